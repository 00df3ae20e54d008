"""What reading windows costs a build: encode a seeded sample of a corpus whole, its tail windows, every window.

    python scripts/cost_windows.py --encoder IDX/v-*/encoder ../shared/data/mlanthology/neurips2025.jsonl.gz

Both passes run in the same process, one after the other, with the build's settings (int8, each text alone,
one text per core), so the ratio (whole + windows) / whole is what the encoding part of a build pays
(``every_ratio``: with every window from the start, encode/windows.every_window, as ``--reading windows-all``).
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.encode.onnx_backend import OnnxEmbedder  # noqa: E402
from semsearch.encode.windows import document_windows, every_window  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--sample", type=int, default=400)
    args = ap.parse_args()
    opener = gzip.open if args.corpus.endswith(".gz") else open
    with opener(args.corpus, "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh if line.strip()]
    rows = np.random.default_rng(0).choice(len(docs), min(args.sample, len(docs)), replace=False)
    picked = [docs[int(i)] for i in sorted(rows)]
    emb = OnnxEmbedder.load(Path(args.encoder), "int8", parallel="texts")
    full = [f"{d.get('title') or ''} {d.get('text') or ''}".strip() for d in picked]
    items = [(f, d.get("title") or "", d.get("text") or "") for f, d in zip(full, picked, strict=True)]
    tails = [t for w in document_windows(items, emb.read_chars) for t in w]
    every = [t for _, title, text in items for t in every_window(title, text)]
    started = time.perf_counter()
    emb.encode(full)
    whole = time.perf_counter() - started
    started = time.perf_counter()
    emb.encode(tails)
    windows = time.perf_counter() - started
    started = time.perf_counter()
    emb.encode(every)
    every_s = time.perf_counter() - started
    long_docs = sum(1 for f in full if emb.read_chars(f) < len(f))
    print(
        json.dumps(
            {
                "sample": len(full),
                "long_share": round(long_docs / len(full), 3),
                "windows": len(tails),
                "windows_per_long_doc": round(len(tails) / max(long_docs, 1), 2),
                "whole_s": round(whole, 2),
                "windows_s": round(windows, 2),
                "encode_ratio": round((whole + windows) / whole, 3),
                "every_windows": len(every),
                "every_s": round(every_s, 2),
                "every_ratio": round((whole + every_s) / whole, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
