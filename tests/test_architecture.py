"""The package's shape: no import circles among its modules, and a query path that loads no build machinery."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, FakeEmbedder

PACKAGE = REPO / "semsearch"


def _imported_modules(path: Path) -> set[str]:
    """The semsearch modules a module imports anywhere (top level or inside functions), by short name.

    Imports under ``if TYPE_CHECKING:`` never run, so they cannot form a circle at run time and are left out.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level == 1 and node.module:
                found.add(node.module.split(".")[0])
            elif node.level == 1:  # from . import x, y
                found.update(alias.name for alias in node.names)
            elif node.level == 0 and node.module and node.module.startswith("semsearch."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            found.update(a.name.split(".")[1] for a in node.names if a.name.startswith("semsearch."))
        elif isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("."):
                found.add(arg.value[1:].split(".")[0])
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the semsearch modules it imports (the package's ``__init__`` is the public façade, left out)."""
    modules = {p.stem: p for p in PACKAGE.glob("*.py") if p.stem not in ("__init__", "__main__")}
    return {name: _imported_modules(path) & modules.keys() - {name} for name, path in modules.items()}


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


def test_the_import_reader_sees_function_level_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from typing import TYPE_CHECKING\n"
        "from .a import x\n"
        "from . import b\n"
        "import semsearch.c\n"
        "if TYPE_CHECKING:\n    from .d import y\n"
        "def f():\n    from .e import z\n    importlib.import_module('.g', __package__)\n",
        encoding="utf-8",
    )
    assert _imported_modules(module) == {"a", "b", "c", "e", "g"}


def test_every_internal_import_names_a_module_that_exists() -> None:
    modules = {p.stem for p in PACKAGE.glob("*.py")}
    dangling = {
        path.stem: sorted(_imported_modules(path) - modules)
        for path in PACKAGE.glob("*.py")
        if _imported_modules(path) - modules
    }
    assert dangling == {}


def test_no_import_cycles_among_semsearch_modules() -> None:
    graph = import_graph()
    assert len(graph) > 30  # the reader really found the package
    assert find_cycles(graph) == []


# Nothing a query needs: the model's training stack, the map builder, the build pipeline and the faces.
QUERY_PATH_BANNED = (
    "torch",
    "sentence_transformers",
    "transformers",
    "umap",
    "semsearch.corpus_map",
    "semsearch.build",
    "semsearch.contents",
    "semsearch.ingest",
    "semsearch.serve",
    "fastapi",
)


def test_library_query_path_loads_no_build_machinery(tmp_path: Path, small_corpus: Path) -> None:
    from semsearch import BuildOptions, build_index

    build_index([str(small_corpus)], tmp_path / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO / 'tests')!r})\n"
        "from conftest import FakeEmbedder\n"
        "from semsearch import Index\n"
        f"with Index.open({str(tmp_path / 'idx')!r}, embedder=FakeEmbedder()) as index:\n"
        "    hits = index.search('federated privacy', k=3)\n"
        "    index.related(hits[0].id, k=2)\n"
        "    index.search('privacy', k=2, where=['collection~Test'], diverse=True)\n"
        f"print(json.dumps([m for m in {QUERY_PATH_BANNED!r} if m in sys.modules]))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("command", [["--help"], ["query", "--help"], ["index", "--help"]])
def test_cli_help_imports_no_numpy(command: list[str]) -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from semsearch.cli import cli\n"
        f"r = CliRunner().invoke(cli, {command!r})\n"
        "assert r.exit_code == 0, r.output\n"
        "print('numpy' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "False"
