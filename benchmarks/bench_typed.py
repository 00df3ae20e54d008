"""Answers for what researchers actually type (issue #36): known-item queries in five styles, scored per mode.

The dev set (``benchmarks/data/typed_dev.jsonl``, written by hand from each target's abstract) holds queries in five
styles: ``plain`` (everyday words, none of the paper's jargon or title words), ``jargon`` (expert terms from the
abstract), ``typo`` (a jargon query with 2-3 slips; ``spelled`` holds it spelled right), ``author`` (a bare name as
people type it; targets: all that person's papers) and ``acronym`` (an acronym alone; targets: the paper(s) that
define it). Every target lies outside the NeurIPS 2025 list. Tune on this set only: the maintainers score the
landed code on a held-out set of other papers in the same styles.

The benchmark searches a slice of about 5,000 papers of the ML Anthology minus NeurIPS 2025: every target, every
paper of each queried author, and distractors drawn with a fixed seed (made once from
``../shared/data/mlanthology``, written outside the repository). It builds (or refreshes, or reuses) an index of
the slice with the default model and reading, runs each query with k=10 in each mode (``default`` is
``Index.search`` with no mode argument), and prints one JSON line: MRR@10 and recall@10 (the share of a query's
targets in its top 10, averaged over queries) per style and mode, the typo queries spelled right
(``typo_spelled``), and n per style. Progress goes to stderr; ``--per-query`` adds each query's rank of its first
target there.

    python -m benchmarks.bench_typed                                  # slice and index under /tmp, reused
    python -m benchmarks.bench_typed --index /tmp/typed-dev-index --per-query 2> ranks.txt
"""

from __future__ import annotations

import gzip
import hashlib
import heapq
import json
import os
import re
import sys
import time
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import BENCH_DATA, MLANTHOLOGY, arguments, emit

ANTHOLOGY = MLANTHOLOGY
DEV = BENCH_DATA / "typed_dev.jsonl"
SLICE = Path("/tmp/typed-slice.jsonl")
INDEX = Path("/tmp/typed-dev-index")
STYLES = ("plain", "jargon", "typo", "author", "acronym")
MODES = ("default", "hybrid", "dense", "lexical")
K = 10
SLICE_SIZE = 5000
SEED = 36


def fold(text: str) -> str:
    """Lower case without diacritics: "Léo Wäldchen" -> "leo waldchen"."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def name_tokens(name: str) -> list[str]:
    """The folded words of a person's name, punctuation dropped: "Gautheron, Léo" -> ["gautheron", "leo"]."""
    return re.findall(r"[a-z0-9]+", fold(name))


def name_matches(query: str, author: str) -> bool:
    """Whether a typed name can mean this author: each typed word is one of the name's words, in any order,
    a one-letter word standing for an initial ("P. Follmann", "Liu Kendong", "Nozick")."""
    wanted = name_tokens(query)
    have = name_tokens(author)
    if not wanted:
        return False
    for word in wanted:
        match = next((w for w in have if w == word or (len(word) == 1 and w.startswith(word))), None)
        if match is None:
            return False
        have.remove(match)
    return True


def by_author(query: str, names: Sequence[str], folded: str | None = None) -> bool:
    """Whether one of a paper's authors matches a typed name (a substring test first: most papers are not).

    ``folded`` is ``fold(" ".join(names))`` when the caller has it (one fold per paper for many queries).
    """
    folded = fold(" ".join(names)) if folded is None else folded
    if not all(word in folded for word in name_tokens(query)):
        return False
    return any(name_matches(query, name) for name in names)


