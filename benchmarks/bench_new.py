#!/usr/bin/env python
"""How well does ``semsearch new`` rank what arrived? A research group's papers arrive among others; one JSON line.

The task follows ``bench_recommend.py``'s group relevance (NeurIPS 2025): for a pair of authors with four or more
joint papers, three joint papers are tagged ``liked`` and the pair's other joint papers *arrive*, together with
``--others`` random papers (by neither author). Variants add the reader's other habits:

- ``tag``: only the liked tag;
- ``tag+watch``: plus a saved query, the title of one random arriving paper (that paper is relevant too: it is
  the query's clear best match, the issue's DP-SGD case);
- ``+dislike``: plus a ``not-for-me`` tag holding three joint papers of another group, whose other joint papers
  arrive as well (not relevant: the reader said so).

Methods (each ranks the arrivals; the score matrices are what ``semsearch.curate.whats_new`` computes):

- ``arrival``: plain arrival order (one build's arrivals in the order the index lists them: by id, so random);
- ``old``: the code before issue 25 (reciprocal-rank fusion of one ranking per tag and saved query, with
  ``not-for-me`` a tag like any other, ranked as an interest);
- ``rrf``, ``sum``, ``max``: ``whats_new.combine`` over the interests, the negative tag as counter-examples.

Recall@10 per request (relevant papers in the top 10 over relevant papers), mean with a 95% bootstrap interval
(2,000 resamples over requests), and the paired difference of each method to ``arrival`` and ``old``.

    semsearch index --index /tmp/neurips ../shared/data/mlanthology/neurips2025.jsonl.gz
    python -m benchmarks.bench_new --index /tmp/neurips
"""

from __future__ import annotations

import itertools
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import arguments, emit, log
from semsearch.curate.whats_new import (
    FIT_METHOD,
    FIT_METHODS,
    WATCH_SCORING,
    WATCH_SCORINGS,
    Interest,
    Profile,
    combine,
    interest_scores,
)
from semsearch.query.search import Index

K = 10
LIKED = 3
FLOORS = (1.0, 1.5, 2.0, 2.5, 3.0)  # candidate --min-fit values: who lands in a digest's sections
VARIANTS = ("tag", "tag+dislike", "tag+watch", "tag+watch+dislike")


def groups(authors: list[list[str]], minimum: int) -> list[tuple[tuple[str, str], list[int]]]:
    """Author pairs with at least ``minimum`` joint papers (rows), one pair per distinct joint set."""
    joint: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row, names in enumerate(authors):
        for pair in itertools.combinations(sorted(set(names)), 2):
            joint[pair].append(row)
    seen: set[tuple[int, ...]] = set()
    out = []
    for pair in sorted(joint):
        key = tuple(sorted(joint[pair]))
        if len(key) >= minimum and key not in seen:
            seen.add(key)
            out.append((pair, list(key)))
    return out


def recall_at(order: np.ndarray, relevant: set[int]) -> float:
    return len(set(order[:K].tolist()) & relevant) / len(relevant)


