"""Tests for semsearch.ingest.sources: formats, fields, encodings, source expansion and bad input."""

from __future__ import annotations

import codecs
import gzip
import hashlib
import itertools
import json
import os
from collections.abc import Iterable
from pathlib import Path

import pytest

from semsearch.core.errors import InputError
from semsearch.core.records import Record
from semsearch.ingest.csv_rows import MAX_FIELD_CHARS, MAX_RECORD_LINES
from semsearch.ingest.sources import expand_sources, read_file, read_sources
from tests.helpers import FIXTURES, REPO, SHARED

INGEST = FIXTURES / "ingest"
SCIFACT = SHARED / "data" / "scifact" / "corpus.jsonl"
NEURIPS = SHARED / "data" / "mlanthology" / "neurips2025.jsonl.gz"

SEED_TEXT = "NeurIPS 2025 论文列表\n\nFirst abstract about retrieval.\n\nSecond abstract, wrapped\nover two lines.\n"
SEED_ABSTRACTS = ["First abstract about retrieval.", "Second abstract, wrapped over two lines."]


@pytest.fixture
def in_fixtures(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from the fixture directory, so provenance names files relative to it."""
    monkeypatch.chdir(INGEST)
    return INGEST


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run the test from tmp_path."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(path: Path, data: bytes | str) -> Path:
    """Write exact bytes (str is UTF-8 encoded, line ends untouched)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def input_error(path: Path, **kwargs: bool) -> str:
    """The message of the InputError that reading `path` raises; it must be a single line."""
    with pytest.raises(InputError) as info:
        read_file(path, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


def labels(records: list[Record]) -> list[str]:
    """The provenance labels of records, in order."""
    return [r.provenance.label() for r in records]


# ------------------------------------------------------------------------------------------- seed text


def test_seed_fixture_paragraphs_header_and_provenance(in_fixtures: Path) -> None:
    records, source, skipped = read_file(Path("seed.txt"))
    assert skipped == []
    assert labels(records) == ["seed.txt:paragraph 1", "seed.txt:paragraph 2", "seed.txt:paragraph 3"]
    assert {r.collection for r in records} == {"Workshop on Tiny Corpora"}
    # The re-wrapped paragraph is joined with single spaces; the tab-and-space line counted as blank.
    assert records[0].text == (
        "We study retrieval over very small corpora and show that re-wrapped lines are joined with single spaces."
    )
    assert records[2].text.startswith("A third abstract, after several blank lines")
    assert all(r.title is None and r.external_id is None and r.metadata == {} for r in records)
    raw = (in_fixtures / "seed.txt").read_bytes()
    assert source.path == str(in_fixtures / "seed.txt")
    assert (source.format, source.encoding, source.records, source.size) == ("seed", "utf-8", 3, len(raw))
    assert source.sha256 == hashlib.sha256(raw).hexdigest()


def test_seed_without_header_when_first_paragraph_is_long(in_tmp: Path) -> None:
    long_line = "A long opening abstract " * 10
    write(in_tmp / "a.txt", f"{long_line}\n\nSecond.\n")
    records, _, _ = read_file(in_tmp / "a.txt")
    assert [r.text for r in records] == [long_line.strip(), "Second."]
    assert [r.collection for r in records] == [None, None]


def test_seed_without_header_when_first_paragraph_has_several_lines(in_tmp: Path) -> None:
    write(in_tmp / "a.md", "Short first line\ncontinued here.\n\nSecond.\n")
    records, source, _ = read_file(in_tmp / "a.md")
    assert [r.text for r in records] == ["Short first line continued here.", "Second."]
    assert records[0].collection is None and source.format == "seed"


def test_seed_header_only_is_an_error(in_tmp: Path) -> None:
    write(in_tmp / "h.txt", "NeurIPS 2025 Papers\n\n   \n")
    assert input_error(in_tmp / "h.txt") == "h.txt: no abstracts found"


def test_real_seeds_give_95_records_in_5_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = read_sources(["seeds"])
    assert len(result.files) == 5 and len(result.records) == 95 and result.skipped == []
    assert {f.format for f in result.files} == {"seed"}
    assert [f.records for f in result.files] == [19] * 5
    assert {r.collection for r in result.records} == {"NeurIPS 2025 Papers", "NeurIPS 2025 论文列表"}
    for source in result.files:
        name = Path(source.path).name
        numbers = [r.provenance.number for r in result.records if r.provenance.file == f"seeds/{name}"]
        assert numbers == list(range(1, 20))
    assert all(r.provenance.kind == "paragraph" and len(r.text) > 200 for r in result.records)


# ----------------------------------------------------------------------------------- structured formats


def test_jsonl_fields_metadata_and_line_numbers(in_fixtures: Path) -> None:
    records, source, _ = read_file(Path("papers.jsonl"))
    # Line 2 is blank: numbers are physical lines.
    assert labels(records) == ["papers.jsonl:line 1", "papers.jsonl:line 3", "papers.jsonl:line 4"]
    first, second, third = records
    assert (first.external_id, first.title) == ("101", "Sparse Attention")
    assert first.text == "Sparse attention scales transformers to long inputs."
    # The nested BEIR-style metadata object is merged flat.
    assert first.metadata == {"venue": "neurips", "year": "2025", "authors": ["A. One", "B. Two"]}
    assert (second.external_id, second.title) == ("p-102", None)
    assert second.metadata == {"url": "https://example.org/102"}
    assert (third.external_id, third.title) == ("p-103", "Mixed Case Keys")
    assert third.text == "Field names are matched without regard to case."
    assert third.metadata == {"score": 0.5}
    assert all(r.collection is None for r in records)
    assert (source.format, source.records) == ("jsonl", 3)


def test_jsonl_bad_line_fails_with_file_and_line(in_fixtures: Path) -> None:
    message = input_error(Path("mixed.jsonl"))
    assert message == "mixed.jsonl:line 2: malformed JSON (Expecting ',' delimiter)"


def test_jsonl_skip_bad_lists_and_continues(in_fixtures: Path) -> None:
    records, source, skipped = read_file(Path("mixed.jsonl"), skip_bad=True)
    # Line 4 has a title and no abstract: a title-only record, not a bad one.
    assert labels(records) == ["mixed.jsonl:line 1", "mixed.jsonl:line 4", "mixed.jsonl:line 5"]
    assert [r.external_id for r in records] == ["ok-1", "no-text", "ok-2"]
    assert [r.title_only for r in records] == [False, True, False]
    assert (records[1].text, records[1].title) == ("Only a title", "Only a title")
    assert records[2].text == "The second good record, via the summary field."
    assert skipped == [
        "mixed.jsonl:line 2: malformed JSON (Expecting ',' delimiter)",
        "mixed.jsonl:line 3: not a JSON object (got array)",
    ]
    assert source.records == 3


def test_skip_bad_with_no_good_records_is_still_an_error(in_tmp: Path) -> None:
    write(in_tmp / "bad.jsonl", '{"venue": "x"}\n{oops\n')
    message = input_error(in_tmp / "bad.jsonl", skip_bad=True)
    assert message == "bad.jsonl: no abstracts found (2 bad records skipped)"


def test_empty_abstract_is_bad_and_first_non_empty_field_wins(in_tmp: Path) -> None:
    write(in_tmp / "e.jsonl", '{"abstract": "  ", "text": ""}\n{"abstract": "", "text": "From text."}\n')
    records, _, skipped = read_file(in_tmp / "e.jsonl", skip_bad=True)
    assert [r.text for r in records] == ["From text."]
    assert skipped == ["e.jsonl:line 1: empty abstract (field 'abstract') and no title"]


def test_json_object_holding_one_list(in_fixtures: Path) -> None:
    records, source, _ = read_file(Path("papers.json"))
    assert labels(records) == ["papers.json:record 1", "papers.json:record 2"]
    assert [r.external_id for r in records] == ["7", "8"]
    assert records[0].metadata == {"tags": ["ir"]}
    assert records[1].text == "The body field also holds abstracts."
    assert source.format == "json"


def test_json_array_with_bad_item_and_skip_bad(in_tmp: Path) -> None:
    write(in_tmp / "a.json", json.dumps([{"text": "One."}, 5, {"text": "Three."}]))
    assert input_error(in_tmp / "a.json") == "a.json:record 2: not a JSON object (got number)"
    records, _, skipped = read_file(in_tmp / "a.json", skip_bad=True)
    assert labels(records) == ["a.json:record 1", "a.json:record 3"]
    assert skipped == ["a.json:record 2: not a JSON object (got number)"]


def test_malformed_json_file_is_an_error_even_with_skip_bad(in_tmp: Path) -> None:
    write(in_tmp / "m.json", '[\n  {"text": "a"},\n  {"text": }\n]\n')
    message = input_error(in_tmp / "m.json", skip_bad=True)
    assert message == "m.json: malformed JSON (Expecting value at line 3 column 12)"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("[]", "no abstracts found"),
        ('{"papers": []}', "no abstracts found"),
        ('"just a string"', "expected a JSON array of objects or an object holding one, got string"),
        ('{"a": [{"text": "x"}], "b": [{"text": "y"}]}', "several lists could hold the records (a, b)"),
    ],
)
def test_json_without_usable_records(in_tmp: Path, content: str, reason: str) -> None:
    write(in_tmp / "x.json", content)
    assert input_error(in_tmp / "x.json") == f"x.json: {reason}"


