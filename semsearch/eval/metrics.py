"""Retrieval metrics as trec_eval computes them (nDCG@k, Recall@k, MRR@k); ``beir.py`` reads the judgments.

A run maps a query id to its ranked document ids (best first); qrels map a query id to {document id: grade}.
Documents with a grade <= 0 are not relevant. Queries without any relevant document are left out of the means.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

Run = Mapping[str, Sequence[str]]
Qrels = Mapping[str, Mapping[str, int]]


def _dedup(ranked: Sequence[str]) -> list[str]:
    # A document listed twice would be counted twice; trec_eval rejects such runs, we keep the first.
    return list(dict.fromkeys(ranked))


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains in rank order: sum of gain / log2(rank + 1)."""
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g > 0)


def ndcg_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with linear graded gains (the grade itself, as trec_eval), ideal ranking from the judgements."""
    ideal = sorted((g for g in judged.values() if g > 0), reverse=True)[:k]
    if not ideal:
        return 0.0
    gains = [max(judged.get(d, 0), 0) for d in _dedup(ranked)[:k]]
    return dcg(gains) / dcg(ideal)


def recall_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 100) -> float:
    """Share of the relevant documents found in the top k."""
    relevant = {d for d, g in judged.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_dedup(ranked)[:k])) / len(relevant)


def mrr_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document in the top k (0 when none)."""
    for rank, d in enumerate(_dedup(ranked)[:k], start=1):
        if judged.get(d, 0) > 0:
            return 1.0 / rank
    return 0.0


def rank_scores(scores: Mapping[str, float]) -> list[str]:
    """Document ids by score descending; ties in reverse id order, as trec_eval breaks them."""
    return [d for d, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def per_query(run: Run, qrels: Qrels) -> dict[str, dict[str, float]]:
    """nDCG@10, Recall@100 and MRR@10 of each query with a relevant document (missing from run: 0)."""
    out: dict[str, dict[str, float]] = {}
    for q, judged in qrels.items():
        if any(g > 0 for g in judged.values()):
            ranked = run.get(q, ())
            out[q] = {
                "ndcg@10": ndcg_at_k(ranked, judged, 10),
                "recall@100": recall_at_k(ranked, judged, 100),
                "mrr@10": mrr_at_k(ranked, judged, 10),
            }
    return out


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 over the queries with a relevant document (missing from run: 0)."""
    return mean_scores(per_query(run, qrels))


def mean_scores(scores: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The mean of each metric over per-query scores (0 for none)."""
    totals = {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for values in scores.values():
        for name in totals:
            totals[name] += values[name]
    n = len(scores)
    return {name: (total / n if n else 0.0) for name, total in totals.items()}


def paired_difference(a: Mapping[str, float], b: Mapping[str, float]) -> dict[str, float]:
    """Mean of b - a over the same queries, its standard error (sample sd / sqrt n) and n.

    Raises ValueError when the two do not score the same queries (a paired difference needs the pairs).
    """
    if set(a) != set(b):
        only = sorted(set(a) ^ set(b))
        raise ValueError(f"the two score different queries ({len(only)} in one only, e.g. {only[0]!r})")
    n = len(a)
    if n == 0:
        raise ValueError("no queries to compare")
    diffs = [b[q] - a[q] for q in sorted(a)]
    mean = sum(diffs) / n
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1)) if n > 1 else 0.0
    return {
        "mean_a": sum(a.values()) / n,
        "mean_b": sum(b.values()) / n,
        "difference": mean,
        "stderr": sd / math.sqrt(n),
        "queries": n,
    }
