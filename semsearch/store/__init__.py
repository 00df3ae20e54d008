"""The index parts on disk: layout, manifest, documents, vectors, ANN, BM25, filter columns, map, versions."""