def test_csv_quoted_multiline_field_and_case_insensitive_header(in_fixtures: Path) -> None:
    records, source, _ = read_file(Path("papers.csv"))
    assert labels(records) == ["papers.csv:row 1", "papers.csv:row 2"]
    assert records[0].text == "An abstract with a comma, and\na line break inside quotes."
    assert (records[0].external_id, records[0].title) == ("c1", "Quoted Fields")
    assert records[0].metadata == {"venue": "icml"}
    assert (records[1].title, records[1].metadata) == (None, {"venue": "iclr"})
    assert source.format == "csv"


def test_tsv(in_fixtures: Path) -> None:
    records, source, _ = read_file(Path("papers.tsv"))
    assert labels(records) == ["papers.tsv:row 1", "papers.tsv:row 2"]
    assert records[0].text == "An abstract in a TSV file, with a comma."
    assert (records[0].external_id, records[0].metadata) == ("t1", {"year": "2024"})
    assert source.format == "tsv"


def test_csv_row_without_abstract(in_tmp: Path) -> None:
    write(in_tmp / "r.csv", "id,abstract\n1,Good one.\n2,\n")
    assert input_error(in_tmp / "r.csv") == "r.csv:row 2: empty abstract (field 'abstract') and no title"


# Row 2 opens a quote it never closes: csv read the rest of the file into its title, "2 abstracts", exit 0.
STRAY_QUOTE_ROWS = [
    ("1", "A", "First abstract."),
    ("2", '"Stray title', "Second abstract."),
    ("3", "C", "Third abstract."),
    ("4", "D", "Fourth abstract."),
]


