"""The read path: Index, fusion, highlights, the live index a server follows."""
