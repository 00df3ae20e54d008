"""Benchmark hybrid query latency at 157k by query style (#36): plain words, jargon, typos, names, acronyms.

Encoding the 157k ML Anthology abstracts with the model takes hours on 2 cores, so the index is built once with
the stand-in encoder (``scripts/standin.py``: a hashed bag of words, 384-d): BM25, the documents, the people
table, ``words.json``, dedup and the ANN (its kind chosen by size, as the product does) are all real. Only the
query's encoding is not, so the same run also times the real default model's query encoder (the ONNX export of
a small seed index, opened as ``Index.encode_query`` opens it) on the same queries, and the estimate of a real
157k query is the stand-in search p50 plus the real encode p50, each shown on its own.

In one process, warm, per style: ``Index.search(q, k=10)`` (the default: hybrid, typo correction and name
look-up on), and as baselines in the same run the same searches with ``exact=True`` (no correction), lexical
only and dense only, with the ratios; also the default search with the IVF's nprobe set to what real vectors
tune to at this size (``--real-nprobe``, 64: docs/explanation/scale.md), since hashed words need a far larger
one for the same recall and so make the dense side slower than the product's. Then a cold ``semsearch query``
(a new process each, 5 runs, median) on the 157k stand-in index (hybrid, the stand-in patched in as the query
encoder; and lexical, the plain CLI) and on the seed index with the real model (hybrid and lexical: their
difference is the model's load + encode).

    python scripts/bench_typed_latency.py [--index /tmp/latency-157k] [--docs N] [--seeds-index /tmp/latency-seeds]

The 157k index is built on the first run and reused after (``--index``); ``--docs N`` builds from the corpus's
first N papers instead. Prints one JSON line on stdout; progress on stderr. Needs ``../shared/data/mlanthology``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))
DATA = REPO.parent / "shared" / "data" / "mlanthology"
DEV = REPO / "scripts" / "data" / "typed_dev.jsonl"
STYLES = ("plain", "jargon", "typo", "author", "acronym")
# name -> Index.search keyword arguments; "hybrid" is the default call the issue is about
VARIANTS: dict[str, dict[str, Any]] = {
    "hybrid": {},
    "hybrid_exact": {"exact": True},
    "lexical": {"mode": "lexical"},
    "dense": {"mode": "dense"},
}

from bench_arrivals import log, percentile_ms, read_jsonl, run_index, write_jsonl  # noqa: E402
from standin import HashedWords  # noqa: E402

# A cold `semsearch query` on the stand-in index: the CLI as installed, its query encoder the stand-in.
COLD_STANDIN = r"""
import sys
sys.path.insert(0, sys.argv.pop(1))
from standin import HashedWords
import semsearch.query.search as search
search.open_query_encoder = lambda *a, **k: HashedWords()
from semsearch.faces.cli import main
sys.argv = ["semsearch", *sys.argv[1:]]
main()
"""


def ensure_index(index: Path, corpus: Path, docs: int | None) -> dict[str, Any]:
    """Build the stand-in index once (all of ``corpus``, or its first ``docs`` records); reuse it after."""
    from semsearch.write.build import BuildOptions, build_index

    if (index / "CURRENT").is_file():
        log(f"reusing {index}")
        return {"built_s": None, "reused": True}
    source = corpus
    if docs:
        records = read_jsonl(corpus)[:docs]
        source = write_jsonl(Path(tempfile.mkdtemp(prefix="latency-")) / "first.jsonl.gz", records)
    log(f"building {index} from {source} with the stand-in encoder ...")
    enc = HashedWords()
    started = time.perf_counter()
    summary = build_index([str(source)], index, BuildOptions(progress=False, batch_size=4096), embedder=enc)
    seconds = time.perf_counter() - started
    log(f"  built {summary.documents:,} documents in {seconds:.0f} s ({summary.ann})")
    return {"built_s": round(seconds, 1), "built_s_excluding_encoding": round(seconds - enc.seconds, 1)}


def slip(word: str, rng: random.Random) -> str:
    """One typing slip in a word: a letter dropped, doubled, swapped with the next, or replaced."""
    i = rng.randrange(1, len(word) - 1)  # keep the first letter, as most slips do
    kind = rng.choice(("drop", "double", "swap", "replace"))
    if kind == "drop":
        return word[:i] + word[i + 1 :]
    if kind == "double":
        return word[:i] + word[i] + word[i:]
    if kind == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    return word[:i] + rng.choice("aeioustnrl".replace(word[i], "")) + word[i + 1 :]


def typo_queries(idx: Any, titles: Sequence[str], n: int, rng: random.Random) -> list[str]:
    """Title openings with one or two slips in their longer words, kept only where correction changes them."""
    out = []
    for title in titles:
        words = title.split()[:6]
        long = [i for i, w in enumerate(words) if len(w) >= 6 and w.isalpha()]
        if not long:
            continue
        for i in rng.sample(long, min(len(long), rng.choice((1, 2)))):
            words[i] = slip(words[i].lower(), rng)
        query = " ".join(words)
        if idx.spell(query).text != idx.spell(query, exact=True).text:  # a slip the search does correct
            out.append(query)
        if len(out) >= n:
            break
    return out


def query_sets(idx: Any, n: int, seed: int = 36) -> dict[str, list[str]]:
    """Each style's queries: the dev set's (scripts/data/typed_dev.jsonl) plus ones drawn from the index."""
    rng = random.Random(seed)
    sets: dict[str, list[str]] = {s: [] for s in STYLES}
    for line in DEV.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        sets[row["style"]].append(row["query"])
    docs = [d for _, d in zip(range(20_000), idx.store.iter_documents(), strict=False)]
    titles = [d.title for d in rng.sample(docs, min(len(docs), 4 * n)) if d.title and len(d.title.split()) >= 4]
    sets["jargon"] += [" ".join(t.split()[:5]) for t in titles[:n]]
    sets["typo"] += typo_queries(idx, titles[n:], n, rng)
    acronym = re.compile(r"^([A-Za-z0-9][\w-]*[A-Z][\w-]*):")  # "LoRA: ...", "BERT: ..."
    found = sorted({m.group(1) for d in docs if d.title and (m := acronym.match(d.title)) and len(m.group(1)) >= 3})
    sets["acronym"] += rng.sample(found, min(n, len(found)))
    rows = idx.store.rows("SELECT name, count(DISTINCT num) FROM people GROUP BY name HAVING count(*) <= 8")
    names = sorted(str(name) for name, c in rows if 1 <= c <= 4 and len(str(name).split()) >= 2)
    sets["author"] += rng.sample(names, min(n, len(names)))
    return sets


def timed(fn: Callable[[str], Any], queries: Sequence[str], repeats: int) -> list[float]:
    """Seconds per call of fn over the queries, ``repeats`` rounds."""
    times = []
    for _ in range(repeats):
        for q in queries:
            t = time.perf_counter()
            fn(q)
            times.append(time.perf_counter() - t)
    return times


def figures(times: Sequence[float]) -> dict[str, float]:
    return {"p50_ms": percentile_ms(times, 50), "p95_ms": percentile_ms(times, 95), "n": len(times)}


def warm_search(index: Path, sets: dict[str, list[str]], repeats: int, real_nprobe: int) -> dict[str, Any]:
    """Each style x variant, warm, in this process; the stand-in's own encode time alongside.

    Hashed words cluster worse than a model's vectors, so the build's recall tuning gives the stand-in IVF a far
    larger nprobe than real vectors get; "hybrid_real_nprobe" is the default search at the real vectors' nprobe.
    """
    from dataclasses import replace

    from semsearch import Index

    enc = HashedWords()
    out: dict[str, Any] = {}
    with Index.open(index, embedder=enc) as idx:
        every = [q for qs in sets.values() for q in qs]
        for q in every:  # warm-up: memory maps, SQLite pages, the lexical index, words.json, the people table
            idx.search(q, 10)
        tuned = idx.ann.spec
        real = replace(tuned, nprobe=real_nprobe) if tuned.nprobe else tuned  # nprobe 0: not an IVF
        variants = {**VARIANTS, "hybrid_real_nprobe": {}}
        pooled: dict[str, list[float]] = {v: [] for v in variants}
        for style, queries in sets.items():
            row: dict[str, Any] = {"queries": len(queries)}
            # The variants take turns query by query, so the machine's other load falls on them alike.
            times: dict[str, list[float]] = {v: [] for v in variants}
            for _ in range(repeats):
                for q in queries:
                    for variant, kwargs in variants.items():
                        idx.ann.spec = real if variant == "hybrid_real_nprobe" else tuned
                        t = time.perf_counter()
                        idx.search(q, 10, **kwargs)
                        times[variant].append(time.perf_counter() - t)
                    idx.ann.spec = tuned
            for variant in variants:
                pooled[variant] += times[variant]
                row[variant] = figures(times[variant])
                log(f"  {style} {variant}: {row[variant]}")
            row["standin_encode"] = figures(timed(idx.encode_query, queries, repeats))
            row["corrected"] = sum(idx.spell(q).text != idx.spell(q, exact=True).text for q in queries)
            row["named"] = sum(bool(idx.store.people(q)) for q in queries)
            out[style] = row
        out["all"] = {v: figures(t) for v, t in pooled.items()}
        out["documents"], out["ann"] = len(idx), idx.info().ann
        out["real_nprobe"] = real.nprobe
    for row in out.values():
        if isinstance(row, dict) and "hybrid" in row:
            hybrid = row["hybrid"]["p50_ms"]
            row["ratios_p50"] = {f"hybrid/{v}": round(hybrid / row[v]["p50_ms"], 2) for v in variants if v != "hybrid"}
    return out


def real_encode(seeds: Path, sets: dict[str, list[str]], repeats: int) -> dict[str, Any]:
    """The default model's query encode time on the same queries, opened from a seed index as queries open it."""
    from semsearch import Index

    if not (seeds / "CURRENT").is_file():
        log(f"building the seed index {seeds} with the default model ...")
        run_index([str(REPO / "seeds")], seeds)
    with Index.open(seeds) as idx:
        out: dict[str, Any] = {"model": idx.manifest.model.name, "backend": idx.manifest.model.backend}
        out["precision"] = idx.manifest.model.precision
        for q in [q for qs in sets.values() for q in qs][:20]:  # warm-up: the session, its first allocations
            idx.encode_query(q)
        pooled: list[float] = []
        for style, queries in sets.items():
            times = timed(idx.encode_query, queries, repeats)
            pooled += times
            out[style] = figures(times)
            log(f"  real encode {style}: {out[style]}")
        out["all"] = figures(pooled)
    return out


