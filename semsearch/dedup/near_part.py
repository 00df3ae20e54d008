"""The near-duplicate keys of an index version (``near/`` of each segment), behind ``parts.IndexPart``.

They are the LSH band keys of every text the documents hold (``save_near_keys``): a refresh checks its arrivals
against them instead of deduplicating the whole corpus again (``dedup/incremental.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from semsearch.core.records import NearKeys
from semsearch.store.manifest import Manifest
from semsearch.store.parts import BaseJob, PartSettings, SegmentJob

NEAR_DIR = "near"  # a segment's NearKeys: keys.npy, nums.npy, origin.npy


def no_near_keys() -> NearKeys:
    """The keys of a segment that gains no text (a removal's): kept as such, not missing like a pre-keys segment's."""
    return NearKeys(np.zeros((0, 0), dtype=np.uint64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))


def save_near_keys(folder: Path, near: NearKeys) -> None:
    """Write a segment's near-duplicate band keys (``near/`` in the version or segment folder)."""
    out = folder / NEAR_DIR
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "keys.npy", np.ascontiguousarray(near.keys, dtype=np.uint64), allow_pickle=False)
    np.save(out / "nums.npy", np.asarray(near.nums, dtype=np.int64), allow_pickle=False)
    np.save(out / "origin.npy", np.asarray(near.origin, dtype=bool), allow_pickle=False)


def load_near_keys(folder: Path) -> NearKeys | None:
    """A segment's near-duplicate band keys, or None when it has none (built before they were kept).

    Memory-mapped, not loaded: the keys grow with the corpus, and a refresh reads them one band column at a
    time (``shared_bands``) and the numbers only of the rows that match.
    """
    try:
        keys = np.load(folder / NEAR_DIR / "keys.npy", allow_pickle=False, mmap_mode="r")
        nums = np.load(folder / NEAR_DIR / "nums.npy", allow_pickle=False, mmap_mode="r")
        origin = np.load(folder / NEAR_DIR / "origin.npy", allow_pickle=False, mmap_mode="r")
    except (OSError, ValueError, EOFError):
        return None
    if keys.ndim != 2 or keys.dtype != np.uint64 or not (len(keys) == len(nums) == len(origin)):
        return None
    return NearKeys(keys, nums, origin)


def shared_bands(new: NearKeys, old: NearKeys) -> list[tuple[int, int, bool]]:
    """(row of ``new``, document number in ``old``, whether that is its own text) for rows sharing a band key."""
    if not len(new.keys) or not len(old.keys) or new.keys.shape[1] != old.keys.shape[1]:
        return []
    found: set[tuple[int, int, bool]] = set()
    for band in range(new.keys.shape[1]):
        order = np.argsort(new.keys[:, band])
        ordered = new.keys[order, band]
        column = old.keys[:, band]
        pos = np.minimum(np.searchsorted(ordered, column), len(ordered) - 1)
        for old_row in np.flatnonzero(ordered[pos] == column).tolist():
            key = column[old_row]
            lo, hi = np.searchsorted(ordered, key), np.searchsorted(ordered, key, side="right")
            for new_row in order[lo:hi].tolist():
                found.add((int(new_row), int(old.nums[old_row]), bool(old.origin[old_row])))
    return sorted(found)


class NearKeysPart:
    """Band keys, owning document numbers and origin flags of the texts each segment's documents hold."""

    name = "near-duplicate keys"

    def write_base(self, job: BaseJob) -> None:
        if job.near_keys is not None:
            save_near_keys(job.folder, job.near_keys)

    def write_segment(self, job: SegmentJob) -> None:
        if job.segment is not None and job.near_keys is not None:
            save_near_keys(job.segment, job.near_keys)

    def open(self, version: Path, manifest: Manifest) -> list[NearKeys | None]:
        """Each segment's keys, base first (None where a segment was written before they were kept)."""
        return [load_near_keys(s.folder) for s in manifest.version_segments(version)]

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        """Every segment that has keys can read them."""
        return [
            f"{segment.folder / NEAR_DIR}: the near-duplicate keys are unreadable"
            for segment in manifest.version_segments(version)
            if (segment.folder / NEAR_DIR).exists() and load_near_keys(segment.folder) is None
        ]

    def describe(self, manifest: Manifest) -> None:
        return None  # whether near copies merge is the manifest's ``dedup`` entry, a build option

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        return ""


def carry(version: Path, manifest: Manifest, nums: Sequence[int]) -> NearKeys | None:
    """The band keys a version holds for the texts of these documents, for a writer that keeps them.

    None when a segment of the version was written before keys were kept (or under another banding): the next
    refresh then rewrites, as it would have.
    """
    kept = NearKeysPart().open(version, manifest)
    if any(k is None for k in kept):
        return None
    parts = [k for k in kept if k is not None and len(k.keys)]
    if not parts or len({k.keys.shape[1] for k in parts}) > 1:
        return None
    wanted = np.asarray(sorted(set(nums)), dtype=np.int64)
    rows = [np.isin(np.asarray(k.nums), wanted) for k in parts]
    return NearKeys(
        np.concatenate([np.asarray(k.keys)[r] for k, r in zip(parts, rows, strict=True)]),
        np.concatenate([np.asarray(k.nums)[r] for k, r in zip(parts, rows, strict=True)]),
        np.concatenate([np.asarray(k.origin)[r] for k, r in zip(parts, rows, strict=True)]),
    )
