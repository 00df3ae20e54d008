"""The one segment publisher: a refresh that appends and a removal both publish the live version plus a segment.

``segment_room`` says whether a change fits a segment (the segment budget, then the map's layout) and reads the
previous map's state once; ``publish_segment`` writes the segment version (``segment_writer``) and publishes
it with the previous manifest updated by the caller's fields.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semsearch.core.fileio import utc_now
from semsearch.store.map_layers import MapState
from semsearch.store.versions import PreviousVersion, VersionWriter
from semsearch.write.segment_writer import SegmentChange, no_room, write_segment_version

MAP_DUE = "the map is due for a new layout"


@dataclass(frozen=True)
class Room:
    """Whether a change fits a segment of the previous version, and that version's map state if it does."""

    refused: str  # why it does not fit ('' when it does)
    previous_map: MapState | None = None  # corpus_map.append_state, read once for the segment writer


def segment_room(
    previous: PreviousVersion, rows: int, documents_after: int, moved: int, *, share: float, map_method: str
) -> Room:
    """Whether ``rows`` documents written (``moved`` of them added or removed) fit a segment of ``previous``."""
    from semsearch.store.corpus_map import append_state, can_append

    why = no_room(previous, rows, share)
    if why:
        return Room(why)
    state = append_state(previous.path, method=map_method)
    if not can_append(state, documents_after, moved, method=map_method):
        return Room(MAP_DUE)
    return Room("", state)


@dataclass(frozen=True)
class Published:
    """A version published as the previous one plus a segment."""

    version: Path
    segments: int  # its extra segments


def publish_segment(
    writer: VersionWriter,
    previous: PreviousVersion,
    change: SegmentChange,
    seq: int,
    *,
    started: float | None = None,
    **fields: Any,
) -> Published:
    """Write ``change`` as a segment of ``previous`` into the writer's folder and publish it.

    ``fields`` are the manifest fields the caller changes (counts, sources...); the segment writer's entries
    (segments, hidden rows, lexical, map) and a fresh ``built_at`` are added, the file list recomputed; with
    ``started`` (a ``perf_counter`` reading) the build's seconds too.
    """
    contents = write_segment_version(writer.path, previous, change, seq)
    if started is not None:
        fields["build_seconds"] = round(time.perf_counter() - started, 3)
    manifest = previous.manifest.updated(built_at=utc_now(), **fields, files={}, **contents)
    # The previous manifest's file list, as read by the planner: not parsed again for 100,000 sources.
    final = writer.publish(manifest, linked_from=previous.path, linked_files=previous.manifest.files)
    return Published(final, len(contents["segments"]))
