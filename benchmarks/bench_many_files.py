"""Benchmark refreshes of a folder of many one-abstract files: first build, +1 file, unchanged refresh.

Generates N seed-format files of one synthetic abstract each (distinct random words, so none are duplicates)
in a temporary folder, and times, in this process, with the stand-in encoder (``semsearch.encode.hashed``, so
encoding does not dominate): the first build of the folder, a refresh after one file is added (an appended
segment), and a refresh with nothing changed. Prints one JSON line; progress goes to stderr.

    python -m benchmarks.bench_many_files [--files 20000] [--also 100000] [--workdir DIR] [--profile OUT.prof]
"""

from __future__ import annotations

import cProfile
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.harness import HashedWords, arguments, emit, log
from semsearch.write.build import BuildOptions, build_index

T = TypeVar("T")


def abstract(rng: random.Random, vocabulary: list[str]) -> str:
    """A 60-word abstract of random words: distinct enough that no two are near copies."""
    return " ".join(rng.choice(vocabulary) for _ in range(60)) + "."


def make_folder(folder: Path, count: int, seed: int = 0) -> None:
    """``count`` one-abstract seed files, spread over subfolders of 1,000 (as a real collection might be)."""
    rng = random.Random(seed)
    vocabulary = [f"w{rng.getrandbits(40):x}" for _ in range(5000)]
    for i in range(count):
        path = folder / f"part{i // 1000:03d}" / f"paper{i:06d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(abstract(rng, vocabulary) + "\n", encoding="utf-8")


def timed(name: str, fn: Callable[[], T], profile: cProfile.Profile | None) -> tuple[T, float]:
    log(f"  {name} ...")
    started = time.perf_counter()
    if profile is not None:
        profile.enable()
    try:
        result = fn()
    finally:
        if profile is not None:
            profile.disable()
    seconds = time.perf_counter() - started
    log(f"  {name}: {seconds:.2f} s")
    return result, seconds


def run(count: int, workdir: Path, profile: cProfile.Profile | None) -> dict[str, Any]:
    """The three timings for a folder of ``count`` files."""
    src = workdir / f"files-{count}"
    log(f"{count} files: generating in {src}")
    make_folder(src, count)
    idx = workdir / f"idx-{count}"
    encoder = HashedWords()
    opts = BuildOptions(progress=False)
    first, first_s = timed("first build", lambda: build_index([str(src)], idx, opts, embedder=encoder), None)
    extra = src / "part999" / "arrived.txt"
    extra.parent.mkdir(exist_ok=True)
    # Longer than a seed header (120 characters), so it reads as an abstract.
    extra.write_text(abstract(random.Random(count), ["arriving", "refresh", "folder", "files", "cost"]) + "\n")
    added, added_s = timed("+1 file", lambda: build_index([str(src)], idx, opts, embedder=encoder), profile)
    same, same_s = timed("unchanged refresh", lambda: build_index([str(src)], idx, opts, embedder=encoder), None)
    if added.documents != count + 1 or not same.unchanged:
        sys.exit(f"unexpected result: +1 file gave {added.documents} documents, unchanged={same.unchanged}")
    return {
        "files": count,
        "first_build_s": round(first_s, 2),
        "plus_one_file_s": round(added_s, 2),
        "plus_one_appended": added.segments > 0,
        "plus_one_rewritten_because": added.rewritten_because,
        "unchanged_refresh_s": round(same_s, 2),
        "documents": first.documents,
    }


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20000, help="files in the folder (default 20000)")
    parser.add_argument("--also", type=int, default=0, help="a second, bigger folder (e.g. 100000)")
    parser.add_argument("--workdir", type=Path, default=None, help="where the folders go (default: a temp dir)")
    parser.add_argument("--profile", type=Path, default=None, help="write a cProfile of the +1 file step here")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    profile = cProfile.Profile() if args.profile else None
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        results = [run(args.files, Path(tmp), profile)]
        if args.also:
            results.append(run(args.also, Path(tmp), None))
    if profile is not None:
        profile.dump_stats(str(args.profile))
    emit(
        {
            "bench": "many_files",
            "encoder": HashedWords().name,
            "cpus": len(os.sched_getaffinity(0)),
            "runs": results,
        },
        out=args.out,
    )


if __name__ == "__main__":
    main()
