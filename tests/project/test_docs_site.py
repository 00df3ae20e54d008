"""The generated reference pages cover the code: every command, route, MCP tool and layout entry; the built site
shows them as the code words them (no Python reprs such as click's ``Sentinel.UNSET``)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import click
import pytest

from semsearch.core import options
from tests.helpers import REPO


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


def _contexts(ctx: click.Context) -> Iterator[click.Context]:
    """The context of a command and of every visible command under it, as ``--help`` builds them."""
    yield ctx
    if isinstance(ctx.command, click.Group):
        for name in ctx.command.list_commands(ctx):
            child = ctx.command.get_command(ctx, name)
            if child is not None and not child.hidden:
                yield from _contexts(click.Context(child, info_name=name, parent=ctx, **child.context_settings))


def _root() -> click.Context:
    from semsearch.faces.cli import cli

    return click.Context(cli, info_name="semsearch", **cli.context_settings)


def test_cli_reference_words_defaults_as_help_does() -> None:
    """Every command gets a section, and every option a row whose default is the one ``--help`` prints."""
    page = _hooks().cli_markdown()
    assert "Sentinel" not in page and "UNSET" not in page
    sections = {
        section.split(" {", 1)[0]: section for section in re.split(r"^#+ ", page, flags=re.MULTILINE) if section
    }
    commands = list(_contexts(_root()))
    assert len(commands) > 20 and set(sections) == {ctx.command_path for ctx in commands}
    for ctx in commands:
        section = sections[ctx.command_path]
        for param in ctx.command.get_params(ctx):
            if not isinstance(param, click.Option) or param.hidden:
                continue
            record = param.get_help_record(ctx)
            assert record is not None, f"{ctx.command_path} {param.name}"
            names = " ".join(record[0].split())
            default = param.get_help_extra(ctx).get("default")
            row = next((line for line in section.splitlines() if line.startswith(f"| `{names}` |")), None)
            assert row is not None, f"{ctx.command_path} {names}"
            assert row.endswith(f"| `{default}` |" if default else "|  |"), row
    assert "| `-k INTEGER` | How many hits. [1<=x<=1000] | `10` |" in page


def test_cli_reference_keeps_example_lines() -> None:
    """A help paragraph click prints line by line (``\\b``) keeps its example lines, one a line, in a text block."""
    page = _hooks().cli_markdown()
    assert (
        '```text\nsemsearch index seeds/\nsemsearch query "federated learning with differential privacy"\n'
        "semsearch related 3f2a9c01d4e5b6a7\nsemsearch info\n```"
    ) in page
    # Relative indentation inside an example survives (a cron line continued on the next).
    assert "0 7 * * *  semsearch index --index ~/papers -q &&\n           semsearch digest" in page


def test_query_help_describes_the_default_fusion() -> None:
    """``query --help`` says how hybrid weighs its sides by default, as options.DEFAULT_FUSION does."""
    from click.testing import CliRunner

    from semsearch.faces.cli import cli

    shown = " ".join(CliRunner().invoke(cli, ["query", "--help"], terminal_width=100).output.split())
    assert options.DEFAULT_FUSION == "adaptive"
    assert "adaptive by default (chosen per query" in shown
    assert "0.5·z(cosine) + 0.5·z(BM25)" not in shown


def test_measured_modes_table_reads_measured_json() -> None:
    """The Quality page's headline rows are the default model's recorded figures, each to four decimals."""
    from semsearch.encode.catalogue import DEFAULT_MODEL, recorded_figures

    table = _hooks().measured_modes_markdown()
    test = recorded_figures()[DEFAULT_MODEL]["scifact_test"]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ")}
    for mode, prefix in (("hybrid", "**semsearch hybrid"), ("dense", "semsearch dense"), ("lexical", "semsearch lex")):
        row = next(line for label, line in rows.items() if label.startswith(prefix))
        for metric in ("ndcg@10", "recall@100", "mrr@10"):
            assert f"{test[mode][metric]:.4f}" in row, (mode, metric, row)
    assert "<!-- semsearch:measured-modes -->" in (REPO / "docs/explanation/quality.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site as ``scripts/docs.sh`` builds it (strict), into a temporary folder."""
    for module in ("mkdocs", "material", "fastapi", "mcp"):
        pytest.importorskip(module)
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, HF_HUB_OFFLINE="1", NO_MKDOCS_2_WARNING="1")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


_REPR = re.compile(r"Sentinel|\bUNSET\b| object at 0x[0-9a-f]+|<function |<class '")


def test_built_site_shows_no_python_reprs(built_site: Path) -> None:
    """No page of the site (nor its search index) shows a Python repr where a value belongs."""
    pages = [*built_site.rglob("*.html"), built_site / "search" / "search_index.json"]
    assert len(pages) > 20
    found = {
        str(page.relative_to(built_site)): sorted(set(_REPR.findall(page.read_text(encoding="utf-8"))))
        for page in pages
    }
    assert {page: hits for page, hits in found.items() if hits} == {}


def test_built_cli_page_shows_defaults_and_examples(built_site: Path) -> None:
    """The built CLI page shows ``query -k``'s default and bounds, and the top-level examples one a line."""
    page = (built_site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert re.search(
        r"<td><code>-k INTEGER</code></td>\s*<td>How many hits. \[1&lt;=x&lt;=1000\]</td>\s*"
        r"<td><code>10</code></td>",
        page,
    )
    assert "<code>semsearch index seeds/\nsemsearch query" in page
