"""Exact document vectors on disk: a float32 matrix and its document ids, read memory-mapped.

The ANN index may hold compressed codes (IVF-PQ) or a graph (HNSW); this store is the one exact copy that
re-ranking, ``related``, MMR, recall checks and the next build's incremental update all read. Memory-mapping
it means a query touches only the rows it needs, so a big index opens in milliseconds and little memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .errors import IndexCorruptError
from .idrows import RowIndex

VECTOR_FILE = "vectors.npy"
IDS_FILE = "ids.npy"


def write_vector_files(folder: Path, ids: np.ndarray, vectors: np.ndarray) -> None:
    """Write the exact vectors (row i belongs to ids[i]) as plain .npy files (no pickle)."""
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
        return cls(matrix, ids)

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
