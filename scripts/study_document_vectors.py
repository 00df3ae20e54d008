"""Study: should `related` and `recommend` read a document's whole-text vector or its sentences too? (issue 24)

With ``--reading sentences`` a document keeps its whole-text vector (the encoder's first window) and one vector
per sentence. The whole vector misses how a long abstract ends; a vector pooled over every sentence does not.
This scores the author and research-group tasks of scripts/bench_recommend.py (liked papers of an author or of
an author pair, relevant = their other papers; NeurIPS 2025) with the library's ``related`` (best match to
any liked paper) and ``centroid`` methods on three document vectors:

    whole       the index's vectors (what related, recommend and the map read): on an index built since the
                sentence scheme "sentences-3" these are already the sentences' mean, so compare a truncated index
    sentences   the unit mean of the document's sentence vectors (the whole vector where it has none)
    both        the unit mean of the whole vector and the sentences' mean

    semsearch index ../shared/data/mlanthology/neurips2025.jsonl.gz --index /tmp/neurips-sent   # sentences
    python scripts/study_document_vectors.py --index /tmp/neurips-sent

Prints one JSON line: per task, vectors and method the mean nDCG@20 and Recall@20, and the paired difference of
each to ``whole`` with its standard error.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from bench_recommend import author_requests, group_requests, load_index, metrics  # noqa: E402

from semsearch import Index  # noqa: E402
from semsearch.reader.recommend import method_scores  # noqa: E402

METHODS = ("related", "centroid")


def pooled_vectors(path: Path, whole: np.ndarray) -> dict[str, np.ndarray]:
    """The ``sentences`` and ``both`` document vectors, row for row with the index's vectors."""
    with Index.open(path) as idx:
        if idx.windows is None:
            sys.exit(f"{path} stores no sentence vectors: build it with --reading sentences")
        nums = np.asarray(idx.vectors.ids, dtype=np.int64)
        got = idx.windows.get(nums)
    row_of = {int(n): i for i, n in enumerate(nums)}
    sums = np.zeros_like(whole, dtype=np.float64)
    counts = np.zeros(len(whole), dtype=np.int64)
    for num, vector in zip(got.ids.tolist(), np.asarray(got.vectors, dtype=np.float64), strict=True):
        sums[row_of[num]] += vector
        counts[row_of[num]] += 1
    mean = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], whole)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    return {"sentences": unit(mean), "both": unit(unit(mean) + whole)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, default=Path("/tmp/neurips-sent"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    whole, authors, _, _, _ = load_index(args.index)
    variants = {"whole": whole, **pooled_vectors(args.index, whole)}
    rng = np.random.default_rng(args.seed)
    tasks = {"author": author_requests(authors, rng, 6, 0), "group": group_requests(authors, rng, 4)}
    n = len(whole)
    out: dict[str, object] = {"index": str(args.index), "documents": n}
    for task, requests in tasks.items():
        per: dict[str, list[float]] = {}
        for name, X in variants.items():
            for method in METHODS:
                values = []
                for liked, negatives, relevant in requests:
                    scores = method_scores(method, X, liked, negatives)
                    candidates = np.setdiff1d(np.arange(n), liked + negatives)
                    values.append(metrics(scores, candidates, relevant)[1])
                per[f"{name}:{method}"] = values
        result: dict[str, object] = {"requests": len(requests)}
        for key, values in per.items():
            base = np.asarray(per[f"whole:{key.split(':')[1]}"])
            d = np.asarray(values) - base
            result[key] = {
                "ndcg@20": round(float(np.mean(values)), 4),
                "diff": round(float(d.mean()), 4),
                "se": round(float(d.std(ddof=1) / math.sqrt(len(d))), 4),
            }
        out[task] = result
        print(json.dumps({task: result}), file=sys.stderr)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