def _table(rows: list[tuple[str, ...]], delimiter: str, *, tail: str = "") -> str:
    return f"id{delimiter}title{delimiter}abstract\n" + "".join(delimiter.join(r) + "\n" for r in rows) + tail


@pytest.mark.parametrize(("name", "delimiter"), [("q.csv", ","), ("q.tsv", "\t")])
def test_unterminated_quote_is_named_by_its_line(in_tmp: Path, name: str, delimiter: str) -> None:
    path = write(in_tmp / name, _table(STRAY_QUOTE_ROWS, delimiter))
    message = input_error(path)
    assert message.startswith(f"{name}:line 3: unterminated quote: its field runs to the end of the file"), message
    # --skip-bad skips that row alone, says so, and reads every row after it.
    records, _, skipped = read_file(path, skip_bad=True)
    assert [(r.external_id, r.title, r.text) for r in records] == [
        ("1", "A", "First abstract."),
        ("3", "C", "Third abstract."),
        ("4", "D", "Fourth abstract."),
    ]
    assert labels(records) == [f"{name}:row 1", f"{name}:row 3", f"{name}:row 4"]
    assert len(skipped) == 1 and skipped[0].startswith(f"{name}:line 3: unterminated quote") and "(row 2)" in skipped[0]


def test_unterminated_quote_closed_by_a_later_quoted_field(in_tmp: Path) -> None:
    # The stray quote pairs with row 5's opening quote: csv merged rows 2-5 into one and read on.
    rows = [*STRAY_QUOTE_ROWS, ("5", '"Quoted, title"', "Fifth abstract."), ("6", "F", "Sixth abstract.")]
    path = write(in_tmp / "q.csv", _table(rows, ","))
    assert input_error(path).startswith("q.csv:line 3: unterminated quote: the record runs on to a quote on line 6")
    records, _, skipped = read_file(path, skip_bad=True)
    assert [r.external_id for r in records] == ["1", "3", "4", "5", "6"]
    assert records[3].title == "Quoted, title"
    assert [s.split(": ")[0] for s in skipped] == ["q.csv:line 3"]


