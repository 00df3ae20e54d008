"""What every benchmark shares: one log, one JSON-line printer, a same-run baseline, the data paths, index helpers.

Benchmarks run from the repository root as ``python -m benchmarks.bench_x``; each prints its figures as one JSON
line on stdout (``emit``, which records the machine's load beside them) and its progress on stderr (``log``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.encode.hashed import HashedWords  # noqa: F401  (the benchmarks' stand-in encoder, re-exported)

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
DATA = SHARED / "data"
MLANTHOLOGY = DATA / "mlanthology"
NEURIPS = MLANTHOLOGY / "neurips2025.jsonl.gz"
CORPUS = MLANTHOLOGY / "corpus.jsonl.gz"
SCIFACT = DATA / "scifact"
SEEDS = REPO / "seeds"
HERE = Path(__file__).resolve().parent
BENCH_DATA = HERE / "data"


def log(*parts: object) -> None:
    """One progress line on stderr with the time of day, the parts joined as print joins them."""
    stamp = datetime.now(timezone.utc).strftime("%H:%M:%S")
    print(f"[{stamp}]", *parts, file=sys.stderr, flush=True)


def machine() -> dict[str, Any]:
    """The load the figures were measured under: on a shared machine a wall time means little without it."""
    one, five, fifteen = os.getloadavg()
    return {"load_1m": round(one, 2), "load_5m": round(five, 2), "load_15m": round(fifteen, 2), "cpus": os.cpu_count()}


def emit(figures: Any, *, out: Path | None = None, **dumps: Any) -> None:
    """Print the figures as one JSON line with the machine's load (and append it to ``out`` when given)."""
    record = {**figures, "machine": machine()} if isinstance(figures, dict) else {"figures": figures}
    record.setdefault("machine", machine())
    line = json.dumps(record, **dumps)
    print(line, flush=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")


def skip(reason: str) -> None:
    """Stop cleanly when the data a benchmark needs is absent: say why on stderr and in the JSON line."""
    log(f"skipped: {reason}")
    emit({"skipped": reason})
    raise SystemExit(0)


def need(path: Path, what: str = "") -> Path:
    """``path`` when it exists, else a clean skip naming it (the shared data lives beside the checkout)."""
    if not path.exists():
        skip(f"{path} is absent{' (' + what + ')' if what else ''}; the shared data lives in ../shared/data")
    return path


def arguments(doc: str | None, *, docs: int | None = None, out: bool = True) -> argparse.ArgumentParser:
    """An argument parser with the shared options: ``--docs N`` when the benchmark has a size, ``--out FILE``."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if docs is not None:
        ap.add_argument("--docs", type=int, default=docs, help=f"how many documents (default {docs})")
    if out:
        ap.add_argument("--out", type=Path, default=None, help="also append the JSON line to this file")
    return ap


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of fn takes."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def same_run(
    a: Callable[[], Any], b: Callable[[], Any], *, repeats: int = 5, names: tuple[str, str] = ("a", "b")
) -> dict[str, Any]:
    """A and B interleaved in one run (A B A B ...): medians and B/A, so the machine's load hits both alike."""
    times: dict[str, list[float]] = {names[0]: [], names[1]: []}
    for _ in range(repeats):
        times[names[0]].append(timed(a))
        times[names[1]].append(timed(b))
    medians = {name: statistics.median(samples) for name, samples in times.items()}
    ratios = [tb / ta for ta, tb in zip(times[names[0]], times[names[1]], strict=True) if ta > 0]
    return {
        **{f"{name}_median_s": round(m, 4) for name, m in medians.items()},
        **{f"{name}_min_s": round(min(times[name]), 4) for name in names},
        "ratio_median": round(medians[names[1]] / medians[names[0]], 3) if medians[names[0]] > 0 else None,
        "ratio_per_pair": [round(r, 3) for r in ratios],
        "repeats": repeats,
    }


def percentile_ms(samples: Sequence[float], q: float) -> float:
    """The q-th percentile of samples in seconds, in milliseconds."""
    return round(float(np.percentile(np.asarray(samples) * 1000, q)), 2)


def read_jsonl(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """The records of a JSONL file (gzipped when its name ends in .gz), the first ``limit`` when given."""
    opener = gzip.open if path.suffix == ".gz" else open
    rows: list[dict[str, Any]] = []
    with opener(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                rows.append(json.loads(line))
                if limit is not None and len(rows) >= limit:
                    break
    return rows


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> Path:
    """Write rows as JSONL (a source file semsearch reads); returns path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return path


def build(sources: Sequence[Path | str], folder: Path, embedder: Any = None, **options: Any) -> Any:
    """Build (or refresh) an index at ``folder`` from ``sources`` without progress bars; the build's report."""
    from semsearch import BuildOptions, build_index

    return build_index([str(s) for s in sources], folder, BuildOptions(progress=False, **options), embedder=embedder)
