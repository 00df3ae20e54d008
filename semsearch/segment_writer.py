"""Writing a version as the previous one plus a segment: shared files hard-linked, new documents appended.

Used when a change is small against the corpus (``segments.MERGE_SHARE``): a refresh that brings new files,
``remove`` by id or by source. The new version links every file of the previous one (no bytes copied), writes
the documents that are new or changed into one new ``seg-<seq>/`` folder and records which older rows it no
longer holds (``hidden.npy``). Vectors, the ANN structure of the base, documents and BM25 postings of unchanged
documents are thus shared; only ``map.json`` and the manifest are written whole.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .documents import write_documents
from .layout import DOCS, LEXICAL_DIR, MANIFEST, doc_id_from_num, doc_num
from .lexical_build import TF_FILE, write_lexical
from .records import Document
from .segments import HIDDEN_FILE, MAX_SEGMENTS, MERGE_SHARE, SEGMENT_PREFIX, Segment, write_hidden
from .vectors import IDS_FILE, write_vector_files
from .versions import PreviousVersion

# Written afresh by every version: never linked from the previous one.
_OWN_FILES = {MANIFEST, HIDDEN_FILE, "map.json"}


@dataclass
class SegmentChange:
    """What a new version changes against the previous one."""

    added: list[Document]  # new documents, and changed ones written again under the same id
    vectors: np.ndarray  # row i for added[i]
    dropped: set[int]  # numbers of documents the version no longer holds (changed ones need not be listed)


def no_room(previous: PreviousVersion, changed_rows: int, share: float = MERGE_SHARE) -> str:
    """Why a change of this many rows cannot be appended as a segment ('' when it can)."""
    manifest = previous.manifest
    if len(manifest.segments) >= MAX_SEGMENTS:
        return f"the index has {MAX_SEGMENTS} appended segments, the most it keeps"
    if not (previous.path / LEXICAL_DIR / TF_FILE).is_file():
        return "the index predates kept term frequencies (written by this build)"
    if manifest.lexical.get("bm25", {}).get("method", "lucene") != "lucene":
        return "its BM25 variant keeps no term frequencies to weigh at query time"
    segments = manifest.version_segments(previous.path)
    appended = sum(s.live_rows for s in segments[1:]) + sum(len(s.hidden) for s in segments)
    if appended + changed_rows > share * max(1, manifest.counts.documents):
        return f"{changed_rows} documents change: with the segments so far, more than {share:.0%} of the index"
    return ""


def link_version(previous: Path, target: Path) -> None:
    """Hard-link every file of ``previous`` into ``target`` (copying where links fail), except per-version ones."""
    for root, _dirs, files in os.walk(previous):
        rel = Path(root).relative_to(previous)
        for name in files:
            if rel == Path(".") and name in _OWN_FILES:
                continue
            dst = target / rel / name
            if dst.exists():  # the encoder export, already linked by the encoder's own loader
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
    *,
    vectors_of: Callable[[list[str]], np.ndarray],
) -> dict[str, Any]:
    """Write ``folder`` as ``previous`` plus one segment; returns the manifest fields that change.

    ``vectors_of`` gives the vectors of document ids (the map places the added documents among the others).
    The returned entries are ``segments``, ``lexical`` and ``map``; the caller adds counts, sources and the rest.
    """
    from .corpus_map import append_map

    link_version(previous.path, folder)
    manifest = previous.manifest
    segments = manifest.version_segments(previous.path)
    added_nums = np.array([doc_num(d.id) for d in change.added], dtype=np.int64)
    gone = np.union1d(np.fromiter(change.dropped, dtype=np.int64, count=len(change.dropped)), added_nums)
    hidden = hidden_after(segments, gone)
    entries = list(manifest.segments)
    if change.added:
        name = f"{SEGMENT_PREFIX}{seq:06d}"
        seg = folder / name
        seg.mkdir()
        order = np.argsort(added_nums, kind="stable")
        docs = [change.added[int(i)] for i in order]
        write_vector_files(seg, added_nums[order], np.ascontiguousarray(change.vectors[order], dtype=np.float32))
        write_documents(seg / DOCS, docs)
        write_lexical(seg / LEXICAL_DIR, added_nums[order], docs)
        entries.append({"name": name, "rows": len(docs)})
    hidden_rows = write_hidden(folder, hidden)
    dropped_ids = {doc_id_from_num(n) for n in change.dropped}
    return {
        "segments": entries,
        "hidden": hidden_rows,
        "lexical": {**manifest.lexical, "analysed": len(change.added)},
        "map": append_map(folder, previous.path, dropped_ids, change.added, vectors_of),
    }
