"""What a reading costs a whole build: first builds of one corpus with each --reading, in the same run.

    python -m benchmarks.bench_reading ../shared/data/mlanthology/neurips2025.jsonl.gz
    python -m benchmarks.bench_reading seeds --readings truncated,sentences,windows-all
    python -m benchmarks.bench_reading ../shared/data/mlanthology/neurips2025.jsonl.gz --keep /tmp/neurips-readings

Each reading builds a fresh index of the corpus with the shipped encoder (`semsearch index`, ONNX int8, its own
empty embedding cache; the ONNX export comes from the shared store, so no build pays for it), one after the other,
``--repeat`` times in alternating order. Prints one JSON line: per reading the median build seconds, the index's
size on disk, its window vectors, and both as ratios to the first reading (today's default was truncated).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import arguments, emit


def build(corpus: str, index: Path, reading: str) -> float:
    shutil.rmtree(index, ignore_errors=True)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "semsearch", "index", corpus, "--index", str(index), "--reading", reading, "-q"],
        check=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def size_of(index: Path) -> int:
    version = index / (index / "CURRENT").read_text().strip()
    return sum(p.stat().st_size for p in version.rglob("*") if p.is_file())


def windows_of(index: Path) -> int:
    import numpy as np

    version = index / (index / "CURRENT").read_text().strip()
    return sum(int(np.load(p).size) for p in version.rglob("window_ids.npy"))


def main() -> None:
    ap = arguments(__doc__)
    ap.add_argument("corpus")
    ap.add_argument("--readings", default="truncated,sentences")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--keep", type=Path, help="copy each reading's index to KEEP/READING (for bench_recommend.py)")
    args = ap.parse_args()
    readings = args.readings.split(",")
    times: dict[str, list[float]] = {r: [] for r in readings}
    out: dict[str, object] = {"corpus": args.corpus, "repeat": args.repeat}
    with tempfile.TemporaryDirectory(prefix="bench-reading-") as tmp:
        build(args.corpus, Path(tmp) / "warm", readings[0])  # the shared ONNX export, the page cache
        for rep in range(args.repeat):
            for reading in readings if rep % 2 == 0 else readings[::-1]:
                index = Path(tmp) / reading
                times[reading].append(build(args.corpus, index, reading))
                if rep == args.repeat - 1:
                    out[reading] = {"size_bytes": size_of(index), "windows": windows_of(index)}
                    if args.keep is not None:
                        shutil.rmtree(args.keep / reading, ignore_errors=True)
                        shutil.copytree(index, args.keep / reading)
        base = readings[0]
        for reading in readings:
            entry = out[reading]
            assert isinstance(entry, dict)
            entry["build_s"] = round(statistics.median(times[reading]), 2)
            entry["build_ratio"] = round(statistics.median(times[reading]) / statistics.median(times[base]), 3)
            entry["size_ratio"] = round(entry["size_bytes"] / out[base]["size_bytes"], 3)  # type: ignore[index]
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