def cold(argv: Sequence[str], runs: int) -> dict[str, Any]:
    """Median wall seconds of a new process running ``argv`` (its output discarded), ``runs`` times."""
    walls = []
    for _ in range(runs):
        t = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        walls.append(time.perf_counter() - t)
        if proc.returncode != 0:
            sys.exit(f"{' '.join(argv[:3])} ... failed: {proc.stderr.strip()[-500:]}")
    return {"median_s": round(statistics.median(walls), 3), "runs_s": [round(w, 3) for w in walls]}


def cold_queries(index: Path, seeds: Path, runs: int) -> dict[str, Any]:
    """Cold `semsearch query` processes: the stand-in index (hybrid, lexical) and the seed index (real model)."""
    query = "variance reducton for stochastic gradient"
    standin = [sys.executable, "-c", COLD_STANDIN, str(REPO / "scripts"), "query", query, "--index", str(index)]
    real = [sys.executable, "-m", "semsearch", "query", query, "--index"]
    out: dict[str, Any] = {
        "query": query,
        "standin_index_hybrid": cold(standin, runs),
        "standin_index_lexical": cold([*standin, "--mode", "lexical"], runs),
        "seeds_real_model_hybrid": cold([*real, str(seeds)], runs),
        "seeds_real_model_lexical": cold([*real, str(seeds), "--mode", "lexical"], runs),
    }
    model = out["seeds_real_model_hybrid"]["median_s"] - out["seeds_real_model_lexical"]["median_s"]
    out["estimate_real_model_hybrid_s"] = {
        "value": round(out["standin_index_hybrid"]["median_s"] + model, 3),
        "how": "stand-in index hybrid cold + (seed index real-model hybrid cold - its lexical cold: model load+encode)",
    }
    for name, row in out.items():
        if isinstance(row, dict) and "median_s" in row:
            log(f"  cold {name}: {row}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, default=Path("/tmp/latency-157k"), help="stand-in index (built once)")
    parser.add_argument("--docs", type=int, help="build from the corpus's first N papers, not all 156,985")
    parser.add_argument("--seeds-index", type=Path, default=Path("/tmp/latency-seeds"), help="real-model index")
    parser.add_argument("--corpus", type=Path, default=DATA / "corpus.jsonl.gz")
    parser.add_argument("--per-style", type=int, default=40, help="generated queries per style, besides the dev set's")
    parser.add_argument("--repeats", type=int, default=3, help="rounds over each query set")
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument(
        "--real-nprobe",
        type=int,
        default=64,
        help="the IVF nprobe real vectors tune to at 157k (docs/explanation/scale.md)",
    )
    args = parser.parse_args()
    if not args.corpus.is_file():
        sys.exit(f"needs {args.corpus} (the ML Anthology corpus, under ../shared); it is absent here")
    from semsearch import Index

    started = time.perf_counter()
    out: dict[str, Any] = {"benchmark": "typed_latency", "cpus": os.cpu_count(), "k": 10}
    out["index"] = {"path": str(args.index), **ensure_index(args.index, args.corpus, args.docs)}
    out["vectors"] = "stand-in (hashed bag of words, 384-d) for documents and in the search timings"
    with Index.open(args.index, embedder=HashedWords()) as idx:
        sets = query_sets(idx, args.per_style)
        out["index"]["documents"] = len(idx)
        out["index"]["corpus_papers_used"] = args.docs or "all"
    log("warm searches on the stand-in index:")
    out["search"] = warm_search(args.index, sets, args.repeats, args.real_nprobe)
    log("the real model's query encoding:")
    out["real_encode"] = real_encode(args.seeds_index, sets, args.repeats)
    out["estimate_real_hybrid_p50_ms"] = {
        style: {
            "standin_search_p50_ms": out["search"][style]["hybrid"]["p50_ms"],
            "real_encode_p50_ms": out["real_encode"][style]["p50_ms"],
            "sum": round(out["search"][style]["hybrid"]["p50_ms"] + out["real_encode"][style]["p50_ms"], 2),
            "standin_search_real_nprobe_p50_ms": out["search"][style]["hybrid_real_nprobe"]["p50_ms"],
            "sum_real_nprobe": round(
                out["search"][style]["hybrid_real_nprobe"]["p50_ms"] + out["real_encode"][style]["p50_ms"], 2
            ),
        }
        for style in (*STYLES, "all")
    }
    log("cold `semsearch query` processes:")
    out["cold"] = cold_queries(args.index, args.seeds_index, args.cold_runs)
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["samples"] = {s: qs[:3] for s, qs in sets.items()}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
