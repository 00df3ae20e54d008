"""How the ANN tuner chooses nprobe at a size, on stand-in vectors: the recall curve it climbs, both ways of counting.

Builds ``--docs`` stand-in documents (the ML Anthology records, then variants of them with 30% of their words
replaced, as ``bench_arrivals.py --grow`` makes them), encoded with the hashed bag-of-words stand-in
(``semsearch.encode.hashed``, 384-d; a short query's scores can tie at the 10th place). For each IVF kind it
builds and tunes the index as a build does (on the encoded titles of a seeded sample of the corpus,
``query_like_texts``), then sweeps nprobe over the tuner's steps and reports at each step recall@10 on those
tuning titles and on ``--queries`` other titles of the corpus, counted tie-aware (a hit is a result whose exact
score reaches the 10th exact score: what the tuner counts) and by ids (the share of the exact top 10's ids found:
what it counted before, which depends on how each kernel orders ties), with the search p50 of one query.

    nice python -m benchmarks.bench_ann_tuning --docs 300000 [--kinds ivf,ivfpq] [--workdir DIR] [--tuned-only]
        [--rerank 200,400]   # IVF-PQ: the same sweep at other re-rank depths

Prints one JSON line on stdout; progress on stderr. The encoded stand-ins are kept in the work dir.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from benchmarks.harness import CORPUS, HashedWords, arguments, emit, log
from semsearch.store.ann import AnnSearcher
from semsearch.store.ann_build import (
    CEILING_MARGIN,
    RECALL_TARGET,
    build_ann,
    exact_top,
    query_like_texts,
    tie_aware_recall,
)
from semsearch.store.vectors import VectorStore

DATA = CORPUS


def records(corpus: Path, size: int) -> list[dict[str, str]]:
    """``size`` records: the corpus's, then variants with 30% of their words replaced (bench_arrivals's rule)."""
    real = []
    with gzip.open(corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            real.append({"title": str(r.get("title") or ""), "text": str(r.get("text") or "")})
    rng = random.Random(1_000_000)
    vocab = [w for r in rng.sample(real, 2000) for w in r["text"].split()]
    out = real[:size]
    for i in range(len(out), size):
        base = real[i % len(real)]
        words = (base["text"] or base["title"]).split()
        for j in rng.sample(range(len(words)), k=int(len(words) * 0.3)):
            words[j] = rng.choice(vocab)
        out.append({"title": f"{base['title']} ({i // len(real)})", "text": " ".join(words)})
    return out


def overlap_recall(found: list[np.ndarray], truth: np.ndarray) -> float:
    """Recall as the tuner counted it before: the share of one exact top 10's ids that were found."""
    return float(np.mean([len(set(f.tolist()) & set(t.tolist())) / len(t) for f, t in zip(found, truth, strict=True)]))


def sweep(
    searcher: AnnSearcher, store: VectorStore, steps: list[int], sets: dict[str, np.ndarray]
) -> list[dict[str, Any]]:
    """Recall (tie-aware and by ids) and p50 at each nprobe, on each query set."""
    truth = {name: exact_top(store, q, 10) for name, q in sets.items()}
    rows = []
    for step in steps:
        searcher.spec.nprobe = step
        row: dict[str, Any] = {"nprobe": step}
        for name, q in sets.items():
            found, times = [], []
            for v in q:
                t = time.perf_counter()
                found.append(searcher.top(v, 10)[0])
                times.append(time.perf_counter() - t)
            ids, scores = truth[name]
            row[f"{name}_tie_aware"] = round(tie_aware_recall(store, q, found, list(scores)), 4)
            row[f"{name}_by_ids"] = round(overlap_recall(found, ids), 4)
            row[f"{name}_p50_ms"] = round(float(np.percentile(times, 50)) * 1e3, 3)
        log(f"    {row}")
        rows.append(row)
    return rows


def rule(rows: list[dict[str, Any]], column: str, exact_last: bool) -> dict[str, Any]:
    """The step the tuner stops at when recall is counted by ``column``: the first reaching RECALL_TARGET, or
    CEILING_MARGIN below the last step's recall when that is lower and the last step is not exact (ann_build._tune)."""
    target = RECALL_TARGET if exact_last else min(RECALL_TARGET, rows[-1][column] - CEILING_MARGIN)
    chosen = next((row for row in rows if row[column] >= target), rows[-1])
    return {"nprobe": chosen["nprobe"], "recall": chosen[column]}


