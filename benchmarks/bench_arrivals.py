"""Benchmark what arrivals cost: refreshes, removals, bytes written and query latency at 157k; +22 at 5.8k.

Prints one JSON line (progress on stderr). The 157k part uses stand-in vectors (a hashed bag of words,
``semsearch.encode.hashed``) for everything that is not encoding, and says so; its "excluding encoding" figures
subtract the stand-in's own seconds. The 5.8k part uses the real default model, encoding included.

    python -m benchmarks.bench_arrivals [--workdir DIR] [--skip-157k] [--skip-5k] [--queries N]
        [--grow 1000000 --no-one-go]   # the same steps on a synthetic 1M corpus (variants of the real records)

157k steps, each timed in this process against the same run's full build:
  full build of the corpus in one go (baseline); the corpus less 500 records, then an unchanged refresh,
  then +500 (a new file), then ``remove --source`` of that file; bytes written per step (the process's
  write() bytes, /proc/self/io wchar); dense and hybrid query p50/p99 (warm, with highlights); the first
  --where filter in a fresh process; and whether the one-go build and the built-in-arrivals index give the
  same top 10 (ids equal, scores within 1e-6).
5.8k step: the NeurIPS 2025 list built once with the real model (kept in the work dir), copied, then a file of
22 abstracts from other venues added with the map on, timed as a `semsearch index` process.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from benchmarks.bench_hybrid import hybrid_latency
from benchmarks.harness import MLANTHOLOGY, REPO, HashedWords, arguments, emit, log

DATA = MLANTHOLOGY
HELD_OUT = 500
ARRIVAL_5K = 22
T = TypeVar("T")


def written() -> int:
    """Bytes this process has written with write() so far (includes SQLite, numpy, FAISS)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("wchar:"):
            return int(line.split()[1])
    return 0


def step(name: str, fn: Callable[[], T], encoder: HashedWords | None = None) -> tuple[T, dict[str, Any]]:
    """Run fn, returning its result and its seconds, bytes written and (stand-in) encoding seconds."""
    log(f"  {name} ...")
    enc_before = encoder.seconds if encoder is not None else 0.0
    w, t = written(), time.perf_counter()
    result = fn()
    seconds = time.perf_counter() - t
    figures: dict[str, Any] = {"s": round(seconds, 2), "bytes_written": written() - w}
    if encoder is not None:
        encoding = encoder.seconds - enc_before
        figures["s_excluding_encoding"] = round(seconds - encoding, 2)
    log(f"  {name}: {figures}")
    return result, figures


STEPS = {
    "semsearch.write.inputs": ("read_files", "deduplicate"),
    "semsearch.write.build": ("encode_with_cache", "_stamp_arrivals"),
    # The index parts (semsearch/store/index_parts.py), for a base and for an appended segment alike.
    "semsearch.store.index_parts": ("write_vector_files", "write_ann", "write_lexical"),
    "semsearch.atlas.compute": ("write_map",),
    "semsearch.atlas.append": ("append_map",),
    # A refresh that appends a segment: planned (plan.py: one walk, the new files read), decided
    # (dedup/incremental.py through append.py), written (segment_writer.py).
    "semsearch.write.plan": ("survey", "read_files"),
    "semsearch.write.append": ("change_against", "write_appended"),
    "semsearch.dedup.incremental": ("deduplicate", "_near_hits", "_dropped"),
    "semsearch.write.segment_writer": ("link_version", "hidden_after"),
}


