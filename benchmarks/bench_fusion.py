"""The fusion table: dense / lexical / hybrid α 0.5 / adaptive per collection and split, with paired standard errors.

Each row runs ``semsearch eval DATA --split SPLIT --index IDX --json --fusion fixed`` (all three modes) and
``... --mode hybrid --fusion adaptive``, keeps both outputs in ``--out``, and compares them with
``benchmarks/bench_quality.py --compare`` (paired difference over the same queries ± its standard error). Prints
a markdown table on stdout and one JSON line per row on stderr.

    python -m benchmarks.bench_fusion --out /tmp/fu/table \\
        scifact=../shared/data/scifact:/tmp/fu/scifact-idx:train,test \\
        identifiers=/tmp/fu/identifiers:/tmp/fu/identifiers-idx:train,test

``--tune SPLIT`` first runs ``semsearch eval DATA --split SPLIT --index IDX --tune`` on each collection (which
records the weighting that clearly wins on that split in the index), then adds to every row the hybrid the index
now records (``--mode hybrid``, no ``--fusion``) against the best single mode: tune on train, report test.
Outputs already in ``--out`` are reused by name (index folder, split, fusion), so give a fresh ``--out`` after
rebuilding or re-tuning an index.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from benchmarks.bench_quality import compare
from benchmarks.harness import arguments


def evaluate(data: str, index: str, split: str, out: Path, fusion: str) -> Path:
    """Run semsearch eval once (reused when its output is already there); the JSON file it wrote.

    ``fusion``: "fixed" (all three modes, alpha 0.5), "adaptive", "recorded" (the index's own weighting) or
    "tune" (eval --tune).
    """
    path = out / f"{Path(index).parent.name}-{Path(index).name}-{split}-{fusion}.json"
    if not path.is_file() or not path.read_text(encoding="utf-8").strip():
        args = ["semsearch", "eval", data, "--split", split, "--index", index, "--json"]
        if fusion in ("fixed", "adaptive"):
            args += ["--fusion", fusion]
        if fusion != "fixed":
            args += ["--mode", "hybrid"]
        if fusion == "tune":
            args += ["--tune"]
        with path.open("w", encoding="utf-8") as fh:
            subprocess.run(args, stdout=fh, check=True)
    return path


def row(name: str, data: str, index: str, split: str, out: Path, tuned: bool = False) -> dict[str, Any]:
    fixed, adaptive = evaluate(data, index, split, out, "fixed"), evaluate(data, index, split, out, "adaptive")
    runs = json.loads(fixed.read_text(encoding="utf-8"))
    means = {m: runs[m]["ndcg@10"] for m in ("dense", "lexical", "hybrid")}
    best = max(("dense", "lexical"), key=lambda m: means[m])

    def diff(a: str, b: str) -> dict[str, Any]:
        return compare(a, b, "ndcg@10", split)["comparisons"][0]

    extra: dict[str, Any] = {}
    if tuned:
        recorded = evaluate(data, index, split, out, "recorded")
        fusion = json.loads(recorded.read_text(encoding="utf-8"))["hybrid"]["fusion"]
        extra = {
            "tuned": diff(f"{fixed}:hybrid", f"{recorded}:hybrid")["mean_b"],
            "tuned_fusion": fusion,
            "tuned_vs_best": diff(f"{fixed}:{best}", f"{recorded}:hybrid"),
            "tuned_vs_adaptive": diff(f"{adaptive}:hybrid", f"{recorded}:hybrid"),
        }
    return {
        "collection": name,
        "split": split,
        "queries": runs["queries"],
        **means,
        "adaptive": diff(f"{fixed}:hybrid", f"{adaptive}:hybrid")["mean_b"],
        "mean_alpha": json.loads(adaptive.read_text(encoding="utf-8"))["hybrid"]["fusion"]["mean_alpha"],
        "best_single": best,
        "hybrid_vs_best": diff(f"{fixed}:{best}", f"{fixed}:hybrid"),
        "adaptive_vs_best": diff(f"{fixed}:{best}", f"{adaptive}:hybrid"),
        "adaptive_vs_hybrid": diff(f"{fixed}:hybrid", f"{adaptive}:hybrid"),
        **extra,
    }


def _pm(d: dict[str, Any]) -> str:
    return f"{d['difference']:+.4f} ± {d['stderr']:.4f}"


def main() -> None:
    parser = arguments(__doc__.splitlines()[0], out=False)
    parser.add_argument("--out", type=Path, required=True, help="folder for the eval outputs")
    parser.add_argument("collections", nargs="+", help="NAME=DATA:INDEX:SPLIT[,SPLIT]")
    parser.add_argument("--tune", metavar="SPLIT", help="first run eval --tune on this split of each collection")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    specs = []
    for spec in args.collections:
        name, _, rest = spec.partition("=")
        data, index, splits = rest.rsplit(":", 2)
        specs.append((name, data, index, splits.split(",")))
    head = (
        "| collection | split | queries | dense | lexical | hybrid α 0.5 | adaptive (mean α) "
        "| hybrid − best single | adaptive − best single | adaptive − hybrid |"
    )
    if args.tune:
        head += " tuned (α) | tuned − best single |"
    print(head)
    print("|---" * head.count(" | ") + "|---|")
    for name, data, index, splits in specs:
        if args.tune:
            # The modes it prints were measured under the weighting recorded before; the choice is what counts.
            tune = json.loads(evaluate(data, index, args.tune, args.out, "tune").read_text(encoding="utf-8"))["tune"]
            print(json.dumps({"collection": name, "tune": tune}), file=sys.stderr)
        for split in splits:
            r = row(name, data, index, split, args.out, tuned=bool(args.tune))
            print(json.dumps(r), file=sys.stderr)
            line = (
                f"| {name} | {split} | {r['queries']} | {r['dense']:.4f} | {r['lexical']:.4f} | {r['hybrid']:.4f} "
                f"| {r['adaptive']:.4f} ({r['mean_alpha']:.2f}) | {_pm(r['hybrid_vs_best'])} "
                f"| {_pm(r['adaptive_vs_best'])} | {_pm(r['adaptive_vs_hybrid'])} |"
            )
            if args.tune:
                fusion = r["tuned_fusion"]
                weight = "adaptive" if fusion["method"] == "adaptive" else f"{fusion['mean_alpha']:g}"
                line += f" {r['tuned']:.4f} ({weight}) | {_pm(r['tuned_vs_best'])} |"
            print(line, flush=True)


if __name__ == "__main__":
    main()
