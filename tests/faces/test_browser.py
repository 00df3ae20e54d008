"""End to end in a browser: `semsearch serve` on the real seed index, driven through Chromium by Playwright."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import _get_json, _screenshot, browser_ready, build_seed_index, serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`semsearch serve` as a real process on a free loopback port, over the seeds indexed with the real model."""
    browser_ready()
    folder = tmp_path_factory.mktemp("browser")
    build_seed_index(folder / "index")
    with serving(folder / "index", folder) as base:
        yield base


def csp_violations(page: Any) -> list[str]:
    """The page's Content-Security-Policy refusals (Chromium reports each on the console), collected as they come."""
    found: list[str] = []
    page.on("console", lambda m: found.append(m.text) if "Content Security Policy" in m.text else None)
    return found


def test_search_related_and_document_pages(server: str, page: Any, tmp_path: Path) -> None:
    refused = csp_violations(page)
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(server) else outside.append(r.url))
    page_errors: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))

    page.goto(server + "/")
    page.fill("#q", "federated privacy")
    page.press("#q", "Enter")
    page.wait_for_selector(".hit")
    assert "q=federated+privacy" in page.url
    hits = page.locator(".hit")
    assert hits.count() == 10
    marks = [m.lower() for m in hits.first.locator(".snippet mark").all_inner_texts()]
    assert marks and set(marks) <= {"federated", "privacy"}, marks
    assert (
        "FedASK" in page.evaluate("fetch('/api/search?q=federated+privacy&k=1').then(r => r.json())")["hits"][0]["text"]
    )
    map_status = _get_json(server + "/api/map")[0]
    assert page.locator("#map-panel").is_visible() == (map_status == 200)
    _screenshot(page, tmp_path, "1-results.png")

    first_id = hits.first.get_attribute("data-id")
    hits.first.locator("a.related").click()
    page.wait_for_selector("#status:has-text('Papers nearest to')")
    related = page.locator("#hits .hit")
    assert related.count() == 10
    assert first_id not in [related.nth(i).get_attribute("data-id") for i in range(related.count())]
    _screenshot(page, tmp_path, "2-related.png")

    target = related.first.get_attribute("data-id")
    related.first.locator("a.hit-title").click()
    page.wait_for_selector(f"#doc[data-id='{target}']")
    page.wait_for_selector("#neighbours li")
    assert len(page.locator("#doc .text").inner_text()) > 200
    assert "source" in page.locator("#doc .facts").inner_text()
    assert page.locator("#neighbours li").count() == 10
    _screenshot(page, tmp_path, "3-document.png")

    # A neighbour opens its own page; back and forward walk the history.
    neighbour = page.locator("#neighbours li").first
    other = neighbour.get_attribute("data-id")
    neighbour.locator("a").click()
    page.wait_for_selector(f"#doc[data-id='{other}']")
    page.go_back()
    page.wait_for_selector(f"#doc[data-id='{target}']")
    page.go_back()
    page.wait_for_selector("#status:has-text('Papers nearest to')")
    page.go_back()
    page.wait_for_selector(".hit")
    assert page.input_value("#q") == "federated privacy"
    page.go_forward()
    page.wait_for_selector("#status:has-text('Papers nearest to')")

    # A bad parameter shows the server's one-line error.
    page.goto(server + "/#q=privacy&k=5000")
    page.wait_for_selector(".error")
    assert "k: Input should be less than or equal to 1000" in page.locator(".error").inner_text()

    assert outside == [] and page_errors == [] and refused == []


def test_api_docs_work_offline(server: str, page: Any, tmp_path: Path) -> None:
    refused = csp_violations(page)
    outside: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(server) else outside.append(r.url))
    page.goto(server + "/docs")
    page.wait_for_selector(".swagger-ui .opblock")
    assert "/api/search" in page.locator(".swagger-ui").inner_text()
    _screenshot(page, tmp_path, "4-docs.png")
    assert outside == [] and refused == []  # the docs' own CSP lets Swagger UI run, nothing more
    page.goto(server + "/redoc")
    page.get_by_text("Papers that best answer a query").first.wait_for()
    # ReDoc runs its search in a blob: worker of this page, and its footer asks for a logo from its CDN, which the
    # CSP refuses: nothing else leaves the page, and nothing else is refused.
    assert all(u.startswith(f"blob:{server}/") or u.startswith("https://cdn.redoc.ly/") for u in outside), outside
    assert all("cdn.redoc.ly" in m for m in refused), refused
