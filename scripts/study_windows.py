"""Study: how should the dense side read abstracts longer than the encoder's window? (SciFact, issue 24)

Encodes SciFact's documents whole and as sentence windows with an int8 ONNX export (each text alone, as a build
does), then scores nDCG@10 on a split for each way of making a document's dense score from those vectors:

    whole        the encoder's first 256 tokens (today's vectors, --reading truncated)
    pooled       unit mean of whole + non-overlapping 2-sentence tail windows past the cut (--reading pooled)
    pooled3      the same with 3-sentence windows
    meanmix0.5   0.5 * whole + 0.5 * mean of the tail windows' scores
    max_tail     max(whole, best tail window): needs a vector per window
    mixA         A * whole + (1 - A) * max_tail, A in 0.3 0.5 0.7
    mixA@R       mixA computed for the whole vector's top R only (R in 100 200 1000), the rest ranked below
    mixA^200     mixA for the whole vector's top 200, every other document at its whole score (as search does)
    pool_all, max_window, max_whole   (--strides) the same over every stride-1 2-sentence window (~35k texts)
    max_all, mixA_all, mixA_all@R     (--all-windows) over every non-overlapping 2-sentence window from the start
    mixA_all^R   mixA_all for the whole vector's top R, every other document at its whole score (what hybrid
                 could fuse at a tenth of the re-scoring: its dense top 1000 with only the first R re-scored)

    python scripts/study_windows.py --encoder IDX/v-*/encoder --split train
    python scripts/study_windows.py --encoder IDX/v-*/encoder --split test --hybrid /tmp/sf

--hybrid INDEX also fuses whole and the --fuse candidates (default pooled, max_tail, mix0.3) with that index's
BM25 top 1000 as hybrid search does (z-scores of the dense top 1000 and BM25's, each query's weight chosen by
adaptive fusion, the default for new indexes; ``--fusion fixed``: alpha 0.5, as the previous release and the
rows measured before 2026-12-02; fuse a mixA@1000, not a mixA@100, whose other 900 floor scores skew the
z-scores); INDEX is any index of the SciFact corpus (only its BM25 side is read), e.g. the one
`semsearch eval ../shared/data/scifact --index /tmp/sf` builds.
Prints one JSON line: per candidate the mean nDCG@10, the paired difference to --base and its standard error.
Vectors are kept in --cache (an .npz keyed by text hash) so a second split costs only the queries.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.core.sentences import split_sentences  # noqa: E402
from semsearch.encode.onnx_backend import OnnxEmbedder  # noqa: E402
from semsearch.encode.windows import document_windows, every_window, pool  # noqa: E402
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


def encode_missing(emb: OnnxEmbedder, wanted: list[str], cache: Path) -> dict[str, np.ndarray]:
    """Vectors of the wanted texts, encoding only those the .npz lacks (saved every 1,000)."""
    store: dict[str, np.ndarray] = {}
    if cache.is_file():
        with np.load(cache) as z:
            store = {k: z[k] for k in z.files}
    todo = [t for t in dict.fromkeys(wanted) if key(t) not in store]
    print(f"{len(set(wanted))} texts, {len(todo)} to encode", file=sys.stderr)
    for start in range(0, len(todo), 1000):
        part = todo[start : start + 1000]
        for t, v in zip(part, emb.encode(part), strict=True):
            store[key(t)] = v
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **store)
        print(f"  {start + len(part)}/{len(todo)}", file=sys.stderr)
    return store


def rescored(whole: np.ndarray, mixed: np.ndarray, depth: int) -> np.ndarray:
    """``mixed`` for each query's ``depth`` best documents by ``whole``; every other document ranks below them."""
    out = np.full_like(whole, -10.0)
    top = np.argpartition(-whole, min(depth, whole.shape[1]) - 1, axis=1)[:, :depth]
    rows = np.arange(len(whole))[:, None]
    out[rows, top] = mixed[rows, top]
    return out


def topped(whole: np.ndarray, mixed: np.ndarray, depth: int) -> np.ndarray:
    """``mixed`` for each query's ``depth`` best documents by ``whole``; every other document keeps ``whole``."""
    out = whole.copy()
    top = np.argpartition(-whole, min(depth, whole.shape[1]) - 1, axis=1)[:, :depth]
    rows = np.arange(len(whole))[:, None]
    out[rows, top] = mixed[rows, top]
    return out


