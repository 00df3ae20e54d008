"""Filters that match nothing say why; an unknown operator or a type mismatch is a one-line error."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from semsearch import BuildOptions, Index, NoMatchWarning, build_index
from semsearch.core.errors import QueryError
from semsearch.core.records import Document, Provenance
from semsearch.store.filters import evaluate, parse_where
from tests.helpers import PAPERS, FakeEmbedder, assert_one_line_error, run, snapshot


@pytest.fixture
def plain(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> Path:
    """An index of seed text: documents have a collection, no year."""
    path = tmp_path / "plain"
    build_index([str(small_corpus)], path, BuildOptions(progress=False), embedder=fake)
    return path


@pytest.fixture
def dated(tmp_path: Path, fake: FakeEmbedder) -> Path:
    rows = [
        {"id": f"p{i}", "title": f"Paper {i}", "abstract": text, "venue": "neurips", "year": 2020 + i}
        for i, text in enumerate(PAPERS.values())
    ]
    src = tmp_path / "dated.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    path = tmp_path / "dated"
    build_index([str(src)], path, BuildOptions(progress=False), embedder=fake)
    return path


def doc(n: int, **metadata: object) -> Document:
    return Document(f"{n:016x}", f"text {n}", None, [Provenance("a.jsonl", "line", n)], metadata=dict(metadata))


def test_missing_field_names_the_fields_that_exist(plain: Path, fake: FakeEmbedder) -> None:
    result = run(["query", "privacy", "--index", str(plain), "--where", "year>=2024", "--json"], fake)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "no document has a field 'year'" in lines[0]
    assert "fields: collection, file, id, title" in lines[0]


def test_related_warns_too(plain: Path, fake: FakeEmbedder) -> None:
    with Index.open(plain, embedder=fake) as index:
        some = index.search("privacy", 1)[0].id
    result = run(["related", some, "--index", str(plain), "--where", "venue=neurips"], fake)
    assert result.exit_code == 0, result.output
    assert "no document has a field 'venue'" in result.stderr


def test_no_warning_when_something_matches(dated: Path, fake: FakeEmbedder) -> None:
    result = run(["query", "privacy", "--index", str(dated), "--where", "year>=2023", "--json"], fake)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 2
    assert result.stderr == ""


def test_a_clause_that_matches_nothing_and_clauses_that_exclude_each_other(dated: Path, fake: FakeEmbedder) -> None:
    with Index.open(dated, embedder=fake) as index:
        with pytest.warns(NoMatchWarning):
            assert index.search("privacy", 3, where=["year>=2030"]) == []
        assert index.where_warnings(["year>=2030"]) == ["--where year>=2030 matches none of the 5 documents"]
        with pytest.warns(NoMatchWarning):
            assert index.search("privacy", 3, where=["year<=2020", "year>=2024"]) == []
        (line,) = index.where_warnings(["year<=2020", "year>=2024"])
        assert "each match some documents, but none meets them all" in line
        assert index.where_warnings(["venue=neurips"]) == []
        assert index.where_warnings([]) == []


def test_type_mismatch_is_an_error(dated: Path, fake: FakeEmbedder) -> None:
    before = snapshot(dated)
    result = run(["query", "privacy", "--index", str(dated), "--where", "year>=abc"], fake)
    assert_one_line_error(result, "year holds numbers", "'abc' is not a number")
    assert_one_line_error(run(["query", "x", "--index", str(dated), "--where", "year=abc"], fake), "not a number")
    # Text fields compare as text, and ~ is a substring test: neither is a mismatch.
    assert run(["query", "x", "--index", str(dated), "--where", "venue>=m"], fake).exit_code == 0
    assert run(["query", "x", "--index", str(dated), "--where", "year~20"], fake).exit_code == 0
    assert snapshot(dated) == before


@pytest.mark.parametrize(
    ("clause", "written"),
    [
        ("year=>2024", "'=>'"),
        ("year==2024", "'=='"),
        ("year=<2024", "'=<'"),
        ("year:2024", "':'"),
        ("year<>2024", "'<>'"),
        ("year !~ x", "'!~'"),
    ],
)
def test_unknown_operator(dated: Path, fake: FakeEmbedder, clause: str, written: str) -> None:
    result = run(["query", "privacy", "--index", str(dated), "--where", clause], fake)
    assert_one_line_error(result, f"unknown operator {written}", "use one of = != >= <= > < ~")


def test_parse_keeps_the_known_operators() -> None:
    assert [str(c) for c in parse_where(["year>=2024", "venue!=x", "title~a=b", "file=seeds/*"])] == [
        "year>=2024",
        "venue!=x",
        "title~a=b",
        "file=seeds/*",
    ]
    with pytest.raises(QueryError, match="malformed"):
        parse_where(["year"])


def test_evaluate_counts_lists_and_mixed_fields() -> None:
    docs = [doc(1, year=2021, authors=["Ada", "Bo"]), doc(2, year="n/a"), doc(3)]
    # A field holding numbers and text is not called a mismatch: text compares as text.
    assert evaluate(docs, parse_where(["year>=abc"])).ids == [f"{2:016x}"]
    assert evaluate(docs, parse_where(["authors=bo"])).ids == [f"{1:016x}"]
    result = evaluate(docs, parse_where(["tags=x"]))
    assert result.ids == [] and "fields: authors, file, id, title, year" in result.warnings[0]
    assert evaluate([], parse_where(["tags=x"])).warnings == []


def test_api_warnings(dated: Path, plain: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    with TestClient(create_app(plain, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        data = client.get("/api/search", params={"q": "privacy", "where": "year>=2024"}).json()
        assert data["hits"] == [] and "no document has a field 'year'" in data["warnings"][0]
        some = client.get("/api/search", params={"q": "privacy"}).json()
        assert some["warnings"] == [] and some["hits"]
        rel = client.get(f"/api/related/{some['hits'][0]['id']}", params={"where": "year>=1"}).json()
        assert rel["hits"] == [] and "no document has a field 'year'" in rel["warnings"][0]
    with TestClient(create_app(dated, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        bad = client.get("/api/search", params={"q": "privacy", "where": "year>=abc"})
        assert bad.status_code == 422 and "not a number" in bad.json()["error"]
        bad = client.get("/api/search", params={"q": "privacy", "where": "year=>2000"})
        assert bad.status_code == 422 and "unknown operator" in bad.json()["error"]
        assert "in where 'year=>2000'" in bad.json()["error"]  # the API's own word for the field, not a flag


def test_each_face_words_the_field_for_its_users(dated: Path) -> None:
    """The library names the request's field; the CLI says --where, the API and the library say where."""
    index = dated
    with Index.open(index, embedder=FakeEmbedder()) as idx, pytest.raises(QueryError) as caught:
        idx.search("privacy", where=["year=>2024"])
    assert "in where 'year=>2024'" in str(caught.value) and "--where" not in str(caught.value)
    result = run(["query", "privacy", "--index", str(index), "--where", "year=>2024"], FakeEmbedder())
    assert_one_line_error(result, "unknown operator '=>' in --where 'year=>2024'")


