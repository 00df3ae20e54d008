"""The page in Chromium, over a hostile document served by a stub of the API: links, text, authors as a list."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, REPO

pytestmark = pytest.mark.slow  # as the other browser tests: it needs Chromium

WEB = REPO / "semsearch" / "faces" / "web"
ORIGIN = "http://semsearch.test"
DOC = {
    "id": "00000000000000a1",
    "title": "Evil \x1b[31mred\x1b[0m \u202etxt.exe **bold** 29.7\\% $\\uparrow$",
    "display_title": None,  # an older server: the page makes the title readable itself
    "text": "An abstract with \x9b2J a clear and \u2066isolated\u2069 text, ``quoted''.",
    "authors": ["Jérôme Müller", "Ann Bold"],
    "byline": "Jérôme Müller, Ann Bold",
    "link": "javascript:alert(1)",
    "metadata": {
        "authors": ["Jérôme Müller", "Ann Bold"],
        "catalogue": {"file": "neurips.jsonl", "record": 12, "match": "exact"},
        "url": "javascript:alert(1)",
    },
    "sources": [{"file": "a.jsonl", "kind": "line", "number": 1}],
    "external_ids": [],
}


def _stub(route: Any) -> None:
    """Static files from semsearch/faces/web, the document from DOC, and an empty answer for the rest of the API."""
    path = route.request.url.removeprefix(ORIGIN).split("?")[0].split("#")[0]
    if path == "/":
        route.fulfill(status=200, content_type="text/html", body=(WEB / "index.html").read_text(encoding="utf-8"))
    elif path.startswith("/static/"):
        kind = "text/css" if path.endswith(".css") else "text/javascript"
        route.fulfill(status=200, content_type=kind, body=(WEB / Path(path).name).read_text(encoding="utf-8"))
    elif path.startswith("/api/documents/"):
        route.fulfill(status=200, content_type="application/json", body=json.dumps(DOC))
    elif path.startswith("/api/related/"):
        route.fulfill(status=200, content_type="application/json", body=json.dumps({"hits": []}))
    else:
        route.fulfill(status=404, content_type="application/json", body=json.dumps({"error": "not here"}))


@pytest.fixture
def page() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page()
            pg.set_default_timeout(20_000)
            pg.route(f"{ORIGIN}/**", _stub)
            yield pg
        finally:
            browser.close()


def test_the_paper_view_shows_a_hostile_document_safely(page: Any) -> None:
    page.goto(f"{ORIGIN}/#doc={DOC['id']}")
    page.wait_for_selector("#doc h1")
    title = page.inner_text("#doc h1")
    assert title == "Evil red txt.exe bold 29.7% ↑"  # readable, no escape or bidi override left
    assert "\x9b" not in page.inner_text("#doc .text") and "\u2066" not in page.inner_text("#doc .text")
    assert "“quoted”" in page.inner_text("#doc .text")
    # javascript: never becomes a link, wherever it is.
    hrefs = page.eval_on_selector_all("a", "els => els.map(a => a.getAttribute('href'))")
    assert not [h for h in hrefs if h and h.lower().startswith("javascript")], hrefs
    # Authors as a list of names, the catalogue match as key: value pairs (not raw JSON).
    assert page.eval_on_selector_all(".facts ul.authors li", "els => els.map(e => e.textContent)") == [
        "Jérôme Müller",
        "Ann Bold",
    ]
    facts = page.inner_text(".facts")
    assert "file: neurips.jsonl · record: 12 · match: exact" in facts
    assert "[" not in facts and "{" not in facts
    checks = page.evaluate(
        "[window.semsearchSafeUrl('javascript:alert(1)'), window.semsearchSafeUrl('https://e.org/a\"b'),"
        " window.semsearchSafeUrl('data:text/html,x')]"
    )
    assert checks == [None, "https://e.org/a%22b", None]
