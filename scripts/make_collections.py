"""Two BEIR-format test collections from a slice of the ML Anthology, one where each side of hybrid search is weak.

Both share one slice of documents (the first ``--docs`` NeurIPS 2025 abstracts with a title), so only the
queried documents differ between them and the embedding cache re-encodes little. Queries are made from
``--queries`` documents drawn with a fixed seed; each query's one relevant document is the one it was made
from; queries whose id hashes even are ``train``, odd ``test`` (qrels/train.tsv, qrels/test.tsv).

- ``mismatch`` (lexical weak): the query is the paper's title; no document carries its title, and the
  queried document's abstract has every word removed whose stem is one of the title's distinctive ones (the
  lexical analyzer's own stems, found in at most ``RARE_DF`` of the slice's abstracts), so BM25 can match it
  only through the title's common words, which other papers share, while the dense side still reads the rest
  of the abstract's meaning. (Removing every title stem, ``--strip all``, leaves both sides near 0.)
- ``typos`` (lexical weak): the query is the paper's title typed with a slip in every word of four letters or
  more (its second and third letters swapped: "Forecasting" -> "Froecasting"); documents are the abstracts
  unchanged, as in ``identifiers``. BM25 matches only the title's short words and the stems a slip leaves
  alone; the encoder's subwords still carry much of a misspelt word.
- ``identifiers`` (dense weak): the query is the two or three rarest words of the abstract (lowest document
  frequency in the slice, at most ``MAX_DF``), preferring identifier-like ones (acronyms, names with digits);
  documents are the abstracts unchanged (no titles either, so most vectors are shared with ``mismatch``).
  BM25 finds exact rare words; MiniLM sees a bag of rare tokens.

    python scripts/make_collections.py --out /tmp/fu2  # /tmp/fu2/mismatch, /tmp/fu2/typos, /tmp/fu2/identifiers
    python scripts/make_collections.py --out /tmp/fu3 --strip all  # /tmp/fu3/mismatch: the table's mismatch-all

Then ``semsearch eval /tmp/fu2/typos --split train --index /tmp/fu2/typos-idx --json`` builds and scores each.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

from semsearch.store.analyzer import TOKEN_PATTERN, Analyzer

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO.parent / "shared" / "data" / "mlanthology" / "neurips2025.jsonl.gz"
MAX_DF = 5  # a query word appears in at most this many documents of the slice
RARE_DF = 50  # mismatch: a title stem in at most this many abstracts (1% of 5,000) is removed from its paper
IDENTIFIER = re.compile(r"[A-Za-z]*[A-Z0-9][A-Za-z0-9-]*[A-Z0-9][A-Za-z0-9-]*")  # LoRA, GPT-4, ResNet50


def read_slice(path: Path, n: int) -> list[dict[str, Any]]:
    """The first n entries with a title and an abstract."""
    rows: list[dict[str, Any]] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            if (row.get("title") or "").strip() and (row.get("text") or "").strip():
                rows.append({"_id": row["_id"], "title": row["title"].strip(), "text": row["text"].strip()})
                if len(rows) == n:
                    break
    return rows


def split_of(qid: str) -> str:
    """train or test, from the query id's hash (stable across runs and machines)."""
    return "train" if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0 else "test"


def without_stems(text: str, stems: set[str], analyzer: Analyzer) -> str:
    """The text with every word whose stem is in ``stems`` removed (spacing tidied)."""
    out, last = [], 0
    for match in TOKEN_PATTERN.finditer(text):
        if analyzer.stem(match.group()) in stems:
            out.append(text[last : match.start()])
            last = match.end()
    out.append(text[last:])
    return re.sub(r"\s{2,}", " ", "".join(out)).strip()


