"""Combining two rankings: reciprocal rank fusion, and score fusion by convex combination of normalized scores.

How hybrid search weighs the two sides for a query is ``weighting``; what it reads of the query, ``signals``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

NORMS = ("minmax", "zscore", "none")
# Hybrid's defaults: convex fusion of z-scored lists, alpha 0.5, over the top DEFAULT_DEPTH of each side. Deep
# lists make each list's mean and standard deviation steadier, and z-scores put BM25's unbounded scores and
# cosines on one scale, which keeps more of each side's evidence than fusing ranks (docs/explanation/quality.md).
DEFAULT_ALPHA = 0.5
DEFAULT_NORM = "zscore"
DEFAULT_DEPTH = 1000
RRF_K = 60  # the textbook k: a k tuned on one collection's train split did worse on its test split


def rrf(
    rankings: Sequence[Sequence[int]], k: int = RRF_K, weights: Sequence[float] | None = None
) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: score(d) = sum_i w_i / (k + rank_i(d)), ranks 1-based; best first.

    A document absent from a ranking gets nothing from it. Ties go to the document with the better best rank,
    then to the smaller id, so the result does not depend on dict order.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    if len(weights) != len(rankings):
        raise ValueError(f"{len(weights)} weights for {len(rankings)} rankings")
    scores: dict[int, float] = {}
    best: dict[int, int] = {}
    for ranking, w in zip(rankings, weights, strict=True):
        for rank, doc in enumerate(dict.fromkeys(ranking), start=1):  # a repeated id counts at its first rank
            scores[doc] = scores.get(doc, 0.0) + w / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]], item[0]))


def normalize(scores: Mapping[int, float], norm: str = "minmax") -> dict[int, float]:
    """Per-query normalization of one list's scores.

    minmax: (s - min) / (max - min), so the list spans [0, 1] (all 1.0 when every score is equal);
    zscore: (s - mean) / std (population std; all 0.0 when every score is equal); none: unchanged.
    """
    if norm not in NORMS:
        raise ValueError(f"unknown normalization {norm!r}; choose from {', '.join(NORMS)}")
    if not scores or norm == "none":
        return dict(scores)
    values = np.fromiter(scores.values(), dtype=np.float64, count=len(scores))
    return dict(zip(scores.keys(), normalized_array(values, norm).tolist(), strict=True))


def convex(
    dense: Mapping[int, float],
    lexical: Mapping[int, float],
    alpha: float = DEFAULT_ALPHA,
    norm: str = DEFAULT_NORM,
    limit: int | None = None,
) -> list[tuple[int, float]]:
    """alpha * norm(dense) + (1 - alpha) * norm(lexical) over the union of both candidate lists; best first.

    Each list is normalized on its own (see ``normalize``). A document missing from one list gets that list's
    minimum normalized score: it ranked below everything the list returned, and its true score is unknown.
    Ties go to the smaller id. ``limit``: return only the best that many.
    """
    check_weight(alpha, norm)
    try:
        arrays = (*_arrays(dense), *_arrays(lexical))
    except (TypeError, ValueError, OverflowError):
        arrays = None  # ids that are not int64 (strings, say): the general path below
    if arrays is not None:
        ids, scores = convex_arrays(*arrays, alpha=alpha, norm=norm, limit=limit)
        return list(zip(ids.tolist(), scores.tolist(), strict=True))
    nd, nl = normalize(dense, norm), normalize(lexical, norm)
    floor_d = min(nd.values(), default=0.0)
    floor_l = min(nl.values(), default=0.0)
    fused = {
        doc: alpha * nd.get(doc, floor_d) + (1.0 - alpha) * nl.get(doc, floor_l) for doc in dict.fromkeys([*nd, *nl])
    }
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:limit]


def convex_arrays(
    dense_ids: np.ndarray,
    dense_scores: np.ndarray,
    lexical_ids: np.ndarray,
    lexical_scores: np.ndarray,
    *,
    alpha: float = DEFAULT_ALPHA,
    norm: str = DEFAULT_NORM,
    limit: int | None = None,
    lexical_depth: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """``convex`` over (unique int64 ids, scores) arrays: (ids, fused scores), best first, at most ``limit``.

    The same float64 operations in the same order as ``convex``'s dict path, so the same result, without a dict
    of every candidate: hybrid search fuses two lists of DEFAULT_DEPTH on every query.

    ``lexical_depth`` (adaptive fusion): the lexical list stands for that many candidates, those it lacks scoring
    BM25's 0, so its normalization counts them and a document it lacks gets the normalized 0. Without it a list
    of one match normalizes to all zeros and BM25's strongest evidence, the one document holding a rare word,
    is lost.
    """
    check_weight(alpha, norm)
    nd = normalized_array(dense_scores, norm)
    floor_d = float(nd.min()) if nd.size else 0.0
    if 0 < lexical_scores.size < lexical_depth and norm != "none":
        padded = np.concatenate([np.asarray(lexical_scores, dtype=np.float64), np.zeros(1)])
        stats = np.concatenate([padded, np.zeros(lexical_depth - padded.size)])
        normalized = _normalized_against(padded, stats, norm)
        nl, floor_l = normalized[:-1], float(normalized[-1])
    else:
        nl = normalized_array(lexical_scores, norm)
        floor_l = float(nl.min()) if nl.size else 0.0
    docs = np.union1d(dense_ids, lexical_ids)
    fused = alpha * _spread(docs, dense_ids, nd, floor_d) + (1.0 - alpha) * _spread(docs, lexical_ids, nl, floor_l)
    order = np.lexsort((docs, -fused))[:limit]
    return docs[order], fused[order]


def check_weight(alpha: float, norm: str) -> None:
    """Raise ValueError unless ``alpha`` is a weight in [0, 1] and ``norm`` a known normalization."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if norm not in NORMS:
        raise ValueError(f"unknown normalization {norm!r}; choose from {', '.join(NORMS)}")


