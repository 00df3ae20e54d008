"""Sentence-window vectors of a version (``--reading windows``): written, opened, checked and scored here.

With ``--reading windows`` a document keeps its one whole-text vector (``vectors.npy``: what ``related``,
``recommend``, the map and dedup read) and also one vector per sentence window past the encoder's cut
(encode/windows.py; ``windows-all``: every window from the start), so that a search's dense side sees how a
long abstract ends. Each segment folder (the version folder for the base) holds its own documents' windows
beside its vectors::

    windows.npy      float16 (W, dimension): one unit vector per window (half the bytes; ranks as float32 does)
    window_ids.npy   int64 (W,): the document number each row belongs to, ascending

A query re-scores the whole vectors' top ``RESCORE_DEPTH`` by ``WHOLE_WEIGHT * whole + (1 - WHOLE_WEIGHT) *
max(whole, best window)``, which never lowers a score, so they stay above the rest of its dense candidates (hybrid
fuses a deeper list). Re-scoring that top ranks as well as re-scoring every candidate, for a fraction of the
window reads (docs/explanation/quality.md, "Long abstracts", gives the figures). A row hidden in a
segment (segments.py) is never scored from it. ``index_parts.WindowsPart`` puts these files behind the
IndexPart protocol (parts.py), so the version and segment writers and ``verify`` reach them through INDEX_PARTS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from semsearch.core.errors import IndexCorruptError

if TYPE_CHECKING:
    from semsearch.store.manifest import Manifest
    from semsearch.store.segments import Segment

WINDOWED_READINGS = ("windows", "windows-all", "sentences")  # options.READINGS whose versions carry these files
WINDOW_FILE = "windows.npy"
WINDOW_IDS_FILE = "window_ids.npy"
WHOLE_WEIGHT = 0.3  # the whole vector's share: the best window of a long abstract's tail decides most of the score
RESCORE_DEPTH = 200  # re-scoring deeper ranks no better, and every re-scored row costs its windows' reads
REBUILD = "rebuild with: semsearch index --full"


@dataclass
class WindowSet:
    """Window vectors and the document number of each row."""

    ids: np.ndarray  # int64 (W,)
    vectors: np.ndarray  # (W, dimension)

    @classmethod
    def empty(cls, dimension: int) -> WindowSet:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, dimension), dtype=np.float16))

    @classmethod
    def concat(cls, parts: Sequence[WindowSet], dimension: int) -> WindowSet:
        """The rows of every part, in turn."""
        if not parts:
            return cls.empty(dimension)
        return cls(
            np.concatenate([p.ids for p in parts]).astype(np.int64),
            np.concatenate([np.asarray(p.vectors, dtype=np.float16) for p in parts]).reshape(-1, dimension),
        )


def is_windowed(manifest: Manifest) -> bool:
    """Whether a version's documents carry window vectors."""
    return manifest.model.reading in WINDOWED_READINGS


def open_windows(version: Path, manifest: Manifest) -> WindowIndex | None:
    """A version's window vectors, None when its reading stores none."""
    return WindowIndex.open_version(version, manifest) if is_windowed(manifest) else None


def write(folder: Path, windows: WindowSet) -> None:
    """Write a segment's window files, rows sorted by document number (a document's windows in their order)."""
    order = np.argsort(windows.ids, kind="stable")
    vectors = np.ascontiguousarray(np.asarray(windows.vectors, dtype=np.float16)[order])
    np.save(folder / WINDOW_FILE, vectors, allow_pickle=False)
    np.save(folder / WINDOW_IDS_FILE, np.ascontiguousarray(windows.ids[order], dtype=np.int64), allow_pickle=False)


@dataclass
class _Part:
    ids: np.ndarray  # ascending document numbers, one per row
    vectors: np.ndarray  # memory-mapped float16 rows
    hidden: np.ndarray  # numbers whose rows this version no longer holds (segments.py)


