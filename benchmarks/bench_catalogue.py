"""Time the catalogue join (semsearch.write.catalogue) and print one JSON line of figures.

Two cases, each run --repeat times (the minimum is reported, with the median):
  seeds     the 91 seed documents against the NeurIPS 2025 list (5,823 records) as catalogue
  neurips   the NeurIPS 2025 list as sources AND as catalogue (5,823 documents, each matching itself)
For each: reading the catalogue file (ingest), the join itself (exact hashes, then MinHash LSH for the rest),
and what was catalogued. Reading and deduplicating the sources is not part of the join and is not timed.

    python -m benchmarks.bench_catalogue [--catalogue ../shared/data/mlanthology/neurips2025.jsonl.gz]
"""

from __future__ import annotations

import copy
import statistics
import sys
import time
from pathlib import Path

from benchmarks.harness import NEURIPS, SEEDS, arguments, emit
from semsearch.dedup.duplicates import deduplicate
from semsearch.ingest.sources import read_sources
from semsearch.write.catalogue import join_catalogue, read_catalogue, take_metadata

DEFAULT_CATALOGUE = NEURIPS


def case(sources: list[str], catalogue: str, repeat: int) -> dict[str, object]:
    documents = deduplicate(read_sources(sources).records).documents
    reads, joins = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        records, _files, _skipped = read_catalogue([catalogue])
        reads.append(time.perf_counter() - start)
        docs = copy.deepcopy(documents)
        start = time.perf_counter()
        matches, ties = join_catalogue(docs, records)
        for i, (j, match) in matches.items():
            take_metadata(docs[i], records[j], match)
        joins.append(time.perf_counter() - start)
    kinds = [m.kind for _, m in matches.values()]
    return {
        "documents": len(documents),
        "records": len(records),
        "catalogued": len(matches),
        "exact": kinds.count("exact"),
        "near": kinds.count("near"),
        "ties": len(ties),
        "titled": sum(1 for d in docs if d.title),
        "read_catalogue_s": round(min(reads), 3),
        "join_s": round(min(joins), 3),
        "join_median_s": round(statistics.median(joins), 3),
    }


def main() -> int:
    parser = arguments(__doc__)
    parser.add_argument("--catalogue", default=str(DEFAULT_CATALOGUE))
    parser.add_argument("--seeds", default=str(SEEDS))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not Path(args.catalogue).exists():
        print(f"bench_catalogue: {args.catalogue} not found", file=sys.stderr)
        return 2
    figures = {
        "seeds": case([args.seeds], args.catalogue, args.repeat),
        "neurips": case([args.catalogue], args.catalogue, args.repeat),
        "repeat": args.repeat,
    }
    emit(figures, out=args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