def read_dev(path: Path) -> list[dict[str, Any]]:
    """The dev set's queries, checked: id, a known style, a query, a non-empty list of target ids."""
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: malformed JSON ({exc})") from None
        targets = row.get("targets") if isinstance(row, dict) else None
        if (
            not isinstance(row, dict)
            or row.get("style") not in STYLES
            or not isinstance(row.get("id"), str)
            or not isinstance(row.get("query"), str)
            or not row["query"].strip()
            or not isinstance(targets, list)
            or not targets
            or not all(isinstance(t, str) for t in targets)
        ):
            raise ValueError(f"{path}:{number}: want id, style ({'/'.join(STYLES)}), query and a list of targets")
        if row["id"] in seen:
            raise ValueError(f"{path}:{number}: id {row['id']!r} twice")
        if row["style"] == "typo" and not isinstance(row.get("spelled"), str):
            raise ValueError(f"{path}:{number}: a typo query needs its 'spelled' form")
        seen.add(row["id"])
        rows.append(row)
    return rows


def _records(corpus: Path, excluded: Path) -> Iterator[tuple[str, dict[str, Any], str]]:
    """(id, record, its line) of each corpus paper not in the excluded list."""
    with gzip.open(excluded, "rt", encoding="utf-8") as fh:
        skip = {json.loads(line)["_id"] for line in fh if line.strip()}
    with gzip.open(corpus, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                record = json.loads(line)
                if record["_id"] not in skip:
                    yield record["_id"], record, line.rstrip("\n")


def _draw(seed: int, doc_id: str) -> str:
    # A per-id hash: the distractors a slice keeps do not move when a target is added or dropped.
    return hashlib.sha256(f"{seed}:{doc_id}".encode()).hexdigest()


def make_slice(
    dev: Sequence[dict[str, Any]],
    out: Path,
    *,
    anthology: Path = ANTHOLOGY,
    size: int = SLICE_SIZE,
    seed: int = SEED,
) -> int:
    """Write (atomically) the slice: every target, every paper of each queried author, then distractors; its size."""
    targets = {t for row in dev for t in row["targets"]}
    authors = [row["query"] for row in dev if row["style"] == "author"]
    kept: dict[str, str] = {}

    def others() -> Iterator[tuple[str, str]]:
        """(draw, line) of each paper that is no target nor by a queried author; those go to ``kept``."""
        for doc_id, record, line in _records(anthology / "corpus.jsonl.gz", anthology / "neurips2025.jsonl.gz"):
            names = (record.get("metadata") or {}).get("authors") or []
            folded = fold(" ".join(names))
            if doc_id in targets or any(by_author(q, names, folded) for q in authors):
                kept[doc_id] = line
            else:
                yield _draw(seed, doc_id), line

    drawn = heapq.nsmallest(size, others())  # keeps only `size` lines in memory while reading the corpus
    missing = targets - kept.keys()
    if missing:
        raise ValueError(f"targets not in the corpus minus NeurIPS 2025: {', '.join(sorted(missing)[:5])}")
    lines = [kept[d] for d in sorted(kept)] + [line for _, line in drawn[: max(size - len(kept), 0)]]
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, out)
    return len(lines)


def slice_ids(path: Path) -> set[str]:
    """The paper ids a slice file holds."""
    with path.open(encoding="utf-8") as fh:
        return {json.loads(line)["_id"] for line in fh if line.strip()}


def score(hits: Sequence[Iterable[str]], targets: Iterable[str], k: int = K) -> tuple[float, float]:
    """(reciprocal rank, recall) at k of one ranking: each hit given by the source ids it stands for.

    A hit can stand for several ids (exact duplicates are merged into one document), so both are counted by hit:
    the rank is that of the first hit holding a target, recall the share of targets some top-k hit holds.
    """
    wanted = set(targets)
    found: set[str] = set()
    rr = 0.0
    for rank, ids in enumerate(hits[:k], 1):
        held = wanted.intersection(ids)
        if held and not found:
            rr = 1.0 / rank
        found |= held
    return rr, (len(found) / len(wanted) if wanted else 0.0)


def first_rank(hits: Sequence[Iterable[str]], targets: Iterable[str]) -> int | None:
    """The 1-based rank of the first hit holding a target, or None."""
    wanted = set(targets)
    return next((rank for rank, ids in enumerate(hits, 1) if wanted.intersection(ids)), None)


