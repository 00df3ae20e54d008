"""Every face shows a full-text index's passages: the CLI's "p. N" line and --passages, HTTP, MCP cards, the page."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from semsearch.faces import agent_results
from semsearch.faces.agent_results import MIN_BUDGET, compact_json, to_dict
from semsearch.query.search import Index
from tests.helpers import PDF_EXPECTED, PDFS, FakeEmbedder, run

NAME = "05-twocol.pdf"
BODY = PDF_EXPECTED[NAME]["body"][0]
QUERY = " ".join(re.findall(r"[\w'’]+", BODY["text"]))
WEB = Path(__file__).resolve().parents[2] / "semsearch" / "faces" / "web"


@pytest.fixture
def index(tmp_path: Path) -> Path:
    papers = tmp_path / "papers"
    papers.mkdir()
    for name in (NAME, "01-single.pdf", "11-twocol-ieee.pdf"):
        shutil.copy(PDFS / name, papers / name)
    path = tmp_path / "idx"
    built = run(["index", str(papers), "--index", str(path), "--full-text", "-q"], FakeEmbedder())
    assert built.exit_code == 0, built.output
    return path


def test_the_cli_table_shows_the_passage_and_its_page(index: Path) -> None:
    found = run(["query", QUERY, "--index", str(index), "-k", "1"], FakeEmbedder())
    assert found.exit_code == 0, found.output
    assert f"p. {BODY['page']}: " in found.output
    as_json = run(["query", QUERY, "--index", str(index), "-k", "1", "--json"], FakeEmbedder())
    data = json.loads(as_json.output)
    hit = (data["results"] if isinstance(data, dict) else data)[0]
    assert hit["passage"]["page"] == BODY["page"] and set(hit["passage"]) == {"page", "text", "score"}


def test_cli_passages_lists_passages_instead_of_papers(index: Path) -> None:
    table = run(["query", QUERY, "--index", str(index), "-k", "3", "--passages"], FakeEmbedder())
    assert table.exit_code == 0, table.output
    assert table.output.lstrip().startswith("1. ")
    assert table.output.count("p. ") == 3
    lines = run(["query", QUERY, "--index", str(index), "-k", "3", "--passages", "--jsonl"], FakeEmbedder())
    rows = [json.loads(line) for line in lines.output.splitlines() if line.strip()]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert all(r["mode"] == "passages" and r["passage"]["page"] >= 1 for r in rows)
    assert rows[0]["passage"]["page"] == BODY["page"]


def test_passages_of_an_abstract_only_index_is_one_line(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    shutil.copy(PDFS / NAME, papers / NAME)
    run(["index", str(papers), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder())
    found = run(["query", "graphs", "--index", str(tmp_path / "idx"), "--passages"], FakeEmbedder())
    assert found.exit_code == 2, found.output
    assert "--full-text" in found.output and "Traceback" not in found.output
    plain = run(["query", "graphs", "--index", str(tmp_path / "idx"), "--json"], FakeEmbedder())
    assert '"passage"' not in plain.output  # an abstract-only index's hits are as they were
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    with TestClient(create_app(tmp_path / "idx", embedder=FakeEmbedder()), base_url="http://localhost") as client:
        refused = client.get("/api/search", params={"q": "graphs", "passages": "true"})
        assert refused.status_code == 422 and "--full-text" in refused.json()["error"]


def test_http_search_gives_the_passage_and_a_passages_mode(index: Path) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    with TestClient(create_app(index, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        papers = client.get("/api/search", params={"q": QUERY, "k": 1})
        assert papers.status_code == 200, papers.text
        assert papers.json()["hits"][0]["passage"]["page"] == BODY["page"]
        assert "passages" not in papers.json()
        passages = client.get("/api/search", params={"q": QUERY, "k": 3, "passages": "true"})
        assert passages.status_code == 200, passages.text
        body = passages.json()
        assert body["passages"] is True and len(body["hits"]) == 3
        assert all(h["mode"] == "passages" for h in body["hits"])


def test_mcp_cards_carry_the_passage_within_the_budget(index: Path) -> None:
    with Index.open(index, embedder=FakeEmbedder()) as opened:
        page = agent_results.search_page(opened, QUERY, k=3)
        card = to_dict(page.items[0])
        assert card["passage"]["page"] == BODY["page"]
        assert len(card["passage"]["text"]) <= agent_results.MAX_SENTENCE_CHARS
        tight = agent_results.search_page(opened, QUERY, k=3, budget=MIN_BUDGET)
        assert len(compact_json(to_dict(tight))) <= MIN_BUDGET
        assert tight.items


def test_the_web_page_shows_the_page_and_passage_under_a_hit() -> None:
    script = (WEB / "app.js").read_text(encoding="utf-8")
    assert "hit.passage" in script and "`p. ${hit.passage.page}`" in script
    assert ".passage" in (WEB / "style.css").read_text(encoding="utf-8")
