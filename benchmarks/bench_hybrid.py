"""Benchmark warm hybrid-query latency on a big index: p50/p99 of dense and hybrid, and where hybrid's time goes.

One process, one opened index, every query searched once per mode after a warm-up pass (the encoder, the
memory maps and SQLite's pages are warm). The breakdown times the stages of ``Index.search`` one by one
(query encode, dense top-1000, BM25 top-1000, fusion, SQLite fetch, highlights). The baseline is the BM25
top-k the index used before (a dense score array over every document, then a sort of every matching one),
timed in the same run and checked against the current path: same ids, scores within 1e-6. Prints one JSON line.

    python -m benchmarks.bench_hybrid --index /tmp/b157/idx --standin [--queries 300]
    python -m benchmarks.bench_hybrid --index /tmp/b157/idx --standin --dump new.json   # each query's hits
    python -m benchmarks.bench_hybrid --compare old.json new.json                      # two versions' hits

``--standin`` encodes queries with ``semsearch.encode.hashed``'s hashed-words encoder, the one an index built by
``benchmarks/bench_arrivals.py`` (or with that encoder) holds (no model needed); without it the index's own
encoder is loaded.
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import NEURIPS, HashedWords, arguments, emit

TITLES = NEURIPS


def title_queries(n: int, path: Path = TITLES) -> list[str]:
    """The first n titles of a JSONL(.gz) corpus: realistic short queries the index has not seen verbatim."""
    opener = gzip.open if path.suffix == ".gz" else open
    out: list[str] = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            title = (json.loads(line).get("title") or "").strip()
            if title:
                out.append(title)
            if len(out) >= n:
                break
    return out


def _ms(samples: Sequence[float]) -> dict[str, float]:
    return {
        "p50_ms": round(float(np.percentile(samples, 50)), 3),
        "p99_ms": round(float(np.percentile(samples, 99)), 3),
    }


class Stages:
    """Wall and CPU milliseconds per named stage: on a shared machine the CPU time is the work, not the wait."""

    def __init__(self) -> None:
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def run(self, name: str, fn: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.thread_time()
        out = fn()
        self.wall.setdefault(name, []).append((time.perf_counter() - wall) * 1000)
        self.cpu.setdefault(name, []).append((time.thread_time() - cpu) * 1000)
        return out

    def p50(self, times: dict[str, list[float]]) -> dict[str, float]:
        return {name: _ms(v)["p50_ms"] for name, v in times.items()}


def old_lexical_top(lex: Any, text: str, depth: int) -> dict[int, float]:
    """The BM25 top-k as it was: score every document that shares a term, then sort all of them."""
    n = len(lex)
    scores = np.zeros(n, dtype=np.float32)
    matched = np.zeros(n, dtype=bool)
    data, indices, indptr = lex.csc()  # a segmented index weighs its postings once, here (not timed apart)
    for tid, w in lex.query_weights(text).items():
        start, end = int(indptr[tid]), int(indptr[tid + 1])
        rows = indices[start:end]
        scores[rows] += np.float32(w) * data[start:end]
        matched[rows] = True
    rows = np.flatnonzero(matched & (scores > 0))
    # Sorted in full (the cost measured); ties by document id, the rule the index follows now.
    order = np.lexsort((lex.ids[rows], -scores[rows]))[:depth]
    return {int(lex.ids[r]): float(scores[r]) for r in rows[order]}


def _as_dict(top: Any) -> dict[int, float]:
    """A stage's candidates as {id: score}: the arrays ``_dense_top`` returns now, or the dict it used to."""
    return top if isinstance(top, dict) else dict(zip(top[0].tolist(), top[1].tolist(), strict=True))


def fuse(dense: Any, lexical: Any, k: int) -> list[int]:
    """The k best fused ids, as ``Retriever.rank`` fuses them (arrays now; dicts before)."""
    from semsearch.query import fusion

    if isinstance(dense, dict):
        return [n for n, _ in fusion.convex(dense, lexical, fusion.DEFAULT_ALPHA, fusion.DEFAULT_NORM)[:k]]
    ids, _ = fusion.convex_arrays(*dense, *lexical, alpha=fusion.DEFAULT_ALPHA, norm=fusion.DEFAULT_NORM, limit=k)
    return [int(n) for n in ids.tolist()]


