"""Deduplication and the ids that never move."""
