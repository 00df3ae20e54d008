"""Adaptive-fusion study: each query's dense and BM25 top 1000 from a built index, then fusion rules scored offline.

The lists come from the product's own index (``semsearch eval DATA --index IDX`` builds it), so the int8 encoder
and BM25 are exactly what a search sees; they are cached beside the index as ``IDX-SPLIT-lists.npz`` (plain
arrays). Each rule is scored by nDCG@10 with its paired difference to z-score alpha 0.5 (today's hybrid) and to
the better of alpha 0 and 1 (the study's stand-ins for the single modes; they lose BM25's one-match lists, see
``convex_arrays``' ``lexical_depth``, so take the single modes from ``semsearch eval``). Rounds: the weight from
each list's head z-score (top 1, 3 or 10; power 1, 2, 4), from the head's gap (z1 - zk), with clips (``--wide``);
BM25's head discounted (scale 1 to 2); BM25's list normalized as the whole depth ("padnorm", the default rules).
The product's ``--fusion adaptive`` is "peaks top1 g1 scale1.5 padnorm". Tune on train only.

    python scripts/study_adaptive.py --data ../shared/data/scifact --index /tmp/fu/scifact-idx --split train
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.eval.beir import read_qrels, read_queries  # noqa: E402
from semsearch.eval.metrics import paired_difference, per_query  # noqa: E402
from semsearch.query.fusion import convex_arrays  # noqa: E402
from semsearch.query.search import Index  # noqa: E402

DEPTH = 1000
Lists = dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]  # qid -> dense ids, scores, lex ids, scores


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def load_lists(
    data: Path, index_dir: Path, split: str
) -> tuple[Lists, dict[str, dict[str, int]], dict[int, list[str]]]:
    """(lists per judged query, qrels, FAISS id -> corpus ids); lists cached beside the index."""
    queries = read_queries(data / "queries.jsonl")
    qrels = read_qrels(data / "qrels" / f"{split}.tsv")
    judged = {q: queries[q] for q in qrels if q in queries}
    cache = index_dir.parent / f"{index_dir.name}-{split}-lists.npz"
    with Index.open(index_dir) as index:
        names = {n: d.external_ids or [d.id] for n, d in _documents(index)}
        if not cache.is_file():
            lists: Lists = {}
            for qid, text in judged.items():
                depth = min(DEPTH, len(index))
                d_ids, d_scores = index._dense_top(index.encode_query(text), depth, None, frozenset())
                l_ids, l_scores = index._lexical_top(text, depth, None, frozenset())
                lists[qid] = (d_ids, d_scores, l_ids, l_scores)
            save(cache, lists)
    return read(cache), qrels, names


def _documents(index: Index) -> list[tuple[int, object]]:
    from semsearch.store.layout import doc_num

    return [(doc_num(d.id), d) for d in index.store.iter_documents()]


def save(path: Path, lists: Lists) -> None:
    """The lists as flat arrays with offsets (no pickle)."""
    qids = list(lists)
    parts: dict[str, np.ndarray] = {"qids": np.array(qids)}
    for j, name in enumerate(("d_ids", "d_scores", "l_ids", "l_scores")):
        arrays = [lists[q][j] for q in qids]
        parts[name] = np.concatenate(arrays) if arrays else np.zeros(0)
        parts[name + "_n"] = np.array([len(a) for a in arrays], dtype=np.int64)
    np.savez(path, **parts)


def read(path: Path) -> Lists:
    z = np.load(path, allow_pickle=False)
    qids = [str(q) for q in z["qids"]]
    out: Lists = {q: ((), (), (), ()) for q in qids}  # type: ignore[misc]
    cols = []
    for name in ("d_ids", "d_scores", "l_ids", "l_scores"):
        ends = np.cumsum(z[name + "_n"])
        cols.append(np.split(z[name], ends[:-1]) if len(qids) else [])
    for i, q in enumerate(qids):
        out[q] = (cols[0][i].astype(np.int64), cols[1][i], cols[2][i].astype(np.int64), cols[3][i])
    return out


Rule = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, float]]


def fixed(alpha: float, pad_norm: bool = False) -> Rule:
    def rule(di: np.ndarray, ds: np.ndarray, li: np.ndarray, ls: np.ndarray) -> tuple[np.ndarray, float]:
        depth = len(ds) if pad_norm else 0
        return convex_arrays(di, ds, li, ls, alpha=alpha, limit=100, lexical_depth=depth)[0], alpha

    return rule


def _z(scores: np.ndarray) -> np.ndarray:
    values = np.asarray(scores, dtype=np.float64)
    std = float(values.std()) if values.size else 0.0
    return (values - values.mean()) / std if std > 0 else np.zeros_like(values)


def peak(scores: np.ndarray, top: int, pad: int = 0) -> float:
    """Mean z-score of a list's ``top`` best (the list padded with zeros to ``pad``): how far its head stands out."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size < pad:
        values = np.concatenate([values, np.zeros(pad - values.size)])
    z = _z(values)
    return float(z[:top].mean()) if z.size else 0.0