def with_steps(fn: Callable[[], T]) -> tuple[T, dict[str, Any]]:
    """Run fn with the build's steps wrapped: each step's seconds and bytes written, where the time goes."""
    import functools
    import importlib

    from semsearch.write.contents import INDEX_PARTS

    figures: dict[str, Any] = {}
    originals: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, original: Any, label: str) -> None:
        originals.append((owner, name, original))

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            w, t = written(), time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                s, b = figures.get(label, (0.0, 0))
                figures[label] = (round(s + time.perf_counter() - t, 2), b + written() - w)

        setattr(owner, name, timed)

    for module_name, names in STEPS.items():
        module = importlib.import_module(module_name)
        for name in names:
            wrap(module, name, getattr(module, name), name)
    # Every part's writers too (documents, filter columns, ...), named "<part>.write_base" / ".write_segment".
    for part in INDEX_PARTS:
        for name in ("write_base", "write_segment"):
            original = type(part).__dict__.get(name)
            if original is not None:
                wrap(type(part), name, original, f"{part.name}.{name}")
    try:
        return fn(), {k: {"s": s, "bytes_written": b} for k, (s, b) in figures.items()}
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def percentile_ms(samples: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(samples) * 1000, q)), 2)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def write_jsonl(path: Path, records: Sequence[dict[str, Any]]) -> Path:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8") as fh:  # type: ignore[operator]
        for record in records:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


FIRST_FILTER = r"""
import json, sys, time
from semsearch.encode.hashed import HashedWords
from semsearch.query.search import Index
idx = Index.open(sys.argv[1], embedder=HashedWords())
idx.search("graph neural networks", 10, mode="dense")  # warm: the filter is what is timed
out = {}
for clause in ("year>=2024", "venue=neurips", "title~graph"):
    t = time.perf_counter()
    idx.search("graph neural networks", 10, mode="dense", where=[clause])
    out[clause] = round((time.perf_counter() - t) * 1000, 1)
print(json.dumps(out))
"""


def first_filter_ms(index_dir: Path) -> dict[str, Any]:
    """Each --where clause's first search in a fresh process (after one unfiltered search), in ms."""
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_FILTER, str(index_dir)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return dict(json.loads(proc.stdout))


def same_top10(a: Path, b: Path, embedder: Any, queries: Sequence[str]) -> dict[str, Any]:
    """How many queries give the same top 10 (ids, scores within 1e-6) on two indexes, dense and hybrid."""
    from semsearch.query.search import Index

    out: dict[str, Any] = {}
    with Index.open(a, embedder=embedder) as one, Index.open(b, embedder=embedder) as other:
        for mode in ("dense", "hybrid"):
            same = same_ids = 0
            for q in queries:
                x, y = one.search(q, 10, mode=mode), other.search(q, 10, mode=mode)
                ids_equal = [h.id for h in x] == [h.id for h in y]
                same_ids += ids_equal
                if ids_equal and all(abs(h.score - g.score) <= 1e-6 for h, g in zip(x, y, strict=True)):
                    same += 1
            out[f"{mode}_same_top10"] = f"{same} of {len(queries)}"
            out[f"{mode}_same_top10_ids"] = f"{same_ids} of {len(queries)}"
    # Copies that arrive after their original keep the original's id and text (identity.py); built in one go,
    # the dedup picks a representative among all copies, so such documents can hold another of their texts.
    texts = [_text_hashes(path) for path in (a, b)]
    out["documents_holding_another_text"] = sum(1 for i, h in texts[0].items() if texts[1].get(i) != h)
    return out


def _text_hashes(index_dir: Path) -> dict[str, str]:
    """Document id -> the hash of the text it holds, in the live version (all its segments)."""
    from semsearch.store.documents import open_documents
    from semsearch.store.layout import current_version
    from semsearch.store.manifest import read_manifest

    version = current_version(index_dir)
    store = open_documents(version, read_manifest(version))
    try:
        return {str(i): str(h) for i, h in store.rows("SELECT id, text_hash FROM documents")}
    finally:
        store.close()


def grown_corpus(corpus: Path, size: int, out: Path) -> Path:
    """A corpus of ``size`` records: the real ones, then variants with 30% of their words replaced.

    A variant shares about a third of its word 3-shingles with its original (Jaccard ~0.2), well below the
    near-duplicate threshold, so every variant is a document of its own; its words are the corpus's.
    """
    records = read_jsonl(corpus)
    rng = random.Random(1_000_000)
    vocab = [w for r in rng.sample(records, 2000) for w in str(r.get("text") or "").split()]
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        for i in range(size):
            base = records[i % len(records)]
            if i < len(records):
                fh.write(json.dumps(base, ensure_ascii=False) + "\n")
                continue
            words = str(base.get("text") or base.get("title") or "").split()
            for j in rng.sample(range(len(words)), k=int(len(words) * 0.3)):
                words[j] = rng.choice(vocab)
            variant = {**base, "_id": f"{base.get('_id')}-v{i}", "title": f"{base.get('title')} ({i // len(records)})"}
            variant["text"] = " ".join(words)
            fh.write(json.dumps(variant, ensure_ascii=False) + "\n")
    return out


