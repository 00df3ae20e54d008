"""In a browser: a full-text index's hit shows "p. N" and its passage under the abstract's sentence."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ENV, PDF_EXPECTED, PDFS, _screenshot, browser_ready, serving

pytestmark = pytest.mark.slow

NAME = "09-twocol-hyphen.pdf"
BODY = PDF_EXPECTED[NAME]["body"][0]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`semsearch serve` over three fixture PDFs indexed with --full-text (the hashed stand-in encoder)."""
    browser_ready()
    folder = tmp_path_factory.mktemp("browser-passages")
    papers = folder / "papers"
    papers.mkdir()
    for name in (NAME, "01-single.pdf", "05-twocol.pdf"):
        shutil.copy(PDFS / name, papers / name)
    index = folder / "index"
    env = {**ENV, "SEMSEARCH_PDF_CACHE": str(folder / "pdf-cache")}
    args = [sys.executable, "-m", "semsearch", "index", str(papers), "--index", str(index)]
    built = subprocess.run(
        [*args, "--full-text", "--backend", "hashed", "-q"], env=env, capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stderr
    with serving(index, folder) as base:
        yield base


def test_a_hit_shows_its_page_and_passage(server: str, page: Any, tmp_path: Path) -> None:
    page.goto(server + "/")
    page.fill("#q", " ".join(re.findall(r"[\w'’]+", BODY["text"])))
    page.press("#q", "Enter")
    page.wait_for_selector(".hit .passage")
    first = page.locator(".hit").first
    assert first.locator(".passage .page").inner_text() == f"p. {BODY['page']}"
    assert BODY["text"][:40] in first.locator(".passage").inner_text()
    _screenshot(page, tmp_path, "passages.png")
