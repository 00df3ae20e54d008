"""Study: how should the dense side read abstracts longer than the encoder's window? (SciFact, issue 24)

Encodes SciFact's documents whole and as sentence windows with the index's int8 ONNX encoder (each text alone),
then scores dense nDCG@10 on a split for each way of making a document score from those vectors:

    whole        the encoder's first 256 tokens (before)
    pooled       unit mean of whole + non-overlapping 2-sentence tail windows past the cut (the default now)
    pooled3      the same with 3-sentence windows
    pool_all     unit mean of whole + every stride-1 2-sentence window
    max_window   best stride-1 2-sentence window (needs a vector per window)
    max_whole    max(whole, best window)

    python scripts/study_windows.py --encoder IDX/v-*/encoder --split train [--base whole] [--strides]

Prints one JSON line: per candidate the mean, and the paired difference to --base with its standard error.
Vectors are kept in --cache (an .npz keyed by text hash) so a second split costs only the queries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.core.sentences import split_sentences  # noqa: E402
from semsearch.encode.onnx_backend import OnnxEmbedder  # noqa: E402
from semsearch.encode.windows import document_windows, pool  # noqa: E402
from semsearch.eval.beir import read_qrels, read_queries  # noqa: E402
from semsearch.eval.metrics import ndcg_at_k  # noqa: E402

SCIFACT = REPO.parent / "shared" / "data" / "scifact"


def key(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def stride_windows(title: str, text: str, size: int = 2) -> list[str]:
    spans = split_sentences(text)
    if len(spans) <= size:
        return [f"{title} {text}".strip()]
    return [f"{title} {text[spans[i][0] : spans[i + size - 1][1]]}".strip() for i in range(len(spans) - size + 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache", default="/tmp/quality/windows.npz")
    ap.add_argument("--base", default="whole")
    ap.add_argument("--strides", action="store_true", help="also every stride-1 window (pool_all, max_*): ~35k texts")
    args = ap.parse_args()
    emb = OnnxEmbedder.load(Path(args.encoder), "int8", parallel="texts")
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open()]
    ids = [d["_id"] for d in docs]
    full = [f"{d['title']} {d['text']}".strip() for d in docs]
    tails2 = document_windows([(f, d["title"], d["text"]) for f, d in zip(full, docs, strict=True)], emb.read_chars, 2)
    tails3 = document_windows([(f, d["title"], d["text"]) for f, d in zip(full, docs, strict=True)], emb.read_chars, 3)
    strides = [stride_windows(d["title"], d["text"]) for d in docs] if args.strides else []
    store: dict[str, np.ndarray] = {}
    cache = Path(args.cache)
    if cache.is_file():
        with np.load(cache) as z:
            store = {k: z[k] for k in z.files}
    wanted = list(dict.fromkeys([*full, *(t for ts in (tails2, tails3, strides) for w in ts for t in w)]))
    todo = [t for t in wanted if key(t) not in store]
    print(f"{len(wanted)} texts, {len(todo)} to encode; long docs {sum(bool(t) for t in tails2)}", file=sys.stderr)
    for start in range(0, len(todo), 1000):
        part = todo[start : start + 1000]
        for t, v in zip(part, emb.encode(part), strict=True):
            store[key(t)] = v
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **store)
        print(f"  {start + len(part)}/{len(todo)}", file=sys.stderr)

    def vec(t: str) -> np.ndarray:
        return store[key(t)]

    whole = np.stack([vec(t) for t in full])
    pooled = np.stack(
        [
            pool(vec(f), np.stack([vec(t) for t in w]) if w else np.zeros((0, 384)))
            for f, w in zip(full, tails2, strict=True)
        ]
    )
    pooled3 = np.stack(
        [
            pool(vec(f), np.stack([vec(t) for t in w]) if w else np.zeros((0, 384)))
            for f, w in zip(full, tails3, strict=True)
        ]
    )

    queries = read_queries(SCIFACT / "queries.jsonl")
    qrels = read_qrels(SCIFACT / "qrels" / f"{args.split}.tsv")
    qids = [q for q in qrels if q in queries]
    qv = emb.encode([queries[q] for q in qids])
    scores = {
        "whole": qv @ whole.T,
        "pooled": qv @ pooled.T,
        "pooled3": qv @ pooled3.T,
    }
    if strides:
        pool_all = np.stack([pool(vec(f), np.stack([vec(t) for t in w])) for f, w in zip(full, strides, strict=True)])
        flat = np.stack([vec(t) for w in strides for t in w])
        starts = np.r_[0, np.cumsum([len(w) for w in strides])[:-1]]
        scores["pool_all"] = qv @ pool_all.T
        win = np.maximum.reduceat(qv @ flat.T, starts, axis=1)
        scores["max_window"] = win
        scores["max_whole"] = np.maximum(win, scores["whole"])
    per: dict[str, np.ndarray] = {}
    for name, s in scores.items():
        top = np.argsort(-s, axis=1)[:, :10]
        per[name] = np.array([ndcg_at_k([ids[j] for j in top[i]], qrels[q]) for i, q in enumerate(qids)])
    base = per[args.base]
    out = {"split": args.split, "queries": len(qids)}
    for name, v in per.items():
        d = v - base
        out[name] = {
            "ndcg@10": round(float(v.mean()), 4),
            "diff": round(float(d.mean()), 4),
            "se": round(float(d.std(ddof=1) / math.sqrt(len(d))), 4),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
