"""Writing and publishing a version as the previous one plus a segment: shared files linked, new documents appended.

Used when a change is small against the corpus (``segments.MERGE_SHARE``): a refresh that brings new files,
``remove`` by id or by source. The new version links every file of the previous one (no bytes copied), writes
the documents that are new or changed into one new ``seg-<seq>/`` folder and records which older rows it no
longer holds (``hidden.npy``). Vectors, the ANN structure of the base, documents and BM25 postings of unchanged
documents are thus shared; the manifest is written whole, and the map writes its point file and state beside a
linked base (``atlas.append.append_map``).

A refresh that appends and a removal both publish through here: ``segment_fit`` says whether a change fits a
segment (the segment budget, then the map's layout) and reads the previous map's state once;
``publish_segment`` writes the segment version and publishes it with the previous manifest updated by the
caller's fields.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.fileio import utc_now
from semsearch.core.records import Document, NearKeys
from semsearch.encode.encoder_choice import copy_encoder
from semsearch.store.index_parts import LexicalPart
from semsearch.store.layout import ENCODER_DIR, LEXICAL_DIR, MANIFEST, doc_id_from_num, doc_num
from semsearch.store.lexical_build import TF_FILE
from semsearch.store.map_layers import MAP_PREFIX, MapState
from semsearch.store.parts import IndexPart, SegmentJob, manifest_entries
from semsearch.store.passages_part import PassageSet
from semsearch.store.segments import HIDDEN_FILE, MAX_SEGMENTS, MERGE_SHARE, SEGMENT_PREFIX, Segment, write_hidden
from semsearch.store.vectors import IDS_FILE, VectorsOfIds
from semsearch.store.versions import PreviousVersion, VersionWriter
from semsearch.store.windows_part import WindowSet
from semsearch.write.contents import INDEX_PARTS

# Written afresh by every version: never linked from the previous one (the map links what it keeps itself).
_OWN_FILES = {MANIFEST, HIDDEN_FILE}


@dataclass
class SegmentChange:
    """What a new version changes against the previous one."""

    added: list[Document]  # documents the previous version lacks
    vectors: np.ndarray  # row i for added[i]
    rewritten: list[Document]  # live documents written again under the same id; they keep their vectors
    dropped: set[int]  # numbers of documents the version no longer holds
    near_keys: NearKeys | None = None  # band keys of the texts the segment's documents gained (dedup.py)
    previous_map: MapState | None = None  # the previous version's map, as atlas.append.append_state read it
    map_method: str | None = None  # auto, pca, umap or off as the writer resolved it; None: SEMSEARCH_MAP
    windows: WindowSet | None = None  # window vectors of ``added`` (--reading windows: windows_part.py)
    passages: PassageSet | None = None  # passages of ``added`` (--full-text: passages_part.py)


def no_room(previous: PreviousVersion, changed_rows: int, share: float = MERGE_SHARE) -> str:
    """Why a change of this many rows cannot be appended as a segment ('' when it can)."""
    manifest = previous.manifest
    if len(manifest.segments) >= MAX_SEGMENTS:
        return f"the index has {MAX_SEGMENTS} appended segments, the most it keeps"
    if not (previous.path / LEXICAL_DIR / TF_FILE).is_file():
        return "the index predates kept term frequencies (written by this build)"
    if manifest.lexical.get("bm25", {}).get("method", "lucene") != "lucene":
        return "its BM25 variant keeps no term frequencies to weigh at query time"
    stale = LexicalPart().stale(manifest)  # a segment's BM25 weights are only comparable under one setting
    if stale:
        return stale
    segments = manifest.version_segments(previous.path)
    appended = sum(s.live_rows for s in segments[1:]) + sum(len(s.hidden) for s in segments)
    if appended + changed_rows > share * max(1, manifest.counts.documents):
        return f"{changed_rows} documents change: with the segments so far, more than {share:.0%} of the index"
    return ""


def link_version(previous: Path, target: Path, *, every: bool = False) -> None:
    """Hard-link every file of ``previous`` into ``target`` (copying where links fail), except per-version ones.

    ``every``: all but the manifest (a version that changes only its manifest: write/fusion_record.py).
    The ONNX export is copied and checked instead (encoder_choice.copy_encoder): no damage is shared or carried.
    """
    if (previous / ENCODER_DIR).is_dir() and not (target / ENCODER_DIR).exists():
        copy_encoder(previous / ENCODER_DIR, target / ENCODER_DIR)
    for root, _dirs, files in os.walk(previous):
        rel = Path(root).relative_to(previous)
        if rel.parts[:1] == (ENCODER_DIR,):
            continue
        for name in files:
            own = name == MANIFEST if every else name in _OWN_FILES or name.startswith(MAP_PREFIX)
            if rel == Path(".") and own:
                continue
            dst = target / rel / name
            if dst.exists():
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(Path(root) / name, dst)
            except OSError:
                shutil.copy2(Path(root) / name, dst)


def _segment_ids(segment: Segment) -> np.ndarray:
    return np.load(segment.folder / IDS_FILE, allow_pickle=False)


def hidden_after(segments: Sequence[Segment], gone: np.ndarray) -> dict[int, np.ndarray]:
    """Each segment's hidden numbers once ``gone`` (numbers live somewhere in the version) are hidden too."""
    hidden: dict[int, np.ndarray] = {}
    for i, segment in enumerate(segments):
        ids = _segment_ids(segment)
        live = ids[segment.live(ids)]
        newly = np.intersect1d(live, gone)
        hidden[i] = np.union1d(segment.hidden, newly).astype(np.int64)
    return hidden


