"""Benchmark warm hybrid-query latency on a big index: p50/p99 of dense and hybrid, and where hybrid's time goes.

One process, one opened index, every query searched once per mode after a warm-up pass (the encoder, the
memory maps and SQLite's pages are warm). The breakdown times the stages of ``Index.search`` one by one
(query encode, dense top-1000, BM25 top-1000, fusion, SQLite fetch, highlights). The baseline is the BM25
top-k the index used before (a dense score array over every document, then a sort of every matching one),
timed in the same run and checked against the current path: same ids, scores within 1e-6. Prints one JSON line.

    python scripts/bench_hybrid.py --index /tmp/b157/idx --standin [--queries 300]

``--standin`` encodes queries with the hashed-words stand-in encoder that /tmp/b157/build.py built that
index with (no model needed); without it the index's own encoder is loaded.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TITLES = REPO.parent / "shared" / "data" / "mlanthology" / "neurips2025.jsonl.gz"
_WORD = re.compile(r"[a-z0-9]+")


class StandIn:
    """The 384-d hashed-words encoder /tmp/b157/build.py indexes with (same name and fingerprint)."""

    backend = "fake"
    precision = "fp32"
    name = "stand-in-hashed-words-384"
    fingerprint = "standin384"
    dimension = 384

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        for r, t in enumerate(texts):
            for w in _WORD.findall(t.lower()):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
                out[r, h % 384] += 1.0 if (h >> 20) & 1 else -1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        n[n == 0] = 1
        return out / n


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


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - started) * 1000


def old_lexical_top(lex: Any, text: str, depth: int) -> dict[int, float]:
    """The BM25 top-k before block pruning: score every document that shares a term, then sort all of them."""
    n = len(lex)
    scores = np.zeros(n, dtype=np.float32)
    matched = np.zeros(n, dtype=bool)
    for tid, w in lex.query_weights(text).items():
        start, end = int(lex.indptr[tid]), int(lex.indptr[tid + 1])
        rows = lex.indices[start:end]
        scores[rows] += np.float32(w) * lex.data[start:end]
        matched[rows] = True
    rows = np.flatnonzero(matched & (scores > 0))
    order = np.lexsort((rows, -scores[rows]))[:depth]
    return {int(lex.ids[r]): float(scores[r]) for r in rows[order]}


def hybrid_latency(index_dir: str | Path, embedder: Any, queries: Sequence[str], k: int = 10) -> dict[str, Any]:
    """Warm p50/p99 of dense and hybrid ``Index.search`` (with highlights), hybrid's stage breakdown, and the
    old BM25 top-k path timed alongside and checked against the current one."""
    from semsearch import Index
    from semsearch.fusion import DEFAULT_ALPHA, DEFAULT_DEPTH, DEFAULT_NORM, convex
    from semsearch.highlight import best_sentences, matched_terms
    from semsearch.lexical import Analyzer

    with Index.open(index_dir, embedder=embedder) as idx:
        for text in queries[:20]:  # warm-up: encoder, memory maps, SQLite pages, the lexical index
            idx.search(text, k, mode="hybrid")
        dense_ms = [_timed(lambda t=t: idx.search(t, k, mode="dense"))[1] for t in queries]  # type: ignore[misc]
        hybrid_ms = [_timed(lambda t=t: idx.search(t, k, mode="hybrid"))[1] for t in queries]  # type: ignore[misc]
        stages: dict[str, list[float]] = {
            s: [] for s in ("encode", "dense_top", "bm25_top", "bm25_top_old", "fusion", "fetch", "highlights")
        }
        depth = min(len(idx), max(DEFAULT_DEPTH, k))
        worst_diff, same_top = 0.0, 0
        for text in queries:
            vector, t = _timed(lambda text=text: idx.encode_query(text))  # type: ignore[misc]
            stages["encode"].append(t)
            dense, t = _timed(lambda: idx._dense_top(vector, depth, None, frozenset()))  # noqa: B023
            stages["dense_top"].append(t)
            lexical, t = _timed(lambda text=text: idx._lexical_top(text, depth, None, frozenset()))  # type: ignore[misc]
            stages["bm25_top"].append(t)
            old, t = _timed(lambda text=text: old_lexical_top(idx.lexical, text, depth))  # type: ignore[misc]
            stages["bm25_top_old"].append(t)
            ranked, t = _timed(lambda: convex(dense, lexical, DEFAULT_ALPHA, DEFAULT_NORM))  # noqa: B023
            stages["fusion"].append(t)
            top = ranked[:k]
            docs, t = _timed(lambda: idx.store.get_many([n for n, _ in top]))  # noqa: B023
            stages["fetch"].append(t)

            def explain(text: str = text, docs: dict[int, Any] = docs) -> None:
                analyzer = Analyzer()
                terms = analyzer(text)
                for doc in docs.values():
                    best_sentences(doc.text, terms, n=1, analyzer=analyzer)
                    matched_terms(doc.embedding_text(), text, analyzer=analyzer)

            stages["highlights"].append(_timed(explain)[1])
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
            "dense": _ms(dense_ms),
            "hybrid": _ms(hybrid_ms),
            "breakdown_p50_ms": {s: _ms(v)["p50_ms"] for s, v in stages.items()},
            "breakdown_p99_ms": {s: _ms(v)["p99_ms"] for s, v in stages.items()},
            "bm25_same_as_old": f"{same_top}/{len(queries)}",
            "bm25_max_score_diff": worst_diff,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--standin", action="store_true", help="use the hashed-words stand-in encoder")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--titles", type=Path, default=TITLES, help="JSONL(.gz) whose titles are the queries")
    args = parser.parse_args()
    queries = title_queries(args.queries, args.titles)
    if not queries:
        sys.exit(f"no titles in {args.titles}")
    embedder = StandIn() if args.standin else None
    print(json.dumps(hybrid_latency(args.index, embedder, queries)))


if __name__ == "__main__":
    main()
