"""What re-scoring by windows adds to a query at scale: stand-in window vectors, the product's WindowIndex.

    python -m benchmarks.bench_windows --docs 157000 --per-doc 1.0    # --reading windows (NeurIPS: 0.95 a document)
    python -m benchmarks.bench_windows --docs 157000 --per-doc 4.1    # --reading windows-all (NeurIPS: 4.07)

Writes random unit float16 windows for --docs documents (a Poisson number each) into a temporary folder, opens
them memory-mapped as a search does, and times ``rescore`` of a query's dense candidates: the hybrid depth
(1000, of which RESCORE_DEPTH are re-scored) and the dense floor (RESCORE_DEPTH). Prints one JSON line of
p50 / p95 milliseconds.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import arguments, emit
from semsearch.store.segments import Segment
from semsearch.store.windows_part import RESCORE_DEPTH, WindowIndex, WindowSet, write


def main() -> None:
    ap = arguments(__doc__, docs=157_000)
    ap.add_argument("--per-doc", type=float, default=1.0)
    ap.add_argument("--dimension", type=int, default=384)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    counts = rng.poisson(args.per_doc, args.docs)
    ids = np.repeat(np.arange(args.docs, dtype=np.int64), counts)
    vectors = rng.standard_normal((len(ids), args.dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    out: dict[str, object] = {"docs": args.docs, "windows": int(len(ids))}
    with tempfile.TemporaryDirectory() as tmp:
        write(Path(tmp), WindowSet(ids, vectors.astype(np.float16)))
        del vectors
        started = time.perf_counter()
        index = WindowIndex.open([Segment(Path(tmp), "", args.docs, np.zeros(0, dtype=np.int64))], args.dimension)
        out["open_ms"] = round(1000 * (time.perf_counter() - started), 2)
        for depth in (1000, RESCORE_DEPTH):
            times = []
            for _ in range(args.queries):
                q = rng.standard_normal(args.dimension).astype(np.float32)
                q /= np.linalg.norm(q)
                nums = rng.choice(args.docs, depth, replace=False).astype(np.int64)
                scores = rng.random(depth).astype(np.float32)
                started = time.perf_counter()
                index.rescore(nums, scores, q)
                times.append(1000 * (time.perf_counter() - started))
            out[f"rescore{depth}_p50_ms"] = round(float(np.percentile(times, 50)), 3)
            out[f"rescore{depth}_p95_ms"] = round(float(np.percentile(times, 95)), 3)
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
