"""PDFs as a source: title, authors and abstract from the fixture papers, bad files, the cache, the folder walk."""

from __future__ import annotations

import json
import re
import shutil
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from semsearch.ingest import pdf
from semsearch.ingest.pdf_layout import column_order, page_lines
from tests.helpers import BAD_PDFS, PDF_EXPECTED, PDFS, FakeEmbedder, pdf_compare_form, run


@pytest.fixture(scope="module")
def heads() -> dict[str, pdf.PdfHead]:
    return {e["file"]: pdf.extract((PDFS / e["file"]).read_bytes(), PDFS / e["file"]) for e in PDF_EXPECTED.values()}


def test_every_fixture_reads_its_title_authors_and_abstract_exactly(heads: dict[str, pdf.PdfHead]) -> None:
    wrong: list[str] = []
    for exp in PDF_EXPECTED.values():
        head = heads[exp["file"]]
        if pdf_compare_form(head.title) != pdf_compare_form(exp["title"]):
            wrong.append(f"{exp['file']} title: {head.title!r}")
        if [pdf_compare_form(a) for a in head.authors] != [pdf_compare_form(a) for a in exp["authors"]]:
            wrong.append(f"{exp['file']} authors: {head.authors!r}")
        if pdf_compare_form(head.abstract) != pdf_compare_form(exp["abstract"]):
            wrong.append(f"{exp['file']} abstract: {head.abstract[:80]!r}")
        if (head.abstract_source == "heading") != exp["abstract_heading"]:
            wrong.append(f"{exp['file']} abstract source: {head.abstract_source}")
        assert head.pages == exp["pages"]
    assert not wrong, "\n".join(wrong)  # 19/19 titles, authors and abstracts (the issue asks >= 95%, 90%)


def test_a_paper_without_an_abstract_heading_is_flagged(tmp_path: Path) -> None:
    source = PDFS / "15-single-noheading.pdf"
    shutil.copy(source, tmp_path / "paper.pdf")
    records, _, _ = pdf.read_pdf(tmp_path / "paper.pdf", "paper.pdf")
    assert records[0].metadata["abstract_source"] == "first-paragraph"
    headed, _, _ = pdf.read_pdf(PDFS / "01-single.pdf", "01-single.pdf")
    assert "abstract_source" not in headed[0].metadata
    assert headed[0].metadata["file"] == str((PDFS / "01-single.pdf").resolve())
    assert headed[0].metadata["pages"] == 5


@pytest.mark.parametrize("name", ["17-twocol-rightfirst.pdf", "18-twocol-rightfirst.pdf", "09-twocol-hyphen.pdf"])
def test_two_columns_read_left_then_right_even_when_drawn_right_first(name: str) -> None:
    import pypdfium2 as pdfium

    exp = PDF_EXPECTED[name]
    document = pdfium.PdfDocument(str(PDFS / name))
    try:
        texts = []
        for index in range(len(document)):
            page = document[index]
            textpage = page.get_textpage()
            lines = column_order(page_lines(textpage, page.get_height()), page.get_width())
            texts.append("\n".join(line.text for line in lines))
            textpage.close()
            page.close()
    finally:
        document.close()
    whole = _squash("\n".join(texts))
    found = [whole.find(_squash(start["text"])) for start in exp["paragraph_starts"]]
    assert all(p >= 0 for p in found)
    assert found == sorted(found)


def _squash(text: str) -> str:
    return re.sub(r"[\s\-\u2010\u00ad\ufffe\x02]+", "", unicodedata.normalize("NFKC", text))


def _papers(tmp_path: Path, *names: str, bad: bool = False) -> Path:
    """A folder holding copies of fixture PDFs (never the fixture folder: its expected.jsonl would be read)."""
    folder = tmp_path / "papers"
    folder.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(PDFS / name, folder / name)
    if bad:
        for name in BAD_PDFS:
            shutil.copy(PDFS / "bad" / name, folder / name)
    return folder


