"""In a browser: a paper read from a PDF has a "PDF" link on its hit and its page, and the link opens the file."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import PDF_EXPECTED, PDFS, browser_ready, semsearch, serving

pytestmark = pytest.mark.slow

PAPER = "05-twocol.pdf"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`semsearch serve` over a PDF, its JSONL copy (one paper) and a JSONL-only paper (the stand-in encoder)."""
    browser_ready()
    folder = tmp_path_factory.mktemp("browser-pdf")
    papers = folder / "papers"
    papers.mkdir()
    shutil.copy(PDFS / PAPER, papers / PAPER)
    e = PDF_EXPECTED[PAPER]
    rows = [
        {"id": "copy", "title": e["title"], "abstract": e["abstract"]},
        {"id": "alone", "title": "Graph initialisation notes", "abstract": "How to initialize graph neural networks."},
    ]
    (papers / "papers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    built = semsearch("index", str(papers), "--index", str(folder / "index"), "--backend", "hashed", "-q")
    assert built.returncode == 0, built.stderr
    with serving(folder / "index", folder) as base:
        yield base


def test_the_pdf_link_is_on_papers_read_from_a_pdf_only(server: str, page: Any) -> None:
    page.goto(server + "/#q=initialization+graph+neural+networks")
    page.wait_for_selector(".hit")
    hits = page.locator(".hit")
    with_pdf = [hits.nth(i) for i in range(hits.count()) if hits.nth(i).locator("a.pdf").count()]
    assert len(with_pdf) == 1 and hits.count() == 2
    link = with_pdf[0].locator("a.pdf")
    doc = with_pdf[0].get_attribute("data-id")
    assert link.get_attribute("href") == f"/api/documents/{doc}/pdf"
    fetched = page.evaluate(
        "(url) => fetch(url).then(async r => [r.status, r.headers.get('content-type'), (await r.text()).slice(0, 5)])",
        link.get_attribute("href"),
    )
    assert fetched == [200, "application/pdf", "%PDF-"]
    # The paper's own page links it too.
    with_pdf[0].locator("a.open").click()
    page.wait_for_selector(f"#doc[data-id='{doc}'] .pdf-line a.pdf")
