"""The --where column index answers exactly as the scan of every document does, and old versions are scanned."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import IndexCorruptError, QueryError
from semsearch.core.records import Arrival, Document, Provenance
from semsearch.store.documents import DocumentStore
from semsearch.store.documents_writer import write_documents
from semsearch.store.filter_columns import FilterColumns
from semsearch.store.filters import evaluate, number, parse_where
from semsearch.store.layout import DOCS, current_version, doc_num
from tests.helpers import PAPERS, FakeEmbedder, assert_one_line_error, run

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.helpers import MANY, chars, clauses, document_lists  # noqa: E402


def _both(docs: list[Document], where: list[str]) -> tuple[object, object]:
    """(scan's answer, the columns' answer): sorted document numbers and warnings, or the QueryError's text."""
    try:
        clauses_ = parse_where(where)
    except QueryError:
        return None, None
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / DOCS
        write_documents(path, docs)
        store = DocumentStore(path)
        try:
            assert store.has_filter_columns
            try:
                result = evaluate(store.iter_documents(), clauses_)
                scan: object = (sorted(doc_num(i) for i in result.ids), result.warnings)
            except QueryError as exc:
                scan = str(exc)
            try:
                answer = FilterColumns(store.rows, path).evaluate(clauses_)
                columns: object = (answer.nums.tolist(), answer.warnings)
            except QueryError as exc:
                columns = str(exc)
        finally:
            store.close()
    return scan, columns


@MANY
@given(document_lists(), st.lists(clauses, min_size=1, max_size=3))
def test_columns_answer_as_the_scan_does(docs: list[Document], where: list[str]) -> None:
    scan, columns = _both(docs, where)
    assert columns == scan


@pytest.mark.parametrize(
    "where",
    [
        ["year>=2024"],
        ["year=2024"],
        ["year!=2024"],
        ["year>=abc"],
        ["year~02"],
        ["venue=neurips"],
        ["venue!=NeurIPS"],
        ["authors=ada"],
        ["authors!=ada"],
        ["title~GRAPH"],
        ["file=seeds/*"],
        ["source!=a.jsonl"],
        ["file>=b"],
        ["id~00"],
        ["id=10"],
        ["added>=2026-01-01"],
        ["added_version>1"],
        ["tags=x"],
        ["tags!=x"],
        ["year<=2020", "year>=2024"],
        ["year>=2021", "venue=icml"],
        ["x=nan"],
        ["x>=nan"],
        ["x=1"],
        ["x=true"],
        ["x~{"],
    ],
)
def test_columns_on_chosen_cases(where: list[str]) -> None:
    docs = [
        Document(
            "000000000000000a",
            "t",
            "Graph nets",
            [Provenance("seeds/000.txt", "para", 0)],
            metadata={"year": "2024", "Venue": "NeurIPS", "authors": ["Ada", "Bo", "Ada"], "x": True},
            added=Arrival(1, "2025-12-31T00:00:00+00:00"),
        ),
        Document(
            "0000000000000010",
            "t",
            None,
            [Provenance("a.jsonl", "line", 1), Provenance("seeds/001.txt", "para", 0)],
            metadata={"year": 2020, "venue": "icml", "x": float("nan"), "authors": [["Cy"], None]},
            added=Arrival(2, "2026-02-01T00:00:00+00:00"),
        ),
        Document("00000000000000ff", "t", "other", [], metadata={"year": 2021.5, "x": {"k": 1}, "venue": ""}),
    ]
    scan, columns = _both(docs, where)
    assert scan is not None and columns == scan


@MANY
@given(st.one_of(st.text(chars, max_size=12), st.text(" \t\u00a0+-_.eE0123456789\u0663infatyINFNA", max_size=12)))
def test_number_answers_as_float_does(text: str) -> None:
    try:
        expected: float | None = float(text)
    except ValueError:
        expected = None
    found = number(text)
    assert (found is None) == (expected is None)
    assert found is None or expected is None or found == expected or (np.isnan(found) and np.isnan(expected))


def test_number_of_a_huge_integer_is_none() -> None:
    assert number(10**400) is None
    assert evaluate([Document("0" * 16, "t", None, [], metadata={"n": 10**400})], parse_where(["n>=1"])).ids == [
        "0" * 16
    ]  # compared as text: "1000…" >= "1"


@pytest.fixture
def dated_rows(tmp_path: Path) -> Path:
    rows = [
        {"id": f"p{i}", "title": f"Paper {i}", "abstract": text, "venue": ["neurips", "icml"][i % 2], "year": 2020 + i}
        for i, text in enumerate(PAPERS.values())
    ]
    src = tmp_path / "dated.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return src


FILTERS = [["year>=2023"], ["venue=neurips"], ["venue!=neurips", "year<2024"], ["title~paper 1"], ["tags=x"],
           ["year>=2030"], ["file=*dated*"], ["added_version=1"]]  # fmt: skip


