"""The fault matrix: every writer against every fault around it, and what must hold after each.

Writers: a refresh that rewrites (a source changed), a refresh that appends (a file arrived), ``remove``,
``index --optimize`` and a tag write. Faults: a damaged, missing or dangling ``CURRENT``; a concurrent writer
at each barrier (``semsearch.core.faults``); SIGKILL at each barrier; a full disk at each write layer (the ONNX
export included). After each: the versions published before are intact, ``verify`` is clean wherever the
pointer is sound, and no removal is undone. The integrity classes (shared-store damage, cache poisoning,
non-finite vectors), each against every writer, are in tests/faults/test_faults_integrity.py.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import semsearch.curate.tags
import semsearch.encode.onnx_export
import semsearch.store.documents
import semsearch.store.lexical
import semsearch.store.vectors
import semsearch.store.versions
from semsearch import BuildOptions, build_index
from semsearch.curate.tags import TagStore
from semsearch.store.layout import CURRENT
from semsearch.write.remove import remove_documents
from tests.helpers import (
    EXTRA_C,
    FakeEmbedder,
    ForkServer,
    FullConnection,
    Scene,
    Writer,
    _seed,
    assert_effect,
    assert_sound,
    assert_versions_intact,
    enospc,
    inject,
    live_manifest,
    lock_held,
    no_leftovers,
    run,
    versions_snapshot,
    writer_args,
)

WRITERS = ("build", "append", "remove", "optimize", "tag")
VERSION_POINTS = ("read", "plan", "publish", "swap")
TAG_POINTS = ("read", "publish")


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
    matrix_scenes: Callable[[bool], Scene], kind: str, how: str
) -> None:
    scene = matrix_scenes(kind != "append")
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
    matrix_scenes: Callable[[bool], Scene], matrix_forks: ForkServer, tmp_path: Path, kind: str, point: str
) -> None:
    scene = matrix_scenes(kind != "append")
    before = versions_snapshot(scene.index)
    args = writer_args(kind, scene)
    other, landed = concurrent_writer(kind, scene)
    stopped = Writer(matrix_forks, args, point, tmp_path / "barrier")
    stopped.reached()
    lock = scene.index / (semsearch.curate.tags.TAGS_LOCK if kind == "tag" else ".lock")
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
    matrix_scenes: Callable[[bool], Scene], matrix_forks: ForkServer, tmp_path: Path, kind: str, point: str
) -> None:
    scene = matrix_scenes(kind != "append")
    live = (scene.index / CURRENT).read_text(encoding="utf-8").strip()
    before = versions_snapshot(scene.index)
    tags_before = (scene.index / "tags.json").read_bytes()
    args = writer_args(kind, scene)
    stopped = Writer(matrix_forks, args, point, tmp_path / "barrier")
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
        inject(patch, layer)  # the same faults as tests/store/test_disk_full.py's
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

        patch.setattr(semsearch.encode.onnx_export, "export_onnx", export)
    elif layer == "tags":
        patch.setattr(semsearch.curate.tags, "write_text_atomic", lambda path, text: (_ for _ in ()).throw(enospc()))
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
    matrix_scenes: Callable[[bool], Scene], monkeypatch: pytest.MonkeyPatch, kind: str, layer: str
) -> None:
    scene = matrix_scenes(kind != "append")
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
