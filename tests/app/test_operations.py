"""The operation table (faces/operations.py) against the faces derived from it: every operation is on every face
it belongs to, and the CLI's options, /openapi.json and MCP tools/list state the same bounds and defaults."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path
from typing import Any

import anyio
import click
import pytest
from click.testing import CliRunner

from tests.helpers import FakeEmbedder

pytest.importorskip("fastapi", reason="the 'serve' extra is not installed")
pytest.importorskip("mcp", reason="the 'mcp' extra is not installed")

from fastapi import APIRouter, FastAPI  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from mcp import Client  # noqa: E402

from semsearch.app import operations as ops  # noqa: E402
from semsearch.app.operations import CLI, FACES, HTTP, MCP, OPERATIONS, REQUIRED, Operation, Param  # noqa: E402
from semsearch.core import options  # noqa: E402
from semsearch.core.errors import QueryError  # noqa: E402
from semsearch.faces import serve_routes  # noqa: E402
from semsearch.faces.cli import Group, cli  # noqa: E402
from semsearch.faces.cli.common import BoundedText  # noqa: E402
from semsearch.faces.http_ops import route  # noqa: E402
from semsearch.faces.mcp_tools import HANDLERS, create_server, make_tool  # noqa: E402
from semsearch.faces.serve import create_app  # noqa: E402
from semsearch.query.live import LiveIndex  # noqa: E402

# What each face states about a field, as one face's words for it.
Observed = dict[str, Any]
# Routes that carry no operation of the table (the server's own: liveness, the map, the page's tag buttons).
NETWORK = (HTTP, MCP)  # the faces that bound how many items a list has (a terminal's user is not a remote caller)


@pytest.fixture(scope="module")
def index(seeded_index: Path) -> Path:
    return seeded_index


@pytest.fixture(scope="module")
def openapi(index: Path) -> dict[str, Any]:
    client = TestClient(create_app(index, embedder=FakeEmbedder()), base_url="http://127.0.0.1")
    schema: dict[str, Any] = client.get("/openapi.json").json()
    return schema


@pytest.fixture(scope="module")
def tools(index: Path) -> dict[str, dict[str, Any]]:
    """tools/list as a client reads it: each tool's input schema by name."""
    found: dict[str, dict[str, Any]] = {}

    async def go() -> None:
        live = LiveIndex(index, embedder=FakeEmbedder())
        try:
            async with Client(create_server(live)) as client:
                for tool in (await client.list_tools()).tools:
                    found[tool.name] = {"description": tool.description, "schema": tool.input_schema}
        finally:
            live.close()

    anyio.run(go)
    return found


# ---------------------------------------------------------------- what each face states


def _plain(value: Any, param: Param) -> Any:
    """A default as JSON states it: lists for tuples, None for click's 'unset'."""
    if type(value).__name__ == "Sentinel":  # click's UNSET: no default given
        value = None
    if param.is_list and value in (None, ()):
        return []
    return list(value) if isinstance(value, tuple) else value


def _schema_facts(schema: dict[str, Any], required: bool) -> Observed:
    """Bounds, choices and default of a JSON Schema (the non-null branch of an anyOf merged in)."""
    flat = dict(schema)
    for branch in schema.get("anyOf", []):
        if branch.get("type") != "null":
            flat = {**branch, **flat}
    maximum = flat.get("maximum")
    if "exclusiveMaximum" in flat:
        maximum = flat["exclusiveMaximum"] - 1
    return {
        "minimum": flat.get("minimum"),
        "maximum": maximum,
        "enum": flat.get("enum"),
        "default": REQUIRED if required else flat.get("default"),
        "min_length": flat.get("minLength", flat.get("minItems")),
        "max_length": flat.get("maxLength", flat.get("maxItems")),
    }


def cli_command(path: str) -> click.Command:
    command: click.Command = cli
    for part in path.split():
        assert isinstance(command, click.Group), path
        found = command.get_command(click.Context(command), part)
        assert found is not None, path
        command = found
    return command


