"""A full version's map: laid out afresh (``compute_map``), or the last layout carried to new documents
(``update_map``), or copied when nothing changed; ``write_map`` picks which and writes it.

The map's format is ``store/corpus_map.py``'s. A refresh does not lay the map out again (UMAP is the slowest step
of a large build): new documents go to the similarity-weighted mean position of their nearest fitted neighbours
and join the cluster whose members' mean vector is nearest, removed ones drop out. A full layout happens when the
documents added and removed since the last one exceed RELAYOUT_SHARE of the documents it laid out, when the
layout method changes, or on request (``semsearch index --relayout`` or ``--full``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.atlas.clusters import cluster_count, kmeans
from semsearch.atlas.labels import cluster_terms, point_label
from semsearch.atlas.layout import UMAP_FIT_MAX, normalize, pca_layout, umap_layout
from semsearch.atlas.method import MAP_ALGORITHM, UMAP_MIN_DOCS, choose_method, requested_method, within_share
from semsearch.atlas.placing import base_sums, nearest_cluster, place_by_neighbours
from semsearch.core.errors import SemsearchError
from semsearch.core.fileio import utc_now
from semsearch.core.records import Document
from semsearch.store.corpus_map import load_map, write_map_file
from semsearch.store.map_layers import DECIMALS, MAP_FILE, centre, write_base


def compute_map(
    documents: Sequence[Document], vectors: np.ndarray, *, method: str = "auto", seed: int = 0
) -> dict[str, Any]:
    """The map of documents (row i of vectors belongs to documents[i]); deterministic for a given seed."""
    n = len(documents)
    if vectors.shape[0] != n:
        raise SemsearchError(f"{vectors.shape[0]} vectors for {n} documents")
    chosen = choose_method(n, method)
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    if chosen == "umap":
        xy, fitted = umap_layout(vecs, seed)
    else:
        xy, fitted = pca_layout(vecs), np.arange(n)
    xy = normalize(xy)
    assignment, k = kmeans(vecs, cluster_count(n), seed)
    terms = cluster_terms(documents, assignment, k, seed=seed)
    clusters = [
        {
            "id": c,
            "label": " · ".join(terms[c]),
            "terms": terms[c],
            **centre(xy[assignment == c]),
            "size": int((assignment == c).sum()),
        }
        for c in range(k)
    ]
    return map_data(documents, xy, assignment, clusters, method=chosen, seed=seed, fitted=fitted)


def map_data(
    documents: Sequence[Document],
    xy: np.ndarray,
    assignment: np.ndarray,
    clusters: list[dict[str, Any]],
    *,
    method: str,
    seed: int,
    fitted: Sequence[int] | np.ndarray,
) -> dict[str, Any]:
    """A map's points, labels and clusters as map.json holds them (row i of xy and assignment is documents[i])."""
    return {
        "method": method,
        "documents": len(documents),
        "seed": seed,
        "points": [
            [d.id, round(float(x), DECIMALS), round(float(y), DECIMALS), int(c)]
            for d, (x, y), c in zip(documents, xy, assignment, strict=True)
        ],
        "labels": [point_label(d) for d in documents],
        "clusters": clusters,
        "fitted": [int(i) for i in fitted],
    }


def update_map(
    old: dict[str, Any], documents: Sequence[Document], vectors: np.ndarray, *, method: str = "auto"
) -> dict[str, Any] | None:
    """The previous map carried to these documents without a new layout, or None when a full layout is due.

    Documents still present keep their position and cluster; removed ones drop out. Each new document is placed
    by its nearest fitted neighbours (``place_by_neighbours``) and joins the cluster whose current members'
    mean vector is nearest by cosine; the clusters keep their labels, their sizes and centres are recounted and
    clusters left empty are dropped. None when ``old`` predates incremental maps (no layout record), when the
    method for this many documents is not the one it was laid out with, when nothing it was fitted on is left,
    or when the documents added and removed since its layout exceed RELAYOUT_SHARE of those it laid out.
    """
    n = len(documents)
    if vectors.shape[0] != n:
        raise SemsearchError(f"{vectors.shape[0]} vectors for {n} documents")
    if not has_layout_record(old) or choose_method(n, method) != old["method"]:
        return None
    row_of = {d.id: r for r, d in enumerate(documents)}
    old_points = old["points"]
    kept = [(i, row_of[p[0]]) for i, p in enumerate(old_points) if p[0] in row_of]
    changed = old["changed_since_layout"] + (n - len(kept)) + (len(old_points) - len(kept))
    if not within_share(old["laid_out_documents"], changed):
        return None
    fitted_rows = sorted(row_of[old_points[i][0]] for i in old["fitted"] if old_points[i][0] in row_of)
    if not fitted_rows:
        return None
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    xy = np.zeros((n, 2), dtype=np.float64)
    assignment = np.full(n, -1, dtype=np.int64)
    for i, row in kept:
        xy[row] = old_points[i][1:3]
        assignment[row] = old_points[i][3]
    arrived = np.flatnonzero(assignment < 0)
    if len(arrived):
        xy[arrived] = place_by_neighbours(vecs[fitted_rows], xy[fitted_rows], vecs[arrived])
        assignment[arrived] = nearest_cluster(vecs, assignment, len(old["clusters"]), arrived)
    sizes = np.bincount(assignment, minlength=len(old["clusters"]))
    remaining = [c for c in range(len(old["clusters"])) if sizes[c] > 0]
    renumber = np.full(len(old["clusters"]), -1, dtype=np.int64)
    renumber[remaining] = np.arange(len(remaining))
    assignment = renumber[assignment]
    clusters = [
        {**old["clusters"][c], "id": new_id, **centre(xy[assignment == new_id]), "size": int(sizes[c])}
        for new_id, c in enumerate(remaining)
    ]
    return {
        **map_data(
            documents, xy, assignment, clusters, method=old["method"], seed=old.get("seed", 0), fitted=fitted_rows
        ),
        "algorithm": MAP_ALGORITHM,
        "laid_out_at": old["laid_out_at"],
        "laid_out_documents": old["laid_out_documents"],
        "changed_since_layout": changed,
    }


