"""Real processes: SIGKILL at random points of a build, concurrent writers, readers during builds, resume."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.store.layout import current_version
from semsearch.store.manifest import Manifest
from semsearch.write.verify import verify_index
from tests.helpers import PAPERS, WORKERS, FakeEmbedder, synthetic_abstracts

WORKER = WORKERS / "build_worker.py"
KILL_TRIALS = 20


def write_seed(path: Path, texts: list[str]) -> Path:
    path.write_text("Synthetic\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
    return path


def worker(
    index: Path, *sources: Path, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(index), *map(str, sources), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def doc_texts(index: Path) -> frozenset[str]:
    with Index.open(index) as idx:
        return frozenset(d.text for d in idx.store.iter_documents())


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.01)


def kill_and_check(
    proc: subprocess.Popen[str], after: float, index: Path, states: dict[str, frozenset[str]], trial: int
) -> None:
    """SIGKILL a writer after ``after`` seconds; the index must verify, answer, and be one of the two states."""
    time.sleep(after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert verify_index(index) == [], f"trial {trial}: verify failed"
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        assert idx.search("neural networks", 3), f"trial {trial}: index does not answer"
    now = doc_texts(index)
    assert now in (states["A"], states["B"]), f"trial {trial}: index is neither the old nor the new one"


@pytest.fixture
def two_corpora(tmp_path: Path) -> tuple[Path, Path]:
    """Two source sets whose indexes differ: A (5 papers) and B (A plus 60 more in a second file)."""
    a = tmp_path / "a"
    a.mkdir()
    write_seed(a / "papers.txt", list(PAPERS.values()))
    b = tmp_path / "b"
    b.mkdir()
    write_seed(b / "papers.txt", list(PAPERS.values()))
    write_seed(b / "more.txt", synthetic_abstracts(60, seed=1))
    return a, b


@pytest.mark.slow  # a storm of killed writer processes
def test_sigkill_at_random_points_never_breaks_the_index(tmp_path: Path, two_corpora: tuple[Path, Path]) -> None:
    a, b = two_corpora
    index = tmp_path / "idx"
    build_index([str(a)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    states = {"A": doc_texts(index)}
    # One uninterrupted build of B measures how long a build takes and what B looks like.
    started = time.monotonic()
    proc = worker(index, b, extra=("--delay", "0.01", "--chunk", "8"))
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    full = time.monotonic() - started
    states["B"] = doc_texts(index)
    assert len(states["B"]) == 65 and states["A"] < states["B"]

    rng = random.Random(20261130)
    for trial in range(KILL_TRIALS):
        # Build towards the other state, from scratch for the cache half the time, so kills land in
        # start-up, ingest, encoding, writing and publishing alike.
        current = "A" if doc_texts(index) == states["A"] else "B"
        target = b if current == "A" else a
        if trial % 2:
            for cache in (index / "cache").glob("*"):
                cache.unlink()
        proc = worker(index, target, extra=("--delay", "0.01", "--chunk", "8"))
        kill_and_check(proc, rng.uniform(0.0, full * 1.1), index, states, trial)
    # Leftovers of killed builds are cleaned by the next successful one.
    proc = worker(index, a)
    assert proc.wait(timeout=60) == 0
    assert not list(index.glob(".build-*")) and not list(index.glob(".CURRENT.*"))
    live_seq = int((index / "CURRENT").read_text().split("-")[1])
    assert all(int(v.name.split("-")[1]) <= live_seq for v in index.glob("v-*")), "unpublished versions left"


@pytest.mark.slow  # a storm of killed writer processes
def test_sigkill_during_appends_removals_and_merges_of_segments(tmp_path: Path) -> None:
    base = write_seed(tmp_path / "a-base.txt", synthetic_abstracts(200, seed=3))
    more = write_seed(tmp_path / "b-more.txt", synthetic_abstracts(8, seed=4))
    index = tmp_path / "idx"
    build_index([str(base), str(more)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    states = {"B": doc_texts(index)}
    build_index([str(base)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    states["A"] = doc_texts(index)
    assert Manifest.read(current_version(index)).segmented  # the removal hid rows instead of rewriting
    started = time.monotonic()
    proc = worker(index, base, more, extra=("--delay", "0.05", "--chunk", "1"))
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    assert json.loads(proc.stdout.read() if proc.stdout else "{}")["segments"] == 1  # appended
    full = time.monotonic() - started
    rng = random.Random(20261201)
    for trial in range(KILL_TRIALS):
        # Append (towards B), hide (towards A), or merge every segment into one base (--optimize).
        current = "A" if doc_texts(index) == states["A"] else "B"
        sources = [base] if current == "B" else [base, more]
        extra = ("--delay", "0.05", "--chunk", "1", *(("--optimize",) if trial % 3 == 2 else ()))
        if trial % 3 == 2:
            sources = [base] if current == "A" else [base, more]  # the same documents, rewritten
        proc = worker(index, *sources, extra=extra)
        kill_and_check(proc, rng.uniform(0.0, full * 1.2), index, states, trial)


def test_second_writer_fails_fast_then_waits(tmp_path: Path, two_corpora: tuple[Path, Path]) -> None:
    a, b = two_corpora
    index = tmp_path / "idx"
    build_index([str(a)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    # The first writer is held at its plan, lock taken, for as long as the test needs (no race with the clock).
    gate = tmp_path / "gate"
    gate.mkdir()
    held = worker(index, b, env={"SEMSEARCH_TEST_BARRIER": f"plan:{gate}"})
    wait_for(lambda: (gate / "plan.reached").exists(), timeout=60)
    second = worker(index, a)
    assert second.wait(timeout=60) == 2
    assert "another semsearch process is writing" in (second.stderr.read() if second.stderr else "")
    # A reader is never blocked by the build and sees the old version.
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        assert len(idx) == 5
        assert idx.search("graph networks", 1)[0].text == PAPERS["graph"]
    waiting = worker(index, a, extra=("--wait",))
    time.sleep(0.5)
    assert waiting.poll() is None  # still waiting for the lock
    (gate / "plan.go").touch()
    assert held.wait(timeout=60) == 0
    assert waiting.wait(timeout=60) == 0
    summary = json.loads(waiting.stdout.read() if waiting.stdout else "{}")
    assert summary["documents"] == 5 and summary["removed"] == 60


def test_interrupted_build_resumes_from_the_cache(tmp_path: Path, two_corpora: tuple[Path, Path]) -> None:
    _, b = two_corpora
    index = tmp_path / "idx"
    proc = worker(index, b, extra=("--delay", "0.02", "--chunk", "8"))
    cache_dir = index / "cache"

    def cached_rows() -> int:
        files = list(cache_dir.glob("*.sqlite"))
        if not files:
            return 0
        try:
            conn = sqlite3.connect(files[0], timeout=0.1)
            try:
                return int(conn.execute("SELECT count(*) FROM codes").fetchone()[0])
            finally:
                conn.close()
        except sqlite3.Error:
            return 0

    wait_for(lambda: cached_rows() >= 24)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    done = cached_rows()
    assert 24 <= done < 65
    resumed = worker(index, b)
    assert resumed.wait(timeout=60) == 0
    summary = json.loads(resumed.stdout.read() if resumed.stdout else "{}")
    assert summary["encoded"] == 65 - done
    assert summary["documents"] == 65


@pytest.mark.parametrize("point", ["read", "plan"])
@pytest.mark.parametrize("first", ["refresh", "remove"])
def test_a_removal_and_a_refresh_in_either_order_end_with_the_removal(tmp_path: Path, first: str, point: str) -> None:
    """Issue 22: ``remove --source F --wait`` landing while a refresh reads its recorded sources must stay."""
    from tests.helpers import ForkServer, Writer, lock_held

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    write_seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"]])
    write_seed(corpus / "f.txt", [PAPERS["graph"]])
    index = tmp_path / "idx"
    build_index([str(corpus)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    write_seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"]])  # the refresh rewrites
    refresh = ["index", "--index", str(index), "-q", "--wait"]
    remove = ["remove", "--source", str(corpus / "f.txt"), "--index", str(index), "--wait"]
    stopped_args, other_args = (refresh, remove) if first == "refresh" else (remove, refresh)
    server = ForkServer()
    try:
        stopped = Writer(server, stopped_args, point, tmp_path / "barrier")
        stopped.reached()
        held = lock_held(index / ".lock")
        other = Writer(server, other_args, None, tmp_path / "other")
        if not held:
            assert other.finish()[0] == 0  # lands while the stopped writer waits
        stopped.release()
        assert stopped.finish()[0] == 0
        assert other.finish()[0] == 0
    finally:
        server.close()
    manifest = Manifest.read(current_version(index))
    assert str(corpus / "f.txt") in manifest.excluded_sources
    assert PAPERS["graph"] not in doc_texts(index) and PAPERS["rl"] in doc_texts(index)
    assert verify_index(index) == []