def write_segment_version(
    folder: Path,
    previous: PreviousVersion,
    change: SegmentChange,
    seq: int,
    parts: Sequence[IndexPart] | None = None,
) -> dict[str, Any]:
    """Write ``folder`` as ``previous`` plus one segment; returns the manifest fields that change.

    Every index part (``contents.INDEX_PARTS`` unless ``parts`` are given) writes its piece of the segment.
    The returned entries are ``format_version``, ``segments``, ``hidden`` and the sections the parts changed
    (``lexical``, ``map``); the caller adds counts, sources and the rest.
    """
    from semsearch.store.ann import open_version_vectors
    from semsearch.store.manifest import FORMAT_VERSION, SEGMENTED_FORMAT_VERSION

    parts = INDEX_PARTS if parts is None else parts

    link_version(previous.path, folder)
    manifest = previous.manifest
    segments = manifest.version_segments(previous.path)
    _, store = open_version_vectors(previous.path, manifest)
    docs = [*change.added, *change.rewritten]
    vectors = np.concatenate(
        [
            change.vectors.reshape(len(change.added), manifest.model.dimension),
            store.get([doc_num(d.id) for d in change.rewritten]),
        ]
    )
    nums = np.array([doc_num(d.id) for d in docs], dtype=np.int64)
    gone = np.union1d(np.fromiter(change.dropped, dtype=np.int64, count=len(change.dropped)), nums)
    hidden = hidden_after(segments, gone)
    entries = list(manifest.segments)
    seg = None
    order = np.argsort(nums, kind="stable")
    if docs:
        name = f"{SEGMENT_PREFIX}{seq:06d}"
        seg = folder / name
        seg.mkdir()
        entries.append({"name": name, "rows": len(docs)})
    hidden_rows = write_hidden(folder, hidden)

    job = SegmentJob(
        version=folder,
        segment=seg,
        previous=previous,
        documents=[docs[int(i)] for i in order],
        ids=nums[order],
        vectors=np.ascontiguousarray(vectors[order], dtype=np.float32),
        added=change.added,
        added_vectors=vectors[: len(change.added)],
        dropped_ids={doc_id_from_num(n) for n in change.dropped},
        previous_vectors_of=VectorsOfIds(store),
        near_keys=change.near_keys,
        previous_map=change.previous_map,
        map_method=change.map_method,
        windows=change.windows,
        passages=change.passages,
    )
    sections = manifest_entries([part.write_segment(job) for part in parts])
    return {
        "format_version": SEGMENTED_FORMAT_VERSION if entries or hidden_rows else FORMAT_VERSION,
        "segments": entries,
        "hidden": hidden_rows,
        **sections,
    }


MAP_DUE = "the map is due for a new layout"


@dataclass(frozen=True)
class SegmentFit:
    """Whether a change fits a segment of the previous version, and that version's map state if it does."""

    refused: str  # why it does not fit ('' when it does)
    previous_map: MapState | None = None  # atlas.append.append_state, read once for the segment writer


def segment_fit(
    previous: PreviousVersion, rows: int, documents_after: int, moved: int, *, share: float, map_method: str
) -> SegmentFit:
    """Whether ``rows`` documents written (``moved`` of them added or removed) fit a segment of ``previous``."""
    from semsearch.atlas.append import append_state, can_append

    why = no_room(previous, rows, share)
    if why:
        return SegmentFit(why)
    state = append_state(previous.path, method=map_method)
    if not can_append(state, documents_after, moved, method=map_method):
        return SegmentFit(MAP_DUE)
    return SegmentFit("", state)


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
    # The previous manifest's file list, as read by the planner: not parsed again (it grows with the sources).
    final = writer.publish(manifest, linked_from=previous.path, linked_files=previous.manifest.files)
    return Published(final, len(contents["segments"]))
