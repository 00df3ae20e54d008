"""The near-duplicate keys of an index version (``near/`` of each segment), behind ``parts.IndexPart``.

They are the LSH band keys of every text the documents hold (``duplicates.save_near_keys``): a refresh checks
its arrivals against them instead of deduplicating the whole corpus again (``write/append.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from semsearch.core.records import NearKeys
from semsearch.dedup.duplicates import NEAR_DIR, load_near_keys, save_near_keys
from semsearch.store.manifest import Manifest
from semsearch.store.parts import BaseJob, PartSettings, SegmentJob


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