def test_unterminated_quote_on_the_last_line(in_tmp: Path) -> None:
    path = write(in_tmp / "q.csv", _table(STRAY_QUOTE_ROWS[:1], ",", tail='2,B,"Cut off abstract.'))
    assert input_error(path).startswith("q.csv:line 3: unterminated quote: its field runs to the end of the file")
    records, _, skipped = read_file(path, skip_bad=True)
    assert [r.external_id for r in records] == ["1"] and len(skipped) == 1


def test_unterminated_quote_in_the_header_fails_the_file(in_tmp: Path) -> None:
    path = write(in_tmp / "q.csv", 'id,"title,abstract\n1,A,First.\n')
    for skip_bad in (False, True):
        assert input_error(path, skip_bad=skip_bad).startswith("q.csv:line 1: unterminated quote")


def test_a_record_running_past_the_line_bound(in_tmp: Path) -> None:
    body = "a line of text\n" * (MAX_RECORD_LINES + 1)
    path = write(in_tmp / "q.csv", f'id,abstract\n1,First.\n2,"{body}"\n')
    assert input_error(path).startswith(f"q.csv:line 3: unterminated quote? the record runs past {MAX_RECORD_LINES}")


def test_sound_quoting_reads_as_before(in_tmp: Path) -> None:
    # Paragraphs in a quoted field, a doubled quote, sloppy quotes within one line: no record is bad.
    text = (
        'id,title,abstract\n1,A,"Para one, with a comma.\n\nPara two with a ""quote""."\n'
        '2,"B" sloppy,Second.\n3,C,"Third, last, no newline at the end."'
    )
    records, _, skipped = read_file(write(in_tmp / "ok.csv", text))
    assert skipped == []
    assert [(r.external_id, r.title, r.text) for r in records] == [
        ("1", "A", 'Para one, with a comma.\n\nPara two with a "quote".'),
        ("2", "B sloppy", "Second."),
        ("3", "C", "Third, last, no newline at the end."),
    ]


def test_a_field_longer_than_csvs_default_limit_is_read(in_tmp: Path) -> None:
    long = "word " * 40_000  # 200,000 characters; csv's default limit is 131,072
    # In a title: an abstract that long is refused by its own cap (guards.MAX_ABSTRACT_CHARS), not by csv.
    path = write(in_tmp / "long.csv", f"id,title,abstract\n1,A,First.\n2,{long},Second.\n3,C,Third.\n")
    records, _, _ = read_file(path)
    assert [r.external_id for r in records] == ["1", "2", "3"] and records[1].title == long.strip()


@pytest.mark.parametrize("quoted", [False, True])
def test_a_field_past_the_bound_is_one_bad_row(in_tmp: Path, quoted: bool) -> None:
    huge = "x" * (MAX_FIELD_CHARS + 1)
    cell = f'"{huge[:1000]}\n{huge}"' if quoted else huge  # on one line, or spanning two
    path = write(in_tmp / "long.csv", f"id,abstract\n1,First.\n2,{cell}\n3,Third.\n")
    message = input_error(path)
    assert message.startswith("long.csv:row 2: field 'abstract' holds"), message
    assert f"more than {MAX_FIELD_CHARS:,}" in message
    records, _, skipped = read_file(path, skip_bad=True)
    assert [r.external_id for r in records] == ["1", "3"] and len(skipped) == 1


@pytest.mark.parametrize(
    ("name", "content", "fmt", "kind"),
    [
        ("data", '{"text": "a"}\n{"text": "b"}\n', "jsonl", "line"),
        ("data.json", '{"text": "a"}\n{"text": "b"}\n', "jsonl", "line"),
        ("data.txt", '[{"text": "a"}, {"text": "b"}]', "json", "record"),
        ("data", '{\n  "items": [{"text": "a"}, {"text": "b"}]\n}\n', "json", "record"),
        ("data.dat", "title,abstract\nT,a\nU,b\n", "csv", "row"),
        ("data", "id\tabstract\n1\ta\n2\tb\n", "tsv", "row"),
        ("notes", "Header\n\na\n\nb\n", "seed", "paragraph"),
    ],
)
def test_format_sniffing(in_tmp: Path, name: str, content: str, fmt: str, kind: str) -> None:
    records, source, _ = read_file(write(in_tmp / name, content))
    assert source.format == fmt
    assert [r.text for r in records] == ["a", "b"]
    assert {r.provenance.kind for r in records} == {kind}


