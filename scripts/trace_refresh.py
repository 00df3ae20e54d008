"""What one refresh runs: the semsearch modules it enters, its calls up a layer, its opens of the live version.

    python scripts/trace_refresh.py [--root REPO] [--fallback] [--workdir DIR]

Builds an index of the seed files with the tests' hashed encoder (``tests/conftest.py`` ``FakeEmbedder``; no
model is loaded), adds one source file with one new abstract, and traces ``build_index`` refreshing it with
``sys.setprofile``. ``--root`` picks the tree whose ``semsearch`` package runs (default: the current folder when
it holds one, else this script's repository), so one script measures two checkouts. ``--fallback`` makes the
segment budget so small that the planner reads the new file, then falls back to writing the index whole;
``--ann hnsw`` (or ivf) builds an approximate index, whose rewrite encodes tuning queries.

Prints one JSON line:

- ``walk`` / ``walk_without_core``: the write layer's modules and the package modules it calls into directly
  (the refresh's route through the package), with and without ``semsearch.core``;
- ``modules`` / ``modules_without_core``: every package module with code run during the refresh (a module
  imported then counts too, its top level being code run), with and without ``semsearch.core``;
- ``calls_up`` and ``calls_up_pairs``: calls whose nearest calling package frame lies in a lower layer than the
  called one (``tests/project/test_architecture.py`` ``LAYERS``); a callback a higher layer hands down counts when the
  lower layer calls it;
- ``build_entered``: calls of functions of ``write/build.py``, comprehensions left out (``build_from_outside``:
  those from another module);
- ``live_opened``: opens of the live version: parses of its manifest (``Manifest.read`` on the live folder,
  ``live_manifest_reads``) plus document stores opened on it (``DocumentStore.open_version``, or the
  constructor called directly, ``live_store_opens``); ``pointer_reads``: ``current_version`` calls;
- ``files_read``: source files read (``ingest.sources.read_file`` calls; the seed folder holds five, the refresh
  brings one); ``deduplicate``: each dedup pass with the number of records it saw.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parents[1]
NEW_FILE = (
    "Extra Papers\n\nWe study federated learning with differential privacy for large language models and show "
    "that adaptive clipping improves utility under a fixed privacy budget across many benchmarks and settings.\n"
)


def _root(given: Path | None) -> Path:
    if given is not None:
        return given.resolve()
    cwd = Path.cwd()
    return cwd if (cwd / "semsearch" / "__init__.py").is_file() else HERE


def _layers(root: Path) -> tuple[str, ...]:
    """The layer order the architecture test of ``root`` checks."""
    import ast

    found = [path for path in (root / "tests" / "project", root / "tests") if (path / "test_architecture.py").is_file()]
    if not found:
        raise SystemExit(f"no tests/project/test_architecture.py under {root}")
    tree = ast.parse((found[0] / "test_architecture.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "LAYERS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise SystemExit("no LAYERS in tests/project/test_architecture.py")


class Tracer:
    """A profile hook that records the package's calls."""

    def __init__(self, layers: tuple[str, ...], live: Path, codes: dict[str, Any]) -> None:
        self.rank = {name: i for i, name in enumerate(layers)}
        self.live = live.resolve()
        self.codes = codes
        self.modules: set[str] = set()
        self.up: Counter[str] = Counter()
        self.build_entered = 0
        self.build_from_outside = 0
        self.walk: set[str] = set()
        self.live_opened = 0
        self.store_opened = 0
        self.pointer_reads = 0
        self.files_read = 0
        self.dedup: list[int] = []

    def layer(self, module: str) -> int | None:
        parts = module.split(".")
        return self.rank.get(parts[1]) if len(parts) > 2 and parts[0] == "semsearch" else None

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not (module == "semsearch" or module.startswith("semsearch.")):
            return
        self.modules.add(module)
        caller = frame.f_back
        while caller is not None and not str(caller.f_globals.get("__name__", "")).startswith("semsearch."):
            caller = caller.f_back
        source = str(caller.f_globals.get("__name__", "")) if caller is not None else ""
        mine, theirs = self.layer(module), self.layer(source)
        if mine is not None and theirs is not None and theirs < mine:
            self.up[f"{source}:{caller.f_code.co_name if caller else ''} -> {module}:{frame.f_code.co_name}"] += 1
        if source.startswith("semsearch.write.") or module.startswith("semsearch.write."):
            self.walk.add(module)
        if module == "semsearch.write.build" and frame.f_code.co_name not in _COMPREHENSIONS:
            self.build_entered += 1
            self.build_from_outside += source != module
        code = frame.f_code
        local = frame.f_locals
        if code is self.codes["manifest_read"] and _same(local.get("version"), self.live):
            self.live_opened += 1
        elif code is self.codes["store_open"] and _same(local.get("version"), self.live):
            self.store_opened += 1
        elif code is self.codes["store_init"] and _same(local.get("path"), self.live):
            caller_code = frame.f_back.f_code if frame.f_back is not None else None
            self.store_opened += caller_code is not self.codes["store_open"]
        elif code is self.codes["current_version"]:
            self.pointer_reads += 1
        elif code is self.codes["read_file"]:
            self.files_read += 1
        elif code is self.codes["deduplicate"]:
            self.dedup.append(len(local.get("records") or []))


