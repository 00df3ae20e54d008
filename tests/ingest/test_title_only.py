"""Records with a title and no abstract are documents, indexed by their title and marked as such."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from semsearch import Index
from tests.helpers import FIXTURES, PAPERS, FakeEmbedder, assert_one_line_error, run, snapshot

FIXTURE = FIXTURES / "beir_title_only"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


ROWS = [
    {"id": "full", "title": "Federated privacy", "abstract": PAPERS["fed"]},
    {"id": "bare", "title": "Oversmoothing in deep graph networks", "abstract": ""},
    {"id": "nofield", "title": "Curiosity for robot navigation", "year": 2021},
]


def test_title_only_records_are_indexed_by_their_title(tmp_path: Path, fake: FakeEmbedder) -> None:
    source = write_jsonl(tmp_path / "papers.jsonl", ROWS)
    index = tmp_path / "idx"
    result = run(["index", str(source), "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["documents"], summary["title_only"]) == (3, 2)
    # The title is encoded once (not "title title"); the full record as title + abstract.
    assert sorted(fake.encoded_texts) == sorted(
        ["Federated privacy " + PAPERS["fed"], ROWS[1]["title"], ROWS[2]["title"]]
    )

    hits = json.loads(run(["query", "graph oversmoothing", "--index", str(index), "--json", "-k", "1"], fake).stdout)
    assert (hits[0]["external_ids"], hits[0]["title_only"], hits[0]["text"]) == (["bare"], True, ROWS[1]["title"])
    assert "abstract" not in hits[0]["metadata"]  # an empty abstract field is no metadata
    table = run(["query", "robot navigation", "--index", str(index), "-k", "1"], fake).stdout
    assert "title only" in table
    full = json.loads(run(["query", "federated privacy", "--index", str(index), "--json", "-k", "1"], fake).stdout)
    assert full[0]["title_only"] is False

    info = json.loads(run(["info", "--index", str(index), "--json"], fake).stdout)
    assert (info["documents"], info["title_only"]) == (3, 2)
    assert "3 (2 title-only)" in run(["info", "--index", str(index)], fake).stdout
    with Index.open(index, embedder=fake) as idx:
        assert idx.get("nofield").title_only and not idx.get("full").title_only
        assert idx.get("nofield").metadata == {"year": 2021}


def test_a_record_with_neither_title_nor_abstract_is_the_empty_error(tmp_path: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    good = write_jsonl(tmp_path / "good.jsonl", ROWS[:1])
    assert run(["index", str(good), "--index", str(index)], fake).exit_code == 0
    before = snapshot(index)
    bad = write_jsonl(tmp_path / "bad.jsonl", [*ROWS, {"id": "empty", "title": "  ", "abstract": ""}])
    result = run(["index", str(bad), "--index", str(index)], fake)
    assert_one_line_error(result, "bad.jsonl:line 4: empty abstract (field 'abstract') and no title")
    assert snapshot(index) == before
    skipped = run(["index", str(bad), "--index", str(index), "--skip-bad", "--json"], fake)
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.stdout.strip().splitlines()[-1])["documents"] == 3


def test_eval_runs_on_a_beir_corpus_where_half_the_records_are_titles(tmp_path: Path, fake: FakeEmbedder) -> None:
    data = tmp_path / "beir"
    shutil.copytree(FIXTURE, data)
    corpus = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines()]
    assert sum(not row["text"] for row in corpus) * 2 == len(corpus)
    result = run(["eval", str(data), "--index", str(tmp_path / "idx"), "--json"], fake)
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert metrics["queries"] == 6
    # Every judged paper, title-only or not, is found by its words.
    assert metrics["lexical"]["recall@100"] == 1.0
    assert metrics["lexical"]["mrr@10"] == 1.0
    with Index.open(tmp_path / "idx", embedder=fake) as idx:
        assert idx.info().title_only == 4
