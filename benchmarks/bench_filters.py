"""Benchmark the first --where filter on a freshly opened index: column index vs today's scan.

For each filter, a fresh ``Index`` is opened and warmed with one unfiltered search (so the BM25 index and the
query encoder are loaded), then timed: the first search with that filter, a second search with another filter
on the same Index, and the filter alone. With ``scan`` the same filter is also computed the way versions
without the column index are (``filters.evaluate`` over every document), for the ratio. Prints one JSON line.

    python -m benchmarks.bench_filters --index DIR [--no-scan] [--where CLAUSE ...]

Without an embedder the searches are lexical (no encoder is loaded); the filter costs the same in every mode.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import arguments, emit
from semsearch import Index
from semsearch.core.errors import QueryError
from semsearch.encode.embedder import Embedder
from semsearch.store.filters import evaluate, parse_where

FILTERS = (
    "year>=2024",
    "venue=neurips",
    "title~graph",
    "file=*corpus*",
    "added>=2026-01-01",
    "authors=yoshua bengio",
    "venue!=neurips",
    "tags=x",  # a field no document has: the warning path
)
QUERY = "graph neural networks for molecules"
TARGET_MS = 50.0


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def first_filter_latency(
    index_dir: str | Path,
    embedder: Embedder | None = None,
    *,
    filters: Sequence[str] = FILTERS,
    scan: bool = True,
    query: str = QUERY,
) -> dict[str, Any]:
    """Per filter: first filtered search on a fresh Index, a second filter after it, the filter alone, the scan."""
    mode = "hybrid" if embedder is not None else "lexical"
    rows: dict[str, dict[str, Any]] = {}
    opened: list[float] = []
    columns = False
    for i, clause in enumerate(filters):
        second = filters[(i + 1) % len(filters)]
        started = time.perf_counter()
        try:
            parse_where([clause])
            with Index.open(index_dir, embedder=embedder) as index:
                started = time.perf_counter()
                index._filters().evaluate([clause])
        except QueryError as exc:  # a clause the filters refuse (year>=abc): how long saying so takes
            rows[clause] = {"error": str(exc), "filter_ms": _ms(time.perf_counter() - started)}
            continue
        started = time.perf_counter()
        with Index.open(index_dir, embedder=embedder) as index:
            opened.append(time.perf_counter() - started)
            columns = index.store.has_filter_columns
            index.search(query, 10, mode=mode)  # load BM25 and the encoder: what is left is the filter
            started = time.perf_counter()
            index.search(query, 10, mode=mode, where=[clause])
            first = time.perf_counter() - started
            started = time.perf_counter()
            with contextlib.suppress(QueryError):  # a refused second filter is timed too: refusing is its cost
                index.search(query, 10, mode=mode, where=[second])
            second_s = time.perf_counter() - started
            matched = len(index._filters().answer([clause])[0])
            warnings = index.where_warnings([clause])
        with Index.open(index_dir, embedder=embedder) as index:
            started = time.perf_counter()
            index._filters().evaluate([clause])
            alone = time.perf_counter() - started
            row: dict[str, Any] = {
                "matched": matched,
                "first_search_ms": _ms(first),
                "filter_ms": _ms(alone),
                "second_filter": second,
                "second_search_ms": _ms(second_s),
                "warnings": warnings,
            }
            if scan:
                started = time.perf_counter()
                result = evaluate(index.store.iter_documents(), parse_where([clause]))
                row["scan_ms"] = _ms(time.perf_counter() - started)
                row["scan_matched"] = len(result.ids)
                row["scan_over_filter"] = round(row["scan_ms"] / max(row["filter_ms"], 0.1), 1)
        rows[clause] = row
    worst = max((r["filter_ms"] for r in rows.values()), default=0.0)
    return {
        "index": str(index_dir),
        "column_index": columns,
        "mode": mode,
        "open_ms_median": _ms(sorted(opened)[len(opened) // 2]),
        "worst_first_filter_ms": worst,
        "target_ms": TARGET_MS,
        "meets_target": worst <= TARGET_MS,
        "filters": rows,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--index", required=True, help="index directory (read only)")
    parser.add_argument("--where", action="append", help="filters to time (default: a fixed set)")
    parser.add_argument("--no-scan", action="store_true", help="skip timing today's scan (seconds per filter)")
    args = parser.parse_args(argv)
    emit(first_filter_latency(args.index, filters=args.where or FILTERS, scan=not args.no_scan), out=args.out)


if __name__ == "__main__":
    main()
