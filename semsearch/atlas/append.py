"""An appended version's map: the previous layout less the removed documents, plus the added ones placed on it.

A version appended as a segment does not rewrite map.json: it keeps the last layout's files as its base and writes
a point file of what it placed and removed, with the cluster sums kept beside (``store/map_layers.py``); the map
``load_map`` assembles from them is the one ``update_map`` computes from the previous map.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.atlas.labels import point_label
from semsearch.atlas.method import MAP_ALGORITHM, choose_method, requested_method, within_share
from semsearch.atlas.placing import base_sums, nearest_of, place_by_neighbours
from semsearch.core.errors import SemsearchError
from semsearch.core.records import Document
from semsearch.store.map_layers import (
    BASE_FILES,
    DECIMALS,
    MAP_FILE,
    MapState,
    base_clusters_of,
    link_files,
    read_state,
    segment_clusters,
    write_base,
    write_segment,
    write_state,
)


def append_state(previous: Path | None, *, method: str | None = None) -> MapState | None:
    """What appending to the previous version's map needs, read without its points; None when it has no usable map.

    A version written before layered maps has no state: its map.json is read whole (``legacy``), once; the
    version appended to it writes the layered files.
    """
    if previous is None:
        return None
    try:
        if (requested_method() if method is None else method) == "off":
            return None
        state = read_state(previous)
    except (OSError, SemsearchError):
        return None  # no usable previous map: a full build lays it out again
    if state is not None:
        return state if state.algorithm == MAP_ALGORITHM else None
    from semsearch.atlas.compute import usable_map  # only a version written before layered maps gets here

    old = usable_map(previous, method=method)
    if old is None:
        return None
    sizes = np.bincount([p[3] for p in old["points"]], minlength=len(old["clusters"])).astype(int).tolist()
    return MapState(
        folder=previous,
        method=old["method"],
        seed=int(old.get("seed", 0)),
        algorithm=MAP_ALGORITHM,
        laid_out_at=old["laid_out_at"],
        laid_out_documents=old["laid_out_documents"],
        changed_since_layout=old["changed_since_layout"],
        documents=len(old["points"]),
        sizes=sizes,
        legacy=old,
    )


def can_append(old: MapState | None, documents_after: int, changed: int, *, method: str | None = None) -> bool:
    """Whether the previous map (``append_state``) takes ``changed`` more added or removed documents without a
    new layout."""
    method = requested_method() if method is None else method
    if method == "off":
        return True
    if old is None or choose_method(documents_after, method) != old.method:
        return False
    return within_share(old.laid_out_documents, old.changed_since_layout + changed)


def append_map(
    folder: Path,
    old: MapState | None,
    dropped: set[str],
    added: Sequence[Document],
    added_vectors: np.ndarray,
    previous_vectors_of: Callable[[list[str]], np.ndarray],
    *,
    method: str | None = None,
) -> dict[str, Any]:
    """Write the map of a version appended as a segment: the previous map less ``dropped``, plus ``added`` placed.

    ``old`` is the previous version's map state (``append_state``; ``can_append`` must have said yes).
    ``added`` are documents the previous version lacks (row i of ``added_vectors`` is added[i]); documents it
    keeps, rewritten or not, keep their place. ``previous_vectors_of`` gives the previous version's vectors of
    document ids. Only what changes is written: the base and the earlier point files are hard-linked, this
    segment's point file, the state and the centroids written (``map_layers``). The map ``load_map`` assembles
    is the one ``update_map`` computes from the previous map (the cluster sums kept, not summed again, so a
    tie between two clusters' cosines may fall the other way by rounding; the label centres come from the
    stored four-decimal positions).
    """
    started = time.perf_counter()
    method = requested_method() if method is None else method
    if method == "off":
        return {"file": None, "method": "off", "clusters": 0, "seconds": 0.0}
    if old is None:
        raise SemsearchError("the previous version has no map to append to")
    state = _layered(folder, old, previous_vectors_of) if old.legacy is not None else old
    link_files(state.folder, folder, [*BASE_FILES, *state.segments])
    sums = state.centroids().copy()
    sizes = np.asarray(state.sizes, dtype=np.int64)
    gone_ids, gone_clusters = _clusters_of(state, sorted(dropped))
    if gone_ids:
        np.subtract.at(sums, gone_clusters, previous_vectors_of(gone_ids).astype(np.float64))
        np.subtract.at(sizes, gone_clusters, 1)
    fitted_ids, fitted_xy = state.fitted()
    gone = set(gone_ids)
    fitted_gone = [*state.fitted_gone, *(doc_id for doc_id in fitted_ids if doc_id in gone)]
    keep = [i for i, doc_id in enumerate(fitted_ids) if doc_id not in gone]
    new = list(added)
    points: list[list[Any]] = []
    if new:
        if not keep:
            raise SemsearchError("the previous map cannot take these documents without a new layout")
        vecs = np.ascontiguousarray(added_vectors, dtype=np.float32).reshape(len(new), -1)
        fitted_vecs = previous_vectors_of([fitted_ids[i] for i in keep])
        xy = place_by_neighbours(fitted_vecs, fitted_xy[keep], vecs)
        assignment = nearest_of(sums, vecs, sizes)
        np.add.at(sums, assignment, vecs.astype(np.float64))
        np.add.at(sizes, assignment, 1)
        points = [
            [d.id, round(float(x), DECIMALS), round(float(y), DECIMALS), int(c)]
            for d, (x, y), c in zip(new, xy, assignment, strict=True)
        ]
    name = write_segment(folder, len(state.segments) + 1, gone_ids, points, [point_label(d) for d in new])
    after = MapState(
        folder=folder,
        method=state.method,
        seed=state.seed,
        algorithm=state.algorithm,
        laid_out_at=state.laid_out_at,
        laid_out_documents=state.laid_out_documents,
        changed_since_layout=state.changed_since_layout + len(gone_ids) + len(new),
        documents=state.documents - len(gone_ids) + len(new),
        sizes=sizes.astype(int).tolist(),
        segments=[*state.segments, name],
        fitted_gone=fitted_gone,
    )
    write_state(folder, after, sums)
    return {
        "file": MAP_FILE,
        "method": after.method,
        "clusters": int((sizes > 0).sum()),
        "seconds": round(time.perf_counter() - started, 3),
        "reused": False,
        "layout": "incremental",
        "laid_out_at": after.laid_out_at,
        "laid_out_documents": after.laid_out_documents,
        "changed_since_layout": after.changed_since_layout,
        "segments": len(after.segments),
    }


def _layered(folder: Path, old: MapState, previous_vectors_of: Callable[[list[str]], np.ndarray]) -> MapState:
    """An old version's whole map (``old.legacy``) as the base of layered maps: its map.json linked, the
    files beside it written into ``folder`` (the vectors of every point read once for the cluster sums)."""
    data = old.legacy
    assert data is not None
    link_files(old.folder, folder, [MAP_FILE])
    vectors = previous_vectors_of([p[0] for p in data["points"]])
    write_base(folder, {**data, "algorithm": MAP_ALGORITHM}, base_sums(data["points"], len(data["clusters"]), vectors))
    state = read_state(folder)
    assert state is not None
    return state


def _clusters_of(state: MapState, ids: list[str]) -> tuple[list[str], np.ndarray]:
    """The ids of ``ids`` on the map and each one's (base-numbered) cluster; ids not on it are left out."""
    if not ids:
        return [], np.zeros(0, dtype=np.int64)
    clusters = base_clusters_of(state, np.array([int(i, 16) for i in ids], dtype=np.int64))
    if state.segments:
        placed = segment_clusters(state)  # a document back in a segment after leaving the base is there
        clusters = np.array([placed.get(i, c) for i, c in zip(ids, clusters.tolist(), strict=True)], dtype=np.int64)
    on_map = clusters >= 0
    return [i for i, keep in zip(ids, on_map.tolist(), strict=True) if keep], clusters[on_map]
