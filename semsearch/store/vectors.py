"""Exact document vectors on disk: a float32 matrix and its document ids, read memory-mapped.

The ANN index may hold compressed codes (IVF-PQ) or a graph (HNSW); this store is the one exact copy that
re-ranking, ``related``, MMR, recall checks and the next build's incremental update all read. Memory-mapping
it means a query touches only the rows it needs, so a big index opens in milliseconds and little memory.
A version with extra segments (segments.py) is read as one store of its live rows (``SegmentedVectorStore``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import IndexCorruptError, SemsearchError
from semsearch.core.idrows import RowIndex
from semsearch.store.layout import doc_num

if TYPE_CHECKING:
    from semsearch.store.manifest import Manifest
    from semsearch.store.segments import Segment

VECTOR_FILE = "vectors.npy"
IDS_FILE = "ids.npy"


# Rows checked for finiteness at once: bounds the temporary mask whatever the corpus size.
_FINITE_CHUNK = 65_536


def first_non_finite(matrix: np.ndarray) -> int | None:
    """The first row holding a NaN or an infinity, or None when every value is finite (read in chunks)."""
    for start in range(0, len(matrix), _FINITE_CHUNK):
        bad = ~np.isfinite(np.asarray(matrix[start : start + _FINITE_CHUNK])).all(axis=1)
        if bad.any():
            return start + int(np.flatnonzero(bad)[0])
    return None


def check_vectors_finite(matrix: np.ndarray, ids: np.ndarray, where: Path) -> None:
    """Raise unless every vector is finite: a NaN row matches nothing (silent "no results") and breaks k-means."""
    row = first_non_finite(matrix)
    if row is not None:
        raise SemsearchError(
            f"{where}: the vector of document number {int(ids[row])} is not finite (NaN or inf); nothing was published"
        )


def non_finite_problems(version: Path, manifest: Manifest) -> list[str]:
    """One line per vector file of a version (each segment's) that holds a non-finite row (``verify``)."""
    problems = []
    for segment in manifest.version_segments(version) if manifest.segmented else []:
        problems += _non_finite_file(segment.folder / VECTOR_FILE, segment.folder / IDS_FILE)
    if not manifest.segmented:
        problems += _non_finite_file(version / VECTOR_FILE, version / IDS_FILE)
    return problems


def _non_finite_file(path: Path, ids_path: Path) -> list[str]:
    if not path.is_file():
        return []  # a format-1 version (vectors in FAISS) or a missing file, which the checksums report
    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
        row = first_non_finite(matrix) if matrix.ndim == 2 else None
    except (OSError, ValueError, EOFError) as exc:
        return [f"{path}: not readable ({exc})"]
    if row is None:
        return []
    with contextlib.suppress(OSError, ValueError, EOFError, IndexError):
        return [f"{path}: the vector of document number {int(np.load(ids_path)[row])} is not finite (NaN or inf)"]
    return [f"{path}: row {row} is not finite (NaN or inf)"]


def write_vector_files(folder: Path, ids: np.ndarray, vectors: np.ndarray) -> None:
    """Write the exact vectors (row i belongs to ids[i]) as plain .npy files (no pickle); refuses non-finite ones."""
    check_vectors_finite(vectors, ids, folder)
    np.save(folder / VECTOR_FILE, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
    np.save(folder / IDS_FILE, np.ascontiguousarray(ids, dtype=np.int64), allow_pickle=False)


class VectorStore:
    """Rows of exact vectors looked up by document number."""

    def __init__(self, matrix: np.ndarray, ids: np.ndarray) -> None:
        self.matrix = matrix
        self.ids = ids
        self._rows = RowIndex(ids)

    @classmethod
    def open(cls, folder: Path, *, dimension: int, count: int) -> VectorStore:
        """Memory-map a version's vectors; checks their shape against the manifest."""
        return cls(*_read_vector_files(folder, dimension=dimension, count=count))

    @classmethod
    def open_segments(cls, segments: Sequence[Segment], *, dimension: int, count: int) -> VectorStore:
        """The live vectors of a version's segments (base first); ``count`` is the manifest's live count.

        With only the base and nothing hidden this is ``open``; else a ``SegmentedVectorStore``.
        """
        if len(segments) == 1 and not len(segments[0].hidden):
            return cls.open(segments[0].folder, dimension=dimension, count=count)
        return SegmentedVectorStore.open(segments, dimension=dimension, count=count)

    @classmethod
    def open_version(cls, version: Path, manifest: Manifest) -> VectorStore:
        """The live vectors of a format-2+ version, whether or not it has extra segments."""
        dimension, count = manifest.model.dimension, manifest.counts.vectors
        if not manifest.segmented:
            return cls.open(version, dimension=dimension, count=count)
        return cls.open_segments(manifest.version_segments(version), dimension=dimension, count=count)

    @classmethod
    def from_flat_faiss(cls, index: Any) -> VectorStore:
        """The vectors of a format-1 index, whose exact FAISS IDMap2 was the only copy."""
        import faiss

        ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        matrix = index.index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, index.d), np.float32)
        return cls(np.asarray(matrix, dtype=np.float32), ids)

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    @property
    def dimension(self) -> int:
        return int(self.matrix.shape[1])

    def rows_of(self, nums: np.ndarray | list[int]) -> np.ndarray:
        """Row of each document number, -1 where the store lacks it."""
        return self._rows.rows_of(nums)

    def get(self, nums: np.ndarray | list[int]) -> np.ndarray:
        """The vectors of these document numbers, in order (a copy; raises on an unknown number)."""
        rows = self.rows_of(nums)
        if (rows < 0).any():
            missing = np.asarray(nums)[rows < 0][0]
            raise IndexCorruptError(f"document number {missing} has no vector; rebuild with: semsearch index --full")
        # Sorted reads touch the memory map in file order, which is kinder to the page cache.
        order = np.argsort(rows)
        out = np.empty((len(rows), self.dimension), dtype=np.float32)
        out[order] = self.matrix[rows[order]]
        return out

    def get_one(self, num: int) -> np.ndarray:
        return self.get([num])[0]


