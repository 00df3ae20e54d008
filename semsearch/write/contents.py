"""What a version holds, written in one place: each artifact saves its own files, this façade calls them in turn.

The vectors (``vectors.py``), the ANN index (``ann.py``), the documents (``documents.py``), the BM25 index
(``lexical.py``) and the corpus map (``corpus_map.py``) each own their file format; a writer hands every one
its piece of the previous version and collects the manifest entries they return.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.records import Document, NearKeys
from semsearch.dedup.duplicates import save_near_keys
from semsearch.store import windows_part
from semsearch.store.ann import QuerySource, previous_ann, write_ann
from semsearch.store.documents import write_documents
from semsearch.store.layout import DOCS, LEXICAL_DIR, doc_num
from semsearch.store.lexical_build import write_lexical
from semsearch.store.vectors import IDS_FILE, VECTOR_FILE, write_vector_files
from semsearch.store.versions import PreviousVersion
from semsearch.store.windows_part import WindowSet


def write_contents(
    folder: Path,
    documents: Sequence[Document],
    vectors: np.ndarray,
    *,
    ann: str = "auto",
    memory_budget: int | None = None,
    previous: PreviousVersion | None = None,
    retrain: bool = False,
    relayout: bool = False,
    tuning_queries: QuerySource | None = None,
    near_keys: NearKeys | None = None,
    windows: WindowSet | None = None,
) -> dict[str, Any]:
    """Write a version's vectors (row i for documents[i]), ANN index, document store, BM25 index and map.

    ``previous`` is the live version: its trained ANN structure is updated rather than trained again when it
    still fits (unless ``retrain``), its kept tuning queries stand in when ``tuning_queries`` is None, and its
    map is copied when nothing it depends on changed. ``windows`` (``--reading windows``) are the documents'
    window vectors, written beside theirs (windows_part.py). Returns the manifest entries that describe what was
    written ("faiss", "ann", "vectors", "lexical", "map").
    """
    from semsearch.store.corpus_map import write_map  # the query path never needs the map builder

    ids = np.array([doc_num(d.id) for d in documents], dtype=np.int64)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(documents):
        raise ValueError(f"{len(documents)} documents but vectors of shape {vectors.shape}")
    write_vector_files(folder, ids, vectors)
    if windows is not None:
        windows_part.write(folder, windows)
    ann_entries = write_ann(
        folder,
        vectors,
        ids,
        requested=ann,
        memory_budget=memory_budget,
        previous=None if previous is None or retrain else previous_ann(previous.path, previous.manifest),
        tuning_queries=tuning_queries,
        fallback_queries=None if previous is None else previous.path,
    )
    write_documents(folder / DOCS, documents)
    if near_keys is not None:  # what a later refresh checks its arrivals against (append.py)
        save_near_keys(folder, near_keys)
    return {
        **ann_entries,
        "vectors": {"file": VECTOR_FILE, "ids": IDS_FILE, "rows": int(len(ids))},
        "lexical": write_lexical(
            folder / LEXICAL_DIR, ids, documents, previous=None if previous is None else previous.path / LEXICAL_DIR
        ),
        "map": write_map(
            folder, documents, vectors, previous=None if previous is None else previous.path, relayout=relayout
        ),
    }
