"""What a version holds, written in one place: the index parts in order, each saving its own files.

The parts (``store/parts.py``) are the vectors (and a windowed reading's window vectors), the ANN index, the
documents and their filter columns, a full-text index's passages, the near-duplicate keys, the BM25 index and the
corpus map; each owns its file format and its manifest section. A writer hands every one the same job (the
documents, their vectors, the previous version) and collects the manifest entries their sections fill.
``stale_parts`` asks each whether the settings it was written with are still the current ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.atlas.map_part import MapPart
from semsearch.core.records import Document, NearKeys
from semsearch.dedup.near_part import NearKeysPart
from semsearch.store.ann_build import DEFAULT_MEMORY_BUDGET, QuerySource, choose_kind
from semsearch.store.ann_kinds import ann_kind
from semsearch.store.index_parts import (
    AnnPart,
    DocumentsPart,
    FilterColumnsPart,
    LexicalPart,
    PassagesPart,
    VectorsPart,
    WindowsPart,
)
from semsearch.store.layout import doc_num
from semsearch.store.manifest import Manifest
from semsearch.store.parts import BaseJob, IndexPart, PartSettings, manifest_entries
from semsearch.store.passages_part import PassageSet
from semsearch.store.versions import PreviousVersion
from semsearch.store.windows_part import WindowSet

# In the order they are written (and verified): the map and the filter columns read what comes before them.
INDEX_PARTS: tuple[IndexPart, ...] = (
    VectorsPart(),
    WindowsPart(),
    PassagesPart(),
    AnnPart(),
    DocumentsPart(),
    FilterColumnsPart(),
    NearKeysPart(),
    LexicalPart(),
    MapPart(),
)


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
    map_method: str | None = None,
    windows: WindowSet | None = None,
    passages: PassageSet | None = None,
) -> dict[str, Any]:
    """Write a version's vectors (row i for documents[i]), ANN index, document store, BM25 index and map.

    ``previous`` is the live version: its trained ANN structure is updated rather than trained again when it
    still fits (unless ``retrain``), its kept tuning queries stand in when ``tuning_queries`` is None (a
    function giving them is called only when the ANN structure is tuned), and its
    map is copied when nothing it depends on changed. ``map_method`` is the map method the writer resolved
    (None: as SEMSEARCH_MAP asks), ``windows`` the documents' window vectors (``--reading windows``; None when
    the reading stores none), ``passages`` their full text's passages (``--full-text``; None: the index keeps
    none). Returns the manifest entries that describe what was
    written ("faiss", "ann", "vectors", "lexical", "map").
    """
    ids = np.array([doc_num(d.id) for d in documents], dtype=np.int64)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(documents):
        raise ValueError(f"{len(documents)} documents but vectors of shape {vectors.shape}")
    if callable(tuning_queries):
        tuning_queries = _resolved(tuning_queries, vectors, ann, memory_budget)
    job = BaseJob(
        folder=folder,
        documents=documents,
        ids=ids,
        vectors=vectors,
        previous=previous,
        ann=ann,
        memory_budget=memory_budget,
        retrain=retrain,
        relayout=relayout,
        tuning_queries=tuning_queries,
        near_keys=near_keys,
        map_method=map_method,
        windows=windows,
        passages=passages,
    )
    return write_base(job)


def _resolved(
    encode: Callable[[], np.ndarray], vectors: np.ndarray, ann: str, memory_budget: int | None
) -> np.ndarray | None:
    """The tuning queries encoded here when the ANN structure the vectors get is tuned at all, else None.

    Handed down as vectors, not as the function: the store never calls back into the layers above it.
    """
    kind = choose_kind(len(vectors), vectors.shape[1], ann, memory_budget or DEFAULT_MEMORY_BUDGET)
    return None if ann_kind(kind).exact or not len(vectors) else encode()


def write_base(job: BaseJob, parts: Sequence[IndexPart] = INDEX_PARTS) -> dict[str, Any]:
    """Write every part of a version's base; returns the manifest entries their sections fill."""
    return manifest_entries([part.write_base(job) for part in parts])


def stale_parts(
    manifest: Manifest, settings: PartSettings | None = None, parts: Sequence[IndexPart] = INDEX_PARTS
) -> list[str]:
    """Why parts of a version are not what the current settings would write, one reason each (none: current)."""
    return [why for part in parts if (why := part.stale(manifest, settings))]