def has_layout_record(data: dict[str, Any]) -> bool:
    """Whether a loaded map says what an update needs: its algorithm, layout record and fitted points."""
    n, k = len(data["points"]), len(data["clusters"])
    record = (data.get("laid_out_at"), data.get("laid_out_documents"), data.get("changed_since_layout"))
    fitted = data.get("fitted")
    return (
        data.get("algorithm") == MAP_ALGORITHM
        and isinstance(record[0], str)
        and all(isinstance(v, int) and v >= 0 for v in record[1:])
        and isinstance(fitted, list)
        and all(isinstance(i, int) and 0 <= i < n for i in fitted)
        and all(_point_ok(p, k) for p in data["points"])
    )


def _point_ok(point: list[Any], clusters: int) -> bool:
    """Whether a stored point is [id, x, y, cluster] with a number for x and y and a cluster that exists."""
    doc_id, x, y, cluster = point
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
    return isinstance(doc_id, str) and numbers and isinstance(cluster, int) and 0 <= cluster < clusters


def map_fingerprint(documents: Sequence[Document], vectors: np.ndarray, method: str, seed: int = 0) -> str:
    """A hash of everything a map depends on: the algorithm, its settings, the documents and their vectors."""
    import hashlib

    digest = hashlib.sha256(f"{MAP_ALGORITHM}|{method}|{seed}|{UMAP_MIN_DOCS}|{UMAP_FIT_MAX}".encode())
    for doc in documents:
        digest.update(f"{doc.id}\0{doc.title or ''}\0".encode())
    digest.update(np.ascontiguousarray(vectors, dtype=np.float32).tobytes())
    return digest.hexdigest()


def usable_map(previous: Path | None, *, method: str | None = None) -> dict[str, Any] | None:
    """The previous version's map when it has a usable one (with its layout record), else None.

    None without reading anything when no map is wanted (SEMSEARCH_MAP=off, or a setting the build rejects).
    """
    if previous is None:
        return None
    try:
        if (requested_method() if method is None else method) == "off":
            return None
        data = load_map(previous)
    except (OSError, SemsearchError):
        return None  # no usable previous map: compute a fresh one
    # A map from before incremental layouts (no layout record) is laid out again, once.
    return data if data is not None and has_layout_record(data) else None


def write_map(
    folder: Path,
    documents: Sequence[Document],
    vectors: np.ndarray,
    *,
    previous: Path | None = None,
    relayout: bool = False,
    now: str | None = None,
    method: str | None = None,
) -> dict[str, Any]:
    """Compute and write a version's map.json; returns its manifest entry (method, clusters, layout, seconds).

    When the ``previous`` version has a map of exactly these documents and vectors (a refresh that changed
    nothing), that map is copied. Otherwise its layout is kept and updated (``update_map``) unless the corpus
    changed too much since it was laid out, or ``relayout`` asks for a fresh layout (stamped with ``now``).
    """
    started = time.perf_counter()
    method = requested_method() if method is None else method  # the writers pass what they resolved once
    if method == "off":
        return {"file": None, "method": "off", "clusters": 0, "seconds": 0.0}
    fingerprint = map_fingerprint(documents, vectors, method)
    old = usable_map(previous, method=method)
    data: dict[str, Any] | None = None
    # A map laid out in one go on exactly these inputs is what a relayout would compute again.
    if old is not None and old.get("fingerprint") == fingerprint and not (relayout and old["changed_since_layout"]):
        data, layout = old, "reused"
    elif old is not None and not relayout:
        data, layout = update_map(old, documents, vectors, method=method), "incremental"
    if data is None:
        data, layout = compute_map(documents, vectors, method=method), "full"
        data.update(
            algorithm=MAP_ALGORITHM,
            laid_out_at=now or utc_now(),
            laid_out_documents=len(documents),
            changed_since_layout=0,
        )
    data["fingerprint"] = fingerprint
    write_map_file(folder, data)
    # What an appended version reads instead of map.json.
    write_base(folder, data, base_sums(data["points"], len(data["clusters"]), vectors))
    return _map_entry(data, layout, started)


def _map_entry(data: dict[str, Any], layout: str, started: float) -> dict[str, Any]:
    """The manifest's entry for a version's map."""
    return {
        "file": MAP_FILE,
        "method": data["method"],
        "clusters": len(data["clusters"]),
        "seconds": round(time.perf_counter() - started, 3),
        "reused": layout == "reused",
        "layout": layout,
        "laid_out_at": data["laid_out_at"],
        "laid_out_documents": data["laid_out_documents"],
        "changed_since_layout": data["changed_since_layout"],
    }