def test_each_bad_pdf_is_one_line_and_the_build_goes_on(tmp_path: Path) -> None:
    papers = _papers(tmp_path, "01-single.pdf", "encrypted-owner-only.pdf", bad=True)
    index = tmp_path / "idx"
    built = run(["index", str(papers), "--index", str(index)], FakeEmbedder())
    assert built.exit_code == 0, built.output
    assert "Traceback" not in built.output
    for name, reason in BAD_PDFS.items():
        lines = [line for line in built.output.splitlines() if name in line]
        assert len(lines) == 1, built.output
        assert reason in lines[0]
    # The owner-password-only file opens without a password: a good paper (the same as 01, so one document).
    assert "encrypted-owner-only.pdf" not in built.output
    assert "read 2 abstracts from 7 files" in built.output
    again = run(["index", str(papers), "--index", str(index)], FakeEmbedder())
    assert again.exit_code == 0 and "up to date" in again.output, again.output


def test_a_book_is_read_from_its_first_pages_only(tmp_path: Path) -> None:
    sys.path.insert(0, str(PDFS))
    try:
        from make_fixtures import make_big_pdf
    finally:
        sys.path.remove(str(PDFS))
    book = tmp_path / "book.pdf"
    make_big_pdf(book, pages=2000)
    start = time.perf_counter()
    head = pdf.extract(book.read_bytes(), book)
    assert time.perf_counter() - start < 5
    assert head.pages == 2000


def test_an_unchanged_pdf_is_never_read_again(tmp_path: Path, pdf_reads: list[Path]) -> None:
    calls = pdf_reads
    papers = _papers(tmp_path, "05-twocol.pdf")
    first, _, _ = pdf.read_pdf(papers / "05-twocol.pdf", "05-twocol.pdf")
    shutil.copy(papers / "05-twocol.pdf", papers / "renamed.pdf")  # same content under another name
    second, _, _ = pdf.read_pdf(papers / "renamed.pdf", "renamed.pdf")
    assert len(calls) == 1
    assert first[0].title == second[0].title and first[0].text == second[0].text
    # Bad files are remembered too; a changed file is read again.
    _papers(tmp_path, bad=True)
    pdf.read_pdf(papers / "encrypted.pdf", "encrypted.pdf")
    pdf.read_pdf(papers / "encrypted.pdf", "encrypted.pdf")
    assert len(calls) == 2
    with (papers / "renamed.pdf").open("ab") as handle:
        handle.write(b"%edited\n")
    pdf.read_pdf(papers / "renamed.pdf", "renamed.pdf")
    assert len(calls) == 3


def test_a_damaged_cache_entry_is_read_again(tmp_path: Path, pdf_cache: Path) -> None:
    papers = _papers(tmp_path, "06-twocol.pdf")
    good, _, _ = pdf.read_pdf(papers / "06-twocol.pdf", "06-twocol.pdf")
    (entry,) = pdf_cache.glob("*.json")
    entry.write_text("{not json", encoding="utf-8")
    again, _, _ = pdf.read_pdf(papers / "06-twocol.pdf", "06-twocol.pdf")
    assert again[0].text == good[0].text
    assert json.loads(entry.read_text(encoding="utf-8"))["version"] == pdf.EXTRACTOR_VERSION


def test_a_folder_mixing_pdf_and_jsonl_is_indexed_and_a_query_finds_the_pdf(tmp_path: Path) -> None:
    papers = _papers(tmp_path, "11-twocol-ieee.pdf", "03-single-runhead.pdf")
    (papers / "more.jsonl").write_text(
        json.dumps({"id": "j1", "title": "Graphs", "abstract": "Message passing networks learn on molecules."}) + "\n",
        encoding="utf-8",
    )
    (papers / "notes.xyz").write_text("not read", encoding="utf-8")
    index = tmp_path / "idx"
    fake = FakeEmbedder()
    built = run(["index", str(papers), "--index", str(index)], fake)
    assert built.exit_code == 0, built.output
    assert "read 3 abstracts from 3 files" in built.output
    exp = PDF_EXPECTED["11-twocol-ieee.pdf"]
    words = " ".join(exp["abstract"].split()[5:25])
    found = run(["query", words, "--index", str(index), "-k", "1", "--json"], fake)
    assert found.exit_code == 0, found.output
    hits: Any = json.loads(found.output)
    first = hits["results"][0] if isinstance(hits, dict) else hits[0]
    assert pdf_compare_form(first["title"]) == pdf_compare_form(exp["title"])