def bootstrap(values: list[float], rng: np.random.Generator, n: int = 2000) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    means = v[rng.integers(0, len(v), size=(n, len(v)))].mean(axis=1)
    return [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)]


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, required=True, help="an index of neurips2025.jsonl.gz")
    parser.add_argument("--requests", type=int, default=0, help="groups to sample [default 0: all]")
    parser.add_argument("--others", type=int, default=200, help="random papers that arrive with the group's")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--watch-scoring", choices=WATCH_SCORINGS, default=WATCH_SCORING, help="saved queries' scoring")
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    per: dict[str, dict[str, list[float]]] = {v: defaultdict(list) for v in VARIANTS}
    floor_rel: list[float] = []  # the library's fit of each relevant arrival (tag+watch+dislike)
    floor_other: list[float] = []  # and of each random arrival
    with Index.open(args.index) as idx:
        nums = idx.vectors.ids
        docs = idx.store.get_many([int(n) for n in nums])
        rows_docs = [docs[int(n)] for n in nums]
        authors = [list(d.metadata.get("authors") or []) for d in rows_docs]
        found = groups(authors, 4)
        order = rng.permutation(len(found))
        chosen = order if not args.requests else order[: args.requests]
        log(f"{len(found)} groups, {len(chosen)} requests, {len(nums)} papers")
        for done, g in enumerate(chosen, start=1):
            (pair, rows) = found[int(g)]
            rows = [int(r) for r in rng.permutation(rows)]
            liked, rest = rows[:LIKED], rows[LIKED:]
            # Another group, by neither author, for the dislike.
            others = [found[int(h)] for h in rng.permutation(len(found)) if not set(found[int(h)][0]) & set(pair)]
            b_rows = [int(r) for r in rng.permutation(next(r for p, r in others if not set(r) & set(rows)))]
            disliked, b_rest = b_rows[:LIKED], b_rows[LIKED:]
            names = set(pair) | {a for r in b_rows for a in authors[r]}
            taken = set(rows) | set(b_rows)
            pool = [r for r in range(len(nums)) if r not in taken and not names & set(authors[r])]
            filler = [int(r) for r in rng.choice(pool, args.others, replace=False)]
            target = filler[0]
            arrivals = np.asarray(sorted(set(rest) | set(b_rest) | set(filler)), dtype=np.int64)
            title = rows_docs[target].title or " ".join(rows_docs[target].text.split()[:12])
            tag = Interest("tag", "liked", papers=[rows_docs[r] for r in liked])
            watch = Interest("watch", "w", query=title)
            nfm = Interest("tag", "not-for-me", papers=[rows_docs[r] for r in disliked])
            plain = interest_scores(idx, Profile([tag, watch, nfm]), args.watch_scoring)  # not-for-me an interest: old
            against = interest_scores(idx, Profile([tag, watch], negatives=nfm.papers), args.watch_scoring)
            arrival_order = arrivals[np.argsort([rows_docs[r].id for r in arrivals], kind="stable")]
            for variant in VARIANTS:
                relevant = set(rest) | ({target} if "watch" in variant else set())
                use = [0, 1] if "watch" in variant else [0]
                old_use = use + ([2] if "dislike" in variant else [])
                new_scores = against if "dislike" in variant else plain
                ranked: dict[str, np.ndarray] = {"arrival": arrival_order}
                old_fit = combine(plain[old_use], arrivals, "rrf")
                ranked["old"] = arrivals[np.lexsort((arrivals, -old_fit))]
                for method in FIT_METHODS:
                    fit = combine(new_scores[use], arrivals, method)
                    ranked[method] = arrivals[np.lexsort((arrivals, -fit))]
                for method, ranking in ranked.items():
                    per[variant][method].append(recall_at(ranking, relevant))
                if variant == VARIANTS[-1]:
                    fit = dict(zip(arrivals.tolist(), combine(new_scores[use], arrivals).tolist(), strict=True))
                    floor_rel += [fit[r] for r in relevant]
                    floor_other += [fit[r] for r in filler[1:]]
            if done % 10 == 0:
                log(f"{done}/{len(chosen)} requests, {time.perf_counter() - started:.0f} s")
    out: dict[str, Any] = {
        "task": "group papers arrive among others",
        "index": str(args.index),
        "requests": len(chosen),
        "arrivals_per_request": f"the group's other joint papers + another group's + {args.others} random",
        "k": K,
        "seed": args.seed,
        "library_method": FIT_METHOD,
        "watch_scoring": args.watch_scoring,
    }
    boot = np.random.default_rng(args.seed)
    for variant, methods in per.items():
        table: dict[str, Any] = {}
        for method, values in methods.items():
            table[method] = {"recall@10": round(float(np.mean(values)), 4), "ci95": bootstrap(values, boot)}
        for lead in FIT_METHODS:
            for base in ("arrival", "old"):
                diff = [a - b for a, b in zip(methods[lead], methods[base], strict=True)]
                table[f"{lead}_minus_{base}"] = {"mean": round(float(np.mean(diff)), 4), "ci95": bootstrap(diff, boot)}
        out[variant] = table
    rel, oth = np.asarray(floor_rel), np.asarray(floor_other)
    out["min_fit"] = {
        str(t): {
            "relevant_in_sections": round(float((rel >= t).mean()), 4),
            "random_in_sections": round(float((oth >= t).mean()), 4),
        }
        for t in FLOORS
    }
    out["best"] = max(FIT_METHODS, key=lambda m: float(np.mean([np.mean(per[v][m]) for v in VARIANTS])))
    out["seconds"] = round(time.perf_counter() - started, 1)
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
