"""Sentence-window vectors of a version (``--reading windows``): written, opened, checked and scored here.

With ``--reading windows`` a document keeps its one whole-text vector (``vectors.npy``: what ``related``,
``recommend``, the map and dedup read) and also one vector per sentence window past the encoder's cut
(encode/windows.py; ``windows-all``: every window from the start), so that a search's dense side sees how a
long abstract ends. Each segment folder (the version folder for the base) holds its own documents' windows
beside its vectors::

    windows.npy        int8 (W, dimension): one unit vector per window as codes, value = code * its row's scale
    window_scales.npy  float32 (W,): each row's scale (its largest value over 127)
    window_ids.npy     int64 (W,): the document number each row belongs to, ascending

A quarter of float32's bytes: a window only re-scores candidates by its cosine, which the codes keep to a few
thousandths. A version written before the codes holds float16 rows in ``windows.npy`` and no scales file; both
are read.

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
WINDOW_SCALES_FILE = "window_scales.npy"
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


def quantize_rows(vectors: np.ndarray, chunk: int = 65_536) -> tuple[np.ndarray, np.ndarray]:
    """Each row as int8 codes and a float32 scale (its largest absolute value over 127), read in chunks."""
    codes = np.empty(vectors.shape, dtype=np.int8)
    scales = np.empty(len(vectors), dtype=np.float32)
    for start in range(0, len(vectors), chunk):
        block = np.asarray(vectors[start : start + chunk], dtype=np.float32)
        peak = np.abs(block).max(axis=1) if block.shape[1] else np.zeros(len(block), np.float32)
        scale = (peak / np.float32(127.0)).astype(np.float32)
        safe = np.where(scale > 0, scale, np.float32(1.0))
        codes[start : start + chunk] = np.rint(block / safe[:, None]).clip(-127, 127).astype(np.int8)
        scales[start : start + chunk] = scale
    return codes, scales


def write(folder: Path, windows: WindowSet) -> None:
    """Write a segment's window files, rows sorted by document number (a document's windows in their order)."""
    order = np.argsort(windows.ids, kind="stable")
    codes, scales = quantize_rows(np.asarray(windows.vectors)[order])
    np.save(folder / WINDOW_FILE, np.ascontiguousarray(codes), allow_pickle=False)
    np.save(folder / WINDOW_SCALES_FILE, scales, allow_pickle=False)
    np.save(folder / WINDOW_IDS_FILE, np.ascontiguousarray(windows.ids[order], dtype=np.int64), allow_pickle=False)


@dataclass
class _Part:
    ids: np.ndarray  # ascending document numbers, one per row
    vectors: np.ndarray  # memory-mapped int8 codes (float16 rows in a version written before them)
    hidden: np.ndarray  # numbers whose rows this version no longer holds (segments.py)
    scales: np.ndarray | None = None  # memory-mapped float32 scale of each row of codes; None: float16 rows

    def rows(self, rows: np.ndarray) -> np.ndarray:
        """These rows as float32 vectors."""
        block = np.asarray(self.vectors[rows], dtype=np.float32)
        return block if self.scales is None else block * np.asarray(self.scales[rows], dtype=np.float32)[:, None]

    def cosines(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """These rows' inner products with ``query`` (a code row's sum is scaled once, not each value)."""
        scores = np.asarray(self.vectors[rows], dtype=np.float32) @ query
        return scores if self.scales is None else scores * np.asarray(self.scales[rows], dtype=np.float32)


def _read(folder: Path, dimension: int) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """A segment's memory-mapped window vectors, their ids and scales (None for float16 rows), checked.

    IndexCorruptError when unsound.
    """
    path = folder / WINDOW_FILE
    scales = None
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
        ids = np.load(folder / WINDOW_IDS_FILE, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise IndexCorruptError(f"{path} is not readable ({exc}); {REBUILD}") from exc
    if vectors.dtype == np.int8:
        try:
            scales = np.load(folder / WINDOW_SCALES_FILE, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise IndexCorruptError(f"{folder / WINDOW_SCALES_FILE} is not readable ({exc}); {REBUILD}") from exc
    if vectors.dtype not in (np.int8, np.float16) or vectors.ndim != 2 or vectors.shape[1] != dimension:
        raise IndexCorruptError(
            f"{path} holds {vectors.dtype} {vectors.shape}, expected int8 (W, {dimension}); {REBUILD}"
        )
    if ids.dtype != np.int64 or ids.shape != (len(vectors),) or (len(ids) > 1 and bool((np.diff(ids) < 0).any())):
        raise IndexCorruptError(f"{folder / WINDOW_IDS_FILE} does not match {path}; {REBUILD}")
    if scales is not None and (scales.dtype != np.float32 or scales.shape != (len(vectors),)):
        raise IndexCorruptError(f"{folder / WINDOW_SCALES_FILE} does not match {path}; {REBUILD}")
    return vectors, ids, scales


def read_all(folder: Path, dimension: int) -> WindowSet:
    """Every window row of a segment folder as float32 vectors (whichever form the file holds)."""
    vectors, ids, scales = _read(folder, dimension)
    return WindowSet(ids, _Part(ids, vectors, np.zeros(0, np.int64), scales).rows(np.arange(len(ids))))


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
            vectors, ids, scales = _read(seg.folder, dimension)
            parts.append(_Part(ids, vectors, seg.hidden, scales))
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
        return rows_of(part.ids, part.hidden, nums)

    def get(self, nums: Sequence[int] | np.ndarray) -> WindowSet:
        """The windows of these document numbers (each document's in its order; none for those without)."""
        nums = np.asarray(nums, dtype=np.int64)
        parts = []
        for part in self.parts:
            owner, rows = self._rows(part, nums)
            parts.append(WindowSet(nums[owner], part.rows(rows).astype(np.float16)))
        return WindowSet.concat(parts, self.dimension)

    def best(self, nums: np.ndarray, query: np.ndarray) -> np.ndarray:
        """Per document number, its best window's cosine with the unit ``query`` (-inf where it has none)."""
        out = np.full(len(nums), -np.inf, dtype=np.float32)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        for part in self.parts:
            owner, rows = self._rows(part, np.asarray(nums, dtype=np.int64))
            if len(rows):
                np.maximum.at(out, owner, part.cosines(rows, q))
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


def rows_of(ids: np.ndarray, hidden: np.ndarray, nums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position in ``nums``, row) of every row of ``ids`` (ascending) that belongs to ``nums`` and is not hidden."""
    lo = np.searchsorted(ids, nums, side="left")
    hi = np.searchsorted(ids, nums, side="right")
    if len(hidden):
        hi = np.where(np.isin(nums, hidden), lo, hi)
    lengths = hi - lo
    total = int(lengths.sum())
    owner = np.repeat(np.arange(len(nums)), lengths)
    rows = np.repeat(lo, lengths) + (np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths))
    return owner, rows.astype(np.int64)


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
            vectors, ids, scales = _read(seg.folder, manifest.model.dimension)
            stray = np.setdiff1d(ids, np.load(seg.folder / IDS_FILE, allow_pickle=False))
            bad = first_non_finite(vectors if scales is None else scales[:, None])
        except (IndexCorruptError, OSError, ValueError) as exc:
            problems.append(str(exc))
            continue
        if bad is not None:
            where = seg.folder / (WINDOW_FILE if scales is None else WINDOW_SCALES_FILE)
            problems.append(f"{where}: the window of document number {int(ids[bad])} is not finite")
        if len(stray):
            problems.append(f"{seg.folder / WINDOW_IDS_FILE}: windows of {len(stray)} documents the segment lacks")
    return problems
