"""Benchmark semsearch at scale: the 157k ML Anthology corpus and a 1M-vector set, for every ANN kind.

For each ANN kind it measures build time (training, adding, recall tuning), index bytes, resident memory
after opening the index in a fresh process (and after 300 queries), warm query p50/p99 and recall@10 against
exact search (tie-aware, as builds tune: a hit is a result whose exact score reaches the 10th exact score).
Queries are real: paper titles not in the sample, encoded with the int8 ONNX model. Exact
search over the same vectors in the same run is the baseline every ratio refers to.

Vectors. Encoding 154k abstracts takes hours on 2 CPU cores, so the benchmark reads the real vectors from an
index's embedding cache (``indexes/mlanthology``: ``semsearch index --index indexes/mlanthology
../shared/data/mlanthology/corpus.jsonl.gz`` fills it and resumes where it stopped). Abstracts the cache
does not hold yet get a stand-in: a real cached vector of another abstract, perturbed. The JSON line says
how many vectors were real. The 1M set is those vectors plus perturbed copies (cosine ~0.9 to the original).

End to end. The 157k documents are also built into a real index (own cache, own fingerprint, never the
model's cache) with ``build_index`` -- dedup, BM25, SQLite, ANN -- and queried through ``Index.search``
(dense and hybrid, query encoding included), with resident memory measured after ``Index.open``.

    python -m benchmarks.bench_scale [--corpus ../shared/data/mlanthology/corpus.jsonl.gz] [--skip-1m]

Prints one JSON line on stdout; progress on stderr. Note: faiss-cpu's OpenBLAS may not recognise this CPU
and fall back to a generic kernel ("Prescott"); exact-search figures are therefore conservative.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import CORPUS, REPO, arguments, emit, log
from semsearch.core.options import ann_choices
from semsearch.encode.cache import SCALE_BYTES, cache_key, decode_vector, embedding_key
from semsearch.store.ann import AnnSearcher
from semsearch.store.ann_build import build_ann, exact_top, factory_string, tie_aware_recall
from semsearch.store.vectors import VectorStore, write_vector_files

DEFAULT_CORPUS = CORPUS
DEFAULT_CACHE_INDEX = REPO / "indexes" / "mlanthology"
N_QUERIES = 300
N_TUNING = 200
COPY_SIGMA = 0.025  # per-dimension noise: a copy keeps cosine ~0.9 with its original at 384-d


def percentile_ms(samples: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(samples) * 1e3, q)), 3)


# ---------------------------------------------------------------- vectors


def real_vectors(cache_index: Path) -> dict[bytes, np.ndarray]:
    """Every vector in the int8 ONNX embedding cache of an index (read-only), by its stored key (``cache_key``)."""
    found: dict[bytes, np.ndarray] = {}
    # A cache file is named after its encoding regime too (-alone-...), since issue #15.
    for path in sorted((cache_index / "cache").glob("embeddings-*-onnx-int8*.sqlite")):
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "codes" in tables:  # the compact cache: int8 codes after a scale
                for key, code in conn.execute("SELECT key, code FROM codes"):
                    vector = decode_vector(code, (len(code) - SCALE_BYTES))
                    if vector is not None:
                        found[bytes(key)] = vector
            if "vectors" in tables:  # a cache an earlier release wrote, not converted yet
                for key, _dim, blob in conn.execute("SELECT key, dim, vector FROM vectors"):
                    found[cache_key(key)] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        finally:
            conn.close()
    return found


def stand_in(key: str, pool: np.ndarray) -> np.ndarray:
    """A deterministic stand-in for an abstract not encoded yet: another real vector, perturbed."""
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    v = pool[rng.integers(len(pool))] + rng.normal(0, COPY_SIGMA, pool.shape[1]).astype(np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


class CachedEmbedder:
    """Real cached vectors for known texts, stand-ins for the rest; its own fingerprint keeps it apart."""

    name = "bench-scale-minilm-cache"
    fingerprint = "benchscale0001"

    def __init__(self, real: dict[bytes, np.ndarray], query_encoder: Any) -> None:
        self.real = real
        self.pool = np.vstack(list(real.values())) if real else np.eye(1, 384, dtype=np.float32)
        self.dimension = int(self.pool.shape[1])
        self.query_encoder = query_encoder
        self.hits = 0

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        short = []
        for i, text in enumerate(texts):
            key = embedding_key(text)
            vec = self.real.get(cache_key(key))
            if vec is not None:
                self.hits += 1
                out[i] = vec
            elif len(text) < 300:  # queries and the build's tuning titles: the real model
                short.append(i)
            else:
                out[i] = stand_in(key, self.pool)
        if short:
            out[short] = np.asarray(self.query_encoder.encode([texts[i] for i in short]), dtype=np.float32)
        return out


def query_encoder() -> Any:
    """The int8 ONNX encoder: an existing export of an index under indexes/, else a fresh export."""
    from semsearch.core.errors import SemsearchError
    from semsearch.encode.encoder_choice import open_build_encoder
    from semsearch.encode.onnx_backend import OnnxEmbedder

    for folder in sorted(REPO.glob("indexes/*/v-*/encoder")):
        try:
            return OnnxEmbedder.load(folder, "int8")
        except SemsearchError:
            continue
    out = Path(tempfile.mkdtemp(prefix="bench-scale-enc-"))
    return open_build_encoder("all-MiniLM-L6-v2", backend="onnx", precision="int8", out_dir=out).embedder


def read_titles(corpus: Path, n: int, seed: int = 7) -> list[str]:
    """n seeded paper titles from the corpus, used as realistic short queries."""
    titles = []
    with gzip.open(corpus, "rt", encoding="utf-8") as f:
        for line in f:
            title = json.loads(line).get("title")
            if title and len(title) > 20:
                titles.append(title)
    rng = np.random.default_rng(seed)
    return [titles[i] for i in rng.choice(len(titles), n, replace=False)]


# ---------------------------------------------------------------- per ANN kind

OPEN_AND_QUERY = r"""
import json, sys, time
import numpy as np
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
from semsearch.store.ann import AnnSearcher, AnnSpec
from semsearch.store.vectors import VectorStore
import faiss
folder, spec = sys.argv[1], AnnSpec.from_dict(json.loads(sys.argv[2]))
queries = np.load(sys.argv[3])
before = rss()
t = time.perf_counter()
store = VectorStore.open(__import__('pathlib').Path(folder), dimension=queries.shape[1], count=int(sys.argv[4]))
searcher = AnnSearcher.open(__import__('pathlib').Path(folder) / 'ann.faiss', spec, store)
open_s = time.perf_counter() - t
after_open = rss()
times = []
for q in queries:
    t = time.perf_counter(); searcher.search(q, 10); times.append(time.perf_counter() - t)
