"""A full-text index's passages (``semsearch index --full-text``): written, opened, checked and looked up here.

A paper read from a PDF with ``--full-text`` keeps its one document vector (title and abstract) and also one
vector per passage of its full text (a few sentences of one page: ingest/pdf_text.py). Each segment folder (the
version folder for the base) holds its own documents' passages beside its vectors, rows sorted by document
number (a document's passages in reading order)::

    passages.npy          float16 (P, dimension): one unit vector per passage
    passage_ids.npy       int64 (P,): the document number each row belongs to, ascending
    passage_pages.npy     int32 (P,): the 1-based page of each passage
    passage_offsets.npy   int64 (P + 1,): where each passage's text starts in passage_text.npy (and the end)
    passage_text.npy      uint8: the passages' texts, UTF-8, one after another

The manifest records the setting (``"full_text": true``); a version built without it has none of these files.
A row hidden in a segment (segments.py) is never read from it. ``index_parts.PassagesPart`` puts the files
behind the IndexPart protocol (parts.py), so the writers and ``verify`` reach them through INDEX_PARTS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import IndexCorruptError
from semsearch.store.windows_part import rows_of

if TYPE_CHECKING:
    from semsearch.store.manifest import Manifest
    from semsearch.store.segments import Segment

FULL_TEXT = "full_text"  # the manifest key that records --full-text (kept by every refresh)
PASSAGE_FILE = "passages.npy"
PASSAGE_IDS_FILE = "passage_ids.npy"
PASSAGE_PAGES_FILE = "passage_pages.npy"
PASSAGE_OFFSETS_FILE = "passage_offsets.npy"
PASSAGE_TEXT_FILE = "passage_text.npy"
FILES = (PASSAGE_FILE, PASSAGE_IDS_FILE, PASSAGE_PAGES_FILE, PASSAGE_OFFSETS_FILE, PASSAGE_TEXT_FILE)
REBUILD = "rebuild with: semsearch index --full"
_CHUNK = 65536  # passage rows scored per step of a scan: bounded memory for a large index


@dataclass
class PassageSet:
    """Passages in memory: the document number, page, text and vector of each row."""

    ids: np.ndarray  # int64 (P,)
    pages: np.ndarray  # int32 (P,)
    texts: list[str]
    vectors: np.ndarray  # (P, dimension)

    @classmethod
    def empty(cls, dimension: int) -> PassageSet:
        return cls(
            np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), [], np.zeros((0, dimension), dtype=np.float16)
        )

    @classmethod
    def concat(cls, parts: Sequence[PassageSet], dimension: int) -> PassageSet:
        """The rows of every part, in turn."""
        if not parts:
            return cls.empty(dimension)
        return cls(
            np.concatenate([p.ids for p in parts]).astype(np.int64),
            np.concatenate([p.pages for p in parts]).astype(np.int32),
            [t for p in parts for t in p.texts],
            np.concatenate([np.asarray(p.vectors, dtype=np.float16) for p in parts]).reshape(-1, dimension),
        )

    def __len__(self) -> int:
        return len(self.ids)


@dataclass(frozen=True)
class Found:
    """One passage as a query reads it: its document number, page, text and cosine with the query."""

    num: int
    page: int
    text: str
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {"page": self.page, "text": self.text, "score": round(float(self.score), 6)}


def has_passages(manifest: Manifest) -> bool:
    """Whether a version was built with ``--full-text`` (its segments hold passage files)."""
    return bool(manifest.extra.get(FULL_TEXT))


def open_passages(version: Path, manifest: Manifest) -> PassageIndex | None:
    """A version's passages, None when it was built without ``--full-text``."""
    return PassageIndex.open_version(version, manifest) if has_passages(manifest) else None


def write(folder: Path, passages: PassageSet) -> None:
    """Write a segment's passage files, rows sorted by document number (a document's passages in their order)."""
    order = np.argsort(passages.ids, kind="stable")
    encoded = [passages.texts[int(i)].encode("utf-8") for i in order]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in encoded], dtype=np.int64) if encoded else []
    text = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    vectors = np.ascontiguousarray(np.asarray(passages.vectors, dtype=np.float16)[order])
    np.save(folder / PASSAGE_FILE, vectors, allow_pickle=False)
    ids = np.ascontiguousarray(passages.ids[order], dtype=np.int64)
    np.save(folder / PASSAGE_IDS_FILE, ids, allow_pickle=False)
    pages = np.ascontiguousarray(passages.pages[order], dtype=np.int32)
    np.save(folder / PASSAGE_PAGES_FILE, pages, allow_pickle=False)
    np.save(folder / PASSAGE_OFFSETS_FILE, offsets, allow_pickle=False)
    np.save(folder / PASSAGE_TEXT_FILE, text, allow_pickle=False)