def best_per_doc(base: np.ndarray, window_scores: np.ndarray, owner: np.ndarray, how: str) -> np.ndarray:
    """Per query and document, the max (or mean) of its windows' scores; ``base`` where it has none."""
    out = np.full_like(base, -np.inf if how == "max" else 0.0)
    counts = np.bincount(owner, minlength=base.shape[1])
    for j, doc in enumerate(owner):
        if how == "max":
            out[:, doc] = np.maximum(out[:, doc], window_scores[:, j])
        else:
            out[:, doc] += window_scores[:, j]
    if how == "mean":
        out = out / np.maximum(counts, 1)
    return np.where(counts > 0, out, base)


def ndcg(scores: np.ndarray, ids: list[str], qids: list[str], qrels: dict) -> np.ndarray:
    top = np.argsort(-scores, axis=1)[:, :10]
    return np.array([ndcg_at_k([ids[j] for j in top[i]], qrels[q]) for i, q in enumerate(qids)])


def hybrid(
    scores: np.ndarray,
    ids: list[str],
    lexical: list[dict[str, float]],
    qids: list[str],
    qrels: dict,
    fusion: str = "adaptive",
) -> np.ndarray:
    """nDCG@10 of the dense top 1000 fused with the index's BM25 top 1000 as search does.

    ``fusion``: "adaptive" (the default for new indexes: each query's weight from its two lists, BM25's list
    normalized over the whole depth) or "fixed" (zscore, alpha 0.5, the previous default).
    """
    from semsearch.query.fusion import DEFAULT_ALPHA, DEFAULT_DEPTH, DEFAULT_NORM, FusionPolicy, convex, convex_arrays

    policy = FusionPolicy("adaptive")
    position = {d: j for j, d in enumerate(ids)}
    out = []
    for i, q in enumerate(qids):
        top = np.argsort(-scores[i], kind="stable")[:DEFAULT_DEPTH]
        if fusion == "fixed":
            dense = {ids[j]: float(scores[i, j]) for j in top}
            ranked = [d for d, _ in convex(dense, lexical[i], alpha=DEFAULT_ALPHA, norm=DEFAULT_NORM)[:10]]
        else:
            dense_scores = scores[i, top]
            lexical_ids = np.array([position[d] for d in lexical[i]], dtype=np.int64)
            lexical_scores = np.array(list(lexical[i].values()), dtype=np.float32)
            choice = policy.choose(dense_scores, lexical_scores, DEFAULT_DEPTH)
            fused, _ = convex_arrays(
                top.astype(np.int64),
                dense_scores,
                lexical_ids,
                lexical_scores,
                alpha=choice.alpha,
                norm=DEFAULT_NORM,
                limit=10,
                lexical_depth=choice.lexical_depth,
            )
            ranked = [ids[j] for j in fused.tolist()]
        out.append(ndcg_at_k(ranked, qrels[q]))
    return np.array(out)


