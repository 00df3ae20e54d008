"""`semsearch serve --workers N`: N processes on one port, each following CURRENT, each screening Host/Origin."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from semsearch import BuildOptions, build_index
from semsearch.faces.cli import cli
from semsearch.store.layout import read_pointer
from tests.helpers import REPO, FakeEmbedder

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

SERVER = """
import sys
sys.path.insert(0, {repo!r})
from tests.helpers import FakeEmbedder
from semsearch.faces.serve import run_server

def ready(url):
    print(url, flush=True)

run_server({index!r}, host="127.0.0.1", port=0, embedder=FakeEmbedder(), ready=ready, workers=2)
"""


def _health(base: str, host: str | None = None) -> tuple[int, dict]:
    """GET /api/health on a new connection (so the kernel may hand it to either worker)."""
    request = urllib.request.Request(base + "api/health", headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _versions_by_worker(base: str, want_workers: int, until_version: str | None = None) -> dict[int, str]:
    """The version each worker answers with, asked on new connections until ``want_workers`` answered
    (and, with ``until_version``, until every one of them answers with it)."""
    seen: dict[int, str] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status, body = _health(base)
        assert status == 200, body
        seen[body["worker"]] = body["version"]
        done = len(seen) >= want_workers
        if done and (until_version is None or all(v == until_version for v in seen.values())):
            return seen
    return seen


def test_two_workers_each_pick_up_a_published_version(small_corpus: Path, tmp_path: Path) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    first = read_pointer(index)
    code = SERVER.format(repo=str(REPO), index=str(index))
    server = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert server.stdout is not None
        base = server.stdout.readline().strip()
        assert base.startswith("http://127.0.0.1:"), server.stderr.read() if server.stderr else ""
        before = _versions_by_worker(base, 2)
        assert len(before) == 2 and set(before.values()) == {first}, before  # two processes, one version
        assert server.pid not in before  # the workers answer, not the parent
        # Every worker keeps the Host screen: another site's name is refused (DNS rebinding).
        assert {_health(base, host="evil.example")[0] for _ in range(10)} == {421}
        (small_corpus.parent / "more.txt").write_text(
            "More Papers\n\nTransformers attend over long documents with sparse attention patterns.\n",
            encoding="utf-8",
        )
        build_index([str(small_corpus.parent)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
        second = read_pointer(index)
        assert second != first
        after = _versions_by_worker(base, 2, until_version=second)
        assert set(before) <= set(after) and set(after.values()) == {second}, (before, after)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            rc = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert rc == 0, server.stderr.read() if server.stderr else ""
    # SIGTERM stopped the workers too: none is left holding the port.
    for pid in before:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


@pytest.mark.parametrize("workers", ["0", "65", "-2"])
def test_workers_out_of_range_is_one_line_error(small_corpus: Path, tmp_path: Path, workers: str) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    result = CliRunner().invoke(
        cli, ["serve", "--index", str(index), "--port", "0", "--workers", workers], obj={"embedder": FakeEmbedder()}
    )
    assert result.exit_code != 0
    assert "--workers must be 1..64" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_workers_without_an_index_is_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["serve", "--index", str(tmp_path / "none"), "--port", "0", "--workers", "2"], obj={}
    )
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and "index" in result.output.lower()


def test_a_server_opens_each_query_encoder_on_one_thread(
    small_corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every server process (one, or each of --workers N) asks for a one-thread query encoder; the library
    (create_app, Index) keeps the default of every core, the fastest single query."""
    from fastapi.testclient import TestClient

    import semsearch.query.search
    from semsearch.faces.serve import QUERY_THREADS, create_app, server_app

    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    asked: list[dict[str, object]] = []

    def recording_loader(manifest: object, version: Path, **options: object) -> FakeEmbedder:
        asked.append(options)
        return FakeEmbedder()

    monkeypatch.setattr(semsearch.query.search, "open_query_encoder", recording_loader)
    for app in (server_app(index, host="127.0.0.1"), create_app(index)):
        with TestClient(app, base_url="http://localhost") as client:
            assert client.get("/api/search", params={"q": "privacy"}).status_code == 200
    assert QUERY_THREADS == 1
    assert asked == [{"threads": 1}, {}]


@pytest.mark.slow
def test_the_served_onnx_query_encoder_has_no_operator_thread_pool(seeds_copy: Path, tmp_path: Path) -> None:
    """With the real model: the server's query encoder runs each query on the calling thread (no pool thread to
    spin-wait after it), `semsearch query`'s keeps every core, and both give the same bytes."""
    import numpy as np
    from fastapi.testclient import TestClient

    from semsearch.encode.onnx_backend import default_threads
    from semsearch.faces.serve import server_app
    from semsearch.query.search import Index

    index = tmp_path / "idx"
    build_index([str(seeds_copy)], index, BuildOptions(progress=False))
    app = server_app(index, host="127.0.0.1")
    with TestClient(app, base_url="http://localhost") as client:
        assert client.get("/api/search", params={"q": "federated privacy"}).json()["hits"]
        with app.state.live.use() as loaded:
            served = loaded.index.embedder
    assert served.threads == 1 and served._session.get_session_options().intra_op_num_threads == 1
    with Index.open(index) as library:
        default = library.embedder
        assert default.threads == default_threads()
        assert np.array_equal(served.encode(["federated privacy"]), default.encode(["federated privacy"]))
