#!/usr/bin/env python
"""Which recommendation method works? Authorship as relevance on real data; one JSON line of figures.

Relevance comes from metadata, not from people, so read every figure as a proxy:

- ``author`` (NeurIPS 2025): for each author with six or more papers, three random papers are liked and
  the author's other papers are relevant. Names are not disambiguated: "Yang Liu" (32 papers) is several
  people, so part of the "relevant" set is unrelated work by a namesake; nothing is hidden or cleaned.
- ``group`` (NeurIPS 2025, the tighter relevance): for each pair of authors with four or more joint
  papers (pairs with the same joint set counted once), three joint papers are liked and the pair's other
  joint papers are relevant: a research group's line of work. Two shared names rarely collide.
- ``--not`` variants: the same, plus three random papers by neither author as negatives.
- ``temporal-tfidf`` (ML Anthology, every abstract): authors with three or more papers up to 2023 and
  three or more in 2024-2025; three papers up to 2023 liked, candidates restricted to 2024-2025 (what
  ``--since`` does), relevant = the author's 2024-2025 papers. TF-IDF features only (arxiv-sanity-lite's
  recipe): embedding 157k abstracts takes over an hour on this machine.
- ``temporal-embed`` (ML Anthology liked, NeurIPS 2025 candidates): authors with three or more papers up
  to 2023 and two or more at NeurIPS 2025; their three liked papers are encoded here, the candidates are
  the NeurIPS 2025 index's vectors (a subset of 2025 that we have vectors for).

Metrics per request: Recall@20 and nDCG@20 (binary gains); each mean comes with a 95% bootstrap interval
over requests (2,000 resamples), and the best method's paired difference to ``related`` and ``centroid``
has one too. Progress goes to stderr; the last stdout line is the JSON.

    semsearch index --index /tmp/neurips ../shared/data/mlanthology/neurips2025.jsonl.gz
    python -m benchmarks.bench_recommend --index /tmp/neurips
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import MLANTHOLOGY, arguments, emit, log
from semsearch.curate.recommend import (
    DEFAULT_METHOD,
    SVM_C_SPARSE,
    bm25_features,
    centroid_scores,
    maxsim_scores,
    method_scores,
    svm_scores,
    zscore,
)
from semsearch.query.search import Index

SHARED = MLANTHOLOGY
K = 20
LIKED = 3
EMBED_METHODS = ("related", "centroid", "maxsim", "svm", "svm-bm25", "fused")
Request = tuple[list[int], list[int], set[int]]  # liked rows, negative rows, relevant rows


def metrics(scores: np.ndarray, candidates: np.ndarray, relevant: set[int]) -> tuple[float, float]:
    """Recall@K and nDCG@K of the candidates ranked by score (ties by row)."""
    s = scores[candidates]
    top = candidates[np.lexsort((candidates, -s))[:K]]
    gains = [1.0 if int(r) in relevant else 0.0 for r in top]
    dcg = sum(g / np.log2(i + 2) for i, g in enumerate(gains))
    ideal = sum(1.0 / np.log2(i + 2) for i in range(min(K, len(relevant))))
    return sum(gains) / len(relevant), dcg / ideal


def bootstrap(values: Sequence[float], rng: np.random.Generator, n: int = 2000) -> list[float]:
    v = np.asarray(values, dtype=np.float64)
    means = v[rng.integers(0, len(v), size=(n, len(v)))].mean(axis=1)
    return [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)]


def summarize(per: dict[str, dict[str, list[float]]], seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for method, m in per.items():
        out[method] = {
            "recall@20": round(float(np.mean(m["recall"])), 4),
            "recall@20_ci95": bootstrap(m["recall"], rng),
            "ndcg@20": round(float(np.mean(m["ndcg"])), 4),
            "ndcg@20_ci95": bootstrap(m["ndcg"], rng),
        }
    best = max(per, key=lambda name: out[name]["recall@20"])
    out["best"] = best
    # Paired differences (same requests) of the best method and of the default against every other method.
    for lead in dict.fromkeys([best, DEFAULT_METHOD]):
        if lead not in per:
            continue
        for other in per:
            if other != lead:
                diff = np.asarray(per[lead]["recall"]) - np.asarray(per[other]["recall"])
                out[f"{lead}_minus_{other}_recall@20"] = {
                    "mean": round(float(diff.mean()), 4),
                    "ci95": bootstrap(diff, rng),
                }
    return out


def run_requests(
    requests: Sequence[Request],
    candidates_of: Callable[[Request], np.ndarray],
    scorer: Callable[[Request], dict[str, np.ndarray]],
    label: str,
) -> dict[str, dict[str, list[float]]]:
    """Metrics of every method on every request (``scorer`` gives all methods' scores for one request)."""
    per: dict[str, dict[str, list[float]]] = {}
    started = time.perf_counter()
    for i, req in enumerate(requests):
        cands = candidates_of(req)
        for name, scores in scorer(req).items():
            r, n = metrics(scores, cands, req[2])
            per.setdefault(name, {"recall": [], "ndcg": []})
            per[name]["recall"].append(r)
            per[name]["ndcg"].append(n)
        if (i + 1) % 50 == 0:
            log(f"{label}: {i + 1}/{len(requests)} requests, {time.perf_counter() - started:.0f} s")
    return per


# ---------------------------------------------------------------- NeurIPS 2025 (vectors from an index)


def load_index(path: Path) -> tuple[np.ndarray, list[list[str]], Any, list[str], list[str]]:
    """Vectors, authors per row, BM25 features per row, titles per row, texts per row."""
    with Index.open(path) as idx:
        X = np.array(idx.vectors.matrix, dtype=np.float32)
        nums = idx.vectors.ids
        docs = idx.store.get_many([int(n) for n in nums])
        authors = [list(docs[int(n)].metadata.get("authors") or []) for n in nums]
        titles = [docs[int(n)].title or "" for n in nums]
        texts = [docs[int(n)].embedding_text() for n in nums]
        lex = idx.lexical
        feats = bm25_features(*lex.csc(), len(lex))[lex.rows_of(nums)]
    return X, authors, feats, titles, texts


def author_requests(authors: list[list[str]], rng: np.random.Generator, minimum: int, limit: int) -> list[Request]:
    papers: dict[str, list[int]] = defaultdict(list)
    for row, names in enumerate(authors):
        for a in set(names):
            papers[a].append(row)
    chosen = sorted(a for a, rows in papers.items() if len(rows) >= minimum)
    if limit and len(chosen) > limit:
        chosen = sorted(rng.choice(chosen, limit, replace=False).tolist())
    out = []
    for a in chosen:
        rows = list(rng.permutation(papers[a]))
        out.append(([int(r) for r in rows[:LIKED]], [], {int(r) for r in rows[LIKED:]}))
    return out


def group_requests(authors: list[list[str]], rng: np.random.Generator, minimum: int) -> list[Request]:
    joint: dict[tuple[str, str], list[int]] = defaultdict(list)
    for row, names in enumerate(authors):
        for pair in itertools.combinations(sorted(set(names)), 2):
            joint[pair].append(row)
    seen: set[tuple[int, ...]] = set()
    out = []
    for pair in sorted(joint):
        rows = joint[pair]
        key = tuple(sorted(rows))
        if len(rows) < minimum or key in seen:
            continue
        seen.add(key)
        shuffled = list(rng.permutation(rows))
        out.append(([int(r) for r in shuffled[:LIKED]], [], {int(r) for r in shuffled[LIKED:]}))
    return out


def with_negatives(requests: list[Request], authors: list[list[str]], rng: np.random.Generator) -> list[Request]:
    out = []
    for liked, _, relevant in requests:
        names = {a for r in liked for a in authors[r]}
        negs: list[int] = []
        while len(negs) < LIKED:
            r = int(rng.integers(len(authors)))
            if r not in relevant and r not in liked and not names & set(authors[r]) and r not in negs:
                negs.append(r)
        out.append((liked, negs, relevant))
    return out


def embed_scorer(X: np.ndarray, feats: Any) -> Callable[[Request], dict[str, np.ndarray]]:
    """Every method's scores for a request; ``fused`` reuses the two SVMs' (the library computes the same)."""

    def score(req: Request) -> dict[str, np.ndarray]:
        out = {m: method_scores(m, X, req[0], req[1], sparse_features=feats) for m in EMBED_METHODS[:-1]}
        out["fused"] = 0.5 * zscore(out["svm"]) + 0.5 * zscore(out["svm-bm25"])
        return out

    return score


def neurips_variants(path: Path, args: argparse.Namespace, out: dict[str, Any]) -> None:
    X, authors, feats, _, _ = load_index(path)
    log(f"index {path}: {len(X)} documents")
    rng = np.random.default_rng(args.seed)
    n = len(X)

    def candidates(req: Request) -> np.ndarray:
        return np.setdiff1d(np.arange(n), req[0] + req[1])

    scorer = embed_scorer(X, feats)
    variants = {
        "author": author_requests(authors, rng, 6, args.authors),
        "group": group_requests(authors, rng, 4),
    }
    variants["author_not"] = with_negatives(variants["author"], authors, rng)
    variants["group_not"] = with_negatives(variants["group"], authors, rng)
    for name, requests in variants.items():
        started = time.perf_counter()
        per = run_requests(requests, candidates, scorer, name)
        out[name] = {
            "corpus": "neurips2025",
            "documents": n,
            "requests": len(requests),
            "relevant_mean": round(float(np.mean([len(r[2]) for r in requests])), 2),
            "seconds": round(time.perf_counter() - started, 1),
            **summarize(per, args.seed),
        }
        log(name, json.dumps(out[name]))


# ---------------------------------------------------------------- ML Anthology, temporal


def read_corpus(path: Path, limit: int) -> list[dict[str, Any]]:
    rows = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            meta = rec.get("metadata") or {}
            try:
                year = int(meta.get("year") or 0)
            except ValueError:
                continue
            if not rec.get("text") or not year:
                continue
            rows.append(
                {
                    "title": rec.get("title") or "",
                    "text": rec["text"],
                    "year": year,
                    "authors": list(meta.get("authors") or []),
                }
            )
            if limit and len(rows) >= limit:
                break
    return rows


def temporal_tfidf(rows: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    from sklearn.feature_extraction.text import TfidfVectorizer

    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    # arxiv-sanity-lite's features: word 1-2 grams, 20k terms, sublinear tf, l2 rows.
    vec = TfidfVectorizer(
        stop_words="english",
        ngram_range=(1, 2),
        max_features=20_000,
        sublinear_tf=True,
        dtype=np.float32,
        min_df=5,
        max_df=0.1,
    )
    F = vec.fit_transform(f"{r['title']} {r['text']}" for r in rows).tocsr()
    log(f"tf-idf of {len(rows)} abstracts: {F.shape}, {time.perf_counter() - started:.0f} s")
    years = np.array([r["year"] for r in rows])
    recent = np.flatnonzero(years >= 2024)
    before: dict[str, list[int]] = defaultdict(list)
    after: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        for a in set(r["authors"]):
            (after if r["year"] >= 2024 else before)[a].append(i)
    chosen = sorted(a for a in before if len(before[a]) >= 3 and len(after.get(a, [])) >= 3)
    if len(chosen) > args.temporal_authors:
        chosen = sorted(rng.choice(chosen, args.temporal_authors, replace=False).tolist())
    requests: list[Request] = [
        ([int(r) for r in rng.permutation(before[a])[:LIKED]], [], set(after[a])) for a in chosen
    ]

    def dense_rows(req: Request) -> Any:
        return F[req[0]].toarray()

    def sparse_dot(P: np.ndarray) -> np.ndarray:
        return np.asarray(F @ P.T)

    scorers: dict[str, Callable[[Request], np.ndarray]] = {
        "related": lambda req: sparse_dot(dense_rows(req)[:1])[:, 0],
        "centroid": lambda req: sparse_dot(dense_rows(req).mean(axis=0, keepdims=True))[:, 0],
        "maxsim": lambda req: sparse_dot(dense_rows(req)).max(axis=1),
        "svm": lambda req: svm_scores(F, req[0], req[1], C=SVM_C_SPARSE, seed=args.seed),
    }
    per = run_requests(
        requests, lambda req: recent, lambda req: {m: f(req) for m, f in scorers.items()}, "temporal-tfidf"
    )
    return {
        "corpus": "mlanthology (all abstracts with a year), tf-idf features only",
        "documents": len(rows),
        "candidates": int(len(recent)),
        "requests": len(requests),
        "relevant_mean": round(float(np.mean([len(r[2]) for r in requests])), 2),
        "seconds": round(time.perf_counter() - started, 1),
        **summarize(per, args.seed),
    }


def temporal_embed(rows: list[dict[str, Any]], index_path: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Liked: ML Anthology papers up to 2023 (encoded here); candidates: the NeurIPS 2025 index."""
    from scipy import sparse

    rng = np.random.default_rng(args.seed)
    started = time.perf_counter()
    X, authors, feats, _, _ = load_index(index_path)
    at_neurips: dict[str, list[int]] = defaultdict(list)
    for row, names in enumerate(authors):
        for a in set(names):
            at_neurips[a].append(row)
    before: dict[str, list[int]] = defaultdict(list)
    for i, r in enumerate(rows):
        if r["year"] <= 2023:
            for a in set(r["authors"]):
                before[a].append(i)
    chosen = sorted(a for a in before if len(before[a]) >= 3 and len(at_neurips.get(a, [])) >= 2)
    if len(chosen) > args.temporal_authors:
        chosen = sorted(rng.choice(chosen, args.temporal_authors, replace=False).tolist())
    liked = {a: [int(i) for i in rng.permutation(before[a])[:LIKED]] for a in chosen}
    wanted = sorted({i for rows_ in liked.values() for i in rows_})
    log(f"temporal-embed: {len(chosen)} authors, encoding {len(wanted)} liked abstracts")
    with Index.open(index_path) as idx:
        enc = idx.embedder
        texts = [f"{rows[i]['title']} {rows[i]['text']}".strip() for i in wanted]
        E = np.vstack([enc.encode(texts[s : s + 64]) for s in range(0, len(texts), 64)])
        lex = idx.lexical
        from sklearn.preprocessing import normalize

        weights = [lex.query_weights(t) for t in texts]
        S = normalize(
            sparse.csr_matrix(
                (
                    [v for w in weights for v in w.values()],
                    [c for w in weights for c in w],
                    np.cumsum([0] + [len(w) for w in weights]),
                ),
                shape=(len(texts), feats.shape[1]),
                dtype=np.float32,
            )
        )
    pos_of = {i: j for j, i in enumerate(wanted)}
    n = len(X)
    cands = np.arange(n)
    requests: list[Request] = [([pos_of[i] for i in liked[a]], [], set(at_neurips[a])) for a in chosen]

    def P(req: Request) -> np.ndarray:
        return E[req[0]]

    def svm_dense(req: Request) -> np.ndarray:
        return svm_scores(X, [], extra_pos=P(req), seed=args.seed)

    def svm_sparse(req: Request) -> np.ndarray:
        return svm_scores(feats, [], extra_pos=S[req[0]], C=SVM_C_SPARSE, seed=args.seed)

    def scorer(req: Request) -> dict[str, np.ndarray]:
        out = {
            "related": X @ P(req)[0],
            "centroid": centroid_scores(X, P(req)),
            "maxsim": maxsim_scores(X, P(req)),
            "svm": svm_dense(req),
            "svm-bm25": svm_sparse(req),
        }
        out["fused"] = 0.5 * zscore(out["svm"]) + 0.5 * zscore(out["svm-bm25"])
        return out

    per = run_requests(requests, lambda req: cands, scorer, "temporal-embed")
    return {
        "corpus": "liked from mlanthology <=2023 (encoded), candidates neurips2025",
        "documents": n,
        "requests": len(requests),
        "relevant_mean": round(float(np.mean([len(r[2]) for r in requests])), 2),
        "seconds": round(time.perf_counter() - started, 1),
        **summarize(per, args.seed),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--index", type=Path, default=Path("/tmp/neurips"), help="an index of neurips2025.jsonl.gz")
    parser.add_argument("--authors", type=int, default=0, help="sample this many authors (0: all with 6+ papers)")
    parser.add_argument("--temporal-authors", type=int, default=200)
    parser.add_argument("--corpus-limit", type=int, default=0, help="read only this many corpus abstracts (0: all)")
    parser.add_argument("--skip-temporal", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    out: dict[str, Any] = {"k": K, "liked": LIKED, "seed": args.seed}
    started = time.perf_counter()
    neurips_variants(args.index, args, out)
    corpus = SHARED / "corpus.jsonl.gz"
    if not args.skip_temporal and corpus.exists():
        rows = read_corpus(corpus, args.corpus_limit)
        out["temporal_embed"] = temporal_embed(rows, args.index, args)
        log("temporal_embed", json.dumps(out["temporal_embed"]))
        out["temporal_tfidf"] = temporal_tfidf(rows, args)
        log("temporal_tfidf", json.dumps(out["temporal_tfidf"]))
    out["seconds"] = round(time.perf_counter() - started, 1)
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
