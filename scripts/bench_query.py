"""Benchmark query latency: a cold `semsearch query` process vs a naive sentence-transformers + FAISS script.

Both answer the same query over the same vectors (the seed index's, exported for the naive script), each
run in a fresh process, alternating, median of --runs. Then warm library latency (encode + search + fetch)
over 200 queries in one process, p50 and p99. Prints one JSON line; progress goes to stderr.

    python scripts/bench_query.py [--index indexes/default] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
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


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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
    scifact = REPO.parent / "shared" / "data" / "scifact" / "queries.jsonl"
    if scifact.is_file():
        with scifact.open(encoding="utf-8") as fh:
            return [json.loads(line)["text"] for _, line in zip(range(n), fh, strict=False)]
    text = " ".join(p.read_text(encoding="utf-8") for p in sorted((REPO / "seeds").glob("*.txt")))
    sentences = [s.strip() for s in text.split(". ") if 20 < len(s.strip()) < 200]
    return sentences[:n]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
    from semsearch.encode.models import resolve_model

    with Index.open(args.index) as idx:
        manifest = idx.manifest
    model_path = resolve_model(str(manifest["model"]["name"]))
    tmp = Path(tempfile.mkdtemp(prefix="semsearch-bench-"))
    export_vectors(args.index, tmp / "vectors.npy")
    (tmp / "naive.py").write_text(NAIVE, encoding="utf-8")

    ours_cmd = [sys.executable, "-m", "semsearch", "query", QUERY, "--index", str(args.index), "--json", "-k", "10"]
    naive_cmd = [sys.executable, str(tmp / "naive.py"), model_path, str(tmp / "vectors.npy"), QUERY]
    timed(ours_cmd)  # warm the page cache for both before measuring
    timed(naive_cmd)
    ours, naive = [], []
    for run in range(args.runs):
        ours.append(timed(ours_cmd))
        naive.append(timed(naive_cmd))
        log(f"run {run + 1}/{args.runs}: semsearch {ours[-1]:.3f} s, naive {naive[-1]:.3f} s")

    texts = queries(args.warm_queries)
    with Index.open(args.index) as idx:
        idx.search(texts[0], 10)  # load the encoder
        latencies = []
        for text in texts:
            started = time.perf_counter()
            idx.search(text, 10)
            latencies.append((time.perf_counter() - started) * 1000)
    cold_ours = statistics.median(ours)
    cold_naive = statistics.median(naive)
    print(
        json.dumps(
            {
                "index": str(args.index),
                "documents": int(manifest["counts"]["documents"]),
                "backend": manifest["model"].get("backend"),
                "precision": manifest["model"].get("precision"),
                "runs": args.runs,
                "cold_query_median_s": round(cold_ours, 3),
                "cold_query_min_s": round(min(ours), 3),
                "naive_median_s": round(cold_naive, 3),
                "naive_min_s": round(min(naive), 3),
                "speedup_vs_naive": round(cold_naive / cold_ours, 2),
                "warm_queries": len(latencies),
                "warm_p50_ms": round(float(np.percentile(latencies, 50)), 3),
                "warm_p99_ms": round(float(np.percentile(latencies, 99)), 3),
                "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
            }
        )
    )


if __name__ == "__main__":
    main()