def test_single_json_object_is_one_record(in_tmp: Path) -> None:
    write(in_tmp / "one.json", '{"id": 3, "abstract": "Alone.", "authors": ["X"]}')
    records, _, _ = read_file(in_tmp / "one.json")
    assert labels(records) == ["one.json:record 1"]
    assert (records[0].external_id, records[0].metadata) == ("3", {"authors": ["X"]})


def test_json_nan_becomes_null(in_tmp: Path) -> None:
    write(in_tmp / "n.jsonl", '{"text": "a", "score": NaN}\n{"text": "b", "score": Infinity}\n')
    records, _, _ = read_file(in_tmp / "n.jsonl")
    assert [r.metadata for r in records] == [{"score": None}, {"score": None}]


# ------------------------------------------------------------------------------------------------- gzip


def test_gzip_jsonl_is_read_transparently(in_tmp: Path) -> None:
    raw = gzip.compress((INGEST / "papers.jsonl").read_bytes())
    records, source, _ = read_file(write(in_tmp / "p.jsonl.gz", raw))
    assert labels(records) == ["p.jsonl.gz:line 1", "p.jsonl.gz:line 3", "p.jsonl.gz:line 4"]
    assert (source.format, source.size, source.sha256) == ("jsonl", len(raw), hashlib.sha256(raw).hexdigest())


def test_gzip_seed_text(in_tmp: Path) -> None:
    records, source, _ = read_file(write(in_tmp / "s.txt.gz", gzip.compress(SEED_TEXT.encode("utf-8"))))
    assert source.format == "seed" and [r.provenance.number for r in records] == [1, 2]


@pytest.mark.parametrize("data", [b"not gzip at all", gzip.compress(b'{"text": "a"}\n' * 50, mtime=0)[:40]])
def test_corrupt_gzip(in_tmp: Path, data: bytes) -> None:
    message = input_error(write(in_tmp / "c.jsonl.gz", data))
    assert message.startswith("c.jsonl.gz: corrupt gzip data")


# -------------------------------------------------------------------------------------------- encodings


def test_gbk_seed_with_chinese_header(in_tmp: Path) -> None:
    records, source, _ = read_file(write(in_tmp / "gbk.txt", SEED_TEXT.encode("gbk")))
    assert source.encoding == "gb18030"
    assert {r.collection for r in records} == {"NeurIPS 2025 论文列表"}
    assert [r.text for r in records] == SEED_ABSTRACTS


@pytest.mark.parametrize(
    ("bom", "codec", "name"),
    [
        (codecs.BOM_UTF16_LE, "utf-16-le", "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be", "utf-16-be"),
        (codecs.BOM_UTF8, "utf-8", "utf-8-sig"),
    ],
)
def test_bom_encodings(in_tmp: Path, bom: bytes, codec: str, name: str) -> None:
    records, source, _ = read_file(write(in_tmp / "b.txt", bom + SEED_TEXT.encode(codec)))
    assert source.encoding == name
    assert records[0].collection == "NeurIPS 2025 论文列表"  # no stray U+FEFF
    assert records[1].text == "Second abstract, wrapped over two lines."


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_crlf_and_cr_line_ends(in_tmp: Path, newline: str) -> None:
    data = codecs.BOM_UTF8 + SEED_TEXT.replace("\n", newline).encode("utf-8")
    records, _, _ = read_file(write(in_tmp / "w.txt", data))
    assert [r.text for r in records] == SEED_ABSTRACTS
    assert all("\r" not in r.text for r in records)


def test_crlf_jsonl_keeps_physical_line_numbers(in_tmp: Path) -> None:
    write(in_tmp / "w.jsonl", '{"text": "a"}\r\n\r\n{"text": "b"}\r\n{bad\r\n')
    assert input_error(in_tmp / "w.jsonl").startswith("w.jsonl:line 4: malformed JSON")
    records, _, _ = read_file(in_tmp / "w.jsonl", skip_bad=True)
    assert [r.provenance.number for r in records] == [1, 3]


