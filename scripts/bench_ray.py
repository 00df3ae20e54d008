"""Benchmark the ray engine against the local one: encoding throughput with a fresh cache, one JSON line.

Both engines encode the same documents (the first --limit abstracts of the NeurIPS 2025 dump, deduplicated)
with the same ONNX int8 export, each into an empty cache. The Ray figures are split into starting a local
Ray (once per build) and the pipeline (actor start-up, model load, encoding, shards, cache); the vectors
of the two engines are compared bitwise.

    python scripts/bench_ray.py                       # 2000 abstracts, local Ray on this machine
    python scripts/bench_ray.py --address ray://head:10001 --actors 16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from semsearch.dedup.duplicates import deduplicate  # noqa: E402
from semsearch.encode.cache import EmbeddingCache  # noqa: E402
from semsearch.encode.encoder_choice import EncoderChoice  # noqa: E402
from semsearch.encode.models import DEFAULT_MODEL  # noqa: E402
from semsearch.encode.onnx_backend import OnnxEmbedder, export_onnx  # noqa: E402
from semsearch.encode.ray_engine import encode_with_ray, ray_session  # noqa: E402
from semsearch.ingest.sources import read_sources  # noqa: E402
from semsearch.write.build import encode_with_cache  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "mlanthology" / "neurips2025.jsonl.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--precision", choices=["int8", "fp32"], default="int8")
    parser.add_argument("--address", help="Ray cluster (default: RAY_ADDRESS, else a local Ray)")
    parser.add_argument("--actors", type=int)
    args = parser.parse_args()

    documents = deduplicate(read_sources([str(args.data)]).records, near=True).documents[: args.limit]
    with tempfile.TemporaryDirectory(prefix="semsearch-bench-ray-") as tmp:
        root = Path(tmp)
        export_onnx(DEFAULT_MODEL, root / "encoder")
        enc = OnnxEmbedder.load(root / "encoder", args.precision)
        choice = EncoderChoice(enc, "onnx", args.precision)

        def cache(name: str) -> EmbeddingCache:
            return EmbeddingCache(root / name, enc.fingerprint, choice.cache_runtime(), enc.dimension)

        load = os.getloadavg()[0]
        started = time.perf_counter()
        local_cache = cache("local")
        local, _ = encode_with_cache(enc, documents, local_cache, batch_size=32, progress=False)
        local_s = time.perf_counter() - started
        local_cache.close()

        started = time.perf_counter()
        with ray_session(args.address) as ray:
            init_s = time.perf_counter() - started
            cpus = ray.cluster_resources().get("CPU", 0)
            started = time.perf_counter()
            ray_cache = cache("ray")
            on_ray, _ = encode_with_ray(
                choice, documents, ray_cache, batch_size=32, progress=False, actors=args.actors, build="bench"
            )
            pipeline_s = time.perf_counter() - started
            ray_cache.close()

    n = len(documents)
    print(
        json.dumps(
            {
                "documents": n,
                "precision": args.precision,
                "cpus_here": os.cpu_count(),
                "ray_cpus": cpus,
                "load_average_1m_before": round(load, 2),
                "local_s": round(local_s, 1),
                "local_docs_per_s": round(n / local_s, 1),
                "ray_init_s": round(init_s, 1),
                "ray_pipeline_s": round(pipeline_s, 1),
                "ray_docs_per_s": round(n / pipeline_s, 1),
                "ray_docs_per_s_with_init": round(n / (pipeline_s + init_s), 1),
                "bitwise_equal": bool(np.array_equal(local, on_ray)),
                "max_abs_diff": float(np.abs(local - on_ray).max()),
            }
        )
    )


if __name__ == "__main__":
    main()
