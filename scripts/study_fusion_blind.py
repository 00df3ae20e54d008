"""Study: can a query's own lists tell a collection where BM25 is confidently wrong? (issue #24)

Two BEIR collections with the same queries and corpus but for the relevant abstracts (``make_collections.py``'s
mismatch, and mismatch-all from ``--strip all``): for each query judged in both, how alike are the two indexes'
BM25 and dense top 10 (the relevant paper left out), and the weight adaptive fusion gives it. When the lists
and weights are nearly the same while the best weight differs (``eval --tune``), no rule that reads one query's
lists can choose both. Prints one JSON line.

    python scripts/study_fusion_blind.py /tmp/fu2/mismatch IDX_A /tmp/fu3/mismatch IDX_B --split train
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from semsearch import Index
from semsearch.eval.beir import read_qrels, read_queries


def _ids(index: Index, nums: np.ndarray) -> list[str]:
    docs = index.store.get_many(nums.tolist())
    return [(docs[n].external_ids or [docs[n].id])[0] for n in nums.tolist()]


def _jaccard(a: list[str], b: list[str]) -> float:
    return len(set(a) & set(b)) / max(len(set(a) | set(b)), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data_a", type=Path)
    parser.add_argument("index_a", type=Path)
    parser.add_argument("data_b", type=Path)
    parser.add_argument("index_b", type=Path)
    parser.add_argument("--split", default="train")
    args = parser.parse_args()
    qa, qb = read_queries(args.data_a / "queries.jsonl"), read_queries(args.data_b / "queries.jsonl")
    ra = read_qrels(args.data_a / "qrels" / f"{args.split}.tsv")
    rb = read_qrels(args.data_b / "qrels" / f"{args.split}.tsv")
    common = [q for q in ra if q in rb and qa.get(q) == qb.get(q)]
    lexical, dense, alpha_gap = [], [], []
    with Index.open(args.index_a) as a, Index.open(args.index_b) as b:
        pa, pb = a.fusion.with_method("adaptive"), b.fusion.with_method("adaptive")
        for q in common:
            relevant = set(ra[q]) | set(rb[q])
            ca, cb = a.hybrid_candidates(qa[q]), b.hybrid_candidates(qb[q])
            tops = []
            for index, cands in ((a, ca), (b, cb)):
                lex = [d for d in _ids(index, cands.lexical[0][:11]) if d not in relevant][:10]
                den = [d for d in _ids(index, cands.dense[0][:11]) if d not in relevant][:10]
                tops.append((lex, den))
            lexical.append(_jaccard(tops[0][0], tops[1][0]))
            dense.append(_jaccard(tops[0][1], tops[1][1]))
            alpha_a = pa.choose(ca.dense[1], ca.lexical[1], ca.depth).alpha
            alpha_b = pb.choose(cb.dense[1], cb.lexical[1], cb.depth).alpha
            alpha_gap.append(abs(alpha_a - alpha_b))
    print(
        json.dumps(
            {
                "queries": len(common),
                "bm25_top10_jaccard": round(float(np.mean(lexical)), 4),
                "bm25_top10_identical_share": round(float(np.mean([j == 1.0 for j in lexical])), 4),
                "dense_top10_jaccard": round(float(np.mean(dense)), 4),
                "adaptive_alpha_gap_mean": round(float(np.mean(alpha_gap)), 4),
                "adaptive_alpha_gap_p90": round(float(np.quantile(alpha_gap, 0.9)), 4),
            }
        )
    )


if __name__ == "__main__":
    main()