def plateau_rule(rows: list[dict[str, Any]], column: str) -> dict[str, Any]:
    """The step the tuner stopped at before: the first reaching RECALL_TARGET, or the one before a doubling
    (from nprobe 16 on) that gained less than 0.002."""
    best = 0.0
    chosen = rows[-1]
    for i, row in enumerate(rows):
        if row[column] >= RECALL_TARGET:
            chosen = row
            break
        if row["nprobe"] >= 16 and row[column] - best < 0.002 and i:
            chosen = rows[i - 1]
            break
        best = row[column]
    return {"nprobe": chosen["nprobe"], "recall": chosen[column]}


def main() -> None:
    parser = arguments(__doc__.splitlines()[0], docs=300_000)
    parser.add_argument("--kinds", default="ivf,ivfpq", help="ivf and/or ivfpq (the sweep sets nprobe)")
    parser.add_argument("--queries", type=int, default=300, help="held-out titles recall is reported on")
    parser.add_argument("--corpus", type=Path, default=DATA)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/semsearch-bench-ann-tuning"))
    parser.add_argument(
        "--rerank",
        default="",
        help="IVF-PQ only: other re-rank depths to sweep as well (e.g. 200,400), reported under rerank_sweep",
    )
    parser.add_argument(
        "--tuned-only", action="store_true", help="measure the tuned nprobe and nlist only, not every step (1M)"
    )
    args = parser.parse_args()
    if not args.corpus.is_file():
        sys.exit(f"no corpus at {args.corpus}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    docs = records(args.corpus, args.docs)
    cached = args.workdir / f"standin-{args.docs}.npy"
    enc = HashedWords()
    if cached.is_file():
        x = np.load(cached, mmap_mode="r")
        log(f"reusing {cached}")
    else:
        log(f"encoding {len(docs):,} stand-in documents")
        x = np.vstack(
            [
                enc.encode([f"{d['title']}. {d['text']}" for d in docs[s : s + 20_000]])
                for s in range(0, len(docs), 20_000)
            ]
        ).astype(np.float32)
        np.save(cached, x)
    x = np.ascontiguousarray(x, dtype=np.float32)
    ids = np.arange(len(x), dtype=np.int64) * 3 + 1
    store = VectorStore(x, ids)
    objects = [SimpleNamespace(title=d["title"], text=d["text"]) for d in docs]
    tuning_texts = query_like_texts(objects)  # what a build tunes on
    rng = np.random.default_rng(7)
    used = set(tuning_texts)
    held_out = [docs[i]["title"] for i in rng.choice(len(docs), 4 * args.queries, replace=False)]
    held_out = [t for t in held_out if t not in used and len(t) > 20][: args.queries]
    sets = {"tuning": enc.encode(tuning_texts), "held_out": enc.encode(held_out)}
    result: dict[str, Any] = {
        "benchmark": "ann_tuning",
        "vectors": "stand-in (hashed bag of words, 384-d)",
        "documents": len(x),
        "tuning_queries": len(tuning_texts),
        "held_out_queries": len(held_out),
        "cpus": os.cpu_count(),
        "kinds": {},
    }
    for kind in args.kinds.split(","):
        log(f"{kind}: building over {len(x):,} vectors")
        started = time.perf_counter()
        index, spec = build_ann(x, ids, requested=kind, tuning_queries=sets["tuning"])
        build_s = time.perf_counter() - started
        described, tuned = spec.describe(), spec.nprobe
        log(f"  {described} in {build_s:.0f} s")
        steps = list(spec.structure.steps(spec))
        if args.tuned_only:
            steps = sorted({tuned, steps[-1]})
        rows = sweep(AnnSearcher(index, spec, store), store, steps, sets)
        result["kinds"][kind] = {
            "describe": described,
            "nlist": spec.nlist,
            "tuned_nprobe": tuned,
            "tuned_recall_at_10": spec.recall_at_10,
            "build_s": round(build_s, 1),
        }
        if not args.tuned_only:  # the rule now (tie-aware, ceiling) and before (by ids, plateau), from one sweep
            result["kinds"][kind]["rule_now"] = rule(rows, "tuning_tie_aware", spec.structure.exact_at_last_step)
            result["kinds"][kind]["rule_before"] = plateau_rule(rows, "tuning_by_ids")
        result["kinds"][kind]["sweep"] = rows
        if args.rerank and spec.rerank:
            extra = []
            for depth in (int(d) for d in args.rerank.split(",")):
                log(f"  re-rank {depth}")
                spec.rerank = depth
                found = sweep(AnnSearcher(index, spec, store), store, steps, sets)
                extra += [{"rerank": depth, **row} for row in found]
            result["kinds"][kind]["rerank_sweep"] = extra
        del index
    emit(result, out=args.out)


if __name__ == "__main__":
    main()
