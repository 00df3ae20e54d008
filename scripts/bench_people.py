"""Benchmark name queries: what the people look-up costs a search, and whether a bare name finds its papers.

One process, one opened index. Names are drawn from the index's own people table (names of two or more whole
parts, with 1-4 papers); ordinary queries are the opening words of documents' titles. Each query is searched
with the look-up and, as the baseline in the same run, with the look-up answering nothing; best of --repeats
passes. Also the look-up alone per query, and recall@10 of bare names (the share of each name's papers in its
top 10). Prints one JSON line.

    python scripts/bench_people.py --index indexes/default [--names 50] [--mode hybrid]
    python scripts/bench_people.py --synthetic 20000   # builds a throwaway index (tests' fake encoder)
    python scripts/bench_people.py --corpus ../shared/data/mlanthology/corpus.jsonl.gz   # the look-up alone

``--corpus`` writes only the people table of a JSONL corpus (the ML Anthology's 157k papers: no encoding), and
times the look-up at that scale: p50/p95 for held-out bare names, hard names ("Wei Wang", "Y. Li") and ordinary
queries (titles' opening words), the table's bytes and write time, and recall@10 of the names' papers when the
named block is ordered as a search orders it (newest first).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.query.search import Index  # noqa: E402

GIVEN = ["Wei", "Emma", "Zhouchen", "Maria", "José", "Anna", "Jun", "Li", "Noam", "Łukasz", "Yuki", "Omar"]
FAMILY = ["Wang", "Lin", "Rossi", "Müller", "Kaiser", "Berg", "Chen", "Zhang", "Smith", "Álvarez", "Long", "Hall"]


def synthetic(count: int, folder: Path) -> Path:
    """A throwaway index of ``count`` papers with random authors, built with the tests' fake encoder."""
    sys.path.insert(0, str(REPO / "tests"))
    from conftest import FakeEmbedder

    from semsearch.write.build import BuildOptions, build_index

    rng = random.Random(7)
    words = [f"w{i}" for i in range(3000)]
    rows = []
    for i in range(count):
        authors = [f"{rng.choice(GIVEN)}{rng.randrange(count // 8)} {rng.choice(FAMILY)}" for _ in range(4)]
        rows.append(
            {
                "title": " ".join(rng.sample(words, 6)),
                "abstract": " ".join(rng.choices(words, k=60)),
                "authors": authors,
                "year": 2015 + i % 11,
            }
        )
    src = folder / "papers.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    build_index([str(src)], folder / "index", BuildOptions(progress=False), embedder=FakeEmbedder())
    return folder / "index"