print(json.dumps({"open_s": open_s, "rss_open_mb": after_open - before, "rss_queries_mb": rss() - before,
                  "times": times}))
"""


def bench_kind(
    kind: str,
    x: np.ndarray,
    ids: np.ndarray,
    queries: np.ndarray,
    truth: np.ndarray,  # each query's exact top-10 scores
    tuning: np.ndarray,
    work: Path,
    budget: int | None,
) -> dict[str, Any]:
    """Build, save, reopen in a fresh process, time and score one ANN kind over x."""
    log(f"  {kind}: building over {len(x):,} vectors")
    started = time.perf_counter()
    extra: dict[str, Any] = {"memory_budget": budget} if budget else {}
    # Tuned as a build tunes: on other encoded titles than the ones recall is reported on.
    index, spec = build_ann(x, ids, requested=kind, tuning_queries=tuning, **extra)
    build_s = time.perf_counter() - started
    import faiss

    folder = work / kind
    folder.mkdir(parents=True, exist_ok=True)
    faiss.write_index(index, str(folder / "ann.faiss"))
    write_vector_files(folder, ids, x)
    searcher = AnnSearcher(index, spec, VectorStore(x, ids))
    found = [searcher.top(q, 10)[0] for q in queries]
    recall = tie_aware_recall(VectorStore(x, ids), queries, found, list(truth))
    del index, searcher
    np.save(work / "queries.npy", queries)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            OPEN_AND_QUERY,
            str(folder),
            json.dumps(spec.to_dict()),
            str(work / "queries.npy"),
            str(len(x)),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    run = json.loads(proc.stdout)
    times = run["times"][20:]  # the first queries page the index in
    row = {
        "kind": kind,
        "faiss": factory_string(spec),
        "describe": spec.describe(),
        "build_s": round(build_s, 2),
        "ann_bytes": (folder / "ann.faiss").stat().st_size,
        "vectors_bytes": (folder / "vectors.npy").stat().st_size,
        "open_s": round(run["open_s"], 3),
        "rss_after_open_mb": round(run["rss_open_mb"], 1),
        "rss_after_queries_mb": round(run["rss_queries_mb"], 1),
        "p50_ms": percentile_ms(times, 50),
        "p99_ms": percentile_ms(times, 99),
        "recall_at_10_queries": round(recall, 4),
        "recall_at_10_build_sample": spec.recall_at_10,
    }
    log(f"  {kind}: {row}")
    return row


def bench_vectors(
    label: str, x: np.ndarray, queries: np.ndarray, tuning: np.ndarray, kinds: Sequence[str], budget: int | None
) -> dict:
    ids = np.arange(len(x), dtype=np.int64) * 3 + 1  # sparse ids, like document numbers
    log(f"{label}: exact ground truth for {len(queries)} queries")
    _, truth = exact_top(VectorStore(x, ids), queries, 10)
    with tempfile.TemporaryDirectory(prefix=f"bench-scale-{label}-") as tmp:
        rows = [bench_kind(k, x, ids, queries, truth, tuning, Path(tmp), budget) for k in kinds]
    flat = next((r for r in rows if r["kind"] == "flat"), None)
    for r in rows:
        if flat:
            r["speedup_vs_exact_p50"] = round(flat["p50_ms"] / r["p50_ms"], 1) if r["p50_ms"] else None
    return {"vectors": len(x), "raw_vector_mb": round(x.nbytes / 2**20, 1), "kinds": rows}


# ---------------------------------------------------------------- end to end


E2E = r"""
import json, sys, time
import numpy as np
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
from benchmarks.bench_scale import CachedEmbedder, query_encoder
enc = CachedEmbedder({}, query_encoder())
enc.encode(["warm up the encoder"])
before = rss()
from semsearch.query.search import Index
t = time.perf_counter()
idx = Index.open(sys.argv[1], embedder=enc)
open_s = time.perf_counter() - t
after_open = rss()
titles = json.loads(open(sys.argv[2]).read())
out = {"open_s": open_s, "rss_open_mb": after_open - before, "documents": len(idx), "ann": idx.info().ann}
for mode in ("dense", "hybrid"):
    times = []
    for q in titles:
        t = time.perf_counter(); idx.search(q, 10, mode=mode); times.append(time.perf_counter() - t)
    out[mode] = times
