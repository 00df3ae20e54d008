"""Time the corpus map (layout + clusters + terms) on an index's real vectors or on a slice of a JSONL corpus.

    python scripts/bench_map.py --index indexes/default --method pca --method umap
    python scripts/bench_map.py --jsonl ../shared/data/mlanthology/corpus.jsonl.gz --limit 30000 --method umap

A JSONL slice has no index, so its vectors are a hashed bag of words (384-d, like the tests' fake encoder):
the layout's cost depends on the number of points and their dimension, not on where the vectors came from.
Prints one JSON line per method.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from semsearch.corpus_map import compute_map  # noqa: E402
from semsearch.dedup import deduplicate  # noqa: E402
from semsearch.records import Document  # noqa: E402


def from_index(index_dir: str) -> tuple[list[Document], np.ndarray]:
    """An index's documents and their vectors, in the same order."""
    import faiss

    from semsearch.ann import VECTORS, read_faiss
    from semsearch.documents import DocumentStore
    from semsearch.layout import DOCS, current_version, doc_num

    version = current_version(Path(index_dir))
    store = DocumentStore(version / DOCS)
    docs = list(store.iter_documents())
    store.close()
    index = read_faiss(version / VECTORS)
    row = {int(n): i for i, n in enumerate(faiss.vector_to_array(index.id_map))}
    vectors = index.index.reconstruct_n(0, index.ntotal)
    return docs, vectors[[row[doc_num(d.id)] for d in docs]]


def from_jsonl(path: str, limit: int, dimension: int = 384) -> tuple[list[Document], np.ndarray]:
    """The first ``limit`` unique abstracts of a JSONL file with hashed bag-of-words vectors."""
    from semsearch.ingest import read_file

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index")
    parser.add_argument("--jsonl")
    parser.add_argument("--limit", type=int, default=30_000)
    parser.add_argument("--method", action="append", choices=["auto", "pca", "umap"])
    parser.add_argument("--out", help="Write the last map as JSON here (to render it).")
    args = parser.parse_args()
    docs, vectors = from_index(args.index) if args.index else from_jsonl(args.jsonl, args.limit)
    data = None
    for method in args.method or ["auto"]:
        started, cpu = time.perf_counter(), time.process_time()
        data = compute_map(docs, vectors, method=method)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        clusters = [c["label"] for c in data["clusters"][:8]]
        print(
            json.dumps(
                {
                    "documents": len(docs),
                    "method": data["method"],
                    "seconds": round(seconds, 2),
                    "cpu_seconds": round(cpu, 2),
                    "clusters": len(data["clusters"]),
                    "largest": clusters,
                }
            ),
            flush=True,
        )
    if args.out and data is not None:
        Path(args.out).write_text(json.dumps(data), encoding="utf-8")


if __name__ == "__main__":
    main()