def observe_cli(op: Operation) -> dict[str, Observed]:
    assert op.cli is not None
    declared = {p.name: p for p in cli_command(op.cli).params}
    seen = {}
    for param in op.params(CLI):
        given = declared[param.field]
        named = param.name.split("/")[0]  # --negative/--positive: an on and an off flag
        assert named in given.opts or (given.metavar or "").strip("[].") == param.name, (op.name, param.name)
        kind = given.type
        seen[param.field] = {
            "minimum": kind.min if isinstance(kind, click.IntRange) else None,
            "maximum": kind.max if isinstance(kind, click.IntRange) else None,
            "enum": list(kind.choices) if isinstance(kind, click.Choice) else None,
            "default": REQUIRED if given.required else _plain(given.default, param),
            "min_length": kind.min_length if isinstance(kind, BoundedText) else None,
            "max_length": kind.max_length if isinstance(kind, BoundedText) else None,
        }
    return seen


def observe_http(op: Operation, schema: dict[str, Any]) -> dict[str, Observed]:
    assert op.http is not None
    route = schema["paths"][op.http][op.method.lower()]
    declared = {p["name"]: p for p in route.get("parameters", [])}
    if "requestBody" in route:  # the JSON body's fields, as the body's model states them
        body = schema["components"]["schemas"][op.request.__name__]
        for name, prop in body["properties"].items():
            declared[name] = {"in": "body", "schema": prop, "required": name in body.get("required", [])}
    seen = {}
    for param in op.params(HTTP):
        given = declared[param.name]
        where = "body" if param.spec.body else "path" if param.spec.path else "query"
        assert given["in"] == where, (op.name, param.name)
        seen[param.field] = _schema_facts(given["schema"], given.get("required", False))
    return seen


def observe_mcp(op: Operation, tool: dict[str, Any]) -> dict[str, Observed]:
    schema = tool["schema"]
    seen = {}
    for param in op.params(MCP):
        seen[param.field] = _schema_facts(schema["properties"][param.field], param.field in schema.get("required", []))
    assert set(schema["properties"]) == set(seen), op.name  # no argument the table does not declare
    return seen


def expected(param: Param) -> Observed:
    """What the table says the face states about the field."""
    spec = param.spec
    facts: Observed = {
        "minimum": spec.ge,
        "maximum": spec.le if spec.lt is None else spec.lt - 1,
        "enum": list(param.choices) or None,
        "default": REQUIRED if spec.required else _plain(spec.default, param),
        "min_length": spec.min_length if _length_bounded(param.face, param.is_list) else None,
        "max_length": spec.max_length if _length_bounded(param.face, param.is_list) else None,
    }
    if param.face == HTTP:  # what the API's schema states beyond its validation (api_schema)
        more = {"minLength": "min_length", "maxLength": "max_length", "enum": "enum"}
        facts.update({ours: spec.schema[theirs] for theirs, ours in more.items() if theirs in spec.schema})
    return facts


def _length_bounded(face: str, is_list: bool) -> bool:
    """A text's length is bounded on every face; a list's number of items on the network faces only."""
    return face in NETWORK or not is_list


def disagreements(op: Operation, seen: dict[str, dict[str, Observed]]) -> list[str]:
    """Where the faces of one operation differ from the table, or from each other, as readable lines."""
    problems = []
    for face, fields in seen.items():
        for param in op.params(face):
            want, got = expected(param), fields[param.field]
            problems += [
                f"{op.name}.{param.field} on {face}: {key} {got[key]!r}, table {want[key]!r}"
                for key in want
                if want[key] != got[key]
            ]
    names = {p.field for face in seen for p in op.params(face)}
    for name in sorted(names):
        on = {face: fields[name] for face, fields in seen.items() if name in fields}
        params = {face: next(p for p in op.params(face) if p.field == name) for face in on}
        for key in ("minimum", "maximum", "enum", "default", "min_length", "max_length"):
            faces = [f for f in on if _compared(key, f, params[f])]
            values = {f: on[f][key] for f in faces}
            if len({repr(v) for v in values.values()}) > 1:
                problems.append(f"{op.name}.{name}: {key} differs between faces: {values}")
    return problems


def _compared(key: str, face: str, param: Param) -> bool:
    """Whether a face's value of ``key`` must equal the other faces': a text's length on every face, a list's
    on network faces only, choices stated by type only, and no value the table replaces for that face on purpose."""
    spec = param.spec
    own = {CLI: spec.cli, HTTP: spec.http, MCP: spec.mcp}[face]
    if key in ("min_length", "max_length"):
        stated = {"min_length": "minLength", "max_length": "maxLength"}[key] in spec.schema  # HTTP's schema says
        return _length_bounded(face, param.is_list) and key not in own and not (face == HTTP and stated)
    if key == "enum":
        return "enum" not in spec.schema
    return key not in own