# ---------------------------------------------------------------- the library says why too


def test_the_library_warns_why_a_filter_matched_nothing(plain: Path, dated: Path, fake: FakeEmbedder) -> None:
    with Index.open(plain, embedder=fake) as index:
        with pytest.warns(NoMatchWarning) as caught:
            assert index.search("privacy", 3, where=["year>=2024"]) == []
        (warned,) = caught
        assert str(warned.message).startswith("where year>=2024 matches nothing: no document has a field 'year'")
        assert "fields: collection, file, id, title" in str(warned.message)
        assert warned.filename == __file__  # the caller's line, not the library's
        some = index.search("privacy", 1)[0].id
        with pytest.warns(NoMatchWarning, match="no document has a field 'venue'") as caught:
            assert index.related(some, 3, where=["venue=neurips"]) == []
        assert caught[0].filename == __file__
        with pytest.warns(NoMatchWarning, match="no document has a field 'venue'"):
            assert index.related_to_text(PAPERS["fed"], 3, where=["venue=neurips"]) == []
        # A field in the query's text is a filter too.
        with pytest.warns(NoMatchWarning, match="no document has a field 'year'"):
            assert index.search("privacy year:2024", 3) == []
    with Index.open(dated, embedder=fake) as index:
        with pytest.warns(NoMatchWarning) as caught:
            assert index.search("privacy", 3, where=["year<=2020", "year>=2024"]) == []
        assert [str(w.message) for w in caught] == [
            "the where clauses year<=2020; year>=2024 each match some documents, but none meets them all"
        ]


def test_no_warning_when_the_filter_matches(dated: Path, fake: FakeEmbedder) -> None:
    with Index.open(dated, embedder=fake) as index, warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(index.search("privacy", 3, where=["year>=2023"])) == 2
        assert index.search("privacy", 3)  # no filter at all


def test_the_command_line_says_it_once(plain: Path, fake: FakeEmbedder) -> None:
    """The CLI's own stderr line, and no Python warning on top of it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(["query", "privacy", "--index", str(plain), "--where", "year>=2024"], fake)
    assert result.exit_code == 0, result.output
    assert result.stderr.count("no document has a field 'year'") == 1
    assert [w for w in caught if issubclass(w.category, NoMatchWarning)] == []
