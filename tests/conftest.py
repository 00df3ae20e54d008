"""Fixtures for every test folder (pytest finds them without an import); other helpers are in tests/helpers.py."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    NO_RAY,
    SEEDS,
    FakeEmbedder,
    ForkServer,
    Scene,
    make_scene,
    run,
    write_small_corpus,
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test that needs Ray is slow (before ``-m`` selects): it starts or waits on a local cluster."""
    for item in items:
        if any(mark.kwargs.get("reason") == NO_RAY for mark in item.iter_markers("skipif")):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True, scope="session")
def _private_encoder_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Shared ONNX exports go to a folder of this test session, never the user's cache (subprocesses inherit it).

    One folder for the session: tests that build with the real model export it once between them, as users do.
    Under pytest-xdist the workers share it (the store takes a lock per export), so the model is exported once.
    """
    if os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.getbasetemp().parent / "encoder-store"
        folder.mkdir(exist_ok=True)
    else:
        folder = tmp_path_factory.mktemp("encoder-store")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEMSEARCH_ENCODERS_DIR", str(folder))
        yield


@pytest.fixture(autouse=True)
def pdf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Readings of PDFs go to this test's own folder, never the user's cache (subprocesses inherit it)."""
    folder = tmp_path / "pdf-cache"
    monkeypatch.setenv("SEMSEARCH_PDF_CACHE", str(folder))
    return folder


@pytest.fixture
def text_reads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The PDFs whose full text is read (a reading taken from the cache reads none)."""
    from semsearch.ingest import pdf_text

    seen: list[bytes] = []
    real = pdf_text.read_pages

    def counting(raw: bytes) -> list[str]:
        seen.append(raw)
        return real(raw)

    monkeypatch.setattr(pdf_text, "read_pages", counting)
    return seen


@pytest.fixture
def pdf_reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the PDF reader opens (a reading taken from the cache opens none)."""
    from semsearch.ingest import pdf

    seen: list[Path] = []
    real = pdf.extract

    def counting(raw: bytes, path: Path) -> pdf.PdfHead:
        seen.append(path)
        return real(raw, path)

    monkeypatch.setattr(pdf, "extract", counting)
    return seen


@pytest.fixture
def fake() -> FakeEmbedder:
    """The test's own fake encoder (it records every text it encodes)."""
    return FakeEmbedder()


@pytest.fixture
def seeds_copy(tmp_path: Path) -> Path:
    """A private copy of the five seed files."""
    dst = tmp_path / "seeds"
    shutil.copytree(SEEDS, dst)
    return dst


@pytest.fixture
def built(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> Path:
    """``small_corpus`` indexed by ``semsearch index`` with the test's fake encoder, at tmp_path/idx."""
    index = tmp_path / "idx"
    result = run(["index", str(small_corpus), "--index", str(index), "-q"], fake)
    assert result.exit_code == 0, result.output
    return index


@pytest.fixture(scope="session")
def _seeds_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeds indexed with the fake encoder once per session: what every seeded index is copied from."""
    from semsearch.write.build import BuildOptions, build_index

    path = tmp_path_factory.mktemp("seeds-fake") / "idx"
    build_index([str(SEEDS)], path, BuildOptions(progress=False), embedder=FakeEmbedder())
    return path


@pytest.fixture(scope="module")
def seeded_index(_seeds_built: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The seeds indexed with the fake encoder, one copy per test module (what its tests write stays in it)."""
    return Path(shutil.copytree(_seeds_built, tmp_path_factory.mktemp("seeded") / "idx"))


@pytest.fixture
def seeded_index_copy(_seeds_built: Path, tmp_path: Path) -> Path:
    """The seeds indexed with the fake encoder, a private copy for one test (``tmp_path/idx``)."""
    return Path(shutil.copytree(_seeds_built, tmp_path / "idx"))


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """A seed-format file with five distinct abstracts plus one exact duplicate (6 read, 5 documents)."""
    return write_small_corpus(tmp_path / "corpus" / "papers.txt")


@pytest.fixture
def page(server: str) -> Iterator[Any]:
    """A Chromium page; ``server`` is the requesting module's own fixture."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 900})
            pg.set_default_timeout(20_000)
            yield pg
        finally:
            browser.close()


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 exported once (fp32 + int8) per test module that asks for it (loads the real model)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from semsearch.encode.onnx_export import export_onnx

    folder = tmp_path_factory.mktemp("onnx") / "encoder"
    export_onnx("all-MiniLM-L6-v2", folder)
    return folder


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for a plugin distribution; the registry is looked up afresh in and after the test."""
    from semsearch.ingest.formats import installed_formats

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop("toyfmt", None)
    installed_formats.cache_clear()
    yield site
    sys.modules.pop("toyfmt", None)  # each test writes its own toyfmt.py
    installed_formats.cache_clear()


@pytest.fixture(scope="module")
def local_ray() -> Iterator[ModuleType]:
    """One local Ray for the module (started through the engine's own session code), shut down after."""
    pytest.importorskip("ray.data")
    from semsearch.encode.ray_engine import ray_session

    with ray_session() as ray:
        yield ray


@pytest.fixture(scope="module")
def matrix_scenes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[bool], Scene]]:
    """The fault matrix's scenes: a fresh one for each test, copied from one built once per kind (paths recorded
    in it stay true: every test works in the same folder, restored from the copy). In memory where it can be:
    every publish fsyncs each file, which a shared disk makes the slowest part of the matrix."""
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
def matrix_forks() -> Iterator[ForkServer]:
    """A warm fork server for the fault tests' writers, one per module."""
    server = ForkServer()
    yield server
    server.close()
