"""Compare models in one run: encoding speed, cold query time and index size, one index per model.

    semsearch index seeds --index indexes/minilm
    semsearch index seeds --model all-mpnet-base-v2 --index indexes/mpnet
    python -m benchmarks.bench_models indexes/minilm indexes/mpnet --abstracts 64 --queries 5

Each index's own int8 ONNX export encodes the same abstracts (SciFact corpus when present, else the seeds),
interleaved model by model so that a busy machine slows each alike; cold queries are new `semsearch query`
processes. Prints one JSON line: per index, abstracts/s, cold query median/min, index version bytes.
"""

from __future__ import annotations

import gzip
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.harness import REPO, SEEDS, arguments, emit
from benchmarks.harness import SCIFACT as SCIFACT_DIR
from semsearch.encode.onnx_backend import OnnxEmbedder
from semsearch.store.layout import current_version
from semsearch.store.manifest import read_manifest

SCIFACT = SCIFACT_DIR / "corpus.jsonl"


def abstracts(n: int) -> list[str]:
    if SCIFACT.is_file():
        opener = gzip.open if SCIFACT.suffix == ".gz" else open
        with opener(SCIFACT, "rt", encoding="utf-8") as fh:
            rows = [json.loads(line) for line in itertools.islice(fh, n)]
        return [r["text"] for r in rows]
    texts = [p for f in sorted((SEEDS).glob("*.txt")) for p in f.read_text().split("\n") if len(p) > 200]
    return texts[:n]


def cold_query(index: Path, text: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "semsearch", "query", text, "--index", str(index), "-k", "10"],
        check=True,
        capture_output=True,
        env=env,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = arguments(__doc__.split("\n")[0])
    parser.add_argument("indexes", nargs="+", type=Path)
    parser.add_argument("--abstracts", type=int, default=64)
    parser.add_argument("--queries", type=int, default=5)
    args = parser.parse_args()
    texts = abstracts(args.abstracts)
    out: dict[str, dict[str, object]] = {}
    encoders = {}
    for index in args.indexes:
        version = current_version(index)
        manifest = read_manifest(version)
        encoders[index] = OnnxEmbedder.load(version / "encoder", manifest.model.precision)
        out[str(index)] = {
            "model": manifest.model.name,
            "precision": manifest.model.precision,
            "index_bytes": sum(p.stat().st_size for p in version.rglob("*") if p.is_file()),
            "encode_s": 0.0,
            "cold_query_s": [],
        }
    # Interleave: batches of 32, model after model, so load changes hit every model alike.
    for start in range(0, len(texts), 32):
        for index, encoder in encoders.items():
            began = time.perf_counter()
            encoder.encode(texts[start : start + 32], batch_size=32)
            out[str(index)]["encode_s"] += time.perf_counter() - began  # type: ignore[operator]
    for _ in range(args.queries):
        for index in args.indexes:
            out[str(index)]["cold_query_s"].append(cold_query(index, "machine unlearning evaluation"))  # type: ignore[union-attr]
    for row in out.values():
        times = row.pop("cold_query_s")
        row["abstracts_per_s"] = round(len(texts) / float(row.pop("encode_s")), 2)  # type: ignore[arg-type]
        row["cold_query_median_s"] = round(statistics.median(times), 3)  # type: ignore[arg-type]
        row["cold_query_min_s"] = round(min(times), 3)  # type: ignore[type-var]
    load = os.getloadavg()[0]
    emit({"abstracts": len(texts), "queries": args.queries, "load_1min": round(load, 2), "indexes": out}, out=args.out)


if __name__ == "__main__":
    main()
