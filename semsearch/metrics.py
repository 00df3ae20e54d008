"""Retrieval metrics as trec_eval computes them (nDCG@k, Recall@k, MRR@k) and a BEIR queries/qrels reader.

A run maps a query id to its ranked document ids (best first); qrels map a query id to {document id: grade}.
Documents with a grade <= 0 are not relevant. Queries without any relevant document are left out of the means.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

from .errors import InputError

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


def evaluate(run: Run, qrels: Qrels) -> dict[str, float]:
    """Mean nDCG@10, Recall@100 and MRR@10 over the queries with a relevant document (missing from run: 0)."""
    queries = [q for q, judged in qrels.items() if any(g > 0 for g in judged.values())]
    totals = {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}
    for q in queries:
        ranked, judged = run.get(q, ()), qrels[q]
        totals["ndcg@10"] += ndcg_at_k(ranked, judged, 10)
        totals["recall@100"] += recall_at_k(ranked, judged, 100)
        totals["mrr@10"] += mrr_at_k(ranked, judged, 10)
    n = len(queries)
    return {name: (total / n if n else 0.0) for name, total in totals.items()}


def load_beir(folder: Path, split: str = "test") -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """(queries, qrels) of a BEIR split: the queries that split judges, and its ``qrels/<split>.tsv``."""
    folder = Path(folder)
    qrels_path = folder / "qrels" / f"{split}.tsv"
    qrels: dict[str, dict[str, int]] = {}
    try:
        with qrels_path.open(encoding="utf-8", newline="") as f:
            for n, row in enumerate(csv.reader(f, delimiter="\t"), start=1):
                if not row or (n == 1 and row[0] == "query-id"):
                    continue
                if len(row) != 3:
                    raise InputError(f"{qrels_path}:line {n}: expected query-id, corpus-id, score")
                try:
                    grade = int(row[2])
                except ValueError:
                    raise InputError(f"{qrels_path}:line {n}: score {row[2]!r} is not an integer") from None
                qrels.setdefault(row[0], {})[row[1]] = grade
    except OSError as exc:
        raise InputError(f"cannot read {qrels_path}: {exc.strerror or exc}") from None
    queries_path = folder / "queries.jsonl"
    queries: dict[str, str] = {}
    try:
        with queries_path.open(encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    qid, text = str(record["_id"]), str(record["text"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    raise InputError(f"{queries_path}:line {n}: expected a JSON object with _id and text") from None
                if qid in qrels:
                    queries[qid] = text
    except OSError as exc:
        raise InputError(f"cannot read {queries_path}: {exc.strerror or exc}") from None
    missing = sorted(set(qrels) - set(queries))
    if missing:
        raise InputError(f"{qrels_path} judges {len(missing)} queries absent from {queries_path}, e.g. {missing[0]}")
    return queries, qrels
