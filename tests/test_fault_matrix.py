"""The fault matrix: every writer against every fault around it, and what must hold after each.

Writers: a refresh that rewrites (a source changed), a refresh that appends (a file arrived), ``remove``,
``index --optimize`` and a tag write. Faults: a damaged, missing or dangling ``CURRENT``; a concurrent writer
at each barrier (``semsearch.core.faults``); SIGKILL at each barrier; a full disk at each write layer (the ONNX
export included). After each: the versions published before are intact, ``verify`` is clean wherever the
pointer is sound, and no removal is undone. The integrity classes (shared-store damage, cache poisoning,
non-finite vectors), each against every writer, are in tests/test_faults_integrity.py.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import PAPERS, FakeEmbedder
from faultkit import ForkServer, Writer, assert_versions_intact, lock_held, versions_snapshot
from test_cli import run
from test_crash_safety import synthetic_abstracts
from test_disk_full import FullConnection, enospc, inject

import semsearch.encode.onnx_backend
import semsearch.reader.tags
import semsearch.store.documents
import semsearch.store.lexical
import semsearch.store.vectors
import semsearch.store.versions
from semsearch import BuildOptions, Index, build_index
from semsearch.reader.tags import TagStore
from semsearch.store.layout import CURRENT
from semsearch.store.manifest import Manifest
from semsearch.write.remove import remove_documents

WRITERS = ("build", "append", "remove", "optimize", "tag")
VERSION_POINTS = ("read", "plan", "publish", "swap")
TAG_POINTS = ("read", "publish")
EXTRA_A = "Sparse attention patterns cut the quadratic cost of transformers on long documents."
EXTRA_C = "Protein structures are predicted by diffusion models conditioned on evolutionary sequence data."
GONE = "Causal discovery from observational data recovers a graph of interventions with sparse priors."


@dataclass
class Scene:
    """An index over corpus/a.txt and corpus/b.txt (and d.txt, removed with ``remove --source``), tagged."""

    root: Path
    corpus: Path
    index: Path
    ids: dict[str, str]  # paper key -> document id
    removed: Path | None  # the source a removal took out before the fault, which must stay out

    @property
    def a(self) -> Path:
        return self.corpus / "a.txt"

    @property
    def b(self) -> Path:
        return self.corpus / "b.txt"


def _seed(path: Path, texts: list[str]) -> None:
    path.write_text("Papers\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")


def make_scene(root: Path, *, with_removal: bool) -> Scene:
    """Build the scene at ``root`` (sources, index, a removal, a tag)."""
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"]])
    _seed(corpus / "b.txt", [PAPERS["graph"], PAPERS["llm"]])
    # Enough documents that one arriving file or a removed one is a small change (appended as a segment).
    _seed(corpus / "bulk.txt", synthetic_abstracts(20, seed=22))
    index = root / "idx"
    fake = FakeEmbedder()
    sources = [str(corpus)]
    removed = None
    if with_removal:
        removed = root / "d.txt"
        _seed(removed, [GONE])
        sources.append(str(removed))
    assert run(["index", *sources, "--index", str(index), "-q"], fake).exit_code == 0
    if removed is not None:
        assert run(["remove", "--source", str(removed), "--index", str(index)], fake).exit_code == 0
    with Index.open(index) as idx:
        ids = {key: next(d.id for d in idx.store.iter_documents() if d.text == text) for key, text in PAPERS.items()}
    assert run(["tag", "add", "liked", ids["fed"], "--index", str(index)], fake).exit_code == 0
    return Scene(root, corpus, index, ids, removed)


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[bool], Scene]]:
    """A fresh scene for each test, copied from one built once per kind (paths recorded in it stay true:
    every test works in the same folder, restored from the copy). In memory where it can be: every publish
    fsyncs each file, which a shared disk makes the slowest part of the matrix."""
    shm = Path("/dev/shm")
    memory = shm.is_dir() and os.access(shm, os.W_OK)
    base = Path(tempfile.mkdtemp(prefix="semsearch-faults-", dir=shm)) if memory else tmp_path_factory.mktemp("scene")
    work = base / "work"
    built: dict[bool, Scene] = {}

    def fresh(with_removal: bool) -> Scene:
        shutil.rmtree(work, ignore_errors=True)
        saved = base / f"saved-{with_removal}"
        if with_removal not in built:
            built[with_removal] = make_scene(work, with_removal=with_removal)
            shutil.copytree(work, saved)
        else:
            shutil.copytree(saved, work)
        return built[with_removal]

    yield fresh
    if memory:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def forks() -> Iterator[ForkServer]:
    server = ForkServer()
    yield server
    server.close()


def writer_args(kind: str, scene: Scene) -> list[str]:
    """Prepare the sources for a writer and return its ``semsearch`` arguments."""
    idx = ["--index", str(scene.index)]
    if kind == "build":  # a kept source changed: the refresh re-reads and rewrites the index whole
        _seed(scene.a, [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"], EXTRA_A])
        return ["index", *idx, "-q", "--wait"]
    if kind == "append":  # a file arrived: the refresh appends a segment
        _seed(scene.corpus / "c.txt", [EXTRA_C])
        return ["index", *idx, "-q", "--wait"]
    if kind == "remove":
        return ["remove", "--source", str(scene.b), *idx, "--wait"]
    if kind == "optimize":
        return ["index", *idx, "--optimize", "-q", "--wait"]
    return ["tag", "add", "liked", scene.ids["vision"], *idx]


def texts(index: Path) -> set[str]:
    with Index.open(index) as idx:
        return {d.text for d in idx.store.iter_documents()}


def live_manifest(index: Path) -> Manifest:
    return Manifest.read(index / (index / CURRENT).read_text(encoding="utf-8").strip())


def assert_sound(scene: Scene) -> None:
    """verify is clean and the removal made before the fault is still in force."""
    checked = run(["verify", "--index", str(scene.index), "--json"], FakeEmbedder())
    assert checked.exit_code == 0, checked.output
    if scene.removed is not None:
        assert GONE not in texts(scene.index), "a removal was undone"
        assert str(scene.removed) in live_manifest(scene.index).excluded_sources


def assert_effect(kind: str, scene: Scene) -> None:
    """What the writer itself set out to do is in the live version (or the tags file)."""
    now = texts(scene.index)
    if kind == "build":
        assert EXTRA_A in now
    elif kind == "append":
        assert EXTRA_C in now
    elif kind == "remove":
        assert PAPERS["graph"] not in now and str(scene.b) in live_manifest(scene.index).excluded_sources
    elif kind == "tag":
        assert scene.ids["vision"] in TagStore(scene.index).tagged_ids(["liked"])


def no_leftovers(index: Path) -> None:
    left = [p.name for p in index.iterdir() if p.name.startswith((".build-", ".CURRENT.")) or p.name == ".publishing"]
    assert left == []
    live = int((index / CURRENT).read_text(encoding="utf-8").split("-")[1])
    assert all(int(v.name.split("-")[1]) <= live for v in index.glob("v-*")), "an unpublished version is left"


# ---------------------------------------------------------------- damaged, missing, dangling CURRENT


def damage(index: Path, how: str) -> None:
    pointer = index / CURRENT
    if how == "damaged":
        pointer.write_bytes(b"\xff\xfe\x00garbage")
    elif how == "missing":
        pointer.unlink()
    else:
        pointer.write_text("v-00001", encoding="utf-8")


@pytest.mark.parametrize("how", ["damaged", "missing", "dangling"])
@pytest.mark.parametrize("kind", WRITERS)
def test_a_bad_pointer_stops_every_writer_and_recover_points_back(
    scenes: Callable[[bool], Scene], kind: str, how: str
) -> None:
    scene = scenes(kind != "append")
    live = (scene.index / CURRENT).read_text(encoding="utf-8").strip()
    before = versions_snapshot(scene.index)
    tags_before = (scene.index / "tags.json").read_bytes()
    args = writer_args(kind, scene)
    damage(scene.index, how)
    (scene.root / "seeds").mkdir(exist_ok=True)  # a default source in reach must not replace the index
    _seed(scene.root / "seeds" / "s.txt", ["A lone seed abstract about protein folding."])
    cwd = Path.cwd()
    os.chdir(scene.root)
    try:
        result = run(args, FakeEmbedder())
    finally:
        os.chdir(cwd)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert live in lines[0] and "semsearch index --recover" in lines[0]
    assert_versions_intact(scene.index, before)
    assert sorted(p.name for p in scene.index.glob("v-*")) == sorted(before)
    assert (scene.index / "tags.json").read_bytes() == tags_before
    recovered = run(["index", "--recover", "--index", str(scene.index), "--json"], FakeEmbedder())
    assert recovered.exit_code == 0, recovered.output
    assert json.loads(recovered.output)["version"] == live
    assert (scene.index / CURRENT).read_text(encoding="utf-8").strip() == live
    assert_versions_intact(scene.index, before)
    assert_sound(scene)
    again = run(args, FakeEmbedder())
    assert again.exit_code == 0, again.output
    assert_sound(scene)
    assert_effect(kind, scene)


# ---------------------------------------------------------------- a concurrent writer at each barrier


def concurrent_writer(kind: str, scene: Scene) -> tuple[Callable[[], None], Callable[[], None]]:
    """Another writer to land while ``kind`` is stopped, and the check that its change is in force."""
    if kind == "tag":

        def untag() -> None:
            TagStore(scene.index).remove("liked", [scene.ids["fed"]])

        def untagged() -> None:
            assert scene.ids["fed"] not in TagStore(scene.index).tagged_ids(["liked"])

        return untag, untagged
    if kind == "remove":
        _seed(scene.corpus / "c.txt", [EXTRA_C])

        def refresh() -> None:
            build_index(None, scene.index, BuildOptions(progress=False, wait=True), embedder=FakeEmbedder())

        return refresh, lambda: assert_effect("append", scene)

    def removal() -> None:
        remove_documents(scene.index, sources=[str(scene.b)], wait=True)

    return removal, lambda: assert_effect("remove", scene)


def _catching(fn: Callable[[], None], failed: list[BaseException]) -> Callable[[], None]:
    def call() -> None:
        try:
            fn()
        except BaseException as exc:  # reported by the test, not lost in the thread
            failed.append(exc)

    return call


CONCURRENT = [(k, p) for k in WRITERS for p in (TAG_POINTS if k == "tag" else VERSION_POINTS)]


@pytest.mark.parametrize(("kind", "point"), CONCURRENT)
def test_a_concurrent_writer_at_each_barrier(
    scenes: Callable[[bool], Scene], forks: ForkServer, tmp_path: Path, kind: str, point: str
) -> None:
    scene = scenes(kind != "append")
    before = versions_snapshot(scene.index)
    args = writer_args(kind, scene)
    other, landed = concurrent_writer(kind, scene)
    stopped = Writer(forks, args, point, tmp_path / "barrier")
    stopped.reached()
    lock = scene.index / (semsearch.reader.tags.TAGS_LOCK if kind == "tag" else ".lock")
    if lock_held(lock):  # the other writer queues behind the stopped one
        failed: list[BaseException] = []
        thread = threading.Thread(target=_catching(other, failed))
        thread.start()
        stopped.release()
        status, output = stopped.finish()
        thread.join(timeout=60)
        assert not thread.is_alive() and not failed, failed
    else:  # it lands while the stopped one waits
        other()
        stopped.release()
        status, output = stopped.finish()
    assert status == 0, output
    assert_versions_intact(scene.index, before)
    assert_sound(scene)
    landed()
    assert_effect(kind, scene)


# ---------------------------------------------------------------- SIGKILL at each barrier


@pytest.mark.parametrize(("kind", "point"), CONCURRENT)
def test_sigkill_at_each_barrier(
    scenes: Callable[[bool], Scene], forks: ForkServer, tmp_path: Path, kind: str, point: str
) -> None:
    scene = scenes(kind != "append")
    live = (scene.index / CURRENT).read_text(encoding="utf-8").strip()
    before = versions_snapshot(scene.index)
    tags_before = (scene.index / "tags.json").read_bytes()
    args = writer_args(kind, scene)
    stopped = Writer(forks, args, point, tmp_path / "barrier")
    stopped.reached()
    stopped.kill()
    assert (scene.index / CURRENT).read_text(encoding="utf-8").strip() == live  # killed before the swap
    assert_versions_intact(scene.index, before)
    assert (scene.index / "tags.json").read_bytes() == tags_before
    assert_sound(scene)
    again = run(args, FakeEmbedder())
    assert again.exit_code == 0, again.output
    no_leftovers(scene.index)
    assert_versions_intact(scene.index, before)
    assert_sound(scene)
    assert_effect(kind, scene)
    if kind == "append":  # a small change: it took the segment path, not a rewrite
        assert live_manifest(scene.index).segments


# ---------------------------------------------------------------- a full disk at each write layer


def fill_disk(patch: pytest.MonkeyPatch, layer: str) -> None:
    """Make one write layer find the disk full (a half-written file first, where a layer writes one)."""
    real_atomic = semsearch.store.versions.write_text_atomic
    if layer in ("vectors", "lexical", "faiss"):
        inject(patch, layer)  # the same faults as tests/test_disk_full.py's
    elif layer == "documents":
        real_connect = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            conn = real_connect(*args, **kwargs)
            return FullConnection(conn) if ".build-" in str(args[0]) else conn  # writes only: reads still work

        patch.setattr(semsearch.store.documents.sqlite3, "connect", connect)
    elif layer in ("journal", "current"):
        target = ".publishing" if layer == "journal" else CURRENT

        def atomic(path: Path, text: str) -> None:
            if path.name == target:
                raise enospc(str(path))
            real_atomic(path, text)

        patch.setattr(semsearch.store.versions, "write_text_atomic", atomic)
    elif layer == "onnx":

        def export(model: str, out_dir: Path, **kwargs: Any) -> Any:
            out_dir.mkdir(parents=True, exist_ok=True)
            (out_dir / "model.onnx").write_bytes(b"\x08\x01" * 64)
            raise enospc(str(out_dir / "model.onnx"))

        patch.setattr(semsearch.encode.onnx_backend, "export_onnx", export)
    elif layer == "tags":
        patch.setattr(semsearch.reader.tags, "write_text_atomic", lambda path, text: (_ for _ in ()).throw(enospc()))
    else:  # pragma: no cover
        raise ValueError(layer)


LAYERS = {
    "build": ("vectors", "lexical", "faiss", "documents", "journal", "current", "onnx"),
    "append": ("vectors", "lexical", "documents", "journal", "current"),
    "remove": ("vectors", "lexical", "faiss", "documents", "journal", "current"),
    "optimize": ("vectors", "lexical", "faiss", "documents", "journal", "current"),
    "tag": ("tags",),
}
DISK_FULL = [(k, layer) for k in WRITERS for layer in LAYERS[k]]


@pytest.mark.parametrize(("kind", "layer"), DISK_FULL)
def test_a_full_disk_at_each_write_layer(
    scenes: Callable[[bool], Scene], monkeypatch: pytest.MonkeyPatch, kind: str, layer: str
) -> None:
    scene = scenes(kind != "append")
    live = (scene.index / CURRENT).read_text(encoding="utf-8").strip()
    before = versions_snapshot(scene.index)
    tags_before = (scene.index / "tags.json").read_bytes()
    args = writer_args(kind, scene)
    # The ONNX layer is the real encoder's: the build runs without the fake (the export is patched).
    embedder = None if layer == "onnx" else FakeEmbedder()
    if layer == "onnx":
        args = [*args, "--full", "--backend", "onnx"]
    with monkeypatch.context() as patch:
        fill_disk(patch, layer)
        result = run(args, embedder)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "disk full" in lines[0] or "No space left" in lines[0], lines[0]
    if layer != "current":  # a CURRENT swap that failed may or may not have happened: it is atomic either way
        assert (scene.index / CURRENT).read_text(encoding="utf-8").strip() == live
    assert_versions_intact(scene.index, before)
    assert (scene.index / "tags.json").read_bytes() == tags_before
    assert not list(scene.index.glob(".build-*"))
    assert_sound(scene)
    again = run(writer_args(kind, scene), FakeEmbedder())
    assert again.exit_code == 0, again.output
    no_leftovers(scene.index)
    assert_versions_intact(scene.index, before)
    assert_sound(scene)
    assert_effect(kind, scene)
