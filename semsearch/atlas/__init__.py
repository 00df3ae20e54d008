"""The corpus map's computation: a 2-D layout of the documents, their clusters and labels, kept across refreshes.

The map's files on disk are the store's (``store/corpus_map.py``, ``store/map_layers.py``); this package computes
what goes in them: ``method`` (which layout, and when to lay out again), ``layout`` and ``clusters`` (a fresh
layout), ``placing`` (new documents on an existing one), ``labels``, ``compute`` (a full version's map) and
``append`` (an appended version's), behind ``map_part.MapPart``.
"""
