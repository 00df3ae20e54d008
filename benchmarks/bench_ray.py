"""Benchmark the ray engine against the local one: encoding throughput with a fresh cache, one JSON line.

Both engines encode the same documents (the first --limit abstracts of the NeurIPS 2025 dump, deduplicated)
with the same ONNX int8 export, each into an empty cache. The Ray figures are split into starting a local
Ray (once per build) and the pipeline (actor start-up, model load, encoding, shards, cache); the vectors
of the two engines are compared bitwise.

    python -m benchmarks.bench_ray                       # 2000 abstracts, local Ray on this machine
    python -m benchmarks.bench_ray --address ray://head:10001 --actors 16
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.harness import NEURIPS, arguments, emit

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from semsearch.dedup.duplicates import deduplicate
from semsearch.encode.cache import EmbeddingCache
from semsearch.encode.catalogue import DEFAULT_MODEL
from semsearch.encode.encoder_choice import EncoderChoice
from semsearch.encode.onnx_backend import OnnxEmbedder
from semsearch.encode.onnx_export import export_onnx
from semsearch.encode.ray_engine import encode_with_ray, ray_session
from semsearch.ingest.sources import read_sources
from semsearch.write.build import encode_with_cache

DEFAULT_DATA = NEURIPS


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
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
    emit(
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
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
