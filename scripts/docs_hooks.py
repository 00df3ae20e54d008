"""MkDocs hook: generated text from the code and its records (click tree, OpenAPI, MCP tools, layout, measured.json)."""

from __future__ import annotations

import asyncio
import inspect
import json
import textwrap
from collections.abc import Iterator
from typing import Any
from unittest import mock

# A marker in a page's Markdown that this hook replaces with text generated from the code.
MARKERS = (
    "<!-- semsearch:openapi -->",
    "<!-- semsearch:mcp-tools -->",
    "<!-- semsearch:layout -->",
    "<!-- semsearch:measured -->",
    "<!-- semsearch:cli -->",
    "<!-- semsearch:measured-modes -->",
)


class _NoIndex:
    """Stands in for a LiveIndex: routes and tools are declared without opening an index."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def close(self) -> None:
        pass


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of ``semsearch serve --allow-tags`` (every route), as FastAPI generates it."""
    from semsearch.faces import serve

    with mock.patch.object(serve, "LiveIndex", _NoIndex):
        return serve.create_app("unused", allow_tags=True).openapi()


def mcp_tools() -> list[dict[str, Any]]:
    """The tools ``semsearch mcp`` lists to a client, with their input and output schemas."""
    from semsearch.faces import mcp_tools as tools_module

    server = tools_module.create_server(_NoIndex())  # type: ignore[arg-type]
    return [tool.model_dump(mode="json", exclude_none=True) for tool in asyncio.run(server.list_tools())]


def _schema_type(schema: dict[str, Any]) -> str:
    """A short type for a JSON schema: ``integer``, ``array of string``, ``hybrid | dense``."""
    if "enum" in schema:
        return " | ".join(f"`{v}`" for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_schema_type(s) for s in schema["anyOf"])
    kind = schema.get("type", schema.get("$ref", "").rsplit("/", 1)[-1] or "any")
    if kind == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    return str(kind)


