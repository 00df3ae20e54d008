"""Zotero attachments: an item without an abstract takes it from its PDF in storage/ (or a linked file)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from semsearch.ingest.sources import read_sources
from tests.helpers import PDF_EXPECTED, PDFS, Library, pdf_compare_form

TITLE = "The library's own title"


def _library(tmp_path: Path, attachments: list[tuple[str, str | None, str]], **fields: str) -> Path:
    """A Zotero folder with one paper and its PDF attachments: (attachment key, fixture copied in or None, path)."""
    folder = tmp_path / "Zotero"
    folder.mkdir()
    lib = Library(folder / "zotero.sqlite")
    parent = lib.add("journalArticle", "PAPER001", title=TITLE, creators=(("Ada", "Lovelace", "author"),), **fields)
    for key, fixture, where in attachments:
        lib.attach(parent, key, where, PDFS / fixture if fixture is not None else None)
    lib.close()
    return folder / "zotero.sqlite"


def test_an_item_without_abstract_takes_it_from_its_stored_pdf(tmp_path: Path, pdf_reads: list[Path]) -> None:
    database = _library(tmp_path, [("ATTACH01", "05-twocol.pdf", "storage:Lovelace - 2021.pdf")])
    (record,) = read_sources([str(database)]).records
    assert not record.title_only
    assert pdf_compare_form(record.text) == pdf_compare_form(PDF_EXPECTED["05-twocol.pdf"]["abstract"])
    assert record.title == TITLE and record.metadata["authors"] == ["Ada Lovelace"]
    assert record.metadata["abstract_source"] == "pdf"
    stored = tmp_path / "Zotero" / "storage" / "ATTACH01" / "Lovelace - 2021.pdf"
    assert record.metadata["pdf"] == str(stored.resolve())
    assert len(pdf_reads) == 1
    read_sources([str(database)])  # read again: the cache by content answers
    assert len(pdf_reads) == 1


def test_a_linked_file_is_read_where_it_lies(tmp_path: Path) -> None:
    linked = tmp_path / "elsewhere" / "paper.pdf"
    linked.parent.mkdir()
    shutil.copy(PDFS / "01-single.pdf", linked)
    database = _library(tmp_path, [("LINKED01", None, str(linked))])
    (record,) = read_sources([str(database)]).records
    assert pdf_compare_form(record.text) == pdf_compare_form(PDF_EXPECTED["01-single.pdf"]["abstract"])
    assert record.metadata["pdf"] == str(linked.resolve())


def test_an_item_with_an_abstract_never_reads_its_pdf(tmp_path: Path, pdf_reads: list[Path]) -> None:
    database = _library(
        tmp_path, [("ATTACH01", "05-twocol.pdf", "storage:paper.pdf")], abstractNote="The library's abstract."
    )
    (record,) = read_sources([str(database)]).records
    assert record.text == "The library's abstract." and "abstract_source" not in record.metadata
    assert "pdf" not in record.metadata
    assert pdf_reads == []


@pytest.mark.parametrize(
    "attachment",
    [
        ("MISSING1", None, "storage:gone.pdf"),  # the file was never synced
        ("ENCRYPT1", "bad/encrypted.pdf", "storage:locked.pdf"),  # needs a password
        ("NOTAPDF1", "bad/not-a-pdf.pdf", "storage:not.pdf"),
        ("RELATIVE", None, "attachments:papers/base-folder.pdf"),  # a base folder the database does not hold
    ],
)
def test_a_missing_or_unreadable_attachment_leaves_the_item_title_only(
    tmp_path: Path, attachment: tuple[str, str | None, str]
) -> None:
    database = _library(tmp_path, [attachment])
    result = read_sources([str(database)])
    (record,) = result.records
    assert record.title_only and record.text == TITLE
    assert result.skipped == []  # silent: a library holds many such items
    assert "pdf" not in record.metadata and "abstract_source" not in record.metadata


def test_a_bad_attachment_gives_way_to_the_next_one(tmp_path: Path) -> None:
    bad = PDFS / "bad" / "encrypted.pdf"
    database = _library(tmp_path, [("ENCRYPT1", None, str(bad)), ("ATTACH02", "06-twocol.pdf", "storage:good.pdf")])
    (record,) = read_sources([str(database)]).records
    assert pdf_compare_form(record.text) == pdf_compare_form(PDF_EXPECTED["06-twocol.pdf"]["abstract"])
