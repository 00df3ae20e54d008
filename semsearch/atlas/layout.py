"""A fresh layout: where each document sits on the map, by PCA or UMAP of the vectors, scaled into [0, 1]."""

from __future__ import annotations

from typing import Any

import numpy as np

from semsearch.atlas.method import UMAP_NEIGHBORS
from semsearch.atlas.placing import place_by_neighbours

# UMAP is fitted on at most this many documents; the rest are placed by their nearest fitted neighbours
# (``placing.place_by_neighbours``, one FAISS search). umap's own ``transform`` does that and then runs
# optimisation epochs per point, which costs more than the whole map placed this way.
UMAP_FIT_MAX = 10_000
# UMAP's own default for more than 10k points; its 500 for smaller sets more than doubles the optimisation time
# for no visible gain on a scatter plot.
UMAP_EPOCHS = 200
OUTLIER_SHARE = 0.001  # per side, see normalize()


def pca_layout(vecs: np.ndarray) -> np.ndarray:
    """The first two principal components (zeros where the data has fewer dimensions of variance)."""
    n = vecs.shape[0]
    out = np.zeros((n, 2), dtype=np.float64)
    if n < 2:
        return out
    centered = vecs.astype(np.float64) - vecs.mean(axis=0, dtype=np.float64)
    # Eigenvectors of the d x d covariance: one matrix product whatever the number of documents.
    values, vectors = np.linalg.eigh(centered.T @ centered)
    top = vectors[:, np.argsort(values)[::-1][:2]]
    # An eigenvector's sign is arbitrary; fixing it makes the picture the same on every machine.
    top *= np.where(top[np.abs(top).argmax(axis=0), range(top.shape[1])] < 0, -1.0, 1.0)
    projected = centered @ top
    projected[:, np.abs(projected).max(axis=0) < 1e-9] = 0.0  # no variance left: do not blow up rounding noise
    out[:, : projected.shape[1]] = projected
    return out


def umap_layout(vecs: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """UMAP (cosine, 15 neighbours) and the rows it was fitted on: at most UMAP_FIT_MAX, the rest are placed."""
    import warnings

    import umap  # imported here: numba's JIT costs seconds, and only large corpora pay for it

    n = vecs.shape[0]

    def reducer(fitted: np.ndarray) -> Any:
        return umap.UMAP(
            n_neighbors=UMAP_NEIGHBORS,
            min_dist=0.1,
            metric="cosine",
            n_epochs=UMAP_EPOCHS,
            random_state=seed,
            precomputed_knn=exact_neighbours(fitted, UMAP_NEIGHBORS),
        )

    with warnings.catch_warnings():
        # "n_jobs value 1 overridden by random_state": determinism is the point of passing a seed; "no NNDescent
        # search index": the map never calls umap's transform (the rest are placed by place_by_neighbours).
        warnings.simplefilter("ignore")
        if n <= UMAP_FIT_MAX:
            return np.asarray(reducer(vecs).fit_transform(vecs), dtype=np.float64), np.arange(n)
        rng = np.random.default_rng(seed)
        sample = np.sort(rng.choice(n, UMAP_FIT_MAX, replace=False))
        out = np.zeros((n, 2), dtype=np.float64)
        out[sample] = reducer(vecs[sample]).fit_transform(vecs[sample])
        rest = np.setdiff1d(np.arange(n), sample)
        out[rest] = place_by_neighbours(vecs[sample], out[sample], vecs[rest])
        return out, sample


def exact_neighbours(vecs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each unit vector's k nearest by cosine, itself first, as UMAP's (indices, cosine distances).

    Given to UMAP instead of letting it run its approximate neighbour search: an exact FAISS search of at most
    UMAP_FIT_MAX vectors is quick, while pynndescent's numba JIT is compiled again in every process, and exact
    neighbours are at least as good a graph.
    """
    import faiss

    n = len(vecs)
    k = min(k, n)
    data = np.ascontiguousarray(vecs, dtype=np.float32)
    index = faiss.IndexFlatIP(data.shape[1])
    index.add(data)
    sims, nearest = index.search(data, min(k + 1, n))
    rows = np.arange(n)[:, None]
    # Itself first (a duplicate vector may tie with it), then the others in order, k in all.
    others = np.where(nearest == rows, -1, nearest)
    order = np.argsort(others == -1, axis=1, kind="stable")
    others = np.take_along_axis(others, order, axis=1)[:, : k - 1]
    other_sims = np.take_along_axis(sims, order, axis=1)[:, : k - 1]
    indices = np.concatenate([rows, others], axis=1).astype(np.int64)
    distances = np.concatenate([np.zeros((n, 1)), 1.0 - other_sims], axis=1).clip(0.0, 2.0).astype(np.float32)
    return indices, distances


def normalize(xy: np.ndarray) -> np.ndarray:
    """Scale a layout into [0, 1] with one factor for both axes (keeps the aspect), centred.

    On large corpora the frame is the 0.1st to 99.9th percentile and the few points beyond sit on its edge:
    UMAP puts small disconnected groups far away, and they would otherwise squash the map into a corner.
    """
    if len(xy) == 0:
        return xy.reshape(0, 2)
    trim = OUTLIER_SHARE if len(xy) >= 1000 else 0.0
    low, high = np.quantile(xy, trim, axis=0), np.quantile(xy, 1 - trim, axis=0)
    span = float((high - low).max())
    if span <= 0:
        return np.full_like(xy, 0.5)
    return np.clip((xy - low) / span + (1.0 - (high - low) / span) / 2, 0.0, 1.0)
