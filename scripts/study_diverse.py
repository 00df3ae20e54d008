"""How much relevance ``--diverse`` may cost: MMR's λ and the relevance floor chosen on BEIR SciFact train.

For each train query (809), the dense top max(3k, 30) by cosine (all-MiniLM-L6-v2, the vectors cached by
scripts/study_fusion.py in /tmp/scifact_minilm_*.npy) is re-ranked by semsearch.query.fusion.diversify, the
function ``--diverse`` runs, for each (λ, floor) of a grid, at k = 5 and k = 10. Measured per configuration:

- nDCG@k over the qrels (relevance kept), and its change against plain relevance order (λ = 1);
- ILS@k, the mean pairwise cosine of the k hits (intra-list similarity: lower is more diverse);
- worst, the mean over queries of the least relevant hit's cosine divided by the best hit's (how far below the
  top a promoted hit may fall: the issue's privacy paper was 0.20 against a top near 0.6).

The rule, in two steps. λ: the lowest ILS@10 without a floor whose nDCG@5 and nDCG@10 stay within 1% of relevance
order. The floor: the highest that gives back at most 10% of the ILS@10 that λ gained. On SciFact a topic's top 30
are nearly all on topic, so a floor there can only cost diversity; it is for corpora (the 91 seeds, a filtered
slice) whose pool runs out of relevant papers, and this keeps its cost where the pool is relevant small. The test
split is never looked at. Prints one JSON line.

    python scripts/study_diverse.py
"""

from __future__ import annotations

import itertools
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from study_fusion import DATA, Data  # noqa: E402

from semsearch.eval.metrics import ndcg_at_k  # noqa: E402
from semsearch.query.fusion import diversify  # noqa: E402

LAMBDAS = (0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
FLOORS = (0.0, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
KS = (5, 10)
TOLERANCE = 0.01  # relative nDCG loss allowed
GIVE_BACK = 0.1  # share of the diversity gained that the floor may cost


def main() -> None:
    """Run the grid on SciFact train and print the figures and the choice as one JSON line."""
    start = time.perf_counter()
    data = Data(DATA)
    rows, qrels = data.splits["train"]
    scores = data.query_vecs[rows] @ data.doc_vecs.T
    results: dict[str, dict[str, float]] = {}
    for lam, floor in itertools.product(LAMBDAS, FLOORS):
        if lam == 1.0 and floor > 0.0:
            continue  # relevance order whatever the floor
        row: dict[str, float] = {}
        for k in KS:
            pool = max(3 * k, 30)
            ndcg, ils, worst = [], [], []
            for r, qrow in enumerate(rows):
                top = np.argsort(-scores[r])[:pool]
                ranked = [(int(c), float(scores[r, c])) for c in top]
                picked = diversify(data.query_vecs[qrow], data.doc_vecs[top], ranked, k, lam, floor)
                ndcg.append(ndcg_at_k([data.doc_ids[c] for c in picked], qrels[data.query_ids[qrow]], k))
                v = data.doc_vecs[picked]
                sims = v @ v.T
                ils.append(float((sims.sum() - np.trace(sims)) / (k * (k - 1))))
                cos = scores[r, picked]
                worst.append(float(cos.min() / cos.max()) if cos.max() > 0 else 1.0)
            row[f"ndcg@{k}"] = round(float(np.mean(ndcg)), 4)
            row[f"ils@{k}"] = round(float(np.mean(ils)), 4)
            row[f"worst@{k}"] = round(float(np.mean(worst)), 3)
        results[f"lambda={lam} floor={floor}"] = row
    base = results["lambda=1.0 floor=0.0"]
    for row in results.values():
        for k in KS:
            row[f"d_ndcg@{k}"] = round(row[f"ndcg@{k}"] - base[f"ndcg@{k}"], 4)
    ok = [
        lam
        for lam in LAMBDAS
        if all(results[f"lambda={lam} floor=0.0"][f"ndcg@{k}"] >= (1 - TOLERANCE) * base[f"ndcg@{k}"] for k in KS)
    ]
    lam = min(ok, key=lambda lam: results[f"lambda={lam} floor=0.0"]["ils@10"])
    free = results[f"lambda={lam} floor=0.0"]["ils@10"]
    allowed = free + GIVE_BACK * (base["ils@10"] - free)
    floor = max(f for f in FLOORS if lam == 1.0 or results[f"lambda={lam} floor={f}"]["ils@10"] <= allowed)
    chosen = f"lambda={lam} floor={floor}"
    print(
        json.dumps(
            {
                "dataset": "scifact",
                "split": "train",
                "queries": len(rows),
                "model": "all-MiniLM-L6-v2",
                "rule": f"lambda: lowest ILS@10 with nDCG@5 and @10 within {TOLERANCE:.0%} of relevance order; "
                f"floor: highest giving back at most {GIVE_BACK:.0%} of the ILS@10 gained",
                "chosen": chosen,
                "chosen_figures": results[chosen],
                "relevance_order": base,
                "old_default": results["lambda=0.5 floor=0.0"],
                "grid": results,
                "seconds": round(time.perf_counter() - start, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
