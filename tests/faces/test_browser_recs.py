"""In a browser: like papers on the page (`semsearch serve --allow-tags`) and watch the "For you" view follow."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import CHROMIUM, CHROMIUM_ARGS, browser_ready, build_seed_index, serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    browser_ready()
    folder = tmp_path_factory.mktemp("browser-recs")
    build_seed_index(folder / "index")
    with serving(folder / "index", folder, "--allow-tags") as base:
        yield base, folder / "index"


def for_you_ids(page: Any, base: str) -> list[str]:
    page.goto(base + "/#foryou")
    page.reload()  # the same hash again would not route
    page.wait_for_selector("#status:has-text('For you')")
    return [h.get_attribute("data-id") for h in page.locator("#hits .hit").all()]


def test_like_buttons_write_tags_and_for_you_follows(server: tuple[str, Path], tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    from semsearch.curate.tags import TagStore

    base, index = server
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(base + "/#foryou")
            page.wait_for_selector("#status:has-text('Like a few papers')")

            page.goto(base + "/#q=federated+privacy&k=5")
            page.wait_for_selector(".hit")
            first = page.locator(".hit").first
            liked = first.get_attribute("data-id")
            first.locator("button.tag-button.liked").click()
            page.wait_for_selector(f".hit[data-id='{liked}'] button.liked[aria-pressed='true']")
            assert [e.id for e in TagStore(index).entries("liked")] == [liked]
            before = for_you_ids(page, base)
            assert before and liked not in before

            # Like a paper on another subject: the recommendations change.
            page.goto(base + "/#q=diffusion+image+generation&k=5")
            page.wait_for_selector(".hit")
            second = page.locator(".hit").first
            other = second.get_attribute("data-id")
            second.locator("button.tag-button.liked").click()
            page.wait_for_selector(f".hit[data-id='{other}'] button.liked[aria-pressed='true']")
            after = for_you_ids(page, base)
            assert after != before and other not in after
            because = page.locator("#hits .because").all_inner_texts()
            assert because and all("because it is near" in b for b in because)

            # "Not for me" on a recommendation: it leaves the view.
            gone = after[0]
            page.locator(f".hit[data-id='{gone}'] button.tag-button.not-for-me").click()
            page.wait_for_selector(f".hit[data-id='{after[1]}'] >> nth=0")
            # (not wait_for_function with a string: Playwright evals it in the page, which the CSP forbids)
            page.wait_for_selector(f"#hits .hit[data-id='{gone}']", state="detached")
            assert gone not in for_you_ids(page, base)
            assert [e.id for e in TagStore(index).entries("not-for-me")] == [gone]

            page.goto(base + "/#new")
            page.wait_for_selector("#status:has-text('New in the latest build')")
            assert errors == []
        finally:
            browser.close()
