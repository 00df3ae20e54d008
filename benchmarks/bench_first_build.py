"""Benchmark a first build with the shared encoder store: the one-off export, then a new index, then encoding alone.

Uses a private store folder (``$SEMSEARCH_ENCODERS_DIR`` in a temp dir), so the first step always exports:

1. cold: ``semsearch index SOURCES --index NEW1`` with an empty store (the model is exported once, into the store);
2. first build: ``semsearch index SOURCES --index NEW2``, a new folder (its own empty embedding cache), the
   export taken from the store;
3. encode only: the documents of step 2 encoded in this process by the stored export, as a build encodes them
   (one text per core at once), not counting loading it.

Each build is a ``semsearch`` process, timed wall-clock (Python start-up and imports included). Prints one JSON
line; progress goes to stderr.

    python -m benchmarks.bench_first_build [--sources seeds] [--workdir DIR]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, arguments, emit, log


def build(sources: list[str], index: Path, env: dict[str, str]) -> tuple[dict[str, Any], float, str]:
    """One ``semsearch index`` process: the version's counts, wall seconds and what it printed on stderr.

    Run as a user runs it (no ``-q``/``--json``), so that the export's progress line is printed.
    """
    from semsearch.store.layout import current_version
    from semsearch.store.manifest import Manifest

    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "semsearch", "index", *sources, "--index", str(index)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
    )
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"semsearch index failed: {proc.stderr.strip()}")
    counts = Manifest.read(current_version(index)).counts
    return {"documents": counts.documents}, seconds, proc.stderr


def encode_only(sources: list[str], index: Path) -> tuple[float, int]:
    """Seconds the index's own export takes to encode the documents a build of ``sources`` encodes."""
    from semsearch.dedup.duplicates import deduplicate
    from semsearch.encode.onnx_backend import OnnxEmbedder
    from semsearch.encode.sentence_runs import sentence_text
    from semsearch.ingest.sources import read_sources
    from semsearch.store.layout import ENCODER_DIR, current_version
    from semsearch.store.manifest import Manifest

    documents = deduplicate(read_sources([str(REPO / s) for s in sources]).records).documents
    embedder = OnnxEmbedder.load(current_version(index) / ENCODER_DIR, "int8", parallel="texts")
    texts = [d.embedding_text() for d in documents]
    # As the build read them: with --reading sentences (the default) the runs over each whole text.
    sentences = Manifest.read(current_version(index)).model.reading == "sentences"
    items = [
        sentence_text(t, d.title or "" if not d.title_only else "", d.text)
        for t, d in zip(texts, documents, strict=True)
    ]
    started = time.perf_counter()
    if sentences:
        embedder.encode_sentences(items)
    else:
        embedder.encode(texts)
    return time.perf_counter() - started, len(texts)


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--sources", nargs="+", default=["seeds"], help="what to index (default: seeds)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the indexes go (default: a temp dir)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        root = Path(tmp)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "SEMSEARCH_ENCODERS_DIR": str(root / "store")}
        log("cold: export into an empty store, then build ...")
        cold, cold_s, cold_err = build(args.sources, root / "cold", env)
        log(f"  {cold_s:.1f} s")
        log("first build into a new folder, export from the store ...")
        first, first_s, first_err = build(args.sources, root / "first", env)
        log(f"  {first_s:.1f} s")
        os.environ["SEMSEARCH_ENCODERS_DIR"] = env["SEMSEARCH_ENCODERS_DIR"]
        encode_s, texts = encode_only(args.sources, root / "first")
        log(f"encode only: {encode_s:.1f} s for {texts} texts")
    emit(
        {
            "bench": "first_build",
            "sources": args.sources,
            "documents": first["documents"],
            "cpus": len(os.sched_getaffinity(0)),
            "cold_export_and_build_s": round(cold_s, 2),
            "cold_printed_export_line": "exporting " in cold_err,
            "first_build_new_folder_s": round(first_s, 2),
            "first_build_exported": "exporting " in first_err,
            "encode_only_s": round(encode_s, 2),
            "first_build_over_encode": round(first_s / encode_s, 2),
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