def _read(folder: Path, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """A segment's memory-mapped window vectors and their ids, checked; IndexCorruptError when unsound."""
    path = folder / WINDOW_FILE
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
        ids = np.load(folder / WINDOW_IDS_FILE, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise IndexCorruptError(f"{path} is not readable ({exc}); {REBUILD}") from exc
    if vectors.dtype != np.float16 or vectors.ndim != 2 or vectors.shape[1] != dimension:
        raise IndexCorruptError(
            f"{path} holds {vectors.dtype} {vectors.shape}, expected float16 (W, {dimension}); {REBUILD}"
        )
    if ids.dtype != np.int64 or ids.shape != (len(vectors),) or (len(ids) > 1 and bool((np.diff(ids) < 0).any())):
        raise IndexCorruptError(f"{folder / WINDOW_IDS_FILE} does not match {path}; {REBUILD}")
    return vectors, ids


class WindowIndex:
    """The window vectors of a version's live documents, looked up per segment on their memory maps."""

    def __init__(self, parts: Sequence[_Part], dimension: int) -> None:
        self.parts = list(parts)
        self.dimension = dimension

    @classmethod
    def open(cls, segments: Sequence[Segment], dimension: int) -> WindowIndex:
        """Memory-map every segment's window files (base first)."""
        parts = []
        for seg in segments:
            vectors, ids = _read(seg.folder, dimension)
            parts.append(_Part(ids, vectors, seg.hidden))
        return cls(parts, dimension)

    @classmethod
    def open_version(cls, version: Path, manifest: Manifest) -> WindowIndex:
        """The window vectors of a version read with windows."""
        return cls.open(manifest.version_segments(version), manifest.model.dimension)

    def count(self) -> int:
        """How many window vectors the version's live documents have."""
        return sum(
            len(p.ids) - int(np.isin(p.ids, p.hidden).sum()) if len(p.hidden) else len(p.ids) for p in self.parts
        )

    def _rows(self, part: _Part, nums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``nums``, row) of every window of ``nums`` live in ``part``."""
        lo = np.searchsorted(part.ids, nums, side="left")
        hi = np.searchsorted(part.ids, nums, side="right")
        if len(part.hidden):
            hi = np.where(np.isin(nums, part.hidden), lo, hi)
        lengths = hi - lo
        total = int(lengths.sum())
        owner = np.repeat(np.arange(len(nums)), lengths)
        rows = np.repeat(lo, lengths) + (np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths))
        return owner, rows.astype(np.int64)

    def get(self, nums: Sequence[int] | np.ndarray) -> WindowSet:
        """The windows of these document numbers (each document's in its order; none for those without)."""
        nums = np.asarray(nums, dtype=np.int64)
        parts = []
        for part in self.parts:
            owner, rows = self._rows(part, nums)
            parts.append(WindowSet(nums[owner], np.asarray(part.vectors[rows], dtype=np.float16)))
        return WindowSet.concat(parts, self.dimension)

    def best(self, nums: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Per document number, its best window's cosine with the unit ``query`` (-inf where it has none)."""
        out = np.full(len(nums), -np.inf, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        for part in self.parts:
            owner, rows = self._rows(part, np.asarray(nums, dtype=np.int64))
            if len(rows):
                np.maximum.at(out, owner, np.asarray(part.vectors[rows], dtype=np.float32) @ q)
        return out

    def rescore(
        self, nums: np.ndarray, scores: np.ndarray, query: np.ndarray, depth: int = RESCORE_DEPTH
    ) -> tuple[np.ndarray, np.ndarray]:
        """Candidates (best first) with the first ``depth`` re-scored by the mix of whole and best window.

        The mix is at least the whole score, so the re-scored ones stay ahead of the rest, which keep theirs.
        """
        nums = np.asarray(nums, dtype=np.int64)
        whole = np.asarray(scores[:depth], dtype=np.float32)
        top = nums[:depth]
        mixed = WHOLE_WEIGHT * whole + (1 - WHOLE_WEIGHT) * np.maximum(whole, self.best(top, query))
        order = np.lexsort((top, -mixed))
        out_nums = np.concatenate([top[order], nums[depth:]])
        return out_nums, np.concatenate([mixed[order], np.asarray(scores[depth:], dtype=np.float32)])


def carry(version: Path, manifest: Manifest, nums: Sequence[int] | np.ndarray) -> WindowSet | None:
    """The windows a version holds for these documents, for a writer that keeps them; None when it has none."""
    if not is_windowed(manifest):
        return None
    return WindowIndex.open_version(version, manifest).get(nums)


def verify(version: Path, manifest: Manifest) -> list[str]:
    """Problems with a version's window files: unreadable, or rows of documents their segment lacks."""
    if not is_windowed(manifest):
        return []
    from semsearch.store.vectors import IDS_FILE, first_non_finite

    problems = []
    for seg in manifest.version_segments(version):
        try:
            vectors, ids = _read(seg.folder, manifest.model.dimension)
            stray = np.setdiff1d(ids, np.load(seg.folder / IDS_FILE, allow_pickle=False))
            bad = first_non_finite(vectors)
        except (IndexCorruptError, OSError, ValueError) as exc:
            problems.append(str(exc))
            continue
        if bad is not None:
            problems.append(f"{seg.folder / WINDOW_FILE}: the window of document number {int(ids[bad])} is not finite")
        if len(stray):
            problems.append(f"{seg.folder / WINDOW_IDS_FILE}: windows of {len(stray)} documents the segment lacks")
    return problems
