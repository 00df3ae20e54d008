"""A PDF's full text by page (``--full-text``): passages of a few sentences, each with its page, cached by content."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from semsearch.core.records import Passage
from semsearch.ingest import pdf_text
from semsearch.ingest.sources import read_sources
from tests.helpers import BAD_PDFS, PDF_EXPECTED, PDFS, Library, pdf_compare_form


def _found(passages: list[Passage], sentence: str) -> list[int]:
    """The pages of the passages that hold a sentence whole."""
    want = pdf_compare_form(sentence)
    return [p.page for p in passages if want in pdf_compare_form(p.text)]


@pytest.mark.parametrize("name", sorted(PDF_EXPECTED))
def test_every_body_sentence_is_in_a_passage_of_its_page(name: str) -> None:
    passages = pdf_text.full_text_of(PDFS / name)
    assert passages and all(p.page >= 1 for p in passages)
    assert max(p.page for p in passages) <= PDF_EXPECTED[name]["pages"]
    for body in PDF_EXPECTED[name]["body"]:
        assert body["page"] in _found(passages, body["text"]), body["text"][:60]
    # A passage is a few sentences of one page, short enough for the encoder to read whole.
    assert all(len(p.text.split()) <= pdf_text.PASSAGE_WORDS for p in passages)


def test_running_headers_page_numbers_and_references_are_left_out() -> None:
    passages = pdf_text.full_text_of(PDFS / "03-single-runhead.pdf")
    texts = " ".join(p.text for p in passages)
    assert "REFERENCES" not in texts and "References" not in texts
    pages = pdf_text.read_pages((PDFS / "03-single-runhead.pdf").read_bytes())
    heads = [page.split(" ")[:4] for page in pages[1:]]
    assert len({" ".join(h) for h in heads}) == len(heads)  # no page opens with the same running header


def test_two_columns_keep_their_reading_order_within_a_passage() -> None:
    exp = PDF_EXPECTED["17-twocol-rightfirst.pdf"]  # the right column is drawn first
    passages = pdf_text.full_text_of(PDFS / "17-twocol-rightfirst.pdf")
    for body in exp["body"]:
        assert _found(passages, body["text"]) == [body["page"]]


def test_passages_are_cached_apart_from_the_head_and_read_once(
    tmp_path: Path, pdf_cache: Path, text_reads: list[bytes]
) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(PDFS / "05-twocol.pdf", papers / "a.pdf")
    read_sources([str(papers)])  # an abstract-only read: no full-text entry
    assert not list(pdf_cache.glob("*.full.json")) and not text_reads
    first = pdf_text.full_text_of(papers / "a.pdf")
    shutil.copy(papers / "a.pdf", papers / "b.pdf")  # the same content under another name
    assert pdf_text.full_text_of(papers / "b.pdf") == first
    assert len(text_reads) == 1
    (entry,) = pdf_cache.glob("*.full.json")
    assert json.loads(entry.read_text(encoding="utf-8"))["version"] == pdf_text.FULL_TEXT_VERSION
    entry.write_text("{damaged", encoding="utf-8")  # a damaged entry is read again
    assert pdf_text.full_text_of(papers / "a.pdf") == first
    assert len(text_reads) == 2


@pytest.mark.parametrize("name", sorted(BAD_PDFS))
def test_a_bad_pdf_has_no_passages(name: str) -> None:
    assert pdf_text.full_text_of(PDFS / "bad" / name) == []


def test_a_book_is_read_up_to_the_page_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(PDFS))
    try:
        from make_fixtures import make_big_pdf
    finally:
        sys.path.remove(str(PDFS))
    book = tmp_path / "book.pdf"
    make_big_pdf(book, pages=40)
    monkeypatch.setattr(pdf_text, "MAX_PAGES", 12)
    pages = pdf_text.read_pages(book.read_bytes())
    assert len(pages) == 12


def test_page_passages_split_a_long_run_by_words() -> None:
    text = "One short sentence here. " + " ".join(["Word"] * 250) + ". Last one here."
    out = pdf_text.page_passages(text)
    assert all(len(p.split()) <= pdf_text.PASSAGE_WORDS for p in out)
    assert out[0] == "One short sentence here."


def test_a_zotero_item_with_an_abstract_takes_its_attachment_full_text(tmp_path: Path) -> None:
    folder = tmp_path / "Zotero"
    folder.mkdir()
    lib = Library(folder / "zotero.sqlite")
    parent = lib.add("journalArticle", "PAPER001", title="Own title", abstractNote="The library's own abstract.")
    lib.attach(parent, "ATTACH01", "storage:paper.pdf", PDFS / "09-twocol-hyphen.pdf")
    lib.close()
    (record,) = read_sources([str(folder / "zotero.sqlite")]).records
    assert record.text == "The library's own abstract." and not record.passages  # nothing read yet
    pdf_text.add_full_text([record])
    body = PDF_EXPECTED["09-twocol-hyphen.pdf"]["body"][0]
    assert body["page"] in _found(record.passages, body["text"])


def test_a_missing_attachment_leaves_the_record_without_passages(tmp_path: Path) -> None:
    (record,) = read_sources([str(PDFS / "01-single.pdf")]).records
    record.metadata["file"] = str(tmp_path / "gone.pdf")  # moved away since it was read
    pdf_text.add_full_text([record])
    assert record.passages == []
