"""Zotero libraries as a source: items, metadata, the trash, and a live WAL database left untouched."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from semsearch.ingest.sources import read_sources
from tests.helpers import PAPERS, FakeEmbedder, Library, assert_one_line_error, run


def fill(library: Library) -> None:
    """A paper in two collections, a title-only one, and what must be skipped: a note, a PDF, the trash, a feed."""
    library.add(
        "journalArticle",
        "FEDPRIV1",
        title="Federated learning with differential privacy",
        abstractNote="  " + PAPERS["fed"].replace(" while ", "\n while "),
        date="2021-05-00 May 2021",
        DOI="10.1000/fed.2021",
        url="https://example.org/fed",
        publicationTitle="Journal of Private Learning",
        creators=(("Ada", "Lovelace", "author"), ("", "OpenAI Team", "author"), ("Ed", "Itor", "editor")),
        tags=("privacy", "federated"),
        collections=(1, 2),
    )
    library.add(
        "conferencePaper",
        "GRAPHS01",
        title="Oversmoothing in deep graph networks",
        date="2019-00-00 2019",
        proceedingsTitle="Proceedings of GraphConf",
        creators=(("Grace", "Hopper", "author"),),
        collections=(1,),
    )
    library.add("note", "NOTE0001")
    library.add("attachment", "PDF00001", title="Full Text PDF")
    library.add("annotation", "ANNOT001")
    library.add("journalArticle", "TRASHED1", title="Thrown away", abstractNote=PAPERS["vision"], deleted=True)
    library.add("journalArticle", "FEEDITEM", title="From an RSS feed", abstractNote=PAPERS["llm"], library=2)


@pytest.fixture
def library(tmp_path: Path) -> Path:
    folder = tmp_path / "Zotero"
    folder.mkdir()
    lib = Library(folder / "zotero.sqlite")
    fill(lib)
    lib.close()
    return folder / "zotero.sqlite"


def test_items_with_their_metadata_and_nothing_else(library: Path) -> None:
    result = read_sources([str(library)])
    assert [r.external_id for r in result.records] == ["FEDPRIV1", "GRAPHS01"]
    fed, graph = result.records
    assert fed.text == PAPERS["fed"] and fed.title == "Federated learning with differential privacy"
    assert not fed.title_only
    assert fed.metadata == {
        "item_type": "journalArticle",
        "authors": ["Ada Lovelace", "OpenAI Team"],
        "date": "May 2021",
        "year": 2021,
        "venue": "Journal of Private Learning",
        "doi": "10.1000/fed.2021",
        "url": "https://example.org/fed",
        "tags": ["federated", "privacy"],
        "collection": ["Privacy", "Reading"],
    }
    assert fed.provenance.kind == "item" and fed.provenance.label().endswith("zotero.sqlite:item 1")
    # No abstract: indexed by its title, and marked so.
    assert (graph.text, graph.title_only, graph.metadata["year"]) == (
        "Oversmoothing in deep graph networks",
        True,
        2019,
    )
    assert graph.metadata["venue"] == "Proceedings of GraphConf"
    [source] = result.files
    assert (source.format, source.records, source.path) == ("zotero", 2, str(library.resolve()))


def test_a_zotero_data_folder_means_its_library(library: Path) -> None:
    storage = library.parent / "storage" / "ABCD1234"
    storage.mkdir(parents=True)
    (storage / "snapshot.txt").write_text("Saved page text that is not an abstract.\n", encoding="utf-8")
    result = read_sources([str(library.parent)])
    assert [f.path for f in result.files] == [str(library.resolve())]
    assert len(result.records) == 2


@pytest.mark.parametrize("exclusive", [False, True], ids=["shared", "exclusive-lock"])
def test_a_live_wal_library_is_read_whole_and_left_untouched(
    tmp_path: Path, fake: FakeEmbedder, exclusive: bool
) -> None:
    folder = tmp_path / "Zotero"
    folder.mkdir()
    db = folder / "zotero.sqlite"
    zotero = Library(db, wal=True, exclusive=exclusive)  # stays open, as Zotero does while it runs
    try:
        fill(zotero)
        # Added last: these rows live only in the -wal file (nothing was checkpointed).
        zotero.add("journalArticle", "RLNAV001", title="Curious robots", abstractNote=PAPERS["rl"], collections=(2,))
        wal = folder / "zotero.sqlite-wal"
        assert wal.stat().st_size > 0
        files_before = {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()}
        main_before = db.read_bytes()
        assert b"RLNAV001" not in main_before  # really only in the WAL

        index = tmp_path / "idx"
        result = run(["index", str(folder), "--index", str(index), "--json"], fake)
        assert result.exit_code == 0, result.output
        summary = json.loads(result.stdout)
        assert (summary["documents"], summary["title_only"]) == (3, 1)

        # The user's files: same names, same bytes, same times; no -shm created, no lock left behind.
        assert {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir()} == files_before
        # Nothing new yet: the refresh has nothing to do, though the library's news live in its -wal file.
        assert json.loads(run(["index", "--index", str(index), "--json"], fake).stdout)["unchanged"] is True
        zotero.add("journalArticle", "LLMQUANT", title="Quantized LLMs", abstractNote=PAPERS["llm"])

        hits = json.loads(run(["query", "robot navigation", "--index", str(index), "--json", "-k", "1"], fake).stdout)
        assert hits[0]["external_ids"] == ["RLNAV001"]
        # Collection names filter like a seed file's header; an item may be in several.
        privacy = run(["query", "learning", "--index", str(index), "--json", "--where", "collection=Privacy"], fake)
        assert sorted(h["external_ids"][0] for h in json.loads(privacy.stdout)) == ["FEDPRIV1", "RLNAV001"]
        reading = run(["query", "learning", "--index", str(index), "--json", "--where", "collection=reading"], fake)
        assert sorted(h["external_ids"][0] for h in json.loads(reading.stdout)) == ["FEDPRIV1", "GRAPHS01"]
        # The Zotero key is an external id: related KEY works.
        assert run(["related", "FEDPRIV1", "--index", str(index), "--json"], fake).exit_code == 0

        # A refresh sees what Zotero wrote since, and encodes only that.
        fake.calls.clear()
        again = json.loads(run(["index", "--index", str(index), "--json"], fake).stdout)
        assert (again["documents"], again["added"], again["encoded"]) == (4, 1, 1)
    finally:
        zotero.close()


def test_not_a_zotero_library(tmp_path: Path, fake: FakeEmbedder) -> None:
    other = tmp_path / "other.sqlite"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    index = tmp_path / "idx"
    result = run(["index", str(other), "--index", str(index)], fake)
    assert_one_line_error(result, "other.sqlite: an SQLite database, but not a Zotero library (no table items)")
    assert not index.exists()


def test_an_item_with_neither_abstract_nor_title(library: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    lib = Library(library, create=False)
    lib.add("journalArticle", "EMPTY001", date="2020-00-00 2020")
    lib.close()
    index = tmp_path / "idx"
    result = run(["index", str(library), "--index", str(index)], fake)
    assert_one_line_error(result, "item EMPTY001 has no abstract and no title", "--skip-bad")
    assert not index.exists()
    skipped = run(["index", str(library), "--index", str(index), "--skip-bad", "--json"], fake)
    assert skipped.exit_code == 0, skipped.output
    assert "skipped" in skipped.output and "EMPTY001" in skipped.output
    assert json.loads(skipped.stdout.strip().splitlines()[-1])["documents"] == 2


def _many(library: Path, count: int) -> None:
    """Add ``count`` papers, so that a write transaction over them spills past a small page cache."""
    lib = Library(library, create=False)
    lib.conn.execute("PRAGMA synchronous=OFF")  # a test's speed, not Zotero's durability
    for i in range(count):
        lib.add("journalArticle", f"MANY{i:04d}", title=f"Paper {i}", abstractNote=f"Abstract {i}: " + "words " * 60)
    lib.close()


@pytest.mark.parametrize("damage", ["schema", "page", "truncated"])
def test_a_damaged_library_is_one_line(library: Path, tmp_path: Path, fake: FakeEmbedder, damage: str) -> None:
    _many(library, 150)
    data = bytearray(library.read_bytes())
    if damage == "schema":
        # Bytes that are not UTF-8 inside the schema text: Python failed decoding SQLite's own error message.
        at = data.index(b"CREATE TABLE itemTypes")
        data[at + 7 : at + 9] = b"\xff\xfe"
    elif damage == "page":
        page = int.from_bytes(data[16:18], "big")
        for start in range(3 * page, len(data), 4 * page):
            data[start : start + 64] = b"\xa5" * 64
    else:
        data = data[: len(data) // 3]
    library.write_bytes(bytes(data))
    index = tmp_path / "idx"
    for extra in ([], ["--skip-bad"]):
        result = run(["index", str(library), "--index", str(index), *extra], fake)
        assert_one_line_error(result, "zotero.sqlite: the Zotero database is damaged", "Check Database Integrity")
    assert not index.exists()


def test_a_library_read_while_zotero_holds_a_write_transaction(
    library: Path, tmp_path: Path, fake: FakeEmbedder
) -> None:
    _many(library, 150)
    committed = read_sources([str(library)]).records
    zotero = sqlite3.connect(library, isolation_level=None)  # rollback-journal mode, as Zotero's default
    try:
        assert zotero.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        zotero.execute("PRAGMA cache_size=5")  # a small cache spills uncommitted pages into the database file
        zotero.execute("BEGIN")
        zotero.execute("INSERT INTO itemDataValues (value) SELECT 'UNCOMMITTED ' || value FROM itemDataValues")
        zotero.execute(
            "UPDATE itemData SET valueID = (SELECT n.valueID FROM itemDataValues o JOIN itemDataValues n "
            "ON n.value = 'UNCOMMITTED ' || o.value WHERE o.valueID = itemData.valueID) WHERE fieldID = 2"
        )
        zotero.execute("DELETE FROM items WHERE key LIKE 'MANY00%'")
        journal = library.with_name("zotero.sqlite-journal")
        assert journal.stat().st_size > 0 and b"UNCOMMITTED" in library.read_bytes()  # a hot journal, a torn file
        files_before = {p.name: p.read_bytes() for p in library.parent.iterdir()}

        result = read_sources([str(library)])
        # The last committed state, whole: every item, none of the uncommitted values.
        assert [(r.external_id, r.text) for r in result.records] == [(r.external_id, r.text) for r in committed]
        index = tmp_path / "idx"
        built = run(["index", str(library), "--index", str(index), "--json"], fake)
        assert built.exit_code == 0, built.output
        assert json.loads(built.stdout)["documents"] == len(committed)
        # Zotero's files are untouched and its transaction goes on to commit.
        assert {p.name: p.read_bytes() for p in library.parent.iterdir()} == files_before
        zotero.execute("COMMIT")
    finally:
        zotero.close()
    after = read_sources([str(library)]).records
    assert len(after) == len(committed) - 100
    assert all(r.text.startswith("UNCOMMITTED") for r in after if r.text != r.title)