out["rss_queries_mb"] = rss() - before
print(json.dumps(out))
"""


def bench_end_to_end(corpus: Path, real: dict[bytes, np.ndarray], titles: list[str], work: Path) -> dict[str, Any]:
    from semsearch.write.build import BuildOptions, build_index

    enc = CachedEmbedder(real, query_encoder())
    log(f"end to end: building {corpus.name} with cached vectors ({len(real):,} real)")
    index_dir = work / "idx157k"
    started = time.perf_counter()
    summary = build_index([str(corpus)], index_dir, BuildOptions(progress=False, batch_size=4096), embedder=enc)
    build_s = time.perf_counter() - started
    log(f"  built {summary.documents:,} documents in {build_s:.1f} s: {summary.ann}")
    t = time.perf_counter()
    # rewrite: time the full path over unchanged sources (bench_arrivals.py times the up-to-date shortcut).
    again = build_index(None, index_dir, BuildOptions(progress=False, batch_size=4096, rewrite=True), embedder=enc)
    unchanged_s = time.perf_counter() - t
    (work / "titles.json").write_text(json.dumps(titles[:200]))
    proc = subprocess.run(
        [sys.executable, "-c", E2E, str(index_dir), str(work / "titles.json")],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)},  # the child imports this module
    )
    run = json.loads(proc.stdout)
    version = index_dir / (index_dir / "CURRENT").read_text().strip()
    sizes = {p.relative_to(version).as_posix(): p.stat().st_size for p in version.rglob("*") if p.is_file()}
    return {
        "read": summary.read,
        "documents": summary.documents,
        "real_vectors": enc.hits,
        "stand_in_vectors": summary.documents - enc.hits,
        "build_s_excluding_encoding": round(build_s, 1),
        "unchanged_rebuild_s": round(unchanged_s, 1),
        "unchanged_rebuild_encoded": again.encoded,
        "ann": run["ann"],
        "index_bytes": sum(sizes.values()),
        "largest_files": dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:6]),
        "open_s": round(run["open_s"], 3),
        "rss_after_open_mb": round(run["rss_open_mb"], 1),
        "rss_after_400_queries_mb": round(run["rss_queries_mb"], 1),
        "dense_p50_ms": percentile_ms(run["dense"][10:], 50),
        "dense_p99_ms": percentile_ms(run["dense"][10:], 99),
        "hybrid_p50_ms": percentile_ms(run["hybrid"][10:], 50),
        "hybrid_p99_ms": percentile_ms(run["hybrid"][10:], 99),
    }


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument(
        "--cache-index",
        type=Path,
        default=DEFAULT_CACHE_INDEX,
        help="index whose int8 ONNX embedding cache holds the real vectors",
    )
    parser.add_argument("--kinds", default=",".join(ann_choices()[1:]))
    parser.add_argument("--kinds-1m", default="flat,ivf,ivfpq", help="HNSW at 1M takes long on 2 cores")
    parser.add_argument("--skip-1m", action="store_true")
    parser.add_argument("--skip-e2e", action="store_true")
    parser.add_argument("--millions", type=float, default=1.0)
    args = parser.parse_args()
    if not args.corpus.is_file():
        sys.exit(f"no corpus at {args.corpus}")

    started = time.perf_counter()
    real = real_vectors(args.cache_index)
    log(f"{len(real):,} real vectors in the cache of {args.cache_index}")
    encoder = query_encoder()
    titles = read_titles(args.corpus, N_QUERIES + N_TUNING)
    encoded = np.vstack([encoder.encode([t]) for t in titles]).astype(np.float32)  # one at a time, as queries are
    queries, tuning = encoded[:N_QUERIES], encoded[N_QUERIES:]
    titles = titles[:N_QUERIES]
    result: dict[str, Any] = {"benchmark": "scale", "cpus": os.cpu_count(), "queries": len(titles)}

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        work = Path(tmp)
        if not args.skip_e2e:
            result["end_to_end_157k"] = bench_end_to_end(args.corpus, real, titles, work)
        # The 157k vectors: exactly what the end-to-end index holds (real + stand-ins), in document order.
        if not args.skip_e2e:
            index_dir = work / "idx157k"
            version = index_dir / (index_dir / "CURRENT").read_text().strip()
            x157 = np.load(version / "vectors.npy")
        else:
            x157 = np.vstack(list(real.values()))
        result["ann_157k"] = bench_vectors("157k", x157, queries, tuning, args.kinds.split(","), None)
        result["ann_157k"]["real_vectors"] = min(len(real), len(x157))
        if not args.skip_1m:
            target = int(args.millions * 1_000_000)
            rng = np.random.default_rng(11)
            parts = [x157]
            while sum(len(p) for p in parts) < target:
                take = min(len(x157), target - sum(len(p) for p in parts))
                copy = x157[rng.choice(len(x157), take, replace=False)] + rng.normal(
                    0, COPY_SIGMA, (take, x157.shape[1])
                ).astype(np.float32)
                parts.append(copy / np.linalg.norm(copy, axis=1, keepdims=True))
            x1m = np.ascontiguousarray(np.vstack(parts), dtype=np.float32)
            del parts
            result["ann_1m"] = bench_vectors("1m", x1m, queries, tuning, args.kinds_1m.split(","), None)
    result["seconds"] = round(time.perf_counter() - started, 1)
    emit(result, out=args.out)


if __name__ == "__main__":
    main()
