"""What a researcher does with the results: tags, recommendations, arrivals, digests, exports (over the query layer)."""