def test_undetectable_encoding(in_tmp: Path) -> None:
    message = input_error(write(in_tmp / "l.txt", "Header\n\nCafé au lait \x80.\n".encode("latin-1")))
    assert message == "cannot detect the text encoding of l.txt (tried utf-8, utf-16, gb18030)"


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",  # NUL bytes
        b"\x01\x02\x03header\x04\x05\xc2\xdb",  # decodes as GB18030, but full of control characters
    ],
)
def test_binary_file(in_tmp: Path, data: bytes) -> None:
    assert input_error(write(in_tmp / "pic.txt", data)) == "pic.txt: binary file, not text"


# ------------------------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize("data", [b"", b"  \n\t\r\n  ", codecs.BOM_UTF8 + b"\n"])
def test_empty_file(in_tmp: Path, data: bytes) -> None:
    assert input_error(write(in_tmp / "e.txt", data)) == "e.txt: empty file"


def test_missing_path(in_tmp: Path) -> None:
    with pytest.raises(InputError, match=r"^no such file or directory: nope\.txt$"):
        expand_sources(["nope.txt"])
    with pytest.raises(InputError, match=r"^no such file or directory: nothing/\*\.jsonl$"):
        read_sources(["nothing/*.jsonl"])
    assert input_error(in_tmp / "nope.txt") == "no such file or directory: nope.txt"


def test_directory_without_usable_files(in_tmp: Path) -> None:
    write(in_tmp / "d" / ".hidden.txt", SEED_TEXT)
    write(in_tmp / "d" / "image.png", b"\x89PNG")
    with pytest.raises(InputError, match=r"^d: no readable abstract files"):
        read_sources(["d"])
    (in_tmp / "empty").mkdir()
    with pytest.raises(InputError, match=r"^empty: no readable abstract files"):
        expand_sources(["empty"])


