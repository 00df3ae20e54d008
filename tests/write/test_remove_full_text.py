"""Removing sources from a full-text index leaves what a full build of the remaining sources would: a kept paper
that lost every source of its full text (its PDF, a Zotero item's attachment) keeps no passages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from semsearch.query.search import Index
from semsearch.store.layout import current_version
from semsearch.store.manifest import Manifest
from semsearch.write.build import BuildOptions, build_index
from semsearch.write.remove import remove_documents
from semsearch.write.verify import verify_index
from tests.helpers import PDF_EXPECTED, PDFS, FakeEmbedder, Library, passages_by_title

FULL = BuildOptions(progress=False, full_text=True, map_method="off")  # no map: every change fits a segment
REBUILD = BuildOptions(progress=False, map_method="off", full=True)
MERGED = "05-twocol.pdf"  # a PDF whose paper a JSONL record also gives (the same title and abstract)
OTHER = "01-single.pdf"  # a PDF of its own


def _segments(index_path: Path) -> int:
    return len(Manifest.read(current_version(index_path)).segments)


def _copy_as_jsonl(papers: Path, name: str) -> Path:
    exp = PDF_EXPECTED[name]
    row = {"id": "j1", "title": exp["title"], "abstract": exp["abstract"]}
    path = papers / "papers.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


def _papers(tmp_path: Path) -> Path:
    papers = tmp_path / "papers"
    papers.mkdir()
    for name in (MERGED, OTHER):
        shutil.copy(PDFS / name, papers / name)
    _copy_as_jsonl(papers, MERGED)
    return papers


@pytest.mark.parametrize("share", [0.1, 1.0])  # a removal rewritten whole; one that would fit a segment
def test_removing_a_papers_pdf_drops_its_passages_as_a_full_build(tmp_path: Path, share: float) -> None:
    papers = _papers(tmp_path)
    index = tmp_path / "idx"
    assert build_index([str(papers)], index, FULL, embedder=FakeEmbedder()).documents == 2
    title = PDF_EXPECTED[MERGED]["title"]
    before = passages_by_title(index)
    assert len(before[title]) > 10

    summary = remove_documents(index, sources=[str(papers / MERGED)], merge_share=share, map_method="off")
    assert (summary.removed, summary.documents) == (0, 2)  # the paper stays: its JSONL record still gives it
    after = passages_by_title(index)
    assert after == {**before, title: []}
    with Index.open(index, embedder=FakeEmbedder()) as opened:
        assert opened.passages is not None
        (doc,) = [d for d in opened.store.iter_documents() if d.title == title]
        assert all(f.num != int(doc.id, 16) for f in opened.passages.top(np.ones(64) / 8.0, 1000))
        assert all(h.passage is None for h in opened.search(title, 2) if h.id == doc.id)
    assert verify_index(index) == []
    build_index(None, index, REBUILD, embedder=FakeEmbedder())  # the remaining sources, read again
    assert passages_by_title(index) == after


def test_removing_another_source_keeps_the_pdfs_passages_in_a_segment(tmp_path: Path) -> None:
    papers = _papers(tmp_path)
    index = tmp_path / "idx"
    build_index([str(papers)], index, FULL, embedder=FakeEmbedder())
    before = passages_by_title(index)
    remove_documents(index, sources=[str(papers / "papers.jsonl")], merge_share=1.0, map_method="off")
    assert _segments(index) == 1  # nothing to drop: the removal stays a segment
    assert passages_by_title(index) == before
    assert verify_index(index) == []


def test_removing_a_zotero_library_drops_the_passages_its_attachment_gave(tmp_path: Path) -> None:
    exp = PDF_EXPECTED[MERGED]
    folder = tmp_path / "Zotero"
    folder.mkdir()
    lib = Library(folder / "zotero.sqlite")
    parent = lib.add("journalArticle", "PAPER001", title=exp["title"], abstractNote=exp["abstract"])
    lib.attach(parent, "ATTACH01", "storage:paper.pdf", PDFS / MERGED)
    lib.close()
    papers = tmp_path / "papers"
    papers.mkdir()
    jsonl = _copy_as_jsonl(papers, MERGED)
    index = tmp_path / "idx"
    sources = [str(folder / "zotero.sqlite"), str(jsonl)]
    assert build_index(sources, index, FULL, embedder=FakeEmbedder()).documents == 1
    assert len(passages_by_title(index)[exp["title"]]) > 10

    remove_documents(index, sources=[str(folder / "zotero.sqlite")], merge_share=1.0, map_method="off")
    assert passages_by_title(index) == {exp["title"]: []}
    assert verify_index(index) == []
