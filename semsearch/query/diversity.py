"""Diversifying a ranking: maximal marginal relevance, and ``--diverse``'s MMR behind a relevance floor."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def mmr(
    query_vec: np.ndarray,
    doc_vecs: np.ndarray,
    candidates: Sequence[int],
    k: int,
    lambda_: float = 0.7,
    *,
    relevance: Sequence[float] | None = None,
) -> list[int]:
    """Maximal marginal relevance: pick k candidates, each maximizing λ·rel(d) − (1 − λ)·max_{s picked} cos(d, s).

    ``doc_vecs`` are the candidates' unit vectors, row i for ``candidates[i]``; rel(d) is cos(query, d) unless
    ``relevance`` gives other scores (e.g. fused ones). λ = 1 is plain relevance order; λ = 0.7 (the default)
    still favours relevance but demotes near-copies of what is already picked. Ties go to the earlier candidate.
    """
    if not 0.0 <= lambda_ <= 1.0:
        raise ValueError(f"lambda_ must be in [0, 1], got {lambda_}")
    n = len(candidates)
    if n == 0 or k < 1:
        return []
    vecs = np.asarray(doc_vecs, dtype=np.float32)
    if vecs.ndim != 2 or vecs.shape[0] != n:
        raise ValueError(f"doc_vecs has shape {vecs.shape}, expected one row per candidate ({n})")
    if relevance is None:
        rel = vecs @ np.asarray(query_vec, dtype=np.float32).reshape(-1)
    else:
        rel = np.asarray(relevance, dtype=np.float32).reshape(-1)
        if rel.shape[0] != n:
            raise ValueError(f"{rel.shape[0]} relevance scores for {n} candidates")
    picked: list[int] = []
    redundancy = np.zeros(n, dtype=np.float32)  # max cosine to anything picked so far (none yet: no penalty)
    available = np.ones(n, dtype=bool)
    for _ in range(min(k, n)):
        gain = lambda_ * rel - (1.0 - lambda_) * redundancy
        gain[~available] = -np.inf
        best = int(np.argmax(gain))  # argmax returns the first maximum: ties go to the earlier candidate
        sims = vecs @ vecs[best]
        redundancy = sims if not picked else np.maximum(redundancy, sims)
        picked.append(best)
        available[best] = False
    return [int(candidates[i]) for i in picked]


NEAR_COPY = 0.95  # cosine at which --diverse treats two papers as copies of each other


def diversify(
    query_vec: np.ndarray,
    doc_vecs: np.ndarray,
    ranked: Sequence[tuple[int, float]],
    k: int,
    lambda_: float,
    floor: float,
) -> list[int]:
    """``--diverse``: MMR over the candidates that pass a relevance floor, the rest after them by relevance.

    ``ranked`` is (id, score) best first, ``doc_vecs`` their unit vectors row by row. A candidate whose cosine to
    the query is below ``floor`` times the best cosine among them is never promoted: MMR chooses only among those
    that pass (relevance min-max scaled over them, so any mode's scores mix with cosine redundancy), and the others
    follow in relevance order when fewer than k pass; near-copies (cosine >= NEAR_COPY) of a paper already chosen
    come last.
    """
    n = len(ranked)
    if n == 0 or k < 1:
        return []
    vecs = np.asarray(doc_vecs, dtype=np.float32)
    cos = vecs @ np.asarray(query_vec, dtype=np.float32).reshape(-1)
    best = float(cos.max())
    keep = cos >= floor * best if best > 0 else np.ones(n, dtype=bool)
    rows = np.flatnonzero(keep)
    rel = np.array([ranked[int(i)][1] for i in rows], dtype=np.float32)
    span = float(rel.max() - rel.min())
    rel = (rel - rel.min()) / span if span > 0 else np.ones_like(rel)
    chosen = mmr(query_vec, vecs[rows], rows.tolist(), len(rows), lambda_, relevance=rel.tolist())
    # A near-copy of a paper already shown adds nothing: it goes last, even after those below the floor.
    fresh: list[int] = []
    copies: list[int] = []
    for i in chosen:
        shown = vecs[fresh] @ vecs[i] if fresh else np.zeros(0, dtype=np.float32)
        (copies if shown.size and float(shown.max()) >= NEAR_COPY else fresh).append(i)
    rest = [i for i in range(n) if not keep[i]]  # already in relevance order
    return [ranked[i][0] for i in (fresh + rest + copies)[:k]]