def hybrid_latency(index_dir: str | Path, embedder: Any, queries: Sequence[str], k: int = 10) -> dict[str, Any]:
    """Warm p50/p99 of dense and hybrid ``Index.search`` (with highlights), hybrid's stage breakdown, and the
    old BM25 top-k path timed alongside and checked against the current one."""
    from semsearch import Index
    from semsearch.query.fusion import DEFAULT_DEPTH
    from semsearch.query.highlight import best_sentences, matched_terms
    from semsearch.store.analyzer import Analyzer

    with Index.open(index_dir, embedder=embedder) as idx:
        for text in queries[:20]:  # warm-up: encoder, memory maps, SQLite pages, the lexical index
            idx.search(text, k, mode="hybrid")
        runs = Stages()
        for text in queries:
            runs.run("dense", lambda text=text: idx.search(text, k, mode="dense"))  # type: ignore[misc]
        for text in queries:
            runs.run("hybrid", lambda text=text: idx.search(text, k, mode="hybrid"))  # type: ignore[misc]
        stages = Stages()
        depth = min(len(idx), max(DEFAULT_DEPTH, k))
        worst_diff, same_top = 0.0, 0
        for text in queries:
            vector = stages.run("encode", lambda text=text: idx.encode_query(text))  # type: ignore[misc]
            dense = stages.run("dense_top", lambda: idx._retrieval().dense_top(vector, depth, None, frozenset()))  # noqa: B023
            lexical = stages.run(
                "bm25_top",
                lambda text=text: idx._retrieval().lexical_top(text, depth, None, frozenset()),  # type: ignore[misc]
            )
            old = stages.run("bm25_top_old", lambda text=text: old_lexical_top(idx.lexical, text, depth))  # type: ignore[misc]
            top = stages.run("fusion", lambda: fuse(dense, lexical, k))  # noqa: B023
            lexical = _as_dict(lexical)
            docs = stages.run("fetch", lambda: idx.store.get_many(top))  # noqa: B023

            def explain(text: str = text, docs: dict[int, Any] = docs) -> None:
                analyzer = Analyzer()
                terms = analyzer(text)
                for doc in docs.values():
                    best_sentences(doc.text, terms, n=1, analyzer=analyzer)
                    matched_terms(doc.embedding_text(), text, analyzer=analyzer)

            stages.run("highlights", explain)
            # The current path must answer what the old one did: same ids in the same order, same scores.
            if list(old) == list(lexical):
                same_top += 1
            worst_diff = max([worst_diff, *(abs(old[d] - s) for d, s in lexical.items() if d in old)])
        return {
            "index": str(index_dir),
            "documents": len(idx),
            "queries": len(queries),
            "k": k,
            "depth": depth,
            "dense": _ms(runs.wall["dense"]),
            "hybrid": _ms(runs.wall["hybrid"]),
            "dense_cpu": _ms(runs.cpu["dense"]),
            "hybrid_cpu": _ms(runs.cpu["hybrid"]),
            "breakdown_p50_ms": stages.p50(stages.wall),
            "breakdown_cpu_p50_ms": stages.p50(stages.cpu),
            "bm25_same_as_old": f"{same_top}/{len(queries)}",
            "bm25_max_score_diff": worst_diff,
        }


def dump_hits(index_dir: str | Path, embedder: Any, queries: Sequence[str], path: Path, k: int = 10) -> None:
    """Write each query's hybrid hits (id, score, parts, highlight, matched words) as JSON, to compare versions."""
    from semsearch import Index

    with Index.open(index_dir, embedder=embedder) as idx:
        out = {
            text: [[h.id, h.score, h.scores, h.highlights, h.matched_terms] for h in idx.search(text, k)]
            for text in queries
        }
    path.write_text(json.dumps(out), encoding="utf-8")


def compare_hits(a: Path, b: Path) -> dict[str, Any]:
    """How far two dumps differ: queries with other ids or order, the largest score gap, other explanations."""
    left, right = json.loads(a.read_text(encoding="utf-8")), json.loads(b.read_text(encoding="utf-8"))
    ids = sum(1 for q in left if [h[0] for h in left[q]] != [h[0] for h in right.get(q, [])])
    gap = max((abs(x[1] - y[1]) for q in left for x, y in zip(left[q], right.get(q, []), strict=False)), default=0.0)
    explained = sum(1 for q in left if [h[2:] for h in left[q]] != [h[2:] for h in right.get(q, [])])
    return {"queries": len(left), "other_ids": ids, "max_score_diff": gap, "other_parts_or_highlights": explained}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--index", type=Path, default=Path("/tmp/b157/idx"))
    parser.add_argument("--standin", action="store_true", help="use the hashed-words stand-in encoder")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--titles", type=Path, default=TITLES, help="JSONL(.gz) whose titles are the queries")
    parser.add_argument("--dump", type=Path, help="only write each query's hybrid hits as JSON here")
    parser.add_argument("--compare", type=Path, nargs=2, metavar="DUMP", help="only compare two --dump files")
    args = parser.parse_args()
    if args.compare:
        emit(compare_hits(*args.compare), out=args.out)
        return
    queries = title_queries(args.queries, args.titles)
    if not queries:
        sys.exit(f"no titles in {args.titles}")
    embedder = HashedWords() if args.standin else None
    if args.dump:
        dump_hits(args.index, embedder, queries, args.dump)
        return
    emit(hybrid_latency(args.index, embedder, queries), out=args.out)


if __name__ == "__main__":
    main()