def _arrays(scores: Mapping[int, float]) -> tuple[np.ndarray, np.ndarray]:
    """(int64 ids, float64 scores) of a score map; TypeError when an id is not an integer."""
    ids = np.fromiter(scores.keys(), dtype=np.int64, count=len(scores))
    if ids.tolist() != list(scores):
        raise TypeError("ids that are not integers")  # 2.5 would become 2: leave such ids to the dict path
    return ids, np.fromiter(scores.values(), dtype=np.float64, count=len(scores))


def normalized_array(scores: np.ndarray, norm: str) -> np.ndarray:
    """One list's scores normalized as ``normalize`` does it, in float64."""
    values = np.asarray(scores, dtype=np.float64)
    if not values.size or norm == "none":
        return values
    if norm == "minmax":
        lo, span = float(values.min()), float(values.max() - values.min())
        return (values - lo) / span if span > 0 else np.ones_like(values)
    mean, std = float(values.mean()), float(values.std())
    return (values - mean) / std if std > 0 else np.zeros_like(values)


def _normalized_against(values: np.ndarray, sample: np.ndarray, norm: str) -> np.ndarray:
    """``values`` normalized with the min/max or mean/std of ``sample`` (which holds them), in float64."""
    if norm == "minmax":
        lo, span = float(sample.min()), float(sample.max() - sample.min())
        return (values - lo) / span if span > 0 else np.ones_like(values)
    mean, std = float(sample.mean()), float(sample.std())
    return (values - mean) / std if std > 0 else np.zeros_like(values)


def _spread(docs: np.ndarray, ids: np.ndarray, values: np.ndarray, floor: float) -> np.ndarray:
    """The value of each of ``docs`` (sorted) in one list, ``floor`` where the list lacks it."""
    out = np.full(docs.shape, floor, dtype=np.float64)
    if ids.size:
        out[np.searchsorted(docs, ids)] = values
    return out
