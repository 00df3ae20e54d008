"""Arrival stamps, set at build time: when each document first entered the index (see ``semsearch.curate.arrivals``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.records import Arrival, Document

if TYPE_CHECKING:
    from semsearch.store.documents import DocumentStore
    from semsearch.store.manifest import Manifest

# A new text whose nearest previous vector is at least this close, and which near-duplicates that text,
# keeps the previous document's arrival (a reformatted copy from another file is not news).
COPY_COSINE = 0.9


def stamp_arrivals(
    documents: Sequence[Document],
    vectors: np.ndarray,
    previous: Path | None,
    seq: int,
    now: str,
    *,
    opened: tuple[DocumentStore, Manifest] | None = None,
) -> int:
    """Set ``added`` on every document (carried from ``previous`` where it was known); returns how many are new.

    ``opened``: the previous version's document store (left open) and manifest, when the caller has them.
    """
    from semsearch.dedup.duplicates import is_near_duplicate
    from semsearch.store.documents import open_documents
    from semsearch.store.layout import sequence_of
    from semsearch.store.manifest import read_manifest

    fresh = Arrival(seq, now)
    if previous is None:
        for doc in documents:
            doc.added = fresh
        return len(documents)
    store = opened[0] if opened is not None else open_documents(previous, read_manifest(previous))
    try:
        if store.has_arrivals:
            known = store.arrivals()
        else:  # a version from before arrivals were recorded: its documents date from its own build
            try:
                manifest = opened[1] if opened is not None else read_manifest(previous)
                stamp = Arrival(max(sequence_of(previous.name), 0), manifest.built_at or now)
            except Exception:  # noqa: BLE001 - a damaged manifest only costs the date
                stamp = Arrival(0, now)
            known = dict.fromkeys(store.ids(), stamp)
        for doc in documents:
            # A document keeps its arrival under a former id too (ids that never move: identity.py).
            doc.added = next((known[i] for i in (doc.id, *doc.aliases) if i in known), fresh)
        unknown = [d for d in documents if d.added == fresh]
        if not unknown:
            return 0
        # 2: a shared source position with a near-duplicate text.
        position = store.positions()
        still: list[Document] = []
        for doc in unknown:
            olds = {position[key] for p in doc.sources if (key := (p.file, p.kind, p.number)) in position}
            olds &= known.keys()
            match = _near_match(store, doc, sorted(olds), is_near_duplicate)
            if match is not None:
                doc.added = known[match]
            else:
                still.append(doc)
        # 3: the nearest previous vector, when it is a near-duplicate text.
        if still:
            row_of = {d.id: i for i, d in enumerate(documents)}
            known_manifest = opened[1] if opened is not None else None
            nearest = _nearest_previous(previous, vectors, [row_of[d.id] for d in still], known_manifest)
            for doc, old_id in zip(still, nearest, strict=True):
                if old_id is not None and old_id in known and _near_match(store, doc, [old_id], is_near_duplicate):
                    doc.added = known[old_id]
    finally:
        if opened is None:
            store.close()
    return sum(1 for d in documents if d.added == fresh)


def _near_match(store: Any, doc: Document, old_ids: Sequence[str], same: Any) -> str | None:
    from semsearch.store.layout import doc_num

    if not old_ids:
        return None
    olds = store.get_many([doc_num(i) for i in old_ids])
    for old in olds.values():
        if same(old.text, doc.text):
            return str(old.id)
    return None


def _nearest_previous(
    previous: Path, vectors: np.ndarray, rows: Sequence[int], known: Manifest | None = None
) -> list[str | None]:
    """The id of each row's nearest vector in the previous version, when it is at least COPY_COSINE away."""
    from semsearch.core.errors import SemsearchError
    from semsearch.store.layout import doc_id_from_num
    from semsearch.store.manifest import read_manifest
    from semsearch.store.vectors import IDS_FILE, VECTOR_FILE, VectorStore

    try:
        manifest = known if known is not None else read_manifest(previous)
    except SemsearchError:
        manifest = None  # only the segments are read from it; the vector files speak for themselves
    try:
        if manifest is not None and manifest.segmented:  # live vectors in several segments, some rows hidden
            store = VectorStore.open_version(previous, manifest)
            old, ids = store.matrix, store.ids
        else:
            old = np.load(previous / VECTOR_FILE, mmap_mode="r", allow_pickle=False)
            ids = np.load(previous / IDS_FILE, allow_pickle=False)
    except (OSError, ValueError, SemsearchError):
        return [None] * len(rows)
    if old.ndim != 2 or old.shape[1] != vectors.shape[1] or not len(old):
        return [None] * len(rows)  # another model (--full switched): no comparison
    out: list[str | None] = []
    for start in range(0, len(rows), 256):
        q = np.asarray(vectors[list(rows[start : start + 256])], dtype=np.float32)
        best = np.full(len(q), -2.0, dtype=np.float32)
        arg = np.zeros(len(q), dtype=np.int64)
        for s in range(0, len(old), 65536):
            sims = q @ np.asarray(old[s : s + 65536]).T
            top = sims.argmax(axis=1)
            val = sims[np.arange(len(q)), top]
            better = val > best
            best[better] = val[better]
            arg[better] = top[better] + s
        out.extend(doc_id_from_num(int(ids[a])) if b >= COPY_COSINE else None for a, b in zip(arg, best, strict=True))
    return out