def test_unreadable_file_reported(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(in_tmp / "locked.txt", SEED_TEXT)

    def deny(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    assert input_error(path) == "locked.txt: permission denied"


def test_directory_of_unreadable_files(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(in_tmp / "d" / "locked.txt", SEED_TEXT)
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    with pytest.raises(InputError, match=r"^d: no readable abstract files"):
        expand_sources(["d"])


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_by_permissions(in_tmp: Path) -> None:
    path = write(in_tmp / "locked.txt", SEED_TEXT)
    path.chmod(0)
    assert input_error(path) == "locked.txt: permission denied"
    with pytest.raises(InputError, match="no readable abstract files"):
        expand_sources([str(in_tmp)])


def test_directory_passed_to_read_file(in_tmp: Path) -> None:
    (in_tmp / "d").mkdir()
    assert input_error(in_tmp / "d") == "d: is a directory, not a file"


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("deep.json", b"[" * 100_000),
        ("deep.jsonl", b'{"text": "a"}\n' + b"[" * 100_000 + b"\n"),
        ("huge.csv", b"id,abstract\n1," + b"x" * (MAX_FIELD_CHARS + 1) + b"\n"),
        ("odd.jsonl", b'{"text": "a"}\n{"text": "b", "n": ' + b"9" * 5000 + b"}\n"),
        ("rand.bin", bytes(range(256)) * 8),
    ],
)
def test_odd_input_raises_only_input_error(in_tmp: Path, name: str, data: bytes) -> None:
    message = input_error(write(in_tmp / name, data))
    assert message.startswith(name)


# ------------------------------------------------------------------------------------ expanding sources


def _tree(root: Path) -> None:
    """A directory tree with data files, hidden and backup files, and files of unknown types."""
    write(root / "b.txt", SEED_TEXT)
    write(root / "a" / "x.jsonl", '{"text": "x"}\n')
    write(root / "a" / "deeper" / "y.csv.gz", gzip.compress(b"abstract\ny\n"))
    write(root / "a" / "readme.docx", b"PK\x03\x04")
    write(root / ".hidden.txt", SEED_TEXT)
    write(root / "~$lock.txt", SEED_TEXT)
    write(root / ".git" / "notes.txt", SEED_TEXT)


def test_directory_is_walked_recursively_skipping_hidden(in_tmp: Path) -> None:
    _tree(in_tmp / "data")
    paths = expand_sources(["data"])
    assert paths == [
        in_tmp / "data" / "a" / "deeper" / "y.csv.gz",
        in_tmp / "data" / "a" / "x.jsonl",
        in_tmp / "data" / "b.txt",
    ]
    assert all(p.is_absolute() for p in paths)


def test_globs_and_deduplication(in_tmp: Path) -> None:
    _tree(in_tmp / "data")
    assert expand_sources(["data/**/*.jsonl"]) == [in_tmp / "data" / "a" / "x.jsonl"]
    assert expand_sources(["data/*.txt"]) == [in_tmp / "data" / "b.txt"]
    # A file named twice, once through a directory and once through a relative path, is read once.
    assert expand_sources(["data/a", "./data/a/x.jsonl", str(in_tmp / "data" / "a" / "x.jsonl")]) == [
        in_tmp / "data" / "a" / "deeper" / "y.csv.gz",
        in_tmp / "data" / "a" / "x.jsonl",
    ]


def test_explicit_file_is_read_whatever_its_name(in_tmp: Path) -> None:
    write(in_tmp / ".notes", SEED_TEXT)
    assert expand_sources([".notes"]) == [in_tmp / ".notes"]


def test_read_sources_combines_files(in_tmp: Path) -> None:
    _tree(in_tmp / "data")
    write(in_tmp / "data" / "a" / "bad.jsonl", '{"text": "ok"}\n[1]\n')
    result = read_sources(["data"], skip_bad=True)
    assert [Path(f.path).name for f in result.files] == ["bad.jsonl", "y.csv.gz", "x.jsonl", "b.txt"]
    assert [r.provenance.label() for r in result.records] == [
        "data/a/bad.jsonl:line 1",
        "data/a/deeper/y.csv.gz:row 1",
        "data/a/x.jsonl:line 1",
        "data/b.txt:paragraph 1",
        "data/b.txt:paragraph 2",
    ]
    assert result.skipped == ["data/a/bad.jsonl:line 2: not a JSON object (got array)"]


def test_provenance_is_absolute_outside_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "data" / "s.txt", SEED_TEXT)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    records, source, _ = read_file(path)
    assert records[0].provenance.file == str(path) == source.path


# ---------------------------------------------------------------------------------- shared datasets


def _head_lines(lines: Iterable[bytes], count: int) -> bytes:
    """The first `count` lines of a binary file, as bytes."""
    return b"".join(itertools.islice(lines, count))


@pytest.mark.skipif(not SCIFACT.exists(), reason="shared SciFact data not present")
def test_scifact_corpus_slice_loads_as_is(in_tmp: Path) -> None:
    with SCIFACT.open("rb") as handle:
        head = _head_lines(handle, 50)
    records, source, skipped = read_file(write(in_tmp / "corpus.jsonl", head))
    assert len(records) == 50 and skipped == [] and source.format == "jsonl"
    first = json.loads(head.split(b"\n", 1)[0])
    assert records[0].external_id == first["_id"] and records[0].title == first["title"]
    assert records[0].text == first["text"].strip()
    assert all(r.text and r.external_id for r in records)


@pytest.mark.skipif(not NEURIPS.exists(), reason="shared ML Anthology data not present")
def test_neurips2025_slice_loads_as_is(in_tmp: Path) -> None:
    with gzip.open(NEURIPS, "rb") as handle:
        head = _head_lines(handle, 50)
    records, source, skipped = read_file(write(in_tmp / "neurips.jsonl.gz", gzip.compress(head)))
    assert len(records) == 50 and skipped == [] and source.format == "jsonl"
    first = json.loads(head.split(b"\n", 1)[0])
    assert records[0].external_id == first["_id"] and records[0].title == first["title"]
    # The nested metadata object is flattened: its keys, not "metadata", sit in Record.metadata.
    assert "metadata" not in records[0].metadata
    assert records[0].metadata["venue"] == "neurips" and records[0].metadata["year"] == "2025"
    assert isinstance(records[0].metadata["authors"], list) and records[0].metadata["authors"]
    assert json.loads(json.dumps([r.metadata for r in records])) == [r.metadata for r in records]
