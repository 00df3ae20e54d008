"""The generated reference pages cover the code: every route, every MCP tool, every layout entry."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
from conftest import REPO


def _hooks() -> ModuleType:
    """scripts/docs_hooks.py, the MkDocs hook that writes the reference pages."""
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_http_reference_lists_every_route() -> None:
    """Each path and method of the server's OpenAPI document gets a section, with its parameters."""
    pytest.importorskip("fastapi")
    hooks = _hooks()
    doc = hooks.openapi_document()
    page = hooks.openapi_markdown(doc)
    for path, methods in doc["paths"].items():
        for method in methods:
            assert f"### `{method.upper()} {path}`" in page
    assert "/api/tags/{name}" in doc["paths"] and "| `q` | query |" in page


def test_mcp_reference_lists_every_tool() -> None:
    """Each tool the MCP server lists gets a section with its arguments and bounds."""
    pytest.importorskip("mcp")
    hooks = _hooks()
    tools = hooks.mcp_tools()
    page = hooks.mcp_markdown(tools)
    names = {tool["name"] for tool in tools}
    assert {"search", "related", "get_paper", "info", "export", "recommend", "whats_new"} <= names
    assert all(f"### `{name}`" in page for name in names)
    assert "| `k` | integer | ≥ 1; ≤ 1000; default `10` |" in page


def test_layout_reference_is_the_layout_docstring() -> None:
    """The index-format page shows every entry of the layout docstring, in a code block."""
    from semsearch.store import layout

    page = _hooks().layout_markdown()
    assert page.count("```") == 2
    for entry in ("CURRENT", "manifest.json", "docs.sqlite", "seg-<seq>/", ".lock"):
        assert entry in page and entry in (layout.__doc__ or "")


def test_every_docs_page_is_in_the_nav() -> None:
    """mkdocs.yml names every Markdown page under docs/ (a page left out would be unreachable)."""
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    for page in (REPO / "docs").rglob("*.md"):
        assert str(page.relative_to(REPO / "docs")) in nav, page