def test_an_old_version_without_the_columns_is_scanned_alike(
    tmp_path: Path, dated_rows: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    new, old = tmp_path / "new", tmp_path / "old"
    build_index([str(dated_rows)], new, BuildOptions(progress=False), embedder=fake)
    with monkeypatch.context() as patch:  # what write_documents wrote before the column index existed
        patch.setattr("semsearch.store.documents_writer.write_filter_columns", lambda *args: None)
        build_index([str(dated_rows)], old, BuildOptions(progress=False), embedder=fake)
    with Index.open(new, embedder=fake) as columns, Index.open(old, embedder=fake) as scanned:
        assert columns.store.has_filter_columns and not scanned.store.has_filter_columns
        tables = {r[0] for r in scanned.store.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not any(t.startswith("filter_") for t in tables)
        for where in FILTERS:
            assert columns.allowed_rows(where).tolist() == sorted(scanned.allowed_rows(where).tolist()), where
            assert columns.where_warnings(where) == scanned.where_warnings(where), where
            assert [h.id for h in columns.search("privacy", 3, where=where)] == [
                h.id for h in scanned.search("privacy", 3, where=where)
            ]
        assert len(columns.allowed_rows(["year>=2023"])) == 2
        for index in (columns, scanned):
            with pytest.raises(QueryError, match="year holds numbers"):
                index.search("privacy", 3, where=["year>=abc"])


def _corrupt(tmp_path: Path, dated_rows: Path, fake: FakeEmbedder, sql: str) -> Path:
    path = tmp_path / "idx"
    build_index([str(dated_rows)], path, BuildOptions(progress=False), embedder=fake)
    docs = current_version(path) / DOCS
    size = docs.stat().st_size
    conn = sqlite3.connect(docs)
    conn.execute(sql)
    conn.commit()
    conn.close()
    assert docs.stat().st_size == size  # the manifest's size check still passes: the damage is inside
    return path


@pytest.mark.parametrize(
    "sql",
    [
        "DELETE FROM filter_documents",
        "UPDATE filter_documents SET nums = x'00'",
        "UPDATE filter_values SET nums = x'01'",
    ],
)
def test_a_damaged_column_index_is_a_one_line_error(
    tmp_path: Path, dated_rows: Path, fake: FakeEmbedder, sql: str
) -> None:
    path = _corrupt(tmp_path, dated_rows, fake, sql)
    with Index.open(path, embedder=fake) as index, pytest.raises(IndexCorruptError, match="rebuild with"):
        index.search("privacy", 3, where=["venue=neurips"])
    result = run(["query", "privacy", "--index", str(path), "--where", "venue=neurips"], fake)
    assert_one_line_error(result, "rebuild with: semsearch index --full")


def test_a_missing_column_table_falls_back_to_the_scan(tmp_path: Path, dated_rows: Path, fake: FakeEmbedder) -> None:
    path = _corrupt(tmp_path, dated_rows, fake, "DROP TABLE filter_fields")
    with Index.open(path, embedder=fake) as index:
        assert not index.store.has_filter_columns
        assert len(index.allowed_rows(["venue=neurips"])) == 3


def test_the_columns_hold_what_the_filters_read(tmp_path: Path, dated_rows: Path, fake: FakeEmbedder) -> None:
    build_index([str(dated_rows)], tmp_path / "idx", BuildOptions(progress=False), embedder=fake)
    copy = tmp_path / "copy.sqlite"
    shutil.copy(current_version(tmp_path / "idx") / DOCS, copy)
    conn = sqlite3.connect(copy)
    fields = {r[0] for r in conn.execute("SELECT DISTINCT field FROM filter_values")}
    assert {"title", "venue", "year", "file", "added", "added_version"} <= fields
    (example,) = conn.execute("SELECT example FROM filter_fields WHERE field = 'year'").fetchone()
    (first,) = conn.execute("SELECT metadata FROM documents ORDER BY num LIMIT 1").fetchone()
    assert json.loads(example) == json.loads(first)["year"]  # the first a scan in document order meets
    conn.close()


def test_the_benchmark_times_both_paths(tmp_path: Path, dated_rows: Path, fake: FakeEmbedder) -> None:
    from benchmarks import bench_filters as bench
    build_index([str(dated_rows)], tmp_path / "idx", BuildOptions(progress=False), embedder=fake)
    report = bench.first_filter_latency(tmp_path / "idx", fake, filters=["venue=neurips", "tags=x"])
    assert report["column_index"] is True and set(report["filters"]) == {"venue=neurips", "tags=x"}
    row = report["filters"]["venue=neurips"]
    assert row["matched"] == row["scan_matched"] == 3 and row["filter_ms"] >= 0 and row["scan_ms"] > 0
    assert "no document has a field 'tags'" in report["filters"]["tags=x"]["warnings"][0]
    json.dumps(report)  # what main() prints
