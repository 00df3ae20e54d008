"""The one interface every part of an index version implements, and what its writers are handed.

A version is its parts: documents, filter columns, exact vectors, the ANN structure, BM25, the near-duplicate keys,
the corpus map and, for a windowed reading, the sentence-window vectors (for ``--full-text``, the passages). Each
part writes its files for a version's base (``write_base``) or for a segment appended to the previous version
(``write_segment``), opens and verifies what it wrote, describes its manifest section (``sections.py``) and says
when the settings it was written with are no longer the current ones (``stale``). The version writer
(``write/contents.py``) and the segment writer (``write/segment_writer.py``) loop over the parts in order instead of
calling each format by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from semsearch.core.records import Document, NearKeys

if TYPE_CHECKING:
    from semsearch.store.ann_build import QuerySource
    from semsearch.store.manifest import Manifest
    from semsearch.store.map_layers import MapState
    from semsearch.store.passages_part import PassageSet
    from semsearch.store.versions import PreviousVersion
    from semsearch.store.windows_part import WindowSet


class Described(Protocol):
    """A typed manifest section (or a pair of them): the manifest keys it fills."""

    def entries(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class BaseJob:
    """What every part of a version's base is written from."""

    folder: Path  # the unpublished version folder
    documents: Sequence[Document]
    ids: np.ndarray  # int64 document number of documents[i]
    vectors: np.ndarray  # float32, C-contiguous, row i for documents[i]
    previous: PreviousVersion | None = None  # the live version: parts reuse what still fits of it
    ann: str = "auto"  # the ANN kind asked for (a registered name, or "auto")
    memory_budget: int | None = None
    retrain: bool = False  # train the ANN structure afresh instead of updating the previous one
    relayout: bool = False  # lay the map out afresh instead of placing arrivals on the previous layout
    tuning_queries: QuerySource | None = None
    near_keys: NearKeys | None = None  # band keys of the texts the documents hold (dedup.duplicates)
    map_method: str | None = None  # as the writer resolved it; None: as SEMSEARCH_MAP asks
    windows: WindowSet | None = None  # the documents' window vectors (--reading windows); None: the reading stores none
    passages: PassageSet | None = None  # the documents' passages (--full-text); None: the index keeps none


@dataclass(frozen=True)
class PartSettings:
    """The settings a build resolved once that parts are written with (and judged stale against)."""

    map_method: str | None = None  # auto, pca, umap or off; None: as SEMSEARCH_MAP asks


@dataclass(frozen=True)
class SegmentJob:
    """What every part of a version written as the previous one plus a segment is written from."""

    version: Path  # the unpublished version folder, the previous version's files already linked into it
    segment: Path | None  # the new segment's folder; None when the change writes no document
    previous: PreviousVersion
    documents: Sequence[Document]  # the segment's documents (added, then rewritten), in number order
    ids: np.ndarray  # int64 numbers of documents, ascending
    vectors: np.ndarray  # float32, row i for documents[i]
    added: Sequence[Document]  # documents the previous version lacks (their vectors: ``added_vectors``)
    added_vectors: np.ndarray
    dropped_ids: set[str]  # ids of documents the version no longer holds
    previous_vectors_of: Callable[[list[str]], np.ndarray]  # the previous version's vectors of document ids
    near_keys: NearKeys | None = None
    previous_map: MapState | None = None
    map_method: str | None = None  # as the writer resolved it; None: as SEMSEARCH_MAP asks
    windows: WindowSet | None = None  # window vectors of ``added`` (--reading windows); None: the reading stores none
    passages: PassageSet | None = None  # passages of ``added`` (--full-text); None: the index keeps none


class IndexPart(Protocol):
    """One part of an index version, behind the same five steps as every other."""

    name: str  # how messages and ``describe_parts`` name it

    def write_base(self, job: BaseJob) -> Described | None:
        """Write the part's files for a version's base; returns its manifest section (None: it has none)."""
        ...

    def write_segment(self, job: SegmentJob) -> Described | None:
        """Write the part's files for an appended segment; returns its changed section (None: unchanged)."""
        ...

    def open(self, version: Path, manifest: Manifest) -> Any:
        """The part as a query reads it."""
        ...

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        """One line per problem found in the part (a SemsearchError: it cannot be read at all)."""
        ...

    def describe(self, manifest: Manifest) -> Described | None:
        """The part's manifest section as recorded (None: the version records none)."""
        ...

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        """Why the part, as recorded, is not what the current settings would write ("" when it is)."""
        ...


def manifest_entries(sections: Sequence[Described | None]) -> dict[str, Any]:
    """The manifest keys a list of parts' sections fill, merged."""
    out: dict[str, Any] = {}
    for section in sections:
        if section is not None:
            out.update(section.entries())
    return out
