"""The typed dev set of issue #36 (benchmarks/data/typed_dev.jsonl) and the scoring of benchmarks/bench_typed.py."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import load_script, requires_shared

bench = load_script("bench_typed")
DEV: list[dict[str, Any]] = bench.read_dev(bench.DEV)


def edits(a: str, b: str) -> int:
    """Optimal-string-alignment distance (insert, delete, substitute, swap two neighbours), case ignored."""
    a, b = a.lower(), b.lower()
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[len(a)][len(b)]


# ---------------------------------------------------------------- the dev set's shape (no data needed)


def test_five_styles_of_at_least_fifteen_queries() -> None:
    counts = Counter(row["style"] for row in DEV)
    assert set(counts) == set(bench.STYLES)
    assert min(counts.values()) >= 15, counts
    assert len({row["id"] for row in DEV}) == len(DEV)
    assert len({(row["style"], row["query"].lower()) for row in DEV}) == len(DEV)  # no query twice


def test_typo_queries_are_two_or_three_slips_from_their_spelling() -> None:
    for row in DEV:
        if row["style"] == "typo":
            assert 2 <= edits(row["query"], row["spelled"]) <= 3, row["id"]
        else:
            assert "spelled" not in row, row["id"]


def test_acronyms_are_one_word_and_authors_a_bare_name() -> None:
    for row in DEV:
        if row["style"] == "acronym":
            assert " " not in row["query"].strip(), row["id"]
        if row["style"] == "author":
            assert 1 <= len(bench.name_tokens(row["query"])) <= 3, row["id"]
            assert 1 <= len(row["targets"]) <= 4, row["id"]


def test_read_dev_names_the_bad_line(tmp_path: Path) -> None:
    bad = tmp_path / "dev.jsonl"
    bad.write_text('{"id": "a", "style": "plain", "query": "q", "targets": ["x"]}\n{"id": "b", "style": "poem"}\n')
    with pytest.raises(ValueError, match=r"dev\.jsonl:2: want id, style"):
        bench.read_dev(bad)
    bad.write_text('{"id": "a", "style": "typo", "query": "q", "targets": ["x"]}\n')
    with pytest.raises(ValueError, match="'spelled'"):
        bench.read_dev(bad)
    bad.write_text("{not json\n")
    with pytest.raises(ValueError, match="malformed JSON"):
        bench.read_dev(bad)


# ---------------------------------------------------------------- the benchmark's scoring on a tiny ranking


def test_score_counts_by_hit_and_cuts_at_k() -> None:
    hits = [["a"], ["b", "c"], ["d"], ["e"]]  # the second hit stands for two merged duplicates
    assert bench.score(hits, ["c", "z"]) == (0.5, 0.5)
    assert bench.score(hits, ["b", "c"]) == (0.5, 1.0)  # one hit holding both targets finds both
    assert bench.score(hits, ["e"], k=3) == (0.0, 0.0)
    assert bench.score(hits, ["d", "a"], k=3) == (1.0, 1.0)
    assert bench.first_rank(hits, ["e"]) == 4 and bench.first_rank(hits, ["q"]) is None


def test_summarize_means_per_style_and_mode() -> None:
    out = bench.summarize({"plain": {"dense": [(1.0, 1.0), (0.5, 0.0)], "lexical": [(0.0, 0.0), (0.0, 0.5)]}})
    assert out == {
        "plain": {"dense": {"mrr@10": 0.75, "recall@10": 0.5}, "lexical": {"mrr@10": 0.0, "recall@10": 0.25}}
    }


def test_name_matches_the_forms_people_type() -> None:
    name = "Léo Gautheron"
    for typed in ("Leo Gautheron", "gautheron, leo", "L. Gautheron", "Gautheron", "GAUTHERON Léo"):
        assert bench.name_matches(typed, name), typed
    for typed in ("M. Gautheron", "Leo Gauthier", "Leo Leo Gautheron", ""):
        assert not bench.name_matches(typed, name), typed


def test_bench_refuses_an_unknown_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="unknown mode sparse"):
        bench.main(["--modes", "dense,sparse"])


def test_bench_says_what_is_missing_without_the_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "ANTHOLOGY", tmp_path / "absent")
    with pytest.raises(SystemExit, match=r"absent is missing: making the slice needs \.\./shared/data/mlanthology"):
        bench.main(["--slice", str(tmp_path / "slice.jsonl"), "--index", str(tmp_path / "idx")])
    assert not (tmp_path / "idx").exists()


def test_bench_refuses_a_bad_dev_file(tmp_path: Path) -> None:
    dev = tmp_path / "dev.jsonl"
    dev.write_text('{"id": "a"}\n')
    with pytest.raises(SystemExit, match="dev.jsonl:1"):
        bench.main(["--dev", str(dev)])


def test_make_slice_keeps_targets_and_authors_and_draws_the_rest(tmp_path: Path) -> None:
    rows = [
        {"_id": f"p{i}", "title": f"T{i}", "text": f"abstract {i}", "metadata": {"authors": [f"Author {i}"]}}
        for i in range(40)
    ]
    rows[7]["metadata"]["authors"] = ["Ada Quill"]
    rows[30]["metadata"]["authors"] = ["Ada Quill", "Author 30"]
    anthology = tmp_path / "anthology"
    anthology.mkdir()
    with gzip.open(anthology / "corpus.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    with gzip.open(anthology / "neurips2025.jsonl.gz", "wt") as fh:
        fh.write(json.dumps({"_id": "p3"}) + "\n")
    dev = [
        {"id": "j", "style": "jargon", "query": "q", "targets": ["p1"]},
        {"id": "a", "style": "author", "query": "quill, ada", "targets": ["p7"]},
    ]
    out = tmp_path / "slice.jsonl"
    assert bench.make_slice(dev, out, anthology=anthology, size=10) == 10
    ids = bench.slice_ids(out)
    assert {"p1", "p7", "p30"} <= ids and "p3" not in ids
    again = tmp_path / "again.jsonl"
    bench.make_slice(dev, again, anthology=anthology, size=10)
    assert again.read_text() == out.read_text()  # the draw is fixed
    dev[0]["targets"] = ["p3"]  # on the NeurIPS 2025 list
    with pytest.raises(ValueError, match="not in the corpus minus NeurIPS 2025: p3"):
        bench.make_slice(dev, out, anthology=anthology, size=10)


# ---------------------------------------------------------------- against the corpus (skipped without ../shared)


@pytest.fixture(scope="module")
def pool() -> dict[str, dict[str, Any]]:
    """The corpus minus NeurIPS 2025, by id."""
    corpus = requires_shared("data", "mlanthology", "corpus.jsonl.gz")
    excluded = corpus.with_name("neurips2025.jsonl.gz")
    return {doc_id: record for doc_id, record, _ in bench._records(corpus, excluded)}


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) >= 4}


@pytest.mark.slow  # reads the whole ML Anthology corpus from ../shared
def test_every_target_is_outside_neurips_2025(pool: dict[str, dict[str, Any]]) -> None:
    missing = sorted({t for row in DEV for t in row["targets"]} - pool.keys())
    assert not missing


@pytest.mark.slow  # reads the whole ML Anthology corpus from ../shared
def test_plain_queries_use_no_title_word(pool: dict[str, dict[str, Any]]) -> None:
    for row in DEV:
        if row["style"] != "plain":
            continue
        for target in row["targets"]:
            title = pool[target]["title"]
            assert title.lower() not in row["query"].lower(), row["id"]
            # No word of four letters or more shares its first five letters with a title word ("data", "learned").
            shared = {q for q in _words(row["query"]) for t in _words(title) if q[:5] == t[:5]}
            assert not shared, (row["id"], shared)


@pytest.mark.slow  # reads the whole ML Anthology corpus from ../shared
def test_acronyms_appear_in_their_targets(pool: dict[str, dict[str, Any]]) -> None:
    for row in DEV:
        if row["style"] == "acronym":
            word = re.compile(r"(?<![A-Za-z0-9])" + re.escape(row["query"]) + r"(?![A-Za-z0-9])", re.I)
            for target in row["targets"]:
                assert word.search(pool[target]["title"] + " " + pool[target]["text"]), (row["id"], target)


@pytest.mark.slow  # reads the whole ML Anthology corpus from ../shared
def test_author_targets_are_all_that_persons_papers(pool: dict[str, dict[str, Any]]) -> None:
    bylines = [(doc_id, r["metadata"].get("authors") or []) for doc_id, r in pool.items()]
    folded = [(doc_id, names, bench.fold(" ".join(names))) for doc_id, names in bylines]
    for row in DEV:
        if row["style"] == "author":
            words = bench.name_tokens(row["query"])
            near = [(doc_id, names, f) for doc_id, names, f in folded if all(w in f for w in words)]
            papers = {doc_id for doc_id, names, f in near if bench.by_author(row["query"], names, f)}
            assert papers == set(row["targets"]), row["id"]
