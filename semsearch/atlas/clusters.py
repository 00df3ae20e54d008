"""The map's clusters on a fresh layout: how many, and spherical k-means over the vectors."""

from __future__ import annotations

import math

import numpy as np

MAX_CLUSTERS = 40


def cluster_count(n: int) -> int:
    """How many clusters for n documents: about sqrt(n/2), 2 to 40, never more than half the documents."""
    if n < 4:
        return 1 if n else 0
    return max(2, min(MAX_CLUSTERS, round(math.sqrt(n / 2)), n // 2))


def kmeans(vecs: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, int]:
    """Cluster of each vector (spherical k-means: the vectors are unit length, compared by cosine)."""
    n = vecs.shape[0]
    if k <= 1:
        return np.zeros(n, dtype=np.int64), k
    import faiss

    # min_points_per_centroid=1 silences FAISS's stderr warning on small corpora; FAISS subsamples
    # max_points_per_centroid (256) points per centroid for training, which bounds the cost on large ones.
    km = faiss.Kmeans(vecs.shape[1], k, niter=20, seed=seed, spherical=True, min_points_per_centroid=1)
    km.train(vecs)
    _, assigned = km.index.search(vecs, 1)
    labels = assigned[:, 0].astype(np.int64)
    # Renumber by size (largest first) and drop empty clusters, so ids are dense and stable in meaning.
    sizes = np.bincount(labels, minlength=k)
    order = [c for c in np.argsort(-sizes, kind="stable") if sizes[c] > 0]
    remap = np.full(k, -1, dtype=np.int64)
    remap[order] = np.arange(len(order))
    return remap[labels], len(order)
