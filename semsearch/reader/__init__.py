"""The reader's features over the query layer: tags, recommendations, arrivals, digests, exports."""
