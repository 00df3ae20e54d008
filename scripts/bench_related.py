"""Benchmark what explaining `related` costs: warm latency with and without each hit's sentence nearest the paper.

One process, one opened index; the first --papers documents are asked for their k nearest papers, each way,
best of --repeats passes (the baseline, ``explain=False``, is measured in the same run). Prints one JSON line:
per k, milliseconds a call without and with the highlight, and their ratio.

    python scripts/bench_related.py --index indexes/default [--papers 60] [--k 10,100]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.query.search import Index  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, default=REPO / "indexes" / "default")
    ap.add_argument("--papers", type=int, default=60)
    ap.add_argument("--k", default="10,100")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    out: dict[str, object] = {"index": str(args.index)}
    with Index.open(args.index) as index:
        ids = [d.id for _, d in zip(range(args.papers), index.store.iter_documents(), strict=False)]
        out |= {"papers": len(ids), "documents": len(index), "reading": index.manifest.model.reading}
        for doc_id in ids[:5]:
            index.related(doc_id, 10)  # warm: memory maps, SQLite pages, the stemmer
        for k in (int(x) for x in args.k.split(",")):
            ms = {}
            for explain in (False, True):
                best = float("inf")
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    for doc_id in ids:
                        index.related(doc_id, k, explain=explain)
                    best = min(best, (time.perf_counter() - start) / len(ids))
                ms["explained" if explain else "plain"] = round(1000 * best, 3)
            ms["ratio"] = round(ms["explained"] / ms["plain"], 2)
            out[f"k{k}"] = ms
    print(json.dumps(out))


if __name__ == "__main__":
    main()