def by_peaks(
    top: int,
    gamma: float,
    lo: float = 0.0,
    hi: float = 1.0,
    pad: bool = True,
    scale: float = 1.0,
    pad_norm: bool = False,
) -> Rule:
    """alpha = pd^g / (pd^g + (pl / scale)^g): ``scale`` > 1 discounts BM25's heavier-tailed head."""

    def rule(di: np.ndarray, ds: np.ndarray, li: np.ndarray, ls: np.ndarray) -> tuple[np.ndarray, float]:
        pd, pl = max(peak(ds, top), 1e-6), max(peak(ls, top, len(ds) if pad else 0) / scale, 1e-6)
        alpha = float(np.clip(pd**gamma / (pd**gamma + pl**gamma), lo, hi))
        depth = len(ds) if pad_norm else 0
        return convex_arrays(di, ds, li, ls, alpha=alpha, limit=100, lexical_depth=depth)[0], alpha

    return rule


def gap(scores: np.ndarray, k: int, pad: int = 0) -> float:
    """z(best) - z(k-th best) of a list (padded with zeros to ``pad``): how far the head stands above the next."""
    values = np.asarray(scores, dtype=np.float64)
    if values.size < pad:
        values = np.concatenate([values, np.zeros(pad - values.size)])
    z = _z(values)
    return float(z[0] - z[min(k, z.size) - 1]) if z.size else 0.0


def by_gaps(k: int, gamma: float) -> Rule:
    def rule(di: np.ndarray, ds: np.ndarray, li: np.ndarray, ls: np.ndarray) -> tuple[np.ndarray, float]:
        gd, gl = max(gap(ds, k), 1e-6), max(gap(ls, k, len(ds)), 1e-6)
        alpha = float(gd**gamma / (gd**gamma + gl**gamma))
        return convex_arrays(di, ds, li, ls, alpha=alpha, limit=100)[0], alpha

    return rule


def score_rule(rule: Rule, lists: Lists, qrels: dict[str, dict[str, int]], names: dict[int, list[str]]) -> dict:
    run: dict[str, list[str]] = {}
    alphas = []
    for qid, (di, ds, li, ls) in lists.items():
        ids, alpha = rule(di, ds, li, ls)
        alphas.append(alpha)
        run[qid] = [x for n in ids.tolist() for x in names[n]]
    scores = per_query(run, qrels)
    return {"ndcg": {q: m["ndcg@10"] for q, m in scores.items()}, "alpha": float(np.mean(alphas))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--index", type=Path, required=True)
    parser.add_argument("--split", default="train")
    parser.add_argument("--wide", action="store_true", help="also the first round's rules (gaps, clips, top 10)")
    args = parser.parse_args()
    lists, qrels, names = load_lists(args.data, args.index, args.split)
    rules: dict[str, Rule] = {f"alpha {a:.1f}": fixed(a) for a in np.linspace(0, 1, 11)}
    if args.wide:
        for top in (1, 3, 10):
            for gamma in (1.0, 2.0, 4.0):
                rules[f"peaks top{top} g{gamma:g}"] = by_peaks(top, gamma)
        for k in (2, 5, 10):
            for gamma in (1.0, 2.0):
                rules[f"gaps k{k} g{gamma:g}"] = by_gaps(k, gamma)
        for top, gamma, lo, hi in ((10, 2.0, 0.2, 0.8), (10, 4.0, 0.2, 0.8), (10, 4.0, 0.1, 0.9), (3, 4.0, 0.2, 0.8)):
            rules[f"peaks top{top} g{gamma:g} clip{lo:g}-{hi:g}"] = by_peaks(top, gamma, lo, hi)
    if args.wide:
        for top in (1, 3):
            for gamma in (1.0, 2.0, 4.0):
                for scale in (1.0, 1.25, 1.5, 2.0):
                    rules[f"peaks top{top} g{gamma:g} scale{scale:g}"] = by_peaks(top, gamma, scale=scale)
    # Round 3: BM25's list normalized as the whole depth (its unmatched documents score 0), see convex_arrays.
    rules["alpha 0.5 padnorm"] = fixed(0.5, pad_norm=True)
    for top, gamma in ((1, 1.0), (1, 2.0), (3, 1.0)):
        for scale in (1.0, 1.25, 1.5, 2.0):
            name = f"peaks top{top} g{gamma:g} scale{scale:g}"
            rules[name] = by_peaks(top, gamma, scale=scale)
            rules[name + " padnorm"] = by_peaks(top, gamma, scale=scale, pad_norm=True)
    results = {name: score_rule(rule, lists, qrels, names) for name, rule in rules.items()}
    base = results["alpha 0.5"]["ndcg"]
    best = max((results["alpha 0.0"], results["alpha 1.0"]), key=lambda r: float(np.mean(list(r["ndcg"].values()))))
    print(f"{'rule':34s} nDCG@10  vs alpha 0.5       vs best single    mean alpha")
    for name, r in results.items():
        diff, gap = paired_difference(base, r["ndcg"]), paired_difference(best["ndcg"], r["ndcg"])
        print(
            f"{name:34s} {np.mean(list(r['ndcg'].values())):.4f}  {diff['difference']:+.4f} ± {diff['stderr']:.4f}  "
            f"{gap['difference']:+.4f} ± {gap['stderr']:.4f}  {r['alpha']:.3f}"
        )
    out = {
        n: {"ndcg@10": round(float(np.mean(list(r["ndcg"].values()))), 4), "alpha": r["alpha"]}
        for n, r in results.items()
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
