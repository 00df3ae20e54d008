"""Benchmark query latency: a cold `semsearch query` process vs a naive sentence-transformers + FAISS script.

Both answer the same query over the same vectors (the seed index's, exported for the naive script), each
run in a fresh process, alternating, median of --runs. Then warm library latency (encode + search + fetch)
over 200 queries in one process, p50 and p99. Prints one JSON line; progress goes to stderr.

    python -m benchmarks.bench_query [--index indexes/default] [--runs 7]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import REPO, SCIFACT, SEEDS, arguments, emit, log, same_run

QUERY = "federated privacy"

NAIVE = """
import sys
import faiss, numpy as np
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(sys.argv[1], device="cpu")
vectors = np.load(sys.argv[2])
index = faiss.IndexFlatIP(vectors.shape[1])
index.add(vectors)
query = model.encode([sys.argv[3]], normalize_embeddings=True)
scores, ids = index.search(query, 10)
print(ids[0][0], scores[0][0])
"""


def timed(cmd: list[str]) -> float:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"{cmd[:3]} failed: {proc.stderr.strip()[-500:]}")
    return elapsed


def export_vectors(index_dir: Path, out: Path) -> None:
    from semsearch import Index

    with Index.open(index_dir) as idx:
        vectors = np.asarray(idx.vectors.matrix)
    np.save(out, np.ascontiguousarray(vectors, dtype=np.float32))


def queries(n: int) -> list[str]:
    """Short research questions: SciFact claims when ../shared is there, else sentences from the seeds."""
    scifact = SCIFACT / "queries.jsonl"
    if scifact.is_file():
        with scifact.open(encoding="utf-8") as fh:
            return [json.loads(line)["text"] for _, line in zip(range(n), fh, strict=False)]
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted((SEEDS).glob("*.txt")))
    sentences = [s.strip() for s in text.split(". ") if 20 < len(s.strip()) < 200]
    return sentences[:n]


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--index", type=Path, default=REPO / "indexes" / "default")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--warm-queries", type=int, default=200)
    args = parser.parse_args()
    if not (args.index / "CURRENT").is_file():
        log(f"building {args.index} from seeds/ first ...")
        subprocess.run(
            [sys.executable, "-m", "semsearch", "index", "seeds", "--index", str(args.index), "-q"],
            check=True,
            cwd=REPO,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
    from semsearch import Index
    from semsearch.encode.catalogue import resolve_model

    with Index.open(args.index) as idx:
        manifest = idx.manifest
    model_path = resolve_model(manifest.model.name)
    tmp = Path(tempfile.mkdtemp(prefix="semsearch-bench-"))
    export_vectors(args.index, tmp / "vectors.npy")
    (tmp / "naive.py").write_text(NAIVE, encoding="utf-8")

    ours_cmd = [sys.executable, "-m", "semsearch", "query", QUERY, "--index", str(args.index), "--json", "-k", "10"]
    naive_cmd = [sys.executable, str(tmp / "naive.py"), model_path, str(tmp / "vectors.npy"), QUERY]
    timed(ours_cmd)  # warm the page cache for both before measuring
    timed(naive_cmd)
    cold = same_run(lambda: timed(ours_cmd), lambda: timed(naive_cmd), repeats=args.runs, names=("ours", "naive"))
    log(f"cold: semsearch {cold['ours_median_s']:.3f} s, naive {cold['naive_median_s']:.3f} s (medians)")

    texts = queries(args.warm_queries)
    with Index.open(args.index) as idx:
        idx.search(texts[0], 10)  # load the encoder
        latencies = []
        for text in texts:
            started = time.perf_counter()
            idx.search(text, 10)
            latencies.append((time.perf_counter() - started) * 1000)
    emit(
        {
            "index": str(args.index),
            "documents": manifest.counts.documents,
            "backend": manifest.model.backend,
            "precision": manifest.model.precision,
            "runs": args.runs,
            "cold_query_median_s": round(cold["ours_median_s"], 3),
            "cold_query_min_s": round(cold["ours_min_s"], 3),
            "naive_median_s": round(cold["naive_median_s"], 3),
            "naive_min_s": round(cold["naive_min_s"], 3),
            "speedup_vs_naive": round(cold["naive_median_s"] / cold["ours_median_s"], 2),
            "warm_queries": len(latencies),
            "warm_p50_ms": round(float(np.percentile(latencies, 50)), 3),
            "warm_p99_ms": round(float(np.percentile(latencies, 99)), 3),
            "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
