"""The fusion table: dense / lexical / hybrid α 0.5 / adaptive per collection and split, with paired standard errors.

Each row runs ``semsearch eval DATA --split SPLIT --index IDX --json --fusion fixed`` (all three modes) and
``... --mode hybrid --fusion adaptive``, keeps both outputs in ``--out``, and compares them with
``scripts/bench_quality.py --compare`` (paired difference over the same queries ± its standard error). Prints
a markdown table on stdout and one JSON line per row on stderr.

    python scripts/bench_fusion.py --out /tmp/fu/table \\
        scifact=../shared/data/scifact:/tmp/fu/scifact-idx:train,test \\
        identifiers=/tmp/fu/identifiers:/tmp/fu/identifiers-idx:train,test
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from bench_quality import compare  # noqa: E402


def evaluate(data: str, index: str, split: str, out: Path, fusion: str) -> Path:
    """Run semsearch eval once (reused when its output is already there); the JSON file it wrote."""
    path = out / f"{Path(index).parent.name}-{Path(index).name}-{split}-{fusion}.json"
    if not path.is_file() or not path.read_text(encoding="utf-8").strip():
        args = ["semsearch", "eval", data, "--split", split, "--index", index, "--json", "--fusion", fusion]
        if fusion == "adaptive":
            args += ["--mode", "hybrid"]
        with path.open("w", encoding="utf-8") as fh:
            subprocess.run(args, stdout=fh, check=True)
    return path


def row(name: str, data: str, index: str, split: str, out: Path) -> dict[str, Any]:
    fixed, adaptive = evaluate(data, index, split, out, "fixed"), evaluate(data, index, split, out, "adaptive")
    runs = json.loads(fixed.read_text(encoding="utf-8"))
    means = {m: runs[m]["ndcg@10"] for m in ("dense", "lexical", "hybrid")}
    best = max(("dense", "lexical"), key=lambda m: means[m])

    def diff(a: str, b: str) -> dict[str, Any]:
        return compare(a, b, "ndcg@10", split)["comparisons"][0]

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
    }


def _pm(d: dict[str, Any]) -> str:
    return f"{d['difference']:+.4f} ± {d['stderr']:.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the eval outputs")
    parser.add_argument("collections", nargs="+", help="NAME=DATA:INDEX:SPLIT[,SPLIT]")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        "| collection | split | queries | dense | lexical | hybrid α 0.5 | adaptive (mean α) "
        "| hybrid − best single | adaptive − best single | adaptive − hybrid |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec in args.collections:
        name, _, rest = spec.partition("=")
        data, index, splits = rest.rsplit(":", 2)
        for split in splits.split(","):
            r = row(name, data, index, split, args.out)
            print(json.dumps(r), file=sys.stderr)
            print(
                f"| {name} | {split} | {r['queries']} | {r['dense']:.4f} | {r['lexical']:.4f} | {r['hybrid']:.4f} "
                f"| {r['adaptive']:.4f} ({r['mean_alpha']:.2f}) | {_pm(r['hybrid_vs_best'])} "
                f"| {_pm(r['adaptive_vs_best'])} | {_pm(r['adaptive_vs_hybrid'])} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
