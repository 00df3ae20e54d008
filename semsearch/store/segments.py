"""The segments of a version: its base files, plus the small segments that refreshes appended since.

A refresh that only brings new files (or takes whole files away) does not rewrite the corpus. The new version
hard-links the previous version's files, adds one folder for the new documents and lists which rows of the
older segments are no longer live::

    v-<seq>-<time>/
        docs.sqlite, vectors.npy, ids.npy, vectors.faiss, lexical/ ...   segment 0, the base (as in any version)
        seg-<seq>/        docs.sqlite, vectors.npy, ids.npy, lexical/: the documents one refresh added
        hidden.npy        int64 (segment, number) rows: rows of a segment that this version no longer holds

A document lives in exactly one segment: an updated one is hidden in its old segment and written again in the
new one (Lucene's delete + add). Segments and their files never change once written, so versions share them by
hard link. The manifest lists the extra segments (``segments``) in the order they were added; a version without
any is laid out exactly as before segments existed, and a full build (``--full``, or a refresh whose extra
segments grew past MERGE_SHARE of the corpus) folds every segment back into one base.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError

REBUILD = "rebuild with: semsearch index --full"

SEGMENT_PREFIX = "seg-"
HIDDEN_FILE = "hidden.npy"
# Extra segments beyond which a refresh merges everything into one base again: each one is another SQLite
# file to attach (SQLite allows 10) and another exact search per query.
MAX_SEGMENTS = 8
# Share of the corpus held by extra segments (and hidden rows) beyond which a refresh merges.
MERGE_SHARE = 0.10


@dataclass(frozen=True)
class Segment:
    """One segment of a version: where its files lie, and which of its rows the version no longer holds."""

    folder: Path  # the version folder itself for the base segment
    name: str  # "" for the base, else the folder name (seg-<seq>)
    rows: int  # rows written in the segment (live or not)
    hidden: np.ndarray  # sorted unique int64 document numbers of its rows that are not live

    @property
    def live_rows(self) -> int:
        return self.rows - len(self.hidden)

    def live(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask over this segment's ids: True where the row is live."""
        if not len(self.hidden):
            return np.ones(len(ids), dtype=bool)
        return ~np.isin(ids, self.hidden, assume_unique=False)


def segment_entries(manifest_segments: Any, where: Path) -> list[dict[str, Any]]:
    """The manifest's ``segments`` list, checked: [{"name": "seg-000004", "rows": 500}, ...]."""
    if not manifest_segments:
        return []
    if not isinstance(manifest_segments, list):
        raise IndexCorruptError(f"{where}: 'segments' is malformed in the manifest; {REBUILD}")
    out = []
    for entry in manifest_segments:
        name = entry.get("name") if isinstance(entry, dict) else None
        rows = entry.get("rows") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.startswith(SEGMENT_PREFIX) or "/" in name or not isinstance(rows, int):
            raise IndexCorruptError(f"{where}: a segment entry is malformed; rebuild with: semsearch index --full")
        out.append({"name": name, "rows": rows})
    return out


def version_segments(version: Path, base_rows: int, extra: Sequence[Mapping[str, Any]]) -> list[Segment]:
    """The segments of a version, base first; ``extra`` is the manifest's ``segments`` list."""
    entries = segment_entries(list(extra), version)
    hidden = read_hidden(version, len(entries) + 1)
    segments = [Segment(version, "", base_rows, hidden.get(0, _EMPTY))]
    for i, entry in enumerate(entries, start=1):
        segments.append(Segment(version / entry["name"], entry["name"], entry["rows"], hidden.get(i, _EMPTY)))
    return segments


_EMPTY = np.zeros(0, dtype=np.int64)


def read_hidden(version: Path, count: int) -> dict[int, np.ndarray]:
    """Segment index -> sorted numbers hidden in it, from ``hidden.npy`` (absent: nothing is hidden)."""
    path = version / HIDDEN_FILE
    if not path.is_file():
        return {}
    try:
        pairs = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise IndexCorruptError(f"{path} is not readable ({exc}); rebuild with: semsearch index --full") from exc
    if pairs.dtype != np.int64 or pairs.ndim != 2 or pairs.shape[1] != 2 or (len(pairs) and pairs[:, 0].max() >= count):
        raise IndexCorruptError(f"{path} is malformed; rebuild with: semsearch index --full")
    return {int(s): np.unique(pairs[pairs[:, 0] == s, 1]) for s in np.unique(pairs[:, 0])}


def write_hidden(version: Path, hidden: Mapping[int, np.ndarray]) -> int:
    """Write ``hidden.npy`` (segment index -> numbers hidden in it); returns how many rows are hidden."""
    parts = [
        np.stack([np.full(len(nums), seg, dtype=np.int64), np.unique(np.asarray(nums, dtype=np.int64))], axis=1)
        for seg, nums in sorted(hidden.items())
        if len(nums)
    ]
    pairs = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
    np.save(version / HIDDEN_FILE, pairs, allow_pickle=False)
    return int(len(pairs))