def bench_157k(work: Path, n_queries: int, corpus: Path, ann: str | None = None, one_go: bool = True) -> dict[str, Any]:
    from semsearch.store.layout import current_version
    from semsearch.store.manifest import read_manifest
    from semsearch.write.build import BuildOptions, build_index
    from semsearch.write.remove import remove_documents

    records = read_jsonl(corpus)
    rng = random.Random(15)
    held = set(rng.sample(range(len(records)), HELD_OUT))
    base = write_jsonl(work / "base.jsonl.gz", [r for i, r in enumerate(records) if i not in held])
    arrivals = write_jsonl(work / "arrivals.jsonl", [records[i] for i in sorted(held)])
    queries = [r["title"] for r in rng.sample(records, n_queries)]
    del records
    opts = BuildOptions(progress=False, batch_size=4096, ann=ann)
    out: dict[str, Any] = {"vectors": "stand-in (hashed bag of words, 384-d); encoding excluded where said"}

    together = work / "one-go"
    if one_go:
        enc = HashedWords()
        summary, out["full_build"] = step(
            "full build, one go", lambda: build_index([str(base), str(arrivals)], together, opts, embedder=enc), enc
        )
        out["documents"], out["ann"] = summary.documents, summary.ann

    enc = HashedWords()
    idx = work / "arrivals-index"
    summary, out["base_build"] = step(
        "build of the corpus less 500", lambda: build_index([str(base)], idx, opts, embedder=enc), enc
    )
    if not one_go:  # the base build is the baseline the ratios are taken against
        out["full_build"] = dict(out["base_build"], note="the build of the corpus less 500 (no one-go build)")
        out["documents"], out["ann"] = summary.documents, summary.ann
    again, out["unchanged_refresh"] = step("unchanged refresh", lambda: build_index(None, idx, opts, embedder=enc), enc)
    out["unchanged_refresh"]["wrote_version"] = not again.unchanged
    (grown, steps), out["add_500"] = step(
        "+500", lambda: with_steps(lambda: build_index([str(base), str(arrivals)], idx, opts, embedder=enc)), enc
    )
    out["add_500"].update(
        encoded=grown.encoded, segments=grown.segments, rewritten_because=grown.rewritten_because, steps=steps
    )

    if one_go:
        out.update(same_top10(together, idx, enc, queries[:50]))
    out["queries"] = hybrid_latency(idx, enc, queries)
    out["first_filter_ms"] = first_filter_ms(idx)
    _, out["remove_500"] = step("remove the 500", lambda: remove_documents(idx, sources=[str(arrivals)]))
    out["remove_500"]["segments"] = len(read_manifest(current_version(idx)).segments)
    hidden = current_version(idx) / "hidden.npy"  # absent when the removal rewrote the index (a small corpus)
    out["remove_500"]["hidden_rows"] = int(len(np.load(hidden))) if hidden.is_file() else 0
    for name in ("full_build", "unchanged_refresh", "add_500", "remove_500"):
        out[name]["ratio_to_full_build"] = round(out[name]["s"] / out["full_build"]["s"], 4)
    return out


