"""Retrieval quality of the product's own pipeline on SciFact (BEIR), beside the published anchors.

Runs what `semsearch eval ../shared/data/scifact --split test` runs, through the library: builds (or
reuses) an index of the 5,183 SciFact abstracts, then scores dense, lexical and hybrid search on the test
split (and on train, where the fusion was tuned, with --train). Prints one JSON line; progress on stderr.
The ablation of fusion choices lives in scripts/study_fusion.py.

    python scripts/bench_quality.py [--backend onnx|torch] [--precision int8|fp32] [--train]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "scifact"
PUBLISHED_TEST_NDCG10 = {
    "bm25_lucene_flat": 0.6789,
    "bm25s_stemmed": 0.6874,
    "all-MiniLM-L6-v2": 0.6451,
    "bge-small-en-v1.5": 0.7127,
    "bge-base-en-v1.5": 0.7434,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["onnx", "torch"], default="onnx")
    parser.add_argument("--precision", choices=["int8", "fp32"], default="int8")
    parser.add_argument("--index", type=Path, help="index folder (default: indexes/eval-scifact-BACKEND-PRECISION)")
    parser.add_argument("--train", action="store_true", help="also score the train split")
    args = parser.parse_args()
    if not (SCIFACT / "corpus.jsonl").is_file():
        sys.exit(f"{SCIFACT} is missing: this benchmark needs ../shared/data/scifact")

    from semsearch.build import BuildOptions
    from semsearch.evaluate import EvalData, run_eval

    backend_name = args.backend if args.backend == "onnx" else "torch"
    precision = args.precision if args.backend == "onnx" else "fp32"
    index = args.index or REPO / "indexes" / f"eval-scifact-{backend_name}-{precision}"
    out: dict[str, object] = {"data": "scifact", "backend": backend_name, "precision": precision}
    splits = ["test", "train"] if args.train else ["test"]
    for split in splits:
        options = BuildOptions(backend=args.backend, precision=precision, progress=True)
        results = run_eval(EvalData.locate(SCIFACT, split), index, options=options)
        out[split] = results
        print(
            f"{split}: " + ", ".join(f"{m} {r['ndcg@10']:.4f}" for m, r in results.items() if isinstance(r, dict)),
            file=sys.stderr,
        )
    test = out["test"]
    assert isinstance(test, dict)
    out["dense_vs_published_minilm"] = round(test["dense"]["ndcg@10"] - PUBLISHED_TEST_NDCG10["all-MiniLM-L6-v2"], 4)
    out["hybrid_ndcg@10"] = test["hybrid"]["ndcg@10"]
    out["published_test_ndcg@10"] = PUBLISHED_TEST_NDCG10
    print(json.dumps(out))


if __name__ == "__main__":
    main()
