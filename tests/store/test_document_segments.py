"""A version's documents over several segments read exactly as one docs.sqlite holding the live documents."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import IndexCorruptError, QueryError
from semsearch.core.records import Arrival, Document, Provenance
from semsearch.dedup.identity import read_identity
from semsearch.store.documents import DocumentStore, open_documents
from semsearch.store.documents_writer import write_documents
from semsearch.store.filter_columns import FilterColumns
from semsearch.store.filters import parse_where
from semsearch.store.index_parts import check_documents
from semsearch.store.layout import DOCS, MANIFEST, current_version, doc_num
from semsearch.store.lexical_build import write_lexical
from semsearch.store.manifest import Manifest
from semsearch.store.segments import Segment, write_hidden
from semsearch.store.vectors import write_vector_files
from semsearch.store.versions import PreviousVersion
from tests.helpers import MANY, FakeEmbedder, clauses, document_lists

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EMPTY = np.zeros(0, dtype=np.int64)


def doc(n: int, **changes: object) -> Document:
    """A document numbered ``n`` with a little of everything a store keeps."""
    base = Document(
        f"{n:016x}",
        f"text {n} about graphs" if n % 2 else f"text {n}",
        None if n % 5 == 0 else f"Title {n} graph" if n % 3 else f"Title {n}",
        [Provenance(f"src/{n % 3}.jsonl", "line", n), Provenance("all.txt", "para", n)],
        external_ids=[f"doi:10/{n}"],
        metadata={"year": 2020 + n % 6, "venue": ["neurips", "icml", "acl"][n % 3], "tags": [f"t{n % 4}", "x"]},
        text_hash=f"h{n}",
        title_only=n % 7 == 0,
        texts=[f"m{n}a", f"m{n}b"] if n % 4 == 0 else [],
        aliases=[f"{n + 0xA000:016x}"] if n % 3 == 0 else [],
        added=Arrival(1 + n % 3, f"2026-01-0{1 + n % 3}T00:00:00+00:00"),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def write_segments(version: Path, parts: list[list[Document]], hidden: list[list[int]]) -> list[Segment]:
    """Write ``parts[0]`` as the base docs.sqlite of ``version`` and the rest as seg-<i> folders."""
    segments = []
    for i, (documents, gone) in enumerate(zip(parts, hidden, strict=True)):
        folder = version if i == 0 else version / f"seg-{i:06d}"
        folder.mkdir(parents=True, exist_ok=True)
        write_documents(folder / DOCS, documents)
        name = "" if i == 0 else folder.name
        segments.append(Segment(folder, name, len(documents), np.array(sorted(set(gone)), dtype=np.int64)))
    return segments


def live(parts: list[list[Document]], hidden: list[list[int]]) -> list[Document]:
    return [d for documents, gone in zip(parts, hidden, strict=True) for d in documents if doc_num(d.id) not in gone]


# Base 1..10; segment 1 re-writes 3 (new metadata, sources, aliases), adds 11 and 12, and holds a 9 that
# segment 2 re-writes again; 5 is gone (hidden, written nowhere else); segment 2 adds 13.
UPDATED_3 = doc(3, metadata={"year": 2031, "venue": "iclr", "tags": "y"}, sources=[Provenance("new.txt", "para", 0)])
PARTS = [
    [doc(n) for n in range(1, 11)],
    [UPDATED_3, doc(11), doc(12), doc(9, title="Nine again")],
    [
        doc(9, title="Nine, third time", aliases=[f"{0xBEEF:016x}"]),
        doc(13, added=Arrival(4, "2026-02-01T00:00:00+00:00")),
    ],
]
HIDDEN = [[3, 5, 9], [9], []]


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[tuple[DocumentStore, DocumentStore]]:
    """(the store over three segments, one docs.sqlite written with the live documents)."""
    segments = write_segments(tmp_path / "v", PARTS, HIDDEN)
    write_documents(tmp_path / "one.sqlite", live(PARTS, HIDDEN))
    many, one = DocumentStore.open_version(tmp_path / "v", segments), DocumentStore(tmp_path / "one.sqlite")
    try:
        yield many, one
    finally:
        many.close()
        one.close()


def test_every_method_answers_as_one_store_does(stores: tuple[DocumentStore, DocumentStore]) -> None:
    many, one = stores
    assert many.segment_tables is not None and one.segment_tables is None
    assert many.count() == one.count() == 12
    assert many.ids() == one.ids()
    nums = [doc_num(i) for i in one.ids()] + [5, 99]
    got = many.get_many(nums)
    assert got == one.get_many(nums)
    assert got[3] == UPDATED_3 and got[9].title == "Nine, third time" and 5 not in got
    assert list(many.iter_documents(batch=4)) == list(one.iter_documents(batch=4))
    assert many.positions() == one.positions()
    assert ("src/0.jsonl", "line", 3) not in many.positions()  # the stale copy's source is gone with it
    assert many.arrivals() == one.arrivals()
    assert many.latest_arrival() == one.latest_arrival() == 4
    assert many.alias_count() == one.alias_count()
    keys = [f"{n:016x}" for n in range(1, 15)] + [f"{n + 0xA000:016x}" for n in range(1, 14)]
    keys += [f"doi:10/{n}" for n in range(1, 14)] + [f"{0xBEEF:016x}", "000000000000000", "0000000000000001"]
    for key in keys:
        assert many.find(key) == one.find(key), key
    assert many.find(f"{5 + 0xA000:016x}") is None and many.find("doi:10/5") is None  # hidden: gone
    for prefix in ("0", "00000000000000", "000000000000000", "000000000000000c"):
        assert many.prefix_ids(prefix, limit=20) == one.prefix_ids(prefix, limit=20)
    assert many.has_filter_columns and many.has_arrivals
    assert many.has_table("aliases") and many.has_table("document_texts")


WHERE = [["venue=neurips"], ["venue=iclr"], ["venue!=neurips"], ["year>=2024"], ["year=2031"], ["year<2022"],
         ["title~graph"], ["title~nine"], ["tags=x"], ["tags!=t1"], ["tags=y"], ["file=src/*"], ["file!=new.txt"],
         ["source=all.txt"], ["id~00"], ["added>=2026-01-02"], ["added_version=4"], ["year>=abc"], ["venue=none"],
         ["nofield=1"], ["year<2021", "year>2030"], ["venue=acl", "title~graph"]]  # fmt: skip


def _answer(store: DocumentStore, where: list[str]) -> object:
    try:
        answer = FilterColumns(store.rows, store.path, store.segment_tables).evaluate(parse_where(where))
    except QueryError as exc:
        # Over segments the type mistake's example comes from the first segment that has the field.
        return str(exc).split("(e.g.")[0]
    return answer.nums.tolist(), answer.warnings


@pytest.mark.parametrize("where", WHERE)
def test_filters_answer_as_one_store_does(stores: tuple[DocumentStore, DocumentStore], where: list[str]) -> None:
    many, one = stores
    assert _answer(many, where) == _answer(one, where)


def test_hidden_values_do_not_count_in_the_survey(tmp_path: Path) -> None:
    """A value or field that only a hidden row held counts for nothing in type checks and warnings."""
    parts = [[doc(1, metadata={"n": "many", "gone": 1}), doc(2, metadata={"n": 4})], [doc(1, metadata={"n": 3})]]
    segments = write_segments(tmp_path / "v", parts, [[1], []])
    store = DocumentStore.open_version(tmp_path / "v", segments)
    try:
        with pytest.raises(QueryError, match="n holds numbers"):
            FilterColumns(store.rows, store.path, store.segment_tables).evaluate(parse_where(["n>=abc"]))
        answer = FilterColumns(store.rows, store.path, store.segment_tables).evaluate(parse_where(["nothere=1"]))
        assert answer.warnings == ["--where nothere=1 matches nothing: no document has a field 'nothere' "
                                   "(fields: file, id, n, title)"]  # fmt: skip
    finally:
        store.close()


@st.composite
def segmented(draw: st.DrawFn) -> tuple[list[list[Document]], list[list[int]]]:
    """Random documents spread over 1-3 segments; some re-written later with other values, some just hidden."""
    docs = draw(document_lists())
    later = draw(document_lists())  # their values, given to re-written copies
    count = draw(st.integers(1, 3))
    parts: list[list[Document]] = [[] for _ in range(count)]
    hidden: list[list[int]] = [[] for _ in range(count)]
    for i, d in enumerate(docs):
        at = draw(st.integers(0, count - 1))
        parts[at].append(d)
        if at < count - 1 and draw(st.booleans()):
            hidden[at].append(doc_num(d.id))
            if draw(st.booleans()):  # updated: written again in a later segment with another's values
                other = later[i % len(later)] if later else d
                again = dataclasses.replace(other, id=d.id)
                parts[draw(st.integers(at + 1, count - 1))].append(again)
    return parts, hidden


@MANY
@given(segmented(), st.lists(clauses, min_size=1, max_size=3))
def test_filters_over_segments_answer_as_the_live_store(
    spread: tuple[list[list[Document]], list[list[int]]], where: list[str]
) -> None:
    parts, hidden = spread
    try:
        parse_where(where)
    except QueryError:
        return
    with tempfile.TemporaryDirectory() as folder:
        segments = write_segments(Path(folder) / "v", parts, hidden)
        write_documents(Path(folder) / "one.sqlite", live(parts, hidden))
        many = DocumentStore.open_version(Path(folder) / "v", segments)
        one = DocumentStore(Path(folder) / "one.sqlite")
        try:
            assert _answer(many, where) == _answer(one, where)
            assert list(many.iter_documents()) == list(one.iter_documents())
        finally:
            many.close()
            one.close()


def test_one_segment_with_nothing_hidden_opens_the_file_as_before(tmp_path: Path) -> None:
    [base] = write_segments(tmp_path / "v", [[doc(1)]], [[]])
    store = DocumentStore.open_version(tmp_path / "v", [base])
    try:
        assert store.segment_tables is None
        assert {r[0] for r in store.rows("SELECT type FROM sqlite_temp_master")} == set()  # no views
    finally:
        store.close()


@pytest.mark.parametrize("damage", [b"not a database at all" * 100, None, b""])
def test_an_unreadable_segment_is_a_one_line_error(tmp_path: Path, damage: bytes | None) -> None:
    segments = write_segments(tmp_path / "v", PARTS[:2], HIDDEN[:2])
    broken = segments[1].folder / DOCS
    if damage is None:
        broken.unlink()
    else:
        broken.write_bytes(damage)  # empty: SQLite reads an empty database, with no documents table
    with pytest.raises(IndexCorruptError) as caught:
        DocumentStore.open_version(tmp_path / "v", segments)
    message = str(caught.value)
    assert "\n" not in message and str(broken) in message and "semsearch index --full" in message


def _segmented_version(tmp_path: Path, fake: FakeEmbedder, small_corpus: Path) -> tuple[Path, Path, list[Document]]:
    """A built index whose live version gains one extra segment: a re-written document and a new one."""
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, BuildOptions(progress=False), embedder=fake)
    version = current_version(index)
    base = DocumentStore(version / DOCS)
    try:
        old = list(base.iter_documents())
    finally:
        base.close()
    updated = dataclasses.replace(old[0], metadata={"venue": "segmented"})
    added = doc(0xC0FFEE)
    seg = version / "seg-000002"
    seg.mkdir()
    write_documents(seg / DOCS, [updated, added])
    nums = np.array([doc_num(updated.id), doc_num(added.id)], dtype=np.int64)
    write_vector_files(seg, nums, fake.encode([updated.embedding_text(), added.embedding_text()]))
    write_lexical(seg / "lexical", nums, [updated, added])
    write_hidden(version, {0: np.array([doc_num(old[0].id), doc_num(old[1].id)], dtype=np.int64)})
    manifest = json.loads((version / MANIFEST).read_text())
    manifest["format_version"] = 3
    manifest["segments"] = [{"name": seg.name, "rows": 2}]
    (version / MANIFEST).write_text(json.dumps(manifest))
    return index, version, [updated, added, *old[2:]]


def test_the_readers_of_a_version_see_its_segments(tmp_path: Path, fake: FakeEmbedder, small_corpus: Path) -> None:
    index, version, expected = _segmented_version(tmp_path, fake, small_corpus)
    previous = PreviousVersion.load(index)
    assert previous is not None and previous.ids == {d.id for d in expected}
    identity = read_identity(version)
    assert identity is not None and set(identity.owner.values()) == {d.id for d in expected}
    store = open_documents(version, Manifest.read(version))
    try:
        assert sorted(store.iter_documents(), key=lambda d: d.id) == sorted(expected, key=lambda d: d.id)
    finally:
        store.close()
    updated = expected[0]
    with Index.open(index, embedder=fake) as opened:  # as many documents as vectors: one hidden, one added
        assert opened.store.find(updated.id) == updated and opened.store.count() == len(expected)
        assert opened.allowed_rows(["venue=segmented"]).tolist() == [doc_num(updated.id)]
    manifest = Manifest.read(version)
    assert check_documents(version, manifest, len(expected), {doc_num(d.id) for d in expected}) == []
    assert check_documents(version, manifest, len(expected), {doc_num(d.id) for d in expected[1:]}) == [
        f"{version / DOCS}: 1 document ids differ from the vector ids"
    ]
    (version / "seg-000002" / DOCS).write_bytes(b"garbage" * 500)
    with pytest.raises(IndexCorruptError, match="seg-000002"):
        PreviousVersion.load(index)
    assert read_identity(version) is None  # a refresh then only loses the in-place-edit matching
    [problem] = check_documents(version, manifest, len(expected), {doc_num(d.id) for d in expected})
    assert problem.startswith(str(version / "seg-000002" / DOCS))


def test_a_base_older_than_some_tables_reads_them_as_empty_there(tmp_path: Path) -> None:
    segments = write_segments(tmp_path / "v", PARTS[:2], [[3, 9], []])
    conn = sqlite3.connect(tmp_path / "v" / DOCS)
    conn.executescript("DROP TABLE aliases; DROP TABLE document_texts; DROP TABLE title_only;")
    conn.close()
    stripped = [
        dataclasses.replace(d, aliases=[], texts=[], title_only=False)
        for d in PARTS[0]
        if d.id not in (doc(3).id, doc(9).id)
    ]
    write_documents(tmp_path / "one.sqlite", stripped + PARTS[1])
    many, one = DocumentStore.open_version(tmp_path / "v", segments), DocumentStore(tmp_path / "one.sqlite")
    try:
        assert many.has_table("aliases") and many.alias_count() == one.alias_count() > 0
        assert list(many.iter_documents()) == list(one.iter_documents())
        sql = "SELECT a.alias, d.id FROM {db}aliases a JOIN {db}documents d ON d.num = a.num"
        assert sorted(many.joined(sql)) == sorted(one.joined(sql))
        assert many.positions() == one.positions() and many.arrivals() == one.arrivals()
    finally:
        many.close()
        one.close()