@dataclass
class _Part:
    ids: np.ndarray  # ascending document numbers, one per row
    pages: np.ndarray
    offsets: np.ndarray
    text: np.ndarray  # memory-mapped UTF-8 bytes
    vectors: np.ndarray  # memory-mapped float16 rows
    hidden: np.ndarray  # numbers whose rows this version no longer holds (segments.py)
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))  # per row: not hidden

    def text_of(self, row: int) -> str:
        return bytes(self.text[int(self.offsets[row]) : int(self.offsets[row + 1])]).decode("utf-8")


def _read(folder: Path, dimension: int) -> _Part:
    """A segment's memory-mapped passage files, checked; IndexCorruptError when unsound."""
    path = folder / PASSAGE_FILE
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
        ids = np.load(folder / PASSAGE_IDS_FILE, allow_pickle=False)
        pages = np.load(folder / PASSAGE_PAGES_FILE, allow_pickle=False)
        offsets = np.load(folder / PASSAGE_OFFSETS_FILE, allow_pickle=False)
        text = np.load(folder / PASSAGE_TEXT_FILE, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise IndexCorruptError(f"the passages in {folder} are not readable ({exc}); {REBUILD}") from exc
    if vectors.dtype != np.float16 or vectors.ndim != 2 or vectors.shape[1] != dimension:
        raise IndexCorruptError(
            f"{path} holds {vectors.dtype} {vectors.shape}, expected float16 (P, {dimension}); {REBUILD}"
        )
    rows = len(vectors)
    if ids.dtype != np.int64 or ids.shape != (rows,) or (rows > 1 and bool((np.diff(ids) < 0).any())):
        raise IndexCorruptError(f"{folder / PASSAGE_IDS_FILE} does not match {path}; {REBUILD}")
    if pages.dtype != np.int32 or pages.shape != (rows,):
        raise IndexCorruptError(f"{folder / PASSAGE_PAGES_FILE} does not match {path}; {REBUILD}")
    if (
        offsets.dtype != np.int64
        or offsets.shape != (rows + 1,)
        or text.dtype != np.uint8
        or int(offsets[0]) != 0
        or int(offsets[-1]) != len(text)
        or (rows > 0 and bool((np.diff(offsets) < 0).any()))
    ):
        raise IndexCorruptError(f"{folder / PASSAGE_TEXT_FILE} does not match its offsets; {REBUILD}")
    return _Part(ids, pages, offsets, text, vectors, np.zeros(0, dtype=np.int64))


class PassageIndex:
    """The passages of a version's live documents, read per segment from their memory maps."""

    def __init__(self, parts: Sequence[_Part], dimension: int) -> None:
        self.parts = list(parts)
        self.dimension = dimension
        for part in self.parts:
            part.live = ~np.isin(part.ids, part.hidden) if len(part.hidden) else np.ones(len(part.ids), dtype=bool)

    @classmethod
    def open(cls, segments: Sequence[Segment], dimension: int) -> PassageIndex:
        """Memory-map every segment's passage files (base first)."""
        parts = []
        for seg in segments:
            part = _read(seg.folder, dimension)
            part.hidden = seg.hidden
            parts.append(part)
        return cls(parts, dimension)

    @classmethod
    def open_version(cls, version: Path, manifest: Manifest) -> PassageIndex:
        """The passages of a version built with ``--full-text``."""
        return cls.open(manifest.version_segments(version), manifest.model.dimension)

    def count(self) -> int:
        """How many passages the version's live documents have."""
        return sum(int(p.live.sum()) for p in self.parts)

    def _rows(self, part: _Part, nums: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position in ``nums``, row) of every live passage of ``nums`` in ``part``."""
        return rows_of(part.ids, part.hidden, nums)

    def get(self, nums: Sequence[int] | np.ndarray) -> PassageSet:
        """The passages of these document numbers (each document's in its order; none for those without)."""
        nums = np.asarray(nums, dtype=np.int64)
        out = []
        for part in self.parts:
            owner, rows = self._rows(part, nums)
            out.append(
                PassageSet(
                    nums[owner],
                    np.asarray(part.pages[rows], dtype=np.int32),
                    [part.text_of(int(r)) for r in rows],
                    np.asarray(part.vectors[rows], dtype=np.float16),
                )
            )
        return PassageSet.concat(out, self.dimension)

    def best(self, nums: Sequence[int] | np.ndarray, query: np.ndarray) -> list[Found | None]:
        """Per document number, its passage nearest the unit ``query`` (None where it has none)."""
        nums = np.asarray(nums, dtype=np.int64)
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        score = np.full(len(nums), -np.inf, dtype=np.float32)
        part_of = np.full(len(nums), -1, dtype=np.int64)
        row_of = np.zeros(len(nums), dtype=np.int64)
        for k, part in enumerate(self.parts):
            owner, rows = self._rows(part, nums)
            if not len(rows):
                continue
            cosines = np.asarray(part.vectors[rows], dtype=np.float32) @ q
            order = np.lexsort((-cosines, owner))  # each owner's rows together, its best first
            first = order[np.r_[True, owner[order][1:] != owner[order][:-1]]]
            better = cosines[first] > score[owner[first]]
            won = owner[first][better]
            score[won], part_of[won], row_of[won] = cosines[first][better], k, rows[first][better]
        return [
            None if part_of[i] < 0 else self._found(int(part_of[i]), int(row_of[i]), float(score[i]), int(nums[i]))
            for i in range(len(nums))
        ]

    def top(
        self, query: np.ndarray, k: int, allowed: np.ndarray | None = None, exclude: Sequence[int] = ()
    ) -> list[Found]:
        """The ``k`` passages nearest the unit ``query``, best first (of ``allowed`` documents, none of ``exclude``)."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        best: list[tuple[float, int, int, int]] = []  # (score, part, row, num)
        if k <= 0:
            return []
        for p, part in enumerate(self.parts):
            keep = part.live
            if allowed is not None:
                keep = keep & np.isin(part.ids, allowed)
            if len(exclude):
                keep = keep & ~np.isin(part.ids, np.asarray(exclude, dtype=np.int64))
            for start in range(0, len(part.ids), _CHUNK):
                mask = keep[start : start + _CHUNK]
                if not mask.any():
                    continue
                scores = np.asarray(part.vectors[start : start + _CHUNK], dtype=np.float32) @ q
                scores = np.where(mask, scores, -np.inf)
                take = min(k, int(mask.sum()))
                idx = np.argpartition(-scores, take - 1)[:take]
                best.extend((float(scores[i]), p, start + int(i), int(part.ids[start + int(i)])) for i in idx)
            best = sorted(best, key=lambda x: (-x[0], x[3], x[2]))[:k]
        return [self._found(p, row, score, num) for score, p, row, num in best]

    def _found(self, part: int, row: int, score: float, num: int) -> Found:
        piece = self.parts[part]
        return Found(num, int(piece.pages[row]), piece.text_of(row), score)


def carry(version: Path, manifest: Manifest, nums: Sequence[int] | np.ndarray) -> PassageSet | None:
    """The passages a version holds for these documents, for a writer that keeps them; None when it has none."""
    if not has_passages(manifest):
        return None
    return PassageIndex.open_version(version, manifest).get(nums)


def verify(version: Path, manifest: Manifest) -> list[str]:
    """Problems with a version's passage files: unreadable, or rows of documents their segment lacks."""
    if not has_passages(manifest):
        return []
    from semsearch.store.vectors import IDS_FILE, first_non_finite

    problems = []
    for seg in manifest.version_segments(version):
        try:
            part = _read(seg.folder, manifest.model.dimension)
            stray = np.setdiff1d(part.ids, np.load(seg.folder / IDS_FILE, allow_pickle=False))
            bad = first_non_finite(part.vectors)
            unreadable = _first_bad_text(part)
        except (IndexCorruptError, OSError, ValueError) as exc:
            problems.append(str(exc))
            continue
        if bad is not None:
            num = int(part.ids[bad])
            problems.append(f"{seg.folder / PASSAGE_FILE}: a passage of document number {num} is not finite")
        if unreadable is not None:
            problems.append(f"{seg.folder / PASSAGE_TEXT_FILE}: passage {unreadable + 1} is not UTF-8 text")
        if len(stray):
            problems.append(f"{seg.folder / PASSAGE_IDS_FILE}: passages of {len(stray)} documents the segment lacks")
    return problems


def _first_bad_text(part: _Part) -> int | None:
    """The first row whose text does not decode (None when all do)."""
    for row in range(len(part.ids)):
        try:
            part.text_of(row)
        except UnicodeDecodeError:
            return row
    return None
