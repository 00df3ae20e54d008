#!/usr/bin/env python
"""BM25 query time of one index's precomputed weights against the same corpus as base + a small segment.

Rebuilds an index version's lexical folder with the Lucene builder (for tf.npy / lengths.npy) under --work,
then writes an extra segment that re-adds --updated base documents with the same text (hidden in the base).
The live corpus is then the base's own, so the segmented scores must equal the ordinary index's bit for bit;
the script checks that, then times ``top(query, depth)`` on both for titles' first four words. Prints JSON.

    python scripts/bench_lexical_segments.py --version /tmp/b157/idx/v-000002-20261201T104604 --work /tmp/lexseg
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing

from semsearch.store.documents import DocumentStore  # noqa: E402
from semsearch.store.layout import DOCS  # noqa: E402
from semsearch.store.lexical import LexicalIndex  # noqa: E402
from semsearch.store.lexical_build import write_lexical  # noqa: E402
from semsearch.store.lexical_segments import load_segments  # noqa: E402
from semsearch.store.segments import Segment  # noqa: E402


def p50_ms(index: object, queries: list[str], depth: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        for q in queries:
            start = time.perf_counter()
            index.top(q, depth)  # type: ignore[attr-defined]
            times.append(time.perf_counter() - start)
    return float(np.median(times) * 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", type=Path, required=True, help="an index version folder (read only)")
    parser.add_argument("--work", type=Path, required=True, help="where the rebuilt lexical folders go")
    parser.add_argument("--updated", type=int, default=500, help="base documents re-added in the extra segment")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depth", type=int, default=1000, help="hybrid's lexical depth")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    ids = LexicalIndex.load(args.version / "lexical").ids
    store = DocumentStore(args.version / DOCS)
    docs = {}
    for start in range(0, len(ids), 20000):
        docs.update(store.get_many(ids[start : start + 20000].tolist()))
    base = args.work / "base"
    if not (base / "lexical" / "tf.npy").is_file():
        base.mkdir(parents=True, exist_ok=True)
        write_lexical(base / "lexical", ids, [docs[int(d)] for d in ids])
    rng = random.Random(0)
    updated = np.array(sorted(rng.sample(ids.tolist(), args.updated)), dtype=np.int64)
    extra = args.work / "seg-000001"
    extra.mkdir(parents=True, exist_ok=True)
    write_lexical(extra / "lexical", updated, [docs[int(d)] for d in updated])

    start = time.perf_counter()
    plain = LexicalIndex.load(base / "lexical")
    plain_load_ms = (time.perf_counter() - start) * 1000
    start = time.perf_counter()
    segmented = load_segments(
        [Segment(base, "", len(ids), updated), Segment(extra, "seg-000001", len(updated), np.zeros(0, np.int64))]
    )
    load_ms = (time.perf_counter() - start) * 1000
    titles = [docs[int(d)].title for d in rng.sample(ids.tolist(), args.queries * 3)]
    queries = [" ".join(t.split()[:4]) for t in titles if t and len(t.split()) >= 2][: args.queries]

    same = True
    for q in queries:
        a, b = plain.scores(q)[0], segmented.scores(q)[0]
        same &= bool(np.array_equal(a, b[segmented.rows_of(plain.ids)]))
        ra, sa = plain.top(q, args.depth)
        rb, sb = segmented.top(q, args.depth)
        same &= bool(np.array_equal(plain.ids[ra], segmented.ids[rb]) and np.array_equal(sa, sb))
    # Each query's first run on a freshly opened index (its terms' document frequencies not yet counted)...
    fresh = load_segments(
        [Segment(base, "", len(ids), updated), Segment(extra, "seg-000001", len(updated), np.zeros(0, np.int64))]
    )
    first_ms = p50_ms(fresh, queries, args.depth, 1)
    for index in (plain, segmented):  # ...then repeated runs, page cache and per-term caches warm alike
        p50_ms(index, queries, args.depth, 1)
    out = {
        "documents": len(ids),
        "extra_segment": len(updated),
        "hidden_in_base": len(updated),
        "queries": len(queries),
        "depth": args.depth,
        "bitwise_equal": same,
        "plain_load_ms": round(plain_load_ms, 1),
        "segmented_load_ms": round(load_ms, 1),
        "plain_p50_ms": round(p50_ms(plain, queries, args.depth, args.repeat), 3),
        "segmented_p50_ms": round(p50_ms(segmented, queries, args.depth, args.repeat), 3),
        "segmented_first_run_p50_ms": round(first_ms, 3),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
