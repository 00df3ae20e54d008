"""Shared fixtures: a deterministic fake encoder, small corpora, paths to shared data."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds"
SHARED = REPO.parent / "shared"

_WORD = re.compile(r"[a-z0-9]+")


class FakeEmbedder:
    """Hashed bag of words: texts sharing words get close vectors. Records every call."""

    backend = "fake"
    precision = "fp32"

    def __init__(self, dimension: int = 64, name: str = "fake-bow", fingerprint: str = "fake0001") -> None:
        self.name = name
        self.dimension = dimension
        self.fingerprint = fingerprint
        self.calls: list[list[str]] = []

    @property
    def encoded_texts(self) -> list[str]:
        return [t for call in self.calls for t in call]

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                h = hashlib.md5(word.encode()).digest()
                out[row, h[0] % self.dimension] += 1.0 if h[1] % 2 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


@pytest.fixture(autouse=True, scope="session")
def _private_encoder_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Shared ONNX exports go to a folder of this test session, never the user's cache (subprocesses inherit it).

    One folder for the session: tests that build with the real model export it once between them, as users do.
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SEMSEARCH_ENCODERS_DIR", str(tmp_path_factory.mktemp("encoder-store")))
        yield


@pytest.fixture
def fake() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def seeds_copy(tmp_path: Path) -> Path:
    """A private copy of the five seed files."""
    dst = tmp_path / "seeds"
    shutil.copytree(SEEDS, dst)
    return dst


PAPERS = {
    "fed": "Federated learning lets clients train a shared model while differential privacy protects each "
    "client's data from leakage through gradient updates.",
    "vision": "We present a convolutional network for image segmentation of medical scans that improves "
    "boundary accuracy on tumour datasets.",
    "rl": "A reinforcement learning agent learns a policy for robot navigation with sparse rewards using "
    "curiosity-driven exploration.",
    "graph": "Graph neural networks pass messages between nodes; we study oversmoothing in deep graph "
    "networks and propose a residual fix.",
    "llm": "Large language models are compressed by post-training quantization with calibration data that "
    "sets activation ranges.",
}


@pytest.fixture
def small_corpus(tmp_path: Path) -> Path:
    """A seed-format file with five distinct abstracts plus one exact duplicate (6 read, 5 documents)."""
    path = tmp_path / "corpus" / "papers.txt"
    path.parent.mkdir()
    paragraphs = list(PAPERS.values()) + [PAPERS["fed"]]
    path.write_text("Test Papers\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
    return path


def load_script(name: str) -> ModuleType:
    """A module of scripts/ (``bench_typed``), imported by path: scripts/ is no package."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


def requires_shared(*parts: str) -> Path:
    """The path of a file in ../shared, or skip the test when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not available")
    return path


# ---------------------------------------------------------------- browser tests (Debian's Chromium via Playwright)

CHROMIUM = Path("/usr/bin/chromium")
# The network is closed: without these Chromium waits on connections it would make at start-up.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


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
    from semsearch.encode.onnx_backend import export_onnx

    folder = tmp_path_factory.mktemp("onnx") / "encoder"
    export_onnx("all-MiniLM-L6-v2", folder)
    return folder


@pytest.fixture
def plugin_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path for a plugin distribution; the registry is looked up afresh in and after the test."""
    from semsearch.ingest.registry import installed_formats

    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    sys.modules.pop("toyfmt", None)
    installed_formats.cache_clear()
    yield site
    sys.modules.pop("toyfmt", None)  # each test writes its own toyfmt.py
    installed_formats.cache_clear()
