"""Time the corpus map (layout + clusters + terms) on an index's real vectors or on a slice of a JSONL corpus.

    python -m benchmarks.bench_map --index indexes/default --method pca --method umap
    python -m benchmarks.bench_map --jsonl ../shared/data/mlanthology/corpus.jsonl.gz --limit 30000 --method umap

A JSONL slice has no index, so its vectors are a hashed bag of words (384-d, like the tests' fake encoder):
the layout's cost depends on the number of points and their dimension, not on where the vectors came from.
Prints one JSON line per method.

With --refresh FILE, times what a refresh that adds FILE's abstracts to (copies of) the index costs: with the
map placing the arrivals on the last layout, with a full re-layout (--relayout), and with no map at all
(SEMSEARCH_MAP=off), in the same run; prints one JSON line (``bench_refresh`` returns it as a dict):

    python -m benchmarks.bench_map --index indexes/neurips --refresh new22.jsonl
    python -m benchmarks.bench_map --index IDX --refresh new.jsonl --stand-in   # IDX built with semsearch.encode.hashed

The index is never written: each variant refreshes its own copy, in a fresh process as `semsearch index` would
(a cold UMAP layout is mostly numba compiling: 5 s warm against 60-70 s cold on 5.8k documents here). When the
index's map predates incremental maps, one copy is first laid out again (a one-time cost, reported as
"prepare") and the variants start from it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import REPO, HashedWords, arguments, emit
from semsearch.atlas.compute import compute_map
from semsearch.atlas.method import MAP_ENV
from semsearch.core.records import Document
from semsearch.dedup.duplicates import deduplicate


def from_index(index_dir: str) -> tuple[list[Document], np.ndarray]:
    """An index's documents and their vectors, in the same order."""
    from semsearch.store.documents import DocumentStore
    from semsearch.store.layout import DOCS, current_version, doc_num
    from semsearch.store.vectors import IDS_FILE, VECTOR_FILE

    version = current_version(Path(index_dir))
    store = DocumentStore(version / DOCS)
    docs = list(store.iter_documents())
    store.close()
    vectors = np.load(version / VECTOR_FILE, allow_pickle=False)  # the exact copy (a flat version has no other)
    row = {int(n): i for i, n in enumerate(np.load(version / IDS_FILE, allow_pickle=False))}
    return docs, vectors[[row[doc_num(d.id)] for d in docs]]


def from_jsonl(path: str, limit: int, dimension: int = 384) -> tuple[list[Document], np.ndarray]:
    """The first ``limit`` unique abstracts of a JSONL file with hashed bag-of-words vectors."""
    from semsearch.ingest.sources import read_file

    records, _, _ = read_file(Path(path))
    docs = deduplicate(records[:limit], near=False).documents
    vectors = np.zeros((len(docs), dimension), dtype=np.float32)
    word = re.compile(r"[a-z0-9]+")
    for i, doc in enumerate(docs):
        for w in word.findall(doc.embedding_text().lower()):
            h = hashlib.md5(w.encode()).digest()
            vectors[i, int.from_bytes(h[:4], "little") % dimension] += 1.0 if h[4] % 2 else -1.0
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    return docs, vectors


def bench_refresh(index_dir: str | Path, add: str | Path, *, stand_in: bool = False) -> dict[str, Any]:
    """Seconds a refresh adding ``add`` to copies of an index takes: map placed, map laid out afresh, no map.

    Each refresh runs in a fresh process, as ``semsearch index`` does: UMAP's numba compilation (most of a
    cold layout's cost) and the other one-time imports are paid the way a user pays them.
    """
    from semsearch.store.corpus_map import load_map
    from semsearch.store.layout import current_version
    from semsearch.store.manifest import read_manifest

    index_dir = Path(index_dir)
    manifest = read_manifest(current_version(index_dir))
    sources = [*manifest.source_args, str(Path(add).resolve())]
    out: dict[str, Any] = {"documents_before": manifest.counts.documents, "add": str(add)}
    with tempfile.TemporaryDirectory(prefix="bench-map-") as tmp:
        base = Path(tmp) / "base"
        shutil.copytree(index_dir, base, symlinks=True)
        old = load_map(current_version(base))
        if old is None or "laid_out_at" not in old:  # a map from before incremental maps: lay it out once
            out["prepare"] = _refresh_in_a_process(base, list(manifest.source_args), relayout=True, stand_in=stand_in)
        for name, relayout, env in (("placed", False, None), ("relayout", True, None), ("map_off", False, "off")):
            copy = Path(tmp) / name
            shutil.copytree(base, copy, symlinks=True)
            out[name] = _refresh_in_a_process(copy, sources, relayout=relayout, stand_in=stand_in, map_env=env)
            shutil.rmtree(copy)
    return out