def mismatch(
    rows: list[dict[str, Any]], picked: list[int], analyzer: Analyzer, rare_df: int | None
) -> tuple[list[dict], dict[str, str]]:
    """(corpus, queries) of the lexical-weak collection; ``rare_df`` None strips every title stem."""
    df = Counter(s for r in rows for s in set(analyzer(r["text"])))
    queries = {}
    corpus = [{"_id": r["_id"], "title": "", "text": r["text"]} for r in rows]
    for i in picked:
        stems = {s for s in analyzer(rows[i]["title"]) if rare_df is None or df[s] <= rare_df}
        stripped = without_stems(rows[i]["text"], stems, analyzer)
        if not stems or len(stripped.split()) < 20:
            continue
        corpus[i]["text"] = stripped
        queries[f"m{i}"] = rows[i]["title"]
    return corpus, queries


def typo(word: str) -> str:
    """A word typed with its second and third letters swapped (words under four letters, or with a digit, kept)."""
    if len(word) < 4 or not word.isalpha() or word[1] == word[2]:
        return word
    return word[0] + word[2] + word[1] + word[3:]


def typos(rows: list[dict[str, Any]], picked: list[int]) -> tuple[list[dict], dict[str, str]]:
    """(corpus, queries) of the second lexical-weak collection."""
    corpus = [{"_id": r["_id"], "title": "", "text": r["text"]} for r in rows]
    queries = {f"t{i}": re.sub(r"[A-Za-z]+", lambda m: typo(m.group()), rows[i]["title"]) for i in picked}
    return corpus, queries


def identifiers(rows: list[dict[str, Any]], picked: list[int]) -> tuple[list[dict], dict[str, str]]:
    """(corpus, queries) of the dense-weak collection."""
    words = [set(TOKEN_PATTERN.findall(r["text"].lower())) for r in rows]
    df = Counter(w for ws in words for w in ws)
    queries = {}
    for i in picked:
        seen: dict[str, str] = {}
        for word in TOKEN_PATTERN.findall(rows[i]["text"]):
            low = word.lower()
            if len(low) >= 3 and not low.isdigit() and df[low] <= MAX_DF:
                seen.setdefault(low, word)
        # Identifier-like first (acronyms, names with digits), then the rarest; ties by first appearance.
        ranked = sorted(seen.values(), key=lambda w: (not IDENTIFIER.fullmatch(w), df[w.lower()]))
        if len(ranked) >= 2:
            queries[f"x{i}"] = " ".join(ranked[:3])
    corpus = [{"_id": r["_id"], "title": "", "text": r["text"]} for r in rows]
    return corpus, queries


def write(folder: Path, corpus: list[dict], queries: dict[str, str], rows: list[dict[str, Any]]) -> dict[str, int]:
    """Write corpus.jsonl, queries.jsonl and qrels/{train,test}.tsv; returns the query count per split."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for entry in corpus:
            fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as fh:
        for qid, text in queries.items():
            fh.write(json.dumps({"_id": qid, "text": text}, ensure_ascii=False) + "\n")
    counts = {"train": 0, "test": 0}
    for split in counts:
        with (folder / "qrels" / f"{split}.tsv").open("w", encoding="utf-8") as fh:
            fh.write("query-id\tcorpus-id\tscore\n")
            for qid in queries:
                if split_of(qid) == split:
                    fh.write(f"{qid}\t{rows[int(qid[1:])]['_id']}\t1\n")
                    counts[split] += 1
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--source", type=Path, default=SOURCE)
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--queries", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strip", choices=["rare", "all"], default="rare", help="mismatch: which title stems go")
    args = parser.parse_args()
    rows = read_slice(args.source, args.docs)
    picked = sorted(random.Random(args.seed).sample(range(len(rows)), min(args.queries, len(rows))))
    analyzer = Analyzer()
    report = {}
    for name, (corpus, queries) in (
        ("mismatch", mismatch(rows, picked, analyzer, RARE_DF if args.strip == "rare" else None)),
        ("typos", typos(rows, picked)),
        ("identifiers", identifiers(rows, picked)),
    ):
        report[name] = write(args.out / name, corpus, queries, rows)
    print(json.dumps({"docs": len(rows), **report}))


if __name__ == "__main__":
    main()
