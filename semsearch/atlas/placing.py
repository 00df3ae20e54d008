"""Placing documents on an existing layout: each goes near its nearest fitted neighbours and joins the cluster
whose members' mean direction is nearest, so a refresh never moves the documents already on the map."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from semsearch.store.map_layers import point_clusters

PLACE_NEIGHBOURS = 5


def place_by_neighbours(fitted: np.ndarray, fitted_xy: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Positions for vectors not in a layout: the similarity-weighted mean of their nearest fitted neighbours'."""
    import faiss

    index = faiss.IndexFlatIP(fitted.shape[1])
    index.add(np.ascontiguousarray(fitted, dtype=np.float32))
    k = min(PLACE_NEIGHBOURS, len(fitted))
    sims, nearest = index.search(np.ascontiguousarray(others, dtype=np.float32), k)
    weights = np.maximum(sims.astype(np.float64), 1e-6)  # unit vectors: inner product is cosine; floor negatives
    weights /= weights.sum(axis=1, keepdims=True)
    return np.einsum("nk,nkd->nd", weights, fitted_xy[nearest])


def cluster_sums(vectors: np.ndarray, assignment: np.ndarray, k: int) -> np.ndarray:
    """Per cluster, the float64 sum of its members' vectors (row i of vectors is in cluster assignment[i]).

    One masked sum per cluster (at most MAX_CLUSTERS passes): sorting the rows by cluster to reduce them would
    copy every vector.
    """
    sums = np.zeros((k, vectors.shape[1]), dtype=np.float64)
    for c in range(k):
        sums[c] = vectors[assignment == c].sum(axis=0, dtype=np.float64)
    return sums


def nearest_of(sums: np.ndarray, vecs: np.ndarray, sizes: np.ndarray | None = None) -> np.ndarray:
    """The cluster of each vector: the one whose members' mean direction (``sums``) is nearest by cosine.

    A cluster with no member left (``sizes`` 0, or a zero sum) takes no newcomers.
    """
    norms = np.linalg.norm(sums, axis=1)
    scores = vecs.astype(np.float64) @ (sums / np.maximum(norms, 1e-12)[:, None]).T
    empty = norms <= 1e-12 if sizes is None else (sizes <= 0) | (norms <= 1e-12)
    scores[:, empty] = -np.inf
    return np.asarray(scores.argmax(axis=1), dtype=np.int64)


def nearest_cluster(vecs: np.ndarray, assignment: np.ndarray, k: int, rows: np.ndarray) -> np.ndarray:
    """The cluster of each of ``rows``: the one whose assigned members' mean direction is nearest by cosine."""
    return nearest_of(cluster_sums(vecs, assignment, k), vecs[rows])


def base_sums(points: Sequence[list[Any]], clusters: int, vectors: np.ndarray) -> np.ndarray:
    """Per cluster of a whole map's ``points``, the sum of its members' vectors (row i of vectors is point i)."""
    return cluster_sums(vectors, point_clusters(points), clusters)