def timed(index: Index, queries: list[str], mode: str, repeats: int) -> float:
    """Best milliseconds per search over ``repeats`` passes."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for q in queries:
            index.search(q, 10, mode=mode, explain=False)
        best = min(best, (time.perf_counter() - start) / len(queries))
    return round(1000 * best, 3)


def corpus_lookups(path: Path, count: int) -> dict[str, Any]:
    """The people table of a JSONL(.gz) corpus, and what looking names up in it costs."""
    import gzip
    import sqlite3
    import statistics
    from types import SimpleNamespace

    from semsearch.core.paperinfo import year_of
    from semsearch.store.people import find_people, write_people

    opener = gzip.open if path.suffix == ".gz" else open
    docs, years, titles = [], {}, []
    with opener(path, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            row = json.loads(line)
            meta = row.get("metadata") or {k: v for k, v in row.items() if k not in ("text", "abstract")}
            docs.append(SimpleNamespace(id=f"{i + 1:016x}", metadata=meta))
            years[i + 1] = int(year_of(meta) or 0)
            titles.append(" ".join(str(row.get("title") or "").split()[:5]))
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "people.sqlite"
        conn = sqlite3.connect(db)
        start = time.perf_counter()
        write_people(conn, docs)  # type: ignore[arg-type]  # only .id and .metadata are read
        conn.commit()
        write_s = time.perf_counter() - start
        size = db.stat().st_size

        def rows(sql: str, params: Any) -> list[tuple[Any, ...]]:
            return conn.execute(sql, params).fetchall()

        counts = rows("SELECT name, count(DISTINCT num) FROM people GROUP BY name", ())
        rng = random.Random(1)
        held = rng.sample([n for n, c in counts if 1 <= c <= 4 and len(str(n).split()) >= 2], count)
        hard = ["Wei Wang", "Y. Li", "Z. Lin", "Zhouchen Lin", "Lin Zhouchen", "Lin, Zhouchen", "Jun Zhu"]
        plain = rng.sample([t for t in titles if t], count)

        def timing(queries: list[str]) -> dict[str, float]:
            ms = []
            for q in queries:
                best = float("inf")
                for _ in range(3):
                    start = time.perf_counter()
                    find_people(rows, q)
                    best = min(best, time.perf_counter() - start)
                ms.append(1000 * best)
            ms.sort()
            return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3)}

        recall = []
        for name in held:
            found = find_people(rows, name)
            mine = set(found.get(name, []))
            block = sorted({n for ns in found.values() for n in ns}, key=lambda n: (-years[n], n))[:10]
            recall.append(len(mine & set(block)) / min(len(mine), 10) if mine else 0.0)
        out = {
            "documents": len(docs),
            "people_rows": int(rows("SELECT count(*) FROM people", ())[0][0]),
            "distinct_names": len(counts),
            "table_bytes": size,
            "write_s": round(write_s, 2),
            "held_out_names": len(held),
            "recall@10_names": round(sum(recall) / len(recall), 4),
            "names": timing(held),
            "hard_names": timing(hard),
            "plain_queries": timing(plain),
        }
        conn.close()
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, default=REPO / "indexes" / "default")
    ap.add_argument("--synthetic", type=int, default=0, help="build a throwaway index of this many papers")
    ap.add_argument("--corpus", type=Path, help="time the look-up alone over this JSONL(.gz) corpus's authors")
    ap.add_argument("--names", type=int, default=50)
    ap.add_argument("--mode", default="hybrid")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.corpus is not None:
        print(json.dumps(corpus_lookups(args.corpus, args.names)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = synthetic(args.synthetic, Path(tmp)) if args.synthetic else args.index
        embedder = None
        if args.synthetic:
            from conftest import FakeEmbedder

            embedder = FakeEmbedder()
        with Index.open(path, embedder=embedder) as index:
            print(json.dumps(run(index, args)))


def run(index: Index, args: argparse.Namespace) -> dict[str, Any]:
    rows = index.store.rows("SELECT name, count(DISTINCT num) FROM people GROUP BY name HAVING count(*) <= 8")
    rng = random.Random(1)
    names = [n for n, c in rows if 1 <= c <= 4 and len(str(n).split()) >= 2]
    names = rng.sample(names, min(args.names, len(names)))
    docs = [d for _, d in zip(range(args.names), index.store.iter_documents(), strict=False)]
    plain = [" ".join((d.title or d.text).split()[:5]) for d in docs]
    for q in (names + plain)[:10]:
        index.search(q, 10, mode=args.mode)  # warm: memory maps, SQLite pages, the encoder
    recall = []
    for name in names:
        mine = {str(d) for d in index.store.people(name).get(name, [])}
        top = {str(int(h.id, 16)) for h in index.search(name, 10, mode=args.mode, explain=False)}
        recall.append(len(mine & top) / min(len(mine), 10) if mine else 0.0)
    start = time.perf_counter()
    for q in names + plain:
        index.store.people(q)
    lookup_ms = 1000 * (time.perf_counter() - start) / len(names + plain)
    out: dict[str, Any] = {"documents": len(index), "mode": args.mode, "names": len(names), "plain": len(plain)}
    out["recall@10_names"] = round(sum(recall) / len(recall), 4) if recall else None
    out["lookup_ms"] = round(lookup_ms, 3)
    with_ = {"names_ms": timed(index, names, args.mode, args.repeats), "plain_ms": timed(index, plain, args.mode, 3)}
    people = index.store.people
    index.store.people = lambda text: {}  # type: ignore[method-assign]  # the baseline: no look-up
    try:
        without = {
            "names_ms": timed(index, names, args.mode, args.repeats),
            "plain_ms": timed(index, plain, args.mode, 3),
        }
    finally:
        index.store.people = people  # type: ignore[method-assign]
    out["with_lookup"], out["without_lookup"] = with_, without
    return out


if __name__ == "__main__":
    main()
