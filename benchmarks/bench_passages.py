"""Benchmark full-text passages (``semsearch index --full-text``): does a body sentence find its page, at what cost.

On the fixture papers (``tests/fixtures/pdf``; ``expected.jsonl`` gives two body sentences per paper with their
page), an index is built with and without ``--full-text``. Target: a query made of a body sentence's words finds
its passage and page in the top 3, measured three ways: a search (hybrid, and dense) whose top 3 holds the paper
with that passage as its hit's passage; and ``--passages``, whose top 3 passages hold it. Each query is the
sentence's words without punctuation. The ranking variants of the dense side are compared too: ``max`` (a paper
scores max(abstract, best passage) and the nearest passages' papers join the candidates, what the package does),
``extra`` (only the nearest passages' papers join: the abstract top keeps its scores) and ``none`` (passages only
shown). Cost: build seconds (median of ``--repeat`` fresh builds, PDF cache warm, embedding cache cold) and the
version's bytes, with and without passages.

    python -m benchmarks.bench_passages [--model] [--repeat 3]

``--model`` encodes with the real default model (all-MiniLM-L6-v2, ONNX) instead of the hashed stand-in.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

from benchmarks.harness import HashedWords, emit, log
from semsearch.query import passages as passages_module
from semsearch.query.search import Index
from semsearch.write.build import BuildOptions, build_index

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pdf"


def compare_form(text: str) -> str:
    """Text as the fixtures' checks compare it: compatibility forms folded, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u00ad", "")
    return " ".join(text.split())


def expected() -> list[dict[str, Any]]:
    """The fixture papers' readings (one per PDF in the fixture folder)."""
    rows = [json.loads(line) for line in (FIXTURES / "expected.jsonl").read_text(encoding="utf-8").splitlines()]
    return [r for r in rows if (FIXTURES / r["file"]).is_file()]


def body_queries() -> list[tuple[str, int, str]]:
    """(file, page, sentence) of every body sentence of every fixture paper."""
    return [(row["file"], int(b["page"]), b["text"]) for row in expected() for b in row["body"]]


def query_of(sentence: str) -> str:
    """A body sentence as a query: its words, without punctuation (query syntax stays out of it)."""
    return " ".join(re.findall(r"[\w'’]+", sentence))


def _found(hits: list[Any], file: str, page: int, sentence: str) -> bool:
    """Whether a hit read from ``file`` carries a passage on ``page`` holding ``sentence``."""
    want = compare_form(sentence)
    for hit in hits:
        passage = hit.passage or {}
        named = any(Path(source.file).name == file for source in hit.sources)  # a merged copy's file too
        if named and passage.get("page") == page and want in compare_form(passage.get("text", "")):
            return True
    return False


def build(folder: Path, index: Path, *, full_text: bool, model: bool) -> float:
    """Seconds to build ``index`` from ``folder``."""
    options = BuildOptions(full_text=full_text, progress=False, map_method="off")
    start = time.perf_counter()
    build_index([str(folder)], index, options, embedder=None if model else HashedWords())
    return time.perf_counter() - start


def size(index: Path) -> int:
    """Bytes of an index's versions (the embedding cache left out)."""
    return sum(f.stat().st_size for f in index.glob("v-*/**/*") if f.is_file())


def accuracy(index_path: Path, model: bool) -> dict[str, Any]:
    """Share of body sentences found with their page in the top 3, per way of asking and ranking variant."""
    queries = body_queries()
    out: dict[str, Any] = {"queries": len(queries)}
    with Index.open(index_path, embedder=None if model else HashedWords()) as index:
        passages = index.passages
        variants = {"max": None, "extra": 0, "none": "off"}
        for name, variant in variants.items():
            depth = passages_module.RESCORE_DEPTH
            if variant == "off":
                index.passages = None  # the dense side without passages; hits still get theirs below
            elif variant == 0:
                passages_module.RESCORE_DEPTH = 0
            try:
                for mode in ("hybrid", "dense"):
                    found = 0
                    for file, page, sentence in queries:
                        hits = index.search(query_of(sentence), 3, mode=mode)
                        if index.passages is None and passages is not None:
                            passages_module.attach(hits, passages, index.encode_query(query_of(sentence)), "")
                        found += _found(hits, file, page, sentence)
                    out[f"{mode}_{name}_top3"] = round(found / len(queries), 3)
            finally:
                index.passages = passages
                passages_module.RESCORE_DEPTH = depth
        found = sum(
            _found(index.search_passages(query_of(sentence), 3), file, page, sentence)
            for file, page, sentence in queries
        )
        out["passages_top3"] = round(found / len(queries), 3)
        out["passages_stored"] = passages.count() if passages is not None else 0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="store_true", help="encode with the real default model")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    result: dict[str, Any] = {"encoder": "all-MiniLM-L6-v2" if args.model else "hashed"}
    with tempfile.TemporaryDirectory(prefix="bench-passages-") as tmp:
        work = Path(tmp)
        folder = work / "papers"
        folder.mkdir()
        for row in expected():
            shutil.copy(FIXTURES / row["file"], folder / row["file"])
        os.environ["SEMSEARCH_PDF_CACHE"] = str(work / "pdf-cache")
        build(folder, work / "warm", full_text=True, model=args.model)  # fills the PDF cache for every build
        for full_text in (False, True):
            label = "full_text" if full_text else "abstracts"
            seconds = []
            for i in range(args.repeat):
                index = work / f"{label}-{i}"
                seconds.append(build(folder, index, full_text=full_text, model=args.model))
            result[f"{label}_build_s"] = round(statistics.median(seconds), 3)
            result[f"{label}_bytes"] = size(work / f"{label}-0")
            log(label, result[f"{label}_build_s"], "s", result[f"{label}_bytes"], "bytes")
        result |= accuracy(work / "full_text-0", args.model)
    emit(result)


if __name__ == "__main__":
    main()
