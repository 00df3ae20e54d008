"""A refresh that appends: the files that arrived, decided against the live version, written as a segment.

``semsearch index`` takes this path when the sources changed only by whole files added or taken away, and the
change is small against the corpus (``segment_writer.no_room``). The change itself is decided as a full build
of the same sources would decide it (``dedup/incremental.py``); whatever only a full build can say raises
``FullBuild``, which the refresh planner (``plan.py``) turns into ``Rewrite(reason)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semsearch.core.fileio import utc_now
from semsearch.core.records import Arrival, IngestResult, SourceFile
from semsearch.dedup.incremental import Change, FullBuild, change_against, counts_after
from semsearch.store.manifest import Counts
from semsearch.store.map_layers import MapState
from semsearch.store.passages_part import PassageSet
from semsearch.store.versions import PreviousVersion, VersionWriter, next_sequence
from semsearch.store.windows_part import WindowSet
from semsearch.write.segment_writer import SegmentChange, SegmentFit, publish_segment, segment_fit
from semsearch.write.settings import fusion_after


@dataclass
class Arrived:
    """The files a refresh brings and takes away, read before the index is touched."""

    sources: list[str]  # the source arguments (absolute), recorded for the next refresh
    files: list[SourceFile]  # every file of the new version, in read order
    order: list[str]  # their paths in that order: a full build reads (and merges) records in this order
    ingested: IngestResult  # the new files' records
    gone: list[str]  # recorded files no longer among the sources


def decide(
    arrived: Arrived, previous: PreviousVersion, *, near: bool, share: float, map_method: str
) -> tuple[Change, SegmentFit]:
    """What the arrived and removed files change in ``previous`` (its document store open), and how it fits a segment.

    Raises FullBuild when only a full build can say, or when the change is too big for a segment
    (``segment_writer.no_room``) or for the map's layout.
    """
    assert previous.store is not None, "the planner hands the live version with its document store open"
    records = arrived.ingested.records
    change = change_against(previous.store, previous, records, arrived.order, arrived.gone, near=near)
    moved = len(change.new) + len(change.gone)
    after = previous.manifest.counts.documents + len(change.new) - len(change.gone)
    fit = segment_fit(previous, moved + len(change.late), after, moved, share=share, map_method=map_method)
    if fit.refused:
        raise FullBuild(fit.refused)
    return change, fit  # the fit holds the map's state, read once: checked here, updated by the segment writer


@dataclass
class Appended:
    """A published version that appended a segment."""

    version: Path
    counts: Counts
    segments: int


def write_appended(
    change: Change,
    arrived: Arrived,
    previous: PreviousVersion,
    writer: VersionWriter,
    new_vectors: np.ndarray,
    started: float,
    windows: WindowSet | None = None,
    *,
    previous_map: MapState | None = None,
    map_method: str | None = None,
    passages: PassageSet | None = None,
) -> Appended:
    """Publish the version as ``previous`` plus a segment of the new and changed documents.

    ``new_vectors`` are the vectors of ``change.new``, in order, ``windows`` their window vectors
    (``--reading windows``), ``passages`` their full text's (``--full-text``); changed documents keep theirs.
    """
    seq = next_sequence(writer.index_dir)
    stamp = Arrival(seq, utc_now())
    for doc in change.new:
        doc.added = stamp
    segment = SegmentChange(
        change.new,
        new_vectors,
        change.late,
        change.gone,
        change.near_keys,
        previous_map,
        map_method,
        windows,
        passages,
    )
    counts = counts_after(previous.manifest.counts, change)
    done = publish_segment(
        writer,
        previous,
        segment,
        seq,
        started=started,
        counts=counts,
        sources=arrived.files,
        source_args=arrived.sources,
        excluded_sources=[],  # sources named again: files `remove --source` took out are read like any other
        fusion=fusion_after(previous.manifest, previous.manifest.model, arrived.sources, rewrite=False),
    )
    return Appended(done.version, counts, done.segments)