def summarize(scores: dict[str, dict[str, list[tuple[float, float]]]]) -> dict[str, dict[str, dict[str, float]]]:
    """Mean MRR@10 and recall@10 of each style and mode, from each query's (reciprocal rank, recall)."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for style, modes in scores.items():
        out[style] = {}
        for mode, pairs in modes.items():
            n = len(pairs)
            out[style][mode] = {
                "mrr@10": round(sum(p[0] for p in pairs) / n, 4) if n else 0.0,
                "recall@10": round(sum(p[1] for p in pairs) / n, 4) if n else 0.0,
            }
    return out


def run_queries(
    index_dir: Path, dev: Sequence[dict[str, Any]], modes: Sequence[str], per_query: bool
) -> dict[str, Any]:
    """Every query (and each typo query spelled right) in each mode: the summary, and whether default is hybrid."""
    from semsearch import Index

    scores: dict[str, dict[str, list[tuple[float, float]]]] = {}
    same_as_hybrid = True
    with Index.open(index_dir) as index:
        for row in dev:
            asked = [(row["style"], row["query"])]
            if row["style"] == "typo":
                asked.append(("typo_spelled", row["spelled"]))
            for style, text in asked:
                ranked: dict[str, list[list[str]]] = {}
                for mode in modes:
                    hits = index.search(text, k=K) if mode == "default" else index.search(text, k=K, mode=mode)
                    ranked[mode] = [h.external_ids or [h.id] for h in hits]
                    scores.setdefault(style, {}).setdefault(mode, []).append(score(ranked[mode], row["targets"]))
                    if per_query:
                        rank = first_rank(ranked[mode], row["targets"])
                        print(f"{row['id']}\t{style}\t{mode}\t{rank or '-'}\t{text}", file=sys.stderr)
                if "default" in ranked and "hybrid" in ranked and ranked["default"] != ranked["hybrid"]:
                    same_as_hybrid = False
    return {"results": summarize(scores), "default_equals_hybrid": same_as_hybrid if "default" in modes else None}


def main(argv: Sequence[str] | None = None) -> None:
    parser = arguments(__doc__)
    parser.add_argument("--dev", type=Path, default=DEV, help="the dev set (JSON Lines)")
    parser.add_argument("--slice", type=Path, default=SLICE, help="the slice file; made from the corpus when missing")
    parser.add_argument("--index", type=Path, default=INDEX, help="the index folder; built or refreshed from the slice")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)}")
    parser.add_argument("--per-query", action="store_true", help="each query's rank of its first target, on stderr")
    parser.add_argument("--no-build", action="store_true", help="search the index as it is (no refresh from the slice)")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown or not modes:
        sys.exit(f"bench_typed: unknown mode {', '.join(unknown) or '(none)'} (choose from {', '.join(MODES)})")
    try:
        dev = read_dev(args.dev)
    except (OSError, ValueError) as exc:
        sys.exit(f"bench_typed: {exc}")
    started = time.perf_counter()
    targets = {t for row in dev for t in row["targets"]}
    if not args.slice.is_file() or not targets <= slice_ids(args.slice):
        if not (ANTHOLOGY / "corpus.jsonl.gz").is_file():
            sys.exit(f"bench_typed: {ANTHOLOGY} is missing: making the slice needs ../shared/data/mlanthology")
        print(f"bench_typed: writing the slice {args.slice}", file=sys.stderr)
        try:
            make_slice(dev, args.slice)
        except (OSError, ValueError) as exc:
            sys.exit(f"bench_typed: {exc}")
    if not args.no_build:
        from semsearch import BuildOptions, build_index

        summary = build_index([str(args.slice)], args.index, BuildOptions(progress=True))
        print(f"bench_typed: index {args.index}: {summary}", file=sys.stderr)
    measured = run_queries(args.index, dev, modes, args.per_query)
    counts = {style: sum(1 for row in dev if row["style"] == style) for style in STYLES}
    out = {
        "data": "typed-dev",
        "dev": str(args.dev),
        "slice": str(args.slice),
        "slice_docs": len(slice_ids(args.slice)),
        "index": str(args.index),
        "k": K,
        "n": counts,
        **measured,
        "seconds": round(time.perf_counter() - started, 1),
    }
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
