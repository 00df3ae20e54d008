"""The page with a catalogue: titles, author lines, links, readable markup, and Cite / Export (Chromium)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import FIXTURES, _screenshot, browser_ready, build_seed_index, serving

pytestmark = pytest.mark.slow

SLICE = FIXTURES / "catalogue" / "neurips2025_slice.jsonl"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`semsearch serve` over the seeds indexed with the real model and the NeurIPS 2025 slice as catalogue."""
    browser_ready()
    folder = tmp_path_factory.mktemp("browser-cite")
    build_seed_index(folder / "index", "--catalogue", str(SLICE))
    with serving(folder / "index", folder) as base:
        yield base


def test_hits_show_titles_authors_links_and_cite(server: str, page: Any, tmp_path: Path) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server + "/#q=federated+privacy")
    page.wait_for_selector(".hit")
    first = page.locator(".hit").first
    assert first.locator("a.hit-title").inner_text() == (
        "Differentially Private Federated Low Rank Adaptation Beyond Fixed-Matrix"
    )
    assert first.locator(".byline").inner_text().startswith("Ming Wen, Jiaqi Zhu, … · NeurIPS 2025")
    assert first.locator("a.paper-link").get_attribute("href") == "https://openreview.net/forum?id=TecJ926Vgn"
    # Cite opens the paper as BibTeX; the status line exports all hits in four formats.
    cite = first.locator("a.cite").get_attribute("href")
    bibtex = page.evaluate(f"fetch({cite!r}).then(r => r.text())")
    assert bibtex.startswith("@inproceedings{wen2025neurips-differentially,")
    assert page.locator("#status a.export-csljson").count() == 1
    csl = page.evaluate("fetch(document.querySelector('#status a.export-csljson').href).then(r => r.json())")
    assert len(csl) == 10 and csl[0]["title"].startswith("Differentially Private Federated")
    _screenshot(page, tmp_path, "5-titles-and-cite.png")
    assert errors == []


def test_markup_is_shown_as_text(server: str, page: Any, tmp_path: Path) -> None:
    page.goto(server + "/#q=Mozart&mode=lexical&k=1")
    page.wait_for_selector(".hit")
    raw = page.evaluate("fetch('/api/search?q=Mozart&mode=lexical&k=1').then(r => r.json())")["hits"][0]
    assert "$\\texttt{Mozart}$" in raw["text"]  # stored as written
    snippet = page.locator(".hit .snippet").first
    assert (
        "Mozart" in snippet.inner_text() and "\\texttt" not in snippet.inner_text() and "$" not in snippet.inner_text()
    )
    assert [m.lower() for m in snippet.locator("mark").all_inner_texts()] == ["mozart"]  # marks survive
    page.locator(".hit a.hit-title").first.click()
    page.wait_for_selector("#doc .text")
    text = page.locator("#doc .text").inner_text()
    assert "Mozart" in text and "\\texttt" not in text
    assert page.locator("#doc .cite-line a.export-bibtex").count() == 1
    _screenshot(page, tmp_path, "6-readable-document.png")
