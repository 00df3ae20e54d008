#!/usr/bin/env python
"""Do watches and `related` find papers by meaning? Judged top lists on NeurIPS 2025; one JSON line.

Judgments (``benchmarks/data/watch_judgments.json``, read from titles and abstracts): for each saved query, the
papers judged on its topic or not among the top 20 that any scoring gave; for each source paper of ``related``,
its topic and the papers judged on it or not among the top 10 any scoring gave. An unjudged paper counts as
off-topic and is counted under ``unjudged`` (0 when the pools cover every scoring measured).

- watches: precision@20 of each saved query's ranking over the whole index (what ``semsearch new`` ranks when
  everything arrived, and what decides a digest's sections), per ``--scoring`` (``whats_new.WATCH_SCORINGS``);
- watch_fit: the papers that fit each watch (score >= MIN_FIT: what lands in its digest section when they
  arrive), the share of them judged on topic (a floor: unjudged papers count as off topic), and the shares of the
  judged on-topic and off-topic papers that fit;
- related: precision@10 and the ranks (1-based, within the top 20) of the on-topic papers, per
  ``--related`` order (``query.neighbours.RELATED_ORDERS``: "cosine" was `related` before, "subject" is now);
- group (a proxy for ``related`` with no judging: bench_recommend's group task): for each pair of authors with
  four or more joint papers, Recall@20 of the pair's other joint papers among one joint paper's related list.

    semsearch index --index /tmp/neurips-index ../shared/data/mlanthology/neurips2025.jsonl.gz
    python -m benchmarks.bench_watches --index /tmp/neurips-index --scoring fixed,covered --related cosine,subject
    python -m benchmarks.bench_watches --index /tmp/neurips-index --pool   # the unjudged papers, to judge
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.bench_new import groups  # (bench_recommend's group task: author pairs' joint papers)
from benchmarks.harness import BENCH_DATA, REPO, arguments, emit
from semsearch.core.options import MIN_FIT
from semsearch.curate.whats_new import WATCH_SCORING, WATCH_SCORINGS, watch_scores
from semsearch.query.neighbours import RELATED_ORDER, RELATED_ORDERS, subject_order
from semsearch.query.search import Index
from semsearch.store.layout import doc_num

JUDGMENTS = BENCH_DATA / "watch_judgments.json"
WATCH_K, RELATED_K, GROUP_K = 20, 10, 20


def top_ids(index: Index, scores: np.ndarray, k: int) -> list[str]:
    """The ids of the k best vector rows (ties to the smaller id)."""
    nums = index.vectors.ids
    order = np.lexsort((nums, -scores))[:k]
    docs = index.store.get_many([int(nums[r]) for r in order])
    return [docs[int(nums[r])].id for r in order]


def related_ids(index: Index, X: np.ndarray, doc_id: str, order: str, k: int) -> list[str]:
    """The k papers ``related`` lists for a paper with its neighbours in ``order`` (what Index.related does)."""
    doc = index.get(doc_id)
    num = doc_num(doc.id)
    nums = index.vectors.ids
    cos = X @ index.vectors.get_one(num).reshape(-1)
    top = [r for r in np.lexsort((nums, -cos))[: max(k, 100) + 2].tolist() if int(nums[r]) != num]
    ranked = subject_order(index.lexical, doc, [(int(nums[r]), float(cos[r])) for r in top], order)[:k]
    docs = index.store.get_many([n for n, _ in ranked])
    return [docs[n].id for n, _ in ranked]


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="an index of neurips2025.jsonl.gz")
    parser.add_argument("--judgments", type=Path, default=JUDGMENTS)
    parser.add_argument("--scoring", default=f"fixed,{WATCH_SCORING}", help="watch scorings, comma-separated")
    parser.add_argument("--related", default=f"cosine,{RELATED_ORDER}", help="related orders, comma-separated")
    parser.add_argument("--groups", type=int, default=300, help="group requests for the related proxy (0: none)")
    parser.add_argument("--pool", action="store_true", help="print the unjudged papers of every pool and stop")
    args = parser.parse_args()
    scorings = list(dict.fromkeys(args.scoring.split(",")))
    related_ways = list(dict.fromkeys(args.related.split(",")))
    for s in scorings:
        if s not in WATCH_SCORINGS:
            parser.error(f"unknown watch scoring {s!r} (choose from {', '.join(WATCH_SCORINGS)})")
    for s in related_ways:
        if s not in RELATED_ORDERS:
            parser.error(f"unknown related order {s!r} (choose from {', '.join(RELATED_ORDERS)})")
    judged = json.loads(args.judgments.read_text(encoding="utf-8"))
    started = time.perf_counter()
    out: dict[str, Any] = {"index": str(args.index), "judgments": str(args.judgments.relative_to(REPO))}
    with Index.open(args.index) as index:
        X = np.asarray(index.vectors.matrix, dtype=np.float32)
        lex_rows = index.lexical.rows_of(index.vectors.ids)
        pools: dict[str, set[str]] = defaultdict(set)
        watches: dict[str, dict[str, Any]] = {s: {} for s in scorings}
        fitting: dict[str, dict[str, list[float]]] = {s: defaultdict(list) for s in scorings}
        all_docs = index.store.get_many([int(n) for n in index.vectors.ids])
        row_ids = np.asarray([all_docs[int(n)].id for n in index.vectors.ids])
        unjudged = 0
        for w in judged["watches"]:
            rel, non = set(w["relevant"]), set(w["not_relevant"])
            for s in scorings:
                scores = watch_scores(index, w["query"], X, lex_rows, s)
                ids = top_ids(index, scores, WATCH_K)
                pools[w["query"]].update(i for i in ids if i not in rel | non)
                unjudged += sum(i not in rel | non for i in ids)
                watches[s][w["query"]] = round(sum(i in rel for i in ids) / WATCH_K, 3)
                # Who fits the watch (lands in its digest section when it arrives): fewer, with the on-topic kept.
                fit = set(row_ids[scores >= MIN_FIT].tolist())
                fitting[s]["papers"].append(len(fit))
                fitting[s]["on_topic_share"].append(len(fit & rel) / max(len(fit), 1))
                fitting[s]["judged_on_topic_fitting"].append(len(fit & rel) / len(rel))
                fitting[s]["judged_off_topic_fitting"].append(len(fit & non) / max(len(non), 1))
        related: dict[str, dict[str, Any]] = {s: {} for s in related_ways}
        for r in judged["related"]:
            rel, non = set(r["relevant"]), set(r["not_relevant"])
            for s in related_ways:
                ids = related_ids(index, X, r["id"], s, 20)
                pools[r["id"]].update(i for i in ids[:RELATED_K] if i not in rel | non)
                unjudged += sum(i not in rel | non for i in ids[:RELATED_K])
                related[s][r["id"]] = {
                    "p@10": round(sum(i in rel for i in ids[:RELATED_K]) / RELATED_K, 3),
                    "ranks": [n for n, i in enumerate(ids, start=1) if i in rel],
                }
        if args.pool:
            for key, ids in pools.items():
                if ids:
                    print(f"== {key}")
                    docs = [index.get(i) for i in sorted(ids)]
                    for d in docs:
                        print(f"{d.id} | {d.title} | {' '.join(d.text.split()[:45])}")
            return
        out["unjudged"] = unjudged
        out["watch_p@20"] = {s: {"mean": round(float(np.mean(list(v.values()))), 3), **v} for s, v in watches.items()}
        out["watch_fit"] = {
            s: {k: round(float(np.mean(v)), 3) for k, v in table.items()} for s, table in fitting.items()
        }
        out["related_p@10"] = {
            s: {"mean": round(float(np.mean([x["p@10"] for x in v.values()])), 3), **v} for s, v in related.items()
        }
        if args.groups:
            nums = index.vectors.ids
            docs = index.store.get_many([int(n) for n in nums])
            rows_docs = [docs[int(n)] for n in nums]
            found = [rows for _, rows in groups([list(d.metadata.get("authors") or []) for d in rows_docs], 4)]
            chosen = np.random.default_rng(0).permutation(len(found))[: args.groups]
            recall: dict[str, list[float]] = defaultdict(list)
            for g in chosen:
                rows = found[int(g)]
                source, rest = rows_docs[rows[0]].id, {rows_docs[r].id for r in rows[1:]}
                for s in related_ways:
                    ids = related_ids(index, X, source, s, GROUP_K)
                    recall[s].append(len(set(ids) & rest) / len(rest))
            out["group_related_recall@20"] = {"requests": len(chosen)} | {
                s: round(float(np.mean(v)), 4) for s, v in recall.items()
            }
        # The library's own `related` is the "subject" order.
        probe = judged["related"][0]["id"]
        out["library_related_is_subject"] = [h.id for h in index.related(probe, 20, explain=False)] == related_ids(
            index, X, probe, "subject", 20
        )
    out["seconds"] = round(time.perf_counter() - started, 1)
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