_COMPREHENSIONS = {"<genexpr>", "<listcomp>", "<dictcomp>", "<setcomp>"}  # a resumed generator is no entry


def _same(path: Any, live: Path) -> bool:
    if path is None:
        return False
    p = Path(path).resolve()
    return p == live or live in p.parents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, help="the checkout whose semsearch runs (default: see above)")
    parser.add_argument("--workdir", type=Path, help="where the index is built (default: a temporary folder)")
    parser.add_argument("--fallback", action="store_true", help="make the planner fall back to a rewrite")
    parser.add_argument("--ann", help="the ANN kind to build (flat, ivf, ivfpq, hnsw; default: by corpus size)")
    args = parser.parse_args()
    root = _root(args.root)
    sys.path[:0] = [str(root), str(root / "tests")]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="semsearch-refresh-"))
    os.environ.setdefault("SEMSEARCH_ENCODERS_DIR", str(work / "encoders"))
    try:
        print(json.dumps(measure(root, work, fallback=args.fallback, ann=args.ann)))
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)


def measure(root: Path, work: Path, *, fallback: bool = False, ann: str | None = None) -> dict[str, Any]:
    """Build the seed index in ``work``, add one file, and trace the refresh (``root``'s package must load)."""
    import semsearch

    assert Path(semsearch.__file__).resolve().is_relative_to(root), semsearch.__file__
    try:
        from tests.helpers import FakeEmbedder
    except ImportError:
        from conftest import FakeEmbedder

    from semsearch.dedup.duplicates import deduplicate
    from semsearch.ingest.sources import read_file
    from semsearch.store import documents
    from semsearch.store.layout import current_version
    from semsearch.store.manifest import Manifest
    from semsearch.write.build import build_index
    from semsearch.write.settings import BuildOptions

    sources = work / "sources"
    shutil.copytree(root / "seeds", sources, dirs_exist_ok=True)
    index = work / "index"
    fake = FakeEmbedder()
    first = build_index([str(sources)], index, BuildOptions(progress=False, ann=ann), embedder=fake)
    (sources / "zz_extra.txt").write_text(NEW_FILE, encoding="utf-8")
    live = current_version(index)
    opts = BuildOptions(progress=False, ann=ann, merge_share=1e-9 if fallback else BuildOptions.merge_share)
    codes = {
        "manifest_read": Manifest.read.__func__.__code__,
        "store_open": documents.DocumentStore.open_version.__func__.__code__,
        "store_init": documents.DocumentStore.__init__.__code__,
        "current_version": current_version.__code__,
        "read_file": read_file.__code__,
        "deduplicate": deduplicate.__code__,
    }
    tracer = Tracer(_layers(root), live, codes)
    sys.setprofile(tracer)
    try:
        summary = build_index([str(sources)], index, opts, embedder=fake)
    finally:
        sys.setprofile(None)
    modules = sorted(tracer.modules)
    without_core = [m for m in modules if not m.startswith("semsearch.core.")]
    walk = sorted(tracer.walk)
    walk_without_core = [m for m in walk if not m.startswith("semsearch.core.")]
    out = {
        "root": str(root),
        "fallback": fallback,
        "documents_before": first.documents,
        "documents_after": summary.documents,
        "segments": summary.segments,
        "rewritten_because": summary.rewritten_because,
        "walk": len(walk),
        "walk_without_core": len(walk_without_core),
        "modules": len(modules),
        "modules_without_core": len(without_core),
        "calls_up": sum(tracer.up.values()),
        "calls_up_sites": len(tracer.up),
        "build_entered": tracer.build_entered,
        "build_from_outside": tracer.build_from_outside,
        "live_opened": tracer.live_opened + tracer.store_opened,
        "live_manifest_reads": tracer.live_opened,
        "live_store_opens": tracer.store_opened,
        "pointer_reads": tracer.pointer_reads,
        "files_read": tracer.files_read,
        "deduplicate": tracer.dedup,
        "walk_names": walk,
        "module_names": modules,
        "calls_up_pairs": dict(tracer.up.most_common()),
    }
    return out


if __name__ == "__main__":
    main()
