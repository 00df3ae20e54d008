"""The package's shape: no import circles among its modules, and a query path that loads no build machinery."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPO, FakeEmbedder

PACKAGE = REPO / "semsearch"


# The layers, lowest first: a module may import from its own layer and the ones before it, never after.
LAYERS = ("core", "ingest", "store", "dedup", "encode", "atlas", "write", "query", "curate", "eval", "app", "faces")


def _resolve(module: str, level: int, package: str) -> str:
    """The absolute dotted name of a relative import made from ``package``."""
    if level == 0:
        return module
    base = package.split(".")
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imported_modules(path: Path, package: str = "semsearch.pkg", *, typing_only: bool = True) -> set[str]:
    """The semsearch modules a module imports anywhere (top level, in functions, under TYPE_CHECKING), dotted.

    ``from semsearch.x import y`` counts as ``semsearch.x.y`` when that is a module, else as ``semsearch.x``
    (the caller trims names to modules it knows). With ``typing_only=False`` imports under ``if TYPE_CHECKING:``
    are left out (they never run).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    if not typing_only:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            base = _resolve(node.module or "", node.level, package)
            if base == "semsearch" or base.startswith("semsearch."):
                found.update(f"{base}.{alias.name}" for alias in node.names)
                found.add(base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("semsearch."))
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                name = _resolve(arg.value.lstrip("."), len(arg.value) - len(arg.value.lstrip(".")), package)
                if name.startswith("semsearch."):
                    found.add(name)
    return found


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name, subpackages' ``__init__`` included."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def import_graph(*, typing_only: bool = True) -> dict[str, set[str]]:
    """Module -> the semsearch modules it imports (the package's ``__init__`` is the public façade, left out)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        if name == "semsearch":
            continue
        imported = _imported_modules(path, _package_of(name, path), typing_only=typing_only)
        graph[name] = {m for m in imported if m in modules} - {name, "semsearch"}
    return graph


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return cycles


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert find_cycles(graph) == [["a", "b", "c"]]
    assert find_cycles({"a": {"b"}, "b": set()}) == []


def test_the_import_reader_sees_every_kind_of_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from .a import x\n"
        "from . import b\n"
        "import semsearch.c\n"
        "from ..core.h import w\n"
        "if TYPE_CHECKING:\n    from .d import y\n"
        "def f():\n    from .e import z\n    importlib.import_module('semsearch.pkg.g')\n",
        encoding="utf-8",
    )
    found = _imported_modules(module, "semsearch.pkg")
    for name in ("semsearch.pkg.a", "semsearch.pkg.b", "semsearch.c", "semsearch.core.h", "semsearch.pkg.d"):
        assert name in found
    assert {"semsearch.pkg.e", "semsearch.pkg.g"} <= found
    assert "semsearch.pkg.d" not in _imported_modules(module, "semsearch.pkg", typing_only=False)


def test_the_layer_check_catches_an_upward_import() -> None:
    graph = {"semsearch.store.documents": {"semsearch.curate.tags"}, "semsearch.curate.tags": set()}
    assert _upward(graph) == ["semsearch.store.documents -> semsearch.curate.tags"]


def _upward(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for module, imported in sorted(graph.items()):
        mine = layer_of(module)
        for other in sorted(imported):
            theirs = layer_of(other)
            if mine is None or theirs is None:
                continue
            if LAYERS.index(theirs) > LAYERS.index(mine):
                bad.append(f"{module} -> {other}")
    return bad


def test_every_module_lives_in_a_layer() -> None:
    flat = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert flat == []
    packages = sorted(p.parent.name for p in PACKAGE.glob("*/__init__.py"))
    assert packages == sorted(LAYERS)


def test_every_internal_import_names_a_module_that_exists() -> None:
    modules = _modules()
    dangling = {}
    for name, path in modules.items():
        imported = _imported_modules(path, _package_of(name, path))
        # "from semsearch.x.y import name" yields semsearch.x.y.name too: only the module part must exist
        missing = {m for m in imported if m not in modules and m.rpartition(".")[0] not in modules}
        if missing:
            dangling[name] = sorted(missing)
    assert dangling == {}


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    graph = import_graph()  # type-only imports included: a type-level circle is a circle too
    assert len(graph) > 60  # the reader really found the package
    assert _upward(graph) == []


def test_no_import_cycles_among_semsearch_modules() -> None:
    assert find_cycles(import_graph()) == []


# Nothing a query needs: the model's training stack, the map builder, the build pipeline and the faces.
QUERY_PATH_BANNED = (
    "torch",
    "sentence_transformers",
    "transformers",
    "umap",
    "semsearch.store.corpus_map",
    "semsearch.atlas",
    "semsearch.write.build",
    "semsearch.write.contents",
    "semsearch.ingest.sources",
    "semsearch.faces.serve",
    "fastapi",
)
# Whole layers a library query never enters: reading sources and writing versions (the stale notice is the CLI's).
QUERY_PATH_BANNED_LAYERS = ("semsearch.ingest", "semsearch.write")


def _banned_loaded(banned: tuple[str, ...], layers: tuple[str, ...] = (), allowed: tuple[str, ...] = ()) -> str:
    """Code that prints, as JSON, the banned modules in sys.modules (layers by prefix, ``allowed`` excepted)."""
    return (
        f"loaded = [m for m in sys.modules if m in {banned!r} or m.startswith({tuple(f'{x}.' for x in layers)!r})]\n"
        f"print(json.dumps(sorted(m for m in loaded if m not in {allowed!r})))\n"
    )


def test_the_query_and_curate_layers_import_no_ingest_and_no_writer() -> None:
    graph = import_graph()
    reach = sorted(
        f"{module} -> {other}"
        for module, imported in graph.items()
        if layer_of(module) in ("query", "curate")
        for other in imported
        if other.startswith(tuple(f"{layer}." for layer in QUERY_PATH_BANNED_LAYERS))
    )
    assert reach == []


def test_library_query_path_loads_no_build_machinery(tmp_path: Path, small_corpus: Path) -> None:
    from semsearch import BuildOptions, build_index

    build_index([str(small_corpus)], tmp_path / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from tests.helpers import FakeEmbedder\n"
        "from semsearch import Index\n"
        f"with Index.open({str(tmp_path / 'idx')!r}, embedder=FakeEmbedder()) as index:\n"
        "    hits = index.search('federated privacy', k=3)\n"
        "    index.related(hits[0].id, k=2)\n"
        "    index.search('privacy', k=2, where=['collection~Test'], diverse=True)\n"
        + _banned_loaded(QUERY_PATH_BANNED, QUERY_PATH_BANNED_LAYERS)
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("command", [["--help"], ["query", "--help"], ["index", "--help"]])
def test_cli_help_imports_no_numpy(command: list[str]) -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from semsearch.faces.cli import cli\n"
        f"r = CliRunner().invoke(cli, {command!r})\n"
        "assert r.exit_code == 0, r.output\n"
        "print('numpy' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_cli_query_loads_only_its_command_family(tmp_path: Path, small_corpus: Path) -> None:
    """`semsearch query` loads the search commands and the application, not the other families or faces."""
    from semsearch import BuildOptions, build_index

    build_index([str(small_corpus)], tmp_path / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from click.testing import CliRunner\n"
        "from tests.helpers import FakeEmbedder\n"
        "from semsearch.faces.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['query', 'federated privacy', '--index', {str(tmp_path / 'idx')!r}],"
        " obj={'embedder': FakeEmbedder()})\n"
        "assert r.exit_code == 0, r.output\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('semsearch.faces', 'semsearch.app')))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert loaded == {
        "semsearch.app",
        "semsearch.app.application",
        "semsearch.app.operations",
        "semsearch.faces",
        "semsearch.faces.cli",
        "semsearch.faces.cli.common",
        "semsearch.faces.cli.main",
        "semsearch.faces.cli.search",
        "semsearch.faces.render",
    }


def test_cli_query_path_loads_no_mail_and_no_build_machinery(tmp_path: Path, small_corpus: Path) -> None:
    from semsearch import BuildOptions, build_index

    build_index([str(small_corpus)], tmp_path / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    # The CLI's stale-sources notice (write.freshness) walks the sources (ingest.walk) and reads no file: no other
    # writer or ingest module may load.
    allowed = ("semsearch.write.freshness", "semsearch.ingest.walk")
    banned = (*QUERY_PATH_BANNED, "smtplib", "semsearch.curate.mail")
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from click.testing import CliRunner\n"
        "from tests.helpers import FakeEmbedder\n"
        "from semsearch.faces.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['query', 'federated privacy', '--index', {str(tmp_path / 'idx')!r}],"
        " obj={'embedder': FakeEmbedder()})\n"
        "assert r.exit_code == 0, r.output\n" + _banned_loaded(banned, QUERY_PATH_BANNED_LAYERS, allowed)
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_how_it_works_names_every_module_in_its_layer() -> None:
    """The layer table of docs/explanation/how-it-works.md is the package's map: every module is named in its row."""
    doc = (REPO / "docs" / "explanation" / "how-it-works.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `semsearch/(\w+)/` \| (.*?) \|", doc, re.M)}
    assert sorted(rows) == sorted(LAYERS)
    missing = []
    for layer in LAYERS:
        named = set(re.findall(r"`(\w+)/?`", rows[layer]))
        for path in sorted((REPO / "semsearch" / layer).rglob("*.py")):
            if path.stem != "__init__" and path.stem not in named:
                missing.append(f"{layer}: {path.relative_to(REPO / 'semsearch')}")
    assert not missing, "how-it-works.md's layer table does not name: " + ", ".join(missing)
