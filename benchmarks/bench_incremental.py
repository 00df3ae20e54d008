"""Benchmark incremental rebuilds: full build vs unchanged re-run vs adding a 20-abstract file.

Indexes ../shared/data/mlanthology/neurips2025.jsonl.gz plus seeds/ from scratch (the baseline), re-runs it
unchanged, then adds one seed-format file of 20 abstracts: 10 NeurIPS 2025 abstracts already in the index,
re-wrapped and with markup, and 10 abstracts from other venues. Each step is a `semsearch index` process,
timed wall-clock. Prints one JSON line; progress goes to stderr.

    python -m benchmarks.bench_incremental [--backend onnx|torch] [--workdir DIR]
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import MLANTHOLOGY, REPO, SEEDS, arguments, emit, log

DATA = MLANTHOLOGY


def index(index_dir: Path, sources: list[str], backend: str) -> tuple[dict, float]:
    started = time.perf_counter()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "semsearch",
            "index",
            *sources,
            "--index",
            str(index_dir),
            "--json",
            "-q",
            "--backend",
            backend,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=REPO,
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"semsearch index failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def reformat(text: str) -> str:
    """The same abstract as a careless copy: re-wrapped every 12 words, a few words in markup."""
    words = text.split()
    for i in (3, 11, 19):
        if i < len(words):
            words[i] = f"*{words[i]}*"
    lines = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
    return "\n".join(lines)


def new_file(path: Path) -> None:
    with gzip.open(DATA / "neurips2025.jsonl.gz", "rt", encoding="utf-8") as fh:
        known = [json.loads(line)["text"] for _, line in zip(range(300), fh, strict=False)][::30][:10]
    others: list[str] = []
    with gzip.open(DATA / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            meta = rec.get("metadata", {})
            if str(meta.get("year")) != "2025" and len(rec["text"].split()) > 60:
                others.append(rec["text"])
            if len(others) == 10:
                break
    path.write_text(
        "NeurIPS 2025 Papers (late additions)\n\n" + "\n\n".join([reformat(t) for t in known] + others) + "\n",
        encoding="utf-8",
    )


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--backend", choices=["onnx", "torch"], default="onnx")
    parser.add_argument("--workdir", type=Path, help="keep the indexes here (default: a temporary folder)")
    args = parser.parse_args()
    if not (DATA / "neurips2025.jsonl.gz").is_file():
        sys.exit(f"{DATA} is missing: this benchmark needs ../shared/data/mlanthology")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="semsearch-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sources_dir = work / "sources"
    sources_dir.mkdir(exist_ok=True)
    catalogue = str(DATA / "neurips2025.jsonl.gz")
    seeds = str(SEEDS)
    idx = work / "index"

    log(f"full build of neurips2025 + seeds into {idx} (encodes everything; minutes on a CPU) ...")
    full, full_wall = index(idx, [catalogue, seeds], args.backend)
    log(f"  {full['documents']} documents, encoded {full['encoded']} in {full_wall:.1f} s")
    log("unchanged re-run ...")
    same, same_wall = index(idx, [catalogue, seeds], args.backend)
    log(f"  encoded {same['encoded']} in {same_wall:.1f} s")
    new_file(sources_dir / "late.txt")
    log("adding a file of 20 abstracts (10 already indexed, re-formatted) ...")
    incr, incr_wall = index(idx, [catalogue, seeds, str(sources_dir / "late.txt")], args.backend)
    log(f"  encoded {incr['encoded']} in {incr_wall:.1f} s")
    emit(
        {
            "backend": args.backend,
            "documents_full": full["documents"],
            "read_full": full["read"],
            "duplicates_full": full["duplicates"],
            "near_duplicates_full": full["near_duplicates"],
            "full_build_s": round(full_wall, 2),
            "unchanged_encoded": same["encoded"],
            "unchanged_s": round(same_wall, 2),
            "incremental_read": incr["read"],
            "incremental_encoded": incr["encoded"],
            "incremental_added": incr["added"],
            "incremental_near_duplicates": incr["near_duplicates"] - full["near_duplicates"],
            "incremental_s": round(incr_wall, 2),
            "incremental_vs_full_ratio": round(incr_wall / full_wall, 4),
            "unchanged_vs_full_ratio": round(same_wall / full_wall, 4),
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