def bench_5k(work: Path) -> dict[str, Any]:
    """+22 abstracts from other venues to the 5.8k NeurIPS 2025 index, real model, map on."""
    cached = work / "neurips2025-base"
    if not (cached / "CURRENT").exists():
        log("  building the 5.8k NeurIPS 2025 index once with the real model (kept for later runs) ...")
        run_index([str(DATA / "neurips2025.jsonl.gz")], cached)
    if not map_laid_out(cached):  # a map from before incremental maps: lay it out once, so runs time a placement
        log("  laying the cached index's map out once (it predates incremental maps) ...")
        run_index([str(DATA / "neurips2025.jsonl.gz")], cached, "--relayout")
    neurips = {r["_id"] for r in read_jsonl(DATA / "neurips2025.jsonl.gz")}
    others: list[dict[str, Any]] = []
    with gzip.open(DATA / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            if record["_id"] not in neurips and record.get("text"):
                others.append(record)
            if len(others) >= 5000:
                break
    # Different abstracts each run: none is in the cached index's embedding cache.
    chosen = random.Random(time.time_ns()).sample(others, ARRIVAL_5K)
    run_dir = work / "neurips2025-run"
    shutil.rmtree(run_dir, ignore_errors=True)
    shutil.copytree(cached, run_dir, symlinks=True)
    new_file = write_jsonl(work / "arrivals22.jsonl", chosen)
    summary, seconds = run_index([str(DATA / "neurips2025.jsonl.gz"), str(new_file)], run_dir)
    return {
        "documents": summary["documents"],
        "encoded": summary["encoded"],
        "add_22_s_map_on": round(seconds, 2),
        "map": json.loads((run_dir / (run_dir / "CURRENT").read_text().strip() / "manifest.json").read_text())["map"],
    }


def map_laid_out(index_dir: Path) -> bool:
    """Whether the live version's map.json records its layout (refreshes then place arrivals on it)."""
    try:
        version = index_dir / (index_dir / "CURRENT").read_text().strip()
        return "laid_out_at" in json.loads((version / "map.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def run_index(sources: list[str], index_dir: Path, *options: str) -> tuple[dict[str, Any], float]:
    """`semsearch index SOURCES --index DIR --json` (plus ``options``) as a process: (its summary, wall seconds)."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "semsearch", "index", *sources, "--index", str(index_dir), "--json", "-q", *options],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        cwd=REPO,
    )
    if proc.returncode != 0:
        sys.exit(f"semsearch index failed: {proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), time.perf_counter() - started


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "semsearch-bench-arrivals")
    parser.add_argument("--skip-157k", action="store_true")
    parser.add_argument("--skip-5k", action="store_true")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--ann", default=None, help="ANN kind for the 157k indexes (default: auto, i.e. IVF)")
    parser.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl.gz", help="the big corpus (jsonl.gz)")
    parser.add_argument(
        "--grow", type=int, metavar="N", help="synthesise a corpus of N records from --corpus (e.g. 1000000)"
    )
    parser.add_argument("--no-one-go", action="store_true", help="skip the one-go build and its comparison")
    args = parser.parse_args()
    if not DATA.is_dir():
        sys.exit(f"needs {DATA} (the ML Anthology corpus)")
    args.workdir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"cpus": os.cpu_count()}
    if not args.skip_5k:
        log("5.8k NeurIPS 2025 index, +22 with the map on (real model):")
        out["neurips_5k"] = bench_5k(args.workdir)
    if not args.skip_157k:
        log("157k ML Anthology index (stand-in vectors):")
        work = args.workdir / "157k"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        corpus = args.corpus
        if args.grow:
            grown = args.workdir / f"grown-{args.grow}.jsonl.gz"
            if grown.is_file():  # the same records every time (a fixed seed): made once per work dir
                log(f"  reusing {grown}")
            else:
                log(f"  synthesising {args.grow} records ...")
                grown_corpus(args.corpus, args.grow, grown.with_suffix(".tmp"))
                grown.with_suffix(".tmp").replace(grown)
            corpus = grown
            # 1M records decompress past the input guard's default 1 GB; these files are the bench's own.
            os.environ.setdefault("SEMSEARCH_MAX_DECOMPRESSED_MB", "8192")
        key = f"synthetic_{args.grow}" if args.grow else "anthology_157k"
        out[key] = bench_157k(work, args.queries, corpus, args.ann, one_go=not args.no_one_go)
        shutil.rmtree(work, ignore_errors=True)
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