def lexical_lists(index_dir: Path, texts: list[str]) -> list[dict[str, float]]:
    """Each text's BM25 top 1000 in an index (its own encoder is never asked for: a lexical search encodes nothing)."""
    from semsearch import Index

    with Index.open(index_dir) as index:
        return [
            {(h.external_ids or [h.id])[0]: h.score for h in index.search(t, 1000, mode="lexical", explain=False)}
            for t in texts
        ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache", default="/tmp/quality/windows.npz")
    ap.add_argument("--base", default="whole")
    ap.add_argument("--strides", action="store_true", help="also every stride-1 window (pool_all, max_*): ~35k texts")
    ap.add_argument("--all-windows", action="store_true", help="also every non-overlapping window (~24k texts)")
    ap.add_argument("--hybrid", type=Path, help="an index of the SciFact corpus: fuse candidates with its BM25")
    ap.add_argument("--fuse", default="pooled,max_tail,mix0.3", help="candidates --hybrid fuses (comma-separated)")
    ap.add_argument("--fusion", choices=["adaptive", "fixed"], default="adaptive", help="how --hybrid fuses")
    args = ap.parse_args()
    emb = OnnxEmbedder.load(Path(args.encoder), "int8", parallel="texts")
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open()]
    ids = [d["_id"] for d in docs]
    full = [f"{d['title']} {d['text']}".strip() for d in docs]
    items = [(f, d["title"], d["text"]) for f, d in zip(full, docs, strict=True)]
    tails2 = document_windows(items, emb.read_chars, 2)
    tails3 = document_windows(items, emb.read_chars, 3)
    strides = [stride_windows(d["title"], d["text"]) for d in docs] if args.strides else []
    every = [every_window(d["title"], d["text"]) for d in docs] if args.all_windows else []
    flat_all = [t for ts in (tails2, tails3, strides, every) for w in ts for t in w]
    print(f"long documents: {sum(bool(t) for t in tails2)} of {len(docs)}", file=sys.stderr)
    store = encode_missing(emb, [*full, *flat_all], Path(args.cache))
    vec: Callable[[str], np.ndarray] = lambda t: store[key(t)]  # noqa: E731

    def pooled_of(tails: list[list[str]]) -> np.ndarray:
        empty = np.zeros((0, emb.dimension), dtype=np.float32)
        return np.stack(
            [pool(vec(f), np.stack([vec(t) for t in w]) if w else empty) for f, w in zip(full, tails, strict=True)]
        )

    def windows_of(tails: list[list[str]]) -> tuple[np.ndarray, np.ndarray]:
        flat = np.stack([vec(t) for w in tails for t in w])
        return flat, np.array([i for i, w in enumerate(tails) for _ in w])

    queries = read_queries(SCIFACT / "queries.jsonl")
    qrels = read_qrels(SCIFACT / "qrels" / f"{args.split}.tsv")
    qids = [q for q in qrels if q in queries]
    qv = emb.encode([queries[q] for q in qids])
    whole = qv @ np.stack([vec(t) for t in full]).T
    flat, owner = windows_of(tails2)
    max_tail = np.maximum(whole, best_per_doc(whole, qv @ flat.T, owner, "max"))
    scores = {
        "whole": whole,
        "pooled": qv @ pooled_of(tails2).T,
        "pooled3": qv @ pooled_of(tails3).T,
        "meanmix0.5": 0.5 * whole + 0.5 * best_per_doc(whole, qv @ flat.T, owner, "mean"),
        "max_tail": max_tail,
        **{f"mix{a}": a * whole + (1 - a) * max_tail for a in (0.3, 0.5, 0.7)},
    }
    for a in (0.3, 0.5, 0.7):
        for depth in (100, 200, 1000):
            scores[f"mix{a}@{depth}"] = rescored(whole, scores[f"mix{a}"], depth)
        scores[f"mix{a}^200"] = topped(whole, scores[f"mix{a}"], 200)
    if every:
        flat_e, owner_e = windows_of([w or [f] for f, w in zip(full, every, strict=True)])
        max_all = np.maximum(whole, best_per_doc(whole, qv @ flat_e.T, owner_e, "max"))
        scores["max_all"] = max_all
        for a in (0.3, 0.5, 0.7):
            scores[f"mix{a}_all"] = a * whole + (1 - a) * max_all
            for depth in (100, 200, 1000):
                scores[f"mix{a}_all@{depth}"] = rescored(whole, scores[f"mix{a}_all"], depth)
            for depth in (100, 200):
                scores[f"mix{a}_all^{depth}"] = topped(whole, scores[f"mix{a}_all"], depth)
    if strides:
        flat_s, owner_s = windows_of(strides)
        best = best_per_doc(whole, qv @ flat_s.T, owner_s, "max")
        scores["pool_all"] = qv @ pooled_of(strides).T
        scores["max_window"] = best
        scores["max_whole"] = np.maximum(best, whole)
    per = {name: ndcg(s, ids, qids, qrels) for name, s in scores.items()}
    if args.hybrid is not None:
        lexical = lexical_lists(args.hybrid, [queries[q] for q in qids])
        per["lexical"] = np.array([ndcg_at_k(list(lex)[:10], qrels[q]) for lex, q in zip(lexical, qids, strict=True)])
        for name in ("whole", *args.fuse.split(",")):
            per[f"hybrid_{name}"] = hybrid(scores[name], ids, lexical, qids, qrels, args.fusion)
    out: dict[str, object] = {"split": args.split, "queries": len(qids), "base": args.base}
    hybrid_base = "hybrid_whole" if args.base == "whole" else args.base
    out.update(paired(per, lambda name: hybrid_base if name.startswith("hybrid_") else args.base))
    print(json.dumps(out))


def paired(per: dict[str, np.ndarray], base_of: Callable[[str], str]) -> dict[str, dict[str, float]]:
    """Per candidate: its mean nDCG@10, and its paired difference to ``base_of(name)`` with the standard error."""
    out = {}
    for name, v in per.items():
        d = v - per[base_of(name)]
        out[name] = {
            "ndcg@10": round(float(v.mean()), 4),
            "diff": round(float(d.mean()), 4),
            "se": round(float(d.std(ddof=1) / math.sqrt(len(d))), 4),
        }
    return out


if __name__ == "__main__":
    main()