@dataclass(frozen=True)
class VectorsOfIds:
    """A version's vectors of document ids (dropped ones included), as the map of a new segment asks for them."""

    store: VectorStore

    def __call__(self, ids: list[str]) -> np.ndarray:
        return np.asarray(self.store.get([doc_num(i) for i in ids]), dtype=np.float32).reshape(len(ids), -1)


def _read_vector_files(folder: Path, *, dimension: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """A folder's memory-mapped vectors and its ids, checked against the expected shape."""
    path = folder / VECTOR_FILE
    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
        ids = np.load(folder / IDS_FILE, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise IndexCorruptError(f"{path} is not readable ({exc}); rebuild with: semsearch index --full") from exc
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape != (count, dimension):
        raise IndexCorruptError(
            f"{path} holds {matrix.dtype} {matrix.shape}, expected float32 ({count}, {dimension}); "
            "rebuild with: semsearch index --full"
        )
    if ids.dtype != np.int64 or ids.shape != (count,):
        raise IndexCorruptError(f"{folder / IDS_FILE} does not match {path}; rebuild with: semsearch index --full")
    return matrix, ids


@dataclass
class SegmentRows:
    """One segment's memory-mapped vectors, all its ids, and which of its rows are live."""

    name: str  # "" for the base
    matrix: np.ndarray  # every written row, memory-mapped
    ids: np.ndarray  # every written row's number
    live: np.ndarray | None  # int64 rows that are live, ascending; None when all are
    hidden: np.ndarray  # sorted numbers of its rows that are not live

    @property
    def live_count(self) -> int:
        return len(self.ids) if self.live is None else len(self.live)

    def live_ids(self) -> np.ndarray:
        return self.ids if self.live is None else self.ids[self.live]


class SegmentedVectorStore(VectorStore):
    """The live rows of several segments, looked up per segment on their memory maps.

    ``ids`` lists the live rows segment after segment (base first, each in file order); ``matrix`` is that
    same order, concatenated only when someone reads it (``recommend``, exact recall checks), since a query's
    ``get`` reads the few rows it needs straight from each segment's map.
    """

    def __init__(self, parts: Sequence[SegmentRows], dimension: int) -> None:
        self.parts = list(parts)
        self._dimension = dimension
        self._matrix: np.ndarray | None = None
        self.ids = np.concatenate([p.live_ids() for p in self.parts]) if self.parts else np.zeros(0, np.int64)
        # offsets[s] is the first row of segment s in ``ids``.
        self.offsets = np.cumsum([0, *(p.live_count for p in self.parts)]).astype(np.int64)
        self._rows = RowIndex(self.ids)

    @classmethod
    def open(cls, segments: Sequence[Segment], *, dimension: int, count: int) -> SegmentedVectorStore:  # type: ignore[override]
        """Memory-map every segment's vectors; checks each against its rows and the live total against ``count``."""
        parts = []
        for seg in segments:
            matrix, ids = _read_vector_files(seg.folder, dimension=dimension, count=seg.rows)
            live = None
            if len(seg.hidden):
                live = np.flatnonzero(seg.live(ids)).astype(np.int64)
            parts.append(SegmentRows(seg.name, matrix, ids, live, seg.hidden))
        store = cls(parts, dimension)
        where = segments[0].folder if segments else Path(".")
        if len(store) != count:
            raise IndexCorruptError(
                f"{where}: its segments hold {len(store)} live vectors, the manifest says {count}; "
                "rebuild with: semsearch index --full"
            )
        if not store._rows.unique():
            raise IndexCorruptError(
                f"{where}: a document number is live in two segments; rebuild with: semsearch index --full"
            )
        return store

    @property
    def matrix(self) -> np.ndarray:
        """Every live row in the order of ``ids`` (a copy, made on first use)."""
        if self._matrix is None:
            blocks = [p.matrix if p.live is None else p.matrix[p.live] for p in self.parts]
            self._matrix = (
                np.concatenate([np.asarray(b, dtype=np.float32) for b in blocks])
                if blocks
                else np.zeros((0, self._dimension), dtype=np.float32)
            )
        return self._matrix

    @matrix.setter
    def matrix(self, value: np.ndarray) -> None:
        # Index.close sets an empty matrix to let the memory maps go: drop the segments' maps with it.
        self._matrix = value
        self.parts = []

    @property
    def dimension(self) -> int:
        return self._dimension

    def segment_rows(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Segment index and row within that segment's files of each row of ``ids``."""
        seg = np.searchsorted(self.offsets, rows, side="right") - 1
        within = rows - self.offsets[seg]
        for s, part in enumerate(self.parts):
            if part.live is not None:
                mine = seg == s
                within[mine] = part.live[within[mine]]
        return seg, within

    def get(self, nums: np.ndarray | list[int]) -> np.ndarray:
        """The vectors of these document numbers, in order (a copy; raises on an unknown number)."""
        rows = self.rows_of(nums)
        if (rows < 0).any():
            missing = np.asarray(nums)[rows < 0][0]
            raise IndexCorruptError(f"document number {missing} has no vector; rebuild with: semsearch index --full")
        seg, within = self.segment_rows(rows)
        out = np.empty((len(rows), self._dimension), dtype=np.float32)
        for s in np.unique(seg).tolist():
            where = np.flatnonzero(seg == s)
            order = np.argsort(within[where])  # file order, kinder to the page cache
            out[where[order]] = self.parts[s].matrix[within[where[order]]]
        return out
