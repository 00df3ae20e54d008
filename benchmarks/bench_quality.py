"""Retrieval quality of the product's own pipeline on SciFact (BEIR), beside the published anchors.

Runs what `semsearch eval ../shared/data/scifact --split test` runs, through the library: builds (or
reuses) an index of the 5,183 SciFact abstracts, then scores dense, lexical and hybrid search on the test
split (and on train, where the fusion was tuned, with --train). Prints one JSON line; progress on stderr.
The ablation of fusion choices was the study scripts/study_fusion.py (in git history at commit df0eec0).

    python -m benchmarks.bench_quality [--backend onnx|torch] [--precision int8|fp32] [--train]

--compare A B prints the paired difference (B - A) of a metric over the same queries and its standard error,
one JSON line, for any two configurations: each of A and B is a file holding `semsearch eval --json` output
or this script's output (its --split is read), optionally with :MODE (a mode on one side applies to both;
none: every mode both hold). Two modes of one run compare too:

    semsearch eval DATA --json > a.json   # ... change a setting, another --index ...   > b.json
    python -m benchmarks.bench_quality --compare a.json b.json --metric ndcg@10
    python -m benchmarks.bench_quality --compare a.json:lexical a.json:hybrid
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, SCIFACT, arguments, emit

PUBLISHED_TEST_NDCG10 = {
    "bm25_lucene_flat": 0.6789,
    "bm25s_stemmed": 0.6874,
    "all-MiniLM-L6-v2": 0.6451,
    "bge-small-en-v1.5": 0.7127,
    "bge-base-en-v1.5": 0.7434,
}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--backend", choices=["onnx", "torch"], default="onnx")
    parser.add_argument("--precision", choices=["int8", "fp32"], default="int8")
    parser.add_argument("--index", type=Path, help="index folder (default: indexes/eval-scifact-BACKEND-PRECISION)")
    parser.add_argument("--train", action="store_true", help="also score the train split")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="paired difference B - A of two eval outputs")
    parser.add_argument("--metric", default="ndcg@10", choices=["ndcg@10", "recall@100", "mrr@10"])
    parser.add_argument("--split", default="test", help="with --compare: the split of this script's output")
    parser.add_argument("--model", default=None, help="the model to build with (default: semsearch's default)")
    parser.add_argument("--reading", default=None, help="--reading for the index (default: semsearch's default)")
    parser.add_argument(
        "--record",
        action="store_true",
        help="write the test figures into semsearch/encode/measured.json (what `semsearch models` and the docs show)",
    )
    args = parser.parse_args()
    if args.compare:
        try:
            emit(compare(args.compare[0], args.compare[1], args.metric, args.split), out=args.out)
        except (OSError, ValueError, KeyError) as exc:
            sys.exit(f"bench_quality: {exc}")
        return
    if not (SCIFACT / "corpus.jsonl").is_file():
        sys.exit(f"{SCIFACT} is missing: this benchmark needs ../shared/data/scifact")

    from semsearch.eval.evaluate import EvalData, run_eval
    from semsearch.write.build import BuildOptions

    backend_name = args.backend if args.backend == "onnx" else "torch"
    precision = args.precision if args.backend == "onnx" else "fp32"
    from semsearch.encode.catalogue import DEFAULT_MODEL

    model = args.model or DEFAULT_MODEL
    suffix = "" if model == DEFAULT_MODEL else f"-{model}"
    index = args.index or REPO / "indexes" / f"eval-scifact-{backend_name}-{precision}{suffix}"
    from semsearch.core.options import DEFAULT_READING

    reading = args.reading or (DEFAULT_READING if args.backend == "onnx" else "truncated")
    out: dict[str, object] = {
        "data": "scifact",
        "model": model,
        "backend": backend_name,
        "precision": precision,
        "reading": reading,
    }
    splits = ["test", "train"] if args.train else ["test"]
    for split in splits:
        options = BuildOptions(model=model, backend=args.backend, precision=precision, reading=reading, progress=True)
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
    if args.record:
        if (backend_name, precision) != ("onnx", "int8"):
            sys.exit("bench_quality: --record keeps the product's own figures: onnx int8 only")
        record(model, test, " ".join(["python -m benchmarks.bench_quality", *sys.argv[1:]]), reading=reading)
    emit(out, out=args.out)


def record(model: str, test: dict[str, Any], command: str, path: Path | None = None, *, reading: str = "") -> None:
    """Write one model's SciFact test figures into measured.json (atomically), keeping the other models'."""
    import datetime
    import os

    from semsearch.encode.catalogue import MEASURED_FILE

    target = path or MEASURED_FILE
    data = json.loads(target.read_text(encoding="utf-8"))
    entry = data["models"].setdefault(model, {})
    entry["measured"] = datetime.date.today().isoformat()
    entry["command"] = command
    if reading:
        entry["reading"] = reading
    if reading == "sentences":
        from semsearch.encode.sentence_runs import SCHEME

        entry["scheme"] = SCHEME  # the sentence runs these figures were measured with
    else:
        entry.pop("scheme", None)
    entry["scifact_test"] = {
        mode: {m: round(float(v), 4) for m, v in scores.items() if m in ("ndcg@10", "recall@100", "mrr@10")}
        for mode, scores in test.items()
        if isinstance(scores, dict)
    }
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, target)


def _load(spec: str, split: str) -> tuple[str, str | None, dict[str, Any]]:
    """(file, mode or None, its eval results) of "FILE" or "FILE:MODE"."""
    path, _, mode = spec.rpartition(":") if not Path(spec).is_file() else (spec, "", "")
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path}: empty")
    data = json.loads(lines[-1])  # the JSON line; anything printed before it is progress
    if "queries" not in data and isinstance(data.get(split), dict):
        data = data[split]  # this script's own output: one eval result per split
    if "queries" not in data:
        raise ValueError(f"{path}: not the output of semsearch eval --json (no 'queries')")
    return path, mode or None, data


def _scores(path: str, data: dict[str, Any], mode: str, metric: str) -> dict[str, float]:
    """One mode's per-query scores of one metric."""
    if not isinstance(data.get(mode), dict):
        raise ValueError(f"{path}: no mode {mode!r} (holds {', '.join(_modes(data))})")
    per = data[mode].get("per_query")
    if per is None:
        raise ValueError(f"{path}: no per-query scores (written by an older semsearch eval?)")
    return {q: float(m[metric]) for q, m in per.items()}


def _modes(data: dict[str, Any]) -> list[str]:
    return [m for m, v in data.items() if isinstance(v, dict) and "per_query" in v]


def compare(a_spec: str, b_spec: str, metric: str = "ndcg@10", split: str = "test") -> dict[str, Any]:
    """The paired difference B - A of ``metric`` (mean, standard error, queries) for each mode compared."""
    from semsearch.eval.metrics import paired_difference

    a_path, a_mode, a = _load(a_spec, split)
    b_path, b_mode, b = _load(b_spec, split)
    if a_mode or b_mode:
        pairs = [(a_mode or b_mode or "", b_mode or a_mode or "")]
    else:
        pairs = [(m, m) for m in _modes(a) if m in _modes(b)]
        if not pairs:
            raise ValueError(f"{a_path} and {b_path} hold no mode in common")
    out: list[dict[str, Any]] = []
    for ma, mb in pairs:
        diff = paired_difference(_scores(a_path, a, ma, metric), _scores(b_path, b, mb, metric))
        rounded = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in diff.items()}
        out.append({"a": f"{a_path}:{ma}", "b": f"{b_path}:{mb}", **rounded})
    return {"metric": metric, "comparisons": out}


if __name__ == "__main__":
    main()
