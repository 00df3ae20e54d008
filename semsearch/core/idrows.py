"""Rows of document numbers in an id array, found by binary search (the vectors, BM25 and its builder share it)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RowIndex:
    """Where each document number sits in an array of unique int64 ids."""

    def __init__(self, ids: np.ndarray) -> None:
        self._order = np.argsort(ids, kind="stable")
        self._sorted = ids[self._order]

    def rows_of(self, nums: Sequence[int] | np.ndarray) -> np.ndarray:
        """Row of each document number, -1 where the ids lack it."""
        nums = np.asarray(nums, dtype=np.int64)
        if not len(self._sorted):
            return np.full(nums.shape, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self._sorted, nums), len(self._sorted) - 1)
        return np.where(self._sorted[pos] == nums, self._order[pos], -1)

    def unique(self) -> bool:
        """Whether no number appears twice."""
        return not (np.diff(self._sorted) == 0).any()

    def repeated(self) -> np.ndarray:
        """The numbers that appear more than once in the ids, sorted."""
        same = self._sorted[1:] == self._sorted[:-1]
        return np.unique(self._sorted[1:][same])