def _refresh_in_a_process(
    index: Path, sources: list[str], *, relayout: bool, stand_in: bool, map_env: str | None = None
) -> dict[str, Any]:
    """Run one refresh of ``index`` from ``sources`` in a child process; its figures and the process's wall time."""
    command = [sys.executable, "-m", "benchmarks.bench_map", "--one-refresh", str(index), *sources]
    command += ["--relayout"] * relayout + ["--stand-in"] * stand_in
    env = {**os.environ, MAP_ENV: map_env} if map_env else {k: v for k, v in os.environ.items() if k != MAP_ENV}
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=True, cwd=REPO)
    return {"seconds": round(time.perf_counter() - started, 2), **json.loads(done.stdout.splitlines()[-1])}


def one_refresh(index: str, sources: list[str], *, relayout: bool, stand_in: bool) -> dict[str, Any]:
    """A refresh in this process (the child of ``_refresh_in_a_process``): build and map figures."""
    from semsearch.store.layout import current_version
    from semsearch.store.manifest import read_manifest
    from semsearch.write.build import BuildOptions, build_index

    summary = build_index(
        sources, index, BuildOptions(progress=False, relayout=relayout), embedder=HashedWords() if stand_in else None
    )
    entry = read_manifest(current_version(Path(index))).map
    return {
        "build_seconds": summary.seconds,
        "map_seconds": entry.get("seconds"),
        "layout": entry.get("layout", entry.get("method")),
        "added": summary.added,
        "encoded": summary.encoded,
        "documents": summary.documents,
    }


def main() -> None:
    parser = arguments(__doc__, out=False)
    parser.add_argument("--index")
    parser.add_argument("--jsonl")
    parser.add_argument("--limit", type=int, default=30_000)
    parser.add_argument("--method", action="append", choices=["auto", "pca", "umap"])
    parser.add_argument("--out", help="Write the last map as JSON here (to render it).")
    parser.add_argument("--refresh", metavar="FILE", help="Time refreshes of --index that add FILE (see above).")
    parser.add_argument(
        "--stand-in", action="store_true", help="--refresh: the index was built with semsearch.encode.hashed's encoder."
    )
    parser.add_argument("--one-refresh", nargs="+", metavar="INDEX SOURCE", help=argparse.SUPPRESS)
    parser.add_argument("--relayout", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one_refresh:
        index, *sources = args.one_refresh
        emit(one_refresh(index, sources, relayout=args.relayout, stand_in=args.stand_in))
        return
    if args.refresh:
        if not args.index:
            parser.error("--refresh needs --index")
        emit(bench_refresh(args.index, args.refresh, stand_in=args.stand_in))
        return
    docs, vectors = from_index(args.index) if args.index else from_jsonl(args.jsonl, args.limit)
    data = None
    for method in args.method or ["auto"]:
        started, cpu = time.perf_counter(), time.process_time()
        data = compute_map(docs, vectors, method=method)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        clusters = [c["label"] for c in data["clusters"][:8]]
        emit(
            {
                "documents": len(docs),
                "method": data["method"],
                "seconds": round(seconds, 2),
                "cpu_seconds": round(cpu, 2),
                "clusters": len(data["clusters"]),
                "largest": clusters,
            }
        )
    if args.out and data is not None:
        Path(args.out).write_text(json.dumps(data), encoding="utf-8")


if __name__ == "__main__":
    main()