def _bounds(schema: dict[str, Any]) -> str:
    """Bounds and default of a JSON schema, in a few words."""
    parts = []
    for key, word in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("exclusiveMaximum", "<")):
        if key in schema:
            parts.append(f"{word} {schema[key]}")
    for key, word in (("minLength", "length ≥"), ("maxLength", "length ≤"), ("maxItems", "items ≤")):
        if key in schema:
            parts.append(f"{word} {schema[key]}")
    if "default" in schema:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(parts)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def openapi_markdown(doc: dict[str, Any]) -> str:
    """Every path, method and parameter of the OpenAPI document, with its responses."""
    out = [
        f"Generated from the OpenAPI document of semsearch {doc['info']['version']} ([openapi.json](openapi.json)).",
        "",
    ]
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            out += [f"### `{method.upper()} {path}`", ""]
            if op.get("summary") or op.get("description"):
                out += [_cell(op.get("description") or op.get("summary")), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | bounds, default | required | meaning |", "|---|---|---|---|---|---|"]
                for p in params:
                    schema = p.get("schema", {})
                    out.append(
                        f"| `{p['name']}` | {p['in']} | {_cell(_schema_type(schema))} | {_cell(_bounds(schema))} | "
                        f"{'yes' if p.get('required') else 'no'} | {_cell(p.get('description', ''))} |"
                    )
                out.append("")
            if "requestBody" in op:
                content = op["requestBody"].get("content", {})
                for media, body in content.items():
                    out += [f"Request body: `{media}`, {_cell(_schema_type(body.get('schema', {})))}.", ""]
            codes = ", ".join(
                f"{code} ({_cell(r.get('description', ''))})" for code, r in op.get("responses", {}).items()
            )
            out += [f"Responses: {codes}.", ""]
    return "\n".join(out)


def mcp_markdown(tools: list[dict[str, Any]]) -> str:
    """Each MCP tool: its description, arguments (from the input schema) and the fields it returns."""
    out = ["Generated from the tool list `semsearch mcp` sends a client (`tools/list`).", ""]
    for tool in tools:
        out += [f"### `{tool['name']}`", "", _cell(tool.get("description", "")), ""]
        props = tool.get("input_schema", {}).get("properties", {})
        required = set(tool.get("input_schema", {}).get("required", []))
        if props:
            out += ["| argument | type | bounds, default | required | meaning |", "|---|---|---|---|---|"]
            for name, schema in props.items():
                out.append(
                    f"| `{name}` | {_cell(_schema_type(schema))} | {_cell(_bounds(schema))} | "
                    f"{'yes' if name in required else 'no'} | {_cell(schema.get('description', ''))} |"
                )
            out.append("")
        else:
            out += ["No arguments.", ""]
        returned = tool.get("output_schema", {}).get("properties", {})
        if returned:
            out += ["Returns: " + ", ".join(f"`{name}`" for name in returned) + ".", ""]
    return "\n".join(out)


def layout_markdown() -> str:
    """The layout docstring of the module that names an index directory's files."""
    from semsearch.store import layout

    head, _, rest = (layout.__doc__ or "").partition("::")
    lines = rest.splitlines()
    # The indented block ends at the first unindented, non-empty line after it.
    cut = next((i for i, ln in enumerate(lines) if i > 1 and ln and not ln.startswith(" ")), len(lines))
    tree = "\n".join(ln[4:] for ln in lines[:cut]).strip("\n")
    after = "\n".join(lines[cut:]).strip()
    return f"{head.strip()}:\n\n```text\n{tree}\n```\n\n{after}\n"


def measured_markdown() -> str:
    """The catalogue models' recorded SciFact figures (measured.json: what `semsearch models` shows too)."""
    from semsearch.encode.catalogue import recorded_figures, specs

    figures = recorded_figures()
    rows = [
        "| SciFact test (int8 ONNX) | nDCG@10 dense / hybrid | Recall@100 dense / hybrid | MRR@10 hybrid | measured |",
        "|---|---|---|---|---|",
    ]

    def cell(test: dict[str, Any], mode: str, metric: str) -> str:
        value = (test.get(mode) or {}).get(metric)
        return f"{value:.3f}" if isinstance(value, (int, float)) else "–"

    for spec in specs():
        entry = figures.get(spec.name) or {}
        test = entry.get("scifact_test") or {}
        rows.append(
            f"| {spec.name} | {cell(test, 'dense', 'ndcg@10')} / {cell(test, 'hybrid', 'ndcg@10')}"
            f" | {cell(test, 'dense', 'recall@100')} / {cell(test, 'hybrid', 'recall@100')}"
            f" | {cell(test, 'hybrid', 'mrr@10')} | {entry.get('measured', '–')}, `{entry.get('command', '')}` |"
        )
    return "\n".join(rows) + "\n"


def measured_modes_markdown() -> str:
    """The default model's recorded SciFact test figures per mode, as the head of a table (measured.json)."""
    from semsearch.encode.catalogue import DEFAULT_MODEL, recorded_figures

    entry = recorded_figures()[DEFAULT_MODEL]
    test = entry["scifact_test"]
    rows = [
        f"Recorded {entry.get('measured', '')} by `{entry.get('command', '')}`:",
        "",
        "| system (SciFact test, 300 queries) | nDCG@10 | Recall@100 | MRR@10 |",
        "|---|---|---|---|",
    ]
    labels = {
        "hybrid": "**semsearch hybrid (default)**, MiniLM int8 + BM25, adaptive weight",
        "dense": f"semsearch dense, MiniLM int8 ONNX, `{entry.get('reading', '')}` reading",
        "lexical": "semsearch lexical, bm25s Lucene k1 1.5 b 0.75, stemmed",
    }
    for mode, label in labels.items():
        cells = [f"{test[mode][metric]:.4f}" for metric in ("ndcg@10", "recall@100", "mrr@10")]
        if mode == "hybrid":
            cells = [f"**{cell}**" for cell in cells]
        rows.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(rows)


def _help_blocks(text: str) -> Iterator[str]:
    """A command's help as Markdown, kept as ``--help`` lays it out.

    click rewraps a paragraph but keeps the lines of one that opens with ``\\b``: there, unindented lines are
    prose (a paragraph) and indented ones are examples, which stay one a line in a text block.
    """
    for paragraph in inspect.cleandoc(text).partition("\f")[0].split("\n\n"):
        lines = paragraph.splitlines()
        if not lines:
            continue
        if lines[0].strip() != "\b":
            yield " ".join(line.strip() for line in lines)
            yield ""
            continue
        run: list[str] = []
        for line in lines[1:] + [""]:
            indented = line.startswith(" ")
            if run and (not line or indented != run[0].startswith(" ")):
                if run[0].startswith(" "):
                    yield "```text"
                    yield from textwrap.dedent("\n".join(run)).splitlines()
                    yield "```"
                else:
                    yield " ".join(part.strip() for part in run)
                yield ""
                run = []
            if line:
                run.append(line)


def _option_row(option: Any, ctx: Any) -> str:
    """One option as ``--help`` lists it: its flags and metavar, its help, bounds and default as click words them."""
    names, _ = option.get_help_record(ctx)
    extra = option.get_help_extra(ctx)
    notes = [f"env var: {', '.join(extra['envvars'])}"] if extra.get("envvars") else []
    notes += [str(extra[key]) for key in ("range", "required") if extra.get(key)]
    described = " ".join(inspect.cleandoc(option.help or "").split())
    if notes:
        described += f" [{'; '.join(notes)}]"
    default = f"`{' '.join(str(extra['default']).split())}`" if extra.get("default") else ""
    # A pipe inside a code span does not split a table row; outside one it is escaped.
    return f"| `{' '.join(names.split())}` | {_cell(described)} | {default} |"


def _command_markdown(ctx: Any, depth: int) -> Iterator[str]:
    """One command's section: heading, help, usage, options; then its subcommands' sections."""
    import click

    command = ctx.command
    anchor = ctx.command_path.replace(" ", "-")
    yield f"{'#' * (depth + 1)} {ctx.command_path} {{ #{anchor} data-toc-label='{ctx.info_name}' }}"
    yield ""
    yield "```text"
    yield ctx.get_usage()
    yield "```"
    yield ""
    yield from _help_blocks(command.help or command.short_help or "")
    rows = [_option_row(p, ctx) for p in command.get_params(ctx) if isinstance(p, click.Option) and not p.hidden]
    if rows:
        yield from ("| option | meaning | default |", "|---|---|---|", *rows, "")
    if isinstance(command, click.Group):
        children = [(name, command.get_command(ctx, name)) for name in command.list_commands(ctx)]
        visible = [(name, child) for name, child in children if child is not None and not child.hidden]
        yield "Commands:"
        yield ""
        for name, child in visible:
            yield f"- [{name}](#{anchor}-{name}): {child.get_short_help_str(limit=200)}"
        yield ""
        for name, child in visible:
            yield from _command_markdown(
                click.Context(child, info_name=name, parent=ctx, **child.context_settings), depth + 1
            )


def cli_markdown() -> str:
    """Every command of the ``semsearch`` click group: help, usage and options, worded as ``--help`` words them."""
    import click

    from semsearch.faces.cli import cli

    ctx = click.Context(cli, info_name="semsearch", **cli.context_settings)
    return "\n".join(_command_markdown(ctx, 1))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace each marker with the text generated from the code."""
    generators = dict(
        zip(
            MARKERS,
            (
                lambda: openapi_markdown(openapi_document()),
                lambda: mcp_markdown(mcp_tools()),
                layout_markdown,
                measured_markdown,
                cli_markdown,
                measured_modes_markdown,
            ),
            strict=True,
        )
    )
    for marker, generate in generators.items():
        if marker in markdown:
            markdown = markdown.replace(marker, generate())
    return markdown


def on_files(files: Any, config: Any) -> Any:
    """Publish the OpenAPI document itself beside the HTTP API page."""
    from mkdocs.structure.files import File

    content = json.dumps(openapi_document(), indent=2, sort_keys=True)
    files.append(File.generated(config, "reference/openapi.json", content=content))
    return files