def observe_all(op: Operation, schema: dict[str, Any], tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    if op.cli:
        seen[CLI] = observe_cli(op)
    if op.http:
        seen[HTTP] = observe_http(op, schema)
    if op.mcp:
        seen[MCP] = observe_mcp(op, tools[op.mcp])
    return seen


# ---------------------------------------------------------------- the checks


def test_every_operation_is_on_every_face_it_belongs_to(openapi: dict[str, Any], tools: dict[str, Any]) -> None:
    for op in OPERATIONS:
        assert op.faces(), op.name
        if op.cli:
            assert cli_command(op.cli).name == op.cli.split()[-1]
        if op.http:
            assert op.method.lower() in openapi["paths"][op.http], op.name
            assert openapi["paths"][op.http][op.method.lower()]["summary"] == op.help.rstrip(".")
        if op.mcp:
            assert tools[op.mcp]["description"] == op.agent_help
    # ... and on no other: every tool and route is one of the table's (or the server's own, named above).
    assert list(tools) == [op.mcp for op in OPERATIONS if op.mcp] == list(options.MCP_TOOLS)
    routes = {(path, method) for path, methods in openapi["paths"].items() for method in methods}
    assert routes == {(op.http, op.method.lower()) for op in OPERATIONS if op.http}


def cli_commands(group: click.Group, prefix: str = "") -> set[str]:
    """Every command and subcommand of the group, by its full name ("tag add")."""
    ctx = click.Context(group)
    found = set()
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        found.add(prefix + name)
        if isinstance(command, click.Group):
            found |= cli_commands(command, prefix + name + " ")
    return found


def test_each_face_offers_the_table_and_its_declared_face_only_entries(
    index: Path, openapi: dict[str, Any], tools: dict[str, Any]
) -> None:
    """Generated from each face: its commands, routes and tools are the table's plus those FACE_ONLY names."""
    from semsearch.app.operations import FACE_ONLY

    table = {face: {getattr(op, face) for op in OPERATIONS if getattr(op, face)} for face in FACES}
    assert cli_commands(cli) == table[CLI] | set(FACE_ONLY[CLI])
    assert not table[CLI] & set(FACE_ONLY[CLI])
    app = create_app(index, embedder=FakeEmbedder())
    pages = {route.path for route in app.routes if getattr(route, "methods", None)}  # outside the schema
    served = set(openapi["paths"]) | pages
    assert served - {"/docs", "/redoc", "/openapi.json"} == table[HTTP] | set(FACE_ONLY[HTTP])
    assert set(tools) == table[MCP]
    assert set(FACE_ONLY[MCP]) == {"paper://{paper_id}"}  # the one resource
    # Every operation is run by the application, named by the table's call.
    from semsearch.app.application import Application

    assert all(callable(getattr(Application, op.call, None)) for op in OPERATIONS)


@pytest.mark.parametrize("op", OPERATIONS, ids=[op.name for op in OPERATIONS])
def test_the_faces_state_the_bounds_and_defaults_of_the_table(
    op: Operation, openapi: dict[str, Any], tools: dict[str, Any]
) -> None:
    assert disagreements(op, observe_all(op, openapi, tools)) == []


def test_no_face_replaces_an_integer_bound_or_a_choice() -> None:
    for op in OPERATIONS:
        for f in dataclasses.fields(op.request):
            spec: ops.Spec = f.metadata["spec"]
            for face in FACES:
                replaced = set({CLI: spec.cli, HTTP: spec.http, MCP: spec.mcp}[face])
                assert not replaced & {"ge", "le", "lt"}, (op.name, f.name, face)


def test_the_table_names_the_librarys_choices() -> None:
    from semsearch.curate.digest import FORMATS as DIGEST_FORMATS
    from semsearch.curate.export import FORMATS
    from semsearch.curate.recommend import METHODS

    assert typing.get_args(ops.Mode) == options.MODES
    assert typing.get_args(ops.CitationFormat) == FORMATS
    assert typing.get_args(ops.DigestFormat) == DIGEST_FORMATS
    assert options.RECOMMEND_METHODS == METHODS
    from semsearch.app.application import Application

    for op in OPERATIONS:  # every entry runs on the application
        assert callable(getattr(Application, op.call)), op.name


def _changed(request: type, field: str, **change: Any) -> type:
    """A copy of a request class with one field's spec changed."""
    hints = typing.get_type_hints(request)
    fields = []
    for f in dataclasses.fields(request):
        spec = f.metadata["spec"]
        if f.name == field:
            spec = dataclasses.replace(spec, **change)
        made = (
            dataclasses.field(metadata={"spec": spec})
            if f.default is dataclasses.MISSING
            else (dataclasses.field(default=f.default, metadata={"spec": spec}))
        )
        fields.append((f.name, hints[f.name], made))
    changed: type = dataclasses.make_dataclass(request.__name__, fields, frozen=True)
    return changed


def test_a_bound_changed_on_one_face_only_is_caught(
    index: Path, openapi: dict[str, Any], tools: dict[str, Any]
) -> None:
    search = ops.operation("search")
    seen = observe_all(search, openapi, tools)
    assert disagreements(search, seen) == []
    spec = search.request.__dataclass_fields__["k"].metadata["spec"]

    # The MCP face built from a table whose k has another maximum there only.
    agent = dataclasses.replace(search, request=_changed(search.request, "k", mcp={**spec.mcp, "le": 500}))
    live = LiveIndex(index, embedder=FakeEmbedder())
    try:
        tool = make_tool(agent, HANDLERS["search"], live, 8000)
    finally:
        live.close()
    seen[MCP] = observe_mcp(agent, {"schema": tool.parameters})
    assert "search.k: maximum differs between faces: {'cli': 1000, 'http': 1000, 'mcp': 500}" in disagreements(
        search, seen
    )

    # The HTTP face built from a table whose k has another maximum, beside the real CLI and MCP faces.
    web = dataclasses.replace(search, request=_changed(search.request, "k", le=999))
    router = APIRouter()
    route(router, web, serve_routes.search)
    app = FastAPI()
    app.include_router(router)
    seen = observe_all(search, openapi, tools)
    seen[HTTP] = observe_http(web, app.openapi())
    found = disagreements(search, seen)
    assert "search.k on http: maximum 999, table 1000" in found
    assert "search.k: maximum differs between faces: {'cli': 1000, 'http': 999, 'mcp': 1000}" in found


# ---------------------------------------------------------------- messages name the fields as each face does


def test_each_face_names_a_field_its_own_way() -> None:
    assert ops.face_name(CLI, "where") == "--where"
    assert ops.face_name(CLI, "not_like", "recommend") == "--not"
    assert ops.face_name(CLI, "query", "search") == "TEXT"
    assert ops.face_name(CLI, "k", "search") == "-k"
    assert ops.face_name(HTTP, "query", "search") == "q"
    assert ops.face_name(HTTP, "not_like") == "not"
    assert ops.face_name(MCP, "not_like") == "not_like"
    assert ops.face_name(CLI, "batch_size") == "--batch-size"  # a field of no operation: its flag's spelling


def test_library_errors_name_fields_as_each_face_does(index: Path) -> None:
    group = Group()

    @group.command(name="recommend")
    def failing() -> None:
        raise QueryError("no such paper in {field}: x", field="not_like")

    result = CliRunner().invoke(group, ["recommend"])
    assert result.exit_code == 2 and result.output.strip() == "Error: no such paper in --not: x"

    app = create_app(index, embedder=FakeEmbedder())

    @app.get("/api/failing")
    def fails() -> None:
        raise QueryError("no such paper in {field}: x", field="not_like")

    client = TestClient(app, base_url="http://127.0.0.1")
    assert client.get("/api/failing").json()["error"] == "no such paper in not: x"
    # A real one: the filter language's error says where, never --where, to the API.
    body = client.get("/api/search", params={"q": "privacy", "where": "year=>2024"}).json()
    assert "in where 'year=>2024'" in body["error"] and "--where" not in body["error"]


def test_an_agent_reads_the_field_by_its_argument_name(index: Path) -> None:
    lines: list[str] = []

    async def go() -> None:
        live = LiveIndex(index, embedder=FakeEmbedder())
        try:
            async with Client(create_server(live)) as client:
                result = await client.call_tool("search", {"query": "privacy", "where": ["year=>2024"]})
                assert result.is_error
                lines.append(result.content[0].text)
        finally:
            live.close()

    anyio.run(go)
    assert lines[0].startswith("search: unknown operator '=>' in where 'year=>2024'"), lines


# ---------------------------------------------------------------- one query length on every face


def test_the_query_has_one_length_bound_on_every_face(openapi: dict[str, Any], tools: dict[str, Any]) -> None:
    search = ops.operation("search")
    seen = observe_all(search, openapi, tools)
    assert {face: seen[face]["query"]["max_length"] for face in FACES} == dict.fromkeys(FACES, ops.MAX_QUERY_CHARS)
    watch = ops.operation("watch")
    assert observe_cli(watch)["query"]["max_length"] == ops.MAX_QUERY_CHARS  # a saved query is a query
    # A CLI that stated no bound (as it did before) is caught.
    seen[CLI]["query"]["max_length"] = None
    found = disagreements(search, seen)
    assert f"search.query on cli: max_length None, table {ops.MAX_QUERY_CHARS}" in found
    # A list's number of items stays a network bound: the CLI's --where takes any number.
    assert seen[CLI]["where"]["max_length"] is None and seen[HTTP]["where"]["max_length"] == ops.MAX_WHERE


def test_a_query_too_long_is_refused_by_every_face(index: Path) -> None:
    limit = ops.MAX_QUERY_CHARS
    fits, long = "privacy " + "x" * (limit - 8), "privacy " + "x" * (1500 - 8)
    obj = {"embedder": FakeEmbedder()}
    for args, given in ((["query", long], None), (["query", "-"], long), (["watch", "add", "w", long], None)):
        result = CliRunner().invoke(cli, [*args, "--index", str(index)], input=given, obj=obj)
        assert result.exit_code == 2, (args[:2], result.output)
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.output, result.output
        assert lines[0].endswith(f" is 1,500 characters; the limit is {limit:,}"), lines[0]
    assert CliRunner().invoke(cli, ["query", fits, "--index", str(index)], obj=obj).exit_code == 0
    assert CliRunner().invoke(cli, ["query", "-", "--index", str(index)], input=fits + "\n", obj=obj).exit_code == 0

    client = TestClient(create_app(index, embedder=FakeEmbedder()), base_url="http://127.0.0.1")
    assert client.get("/api/search", params={"q": fits}).status_code == 200
    refused = client.get("/api/search", params={"q": long})
    assert refused.status_code == 422 and f"at most {limit} characters" in refused.json()["error"]

    answers: list[Any] = []

    async def go() -> None:
        live = LiveIndex(index, embedder=FakeEmbedder())
        try:
            async with Client(create_server(live)) as agent:
                answers.append(await agent.call_tool("search", {"query": fits}))
                answers.append(await agent.call_tool("search", {"query": long}))
        finally:
            live.close()

    anyio.run(go)
    assert not answers[0].is_error
    assert answers[1].is_error and f"at most {limit} characters" in answers[1].content[0].text


# ---------------------------------------------------------------- the application runs the table


def test_the_application_runs_each_operation_with_its_own_request(index: Path) -> None:
    from semsearch.app.application import Application

    with Application(index, embedder=FakeEmbedder()) as app:
        found = app.run("search", ops.Search("federated privacy", k=2))
        assert len(found.hits) == 2 and found.version.startswith("v-")
        assert app.run(ops.operation("info"), ops.Info())["documents"] == len(
            app.run("export", ops.Export(ids=())).documents
        )
        with pytest.raises(TypeError, match="search takes a Search"):
            app.run("search", ops.Related("x"))


def test_since_last_is_one_rule_of_the_application(index: Path) -> None:
    """A bookmark is the command line's: a served application refuses since=last, the CLI's follows it."""
    from semsearch.app.application import Application

    live = LiveIndex(index, embedder=FakeEmbedder())
    try:
        served = Application(None, live=live)
        for op, request in (("new", ops.New(since="last")), ("recommend", ops.Recommend(("x",), since="last"))):
            with pytest.raises(QueryError, match="since=last follows a command-line bookmark"):
                served.run(op, request)
        assert served.since(" ") is None  # blank: the default, as the schemas say
    finally:
        live.close()
    with Application(index, embedder=FakeEmbedder()) as local:
        assert local.since("last") == "last"
        local.run("new", ops.New(since="last"))  # moves the bookmark: a second call lists nothing new
        assert local.run("new", ops.New(since="last")).papers == []


def test_a_page_asks_one_more_rank_and_says_whether_more_exist(index: Path) -> None:
    from semsearch.app.application import Application

    with Application(index, embedder=FakeEmbedder()) as app:
        whole = app.run("search", ops.Search("learning", k=6)).hits
        first = app.run("search", ops.Search("learning", k=3, offset=0))
        second = app.run("search", ops.Search("learning", k=3, offset=3))
    assert [h.id for h in first.hits + second.hits] == [h.id for h in whole]
    assert first.more  # a page says whether ranks follow it
