"""A full disk (and an I/O error) part-way through a build, a refresh and a removal.

Faults are injected at each write layer (numpy files, the FAISS file, the SQLite document store, the CURRENT
swap); where the test runs as root and may mount, a real 2 MB tmpfs fills up too. Each time: one line that
says "disk full" (exit 2), the published version unchanged and sound (``semsearch verify``), no partial
``.build-*`` folder left, and the next run cleans whatever a failed or killed writer left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import PAPERS, FakeEmbedder, assert_one_line_error, inject, run, snapshot

KEPT = (
    "Coral reef surveys count fish species along fixed transects every spring.",
    "Glacier melt rates are estimated from repeated satellite altimetry over a decade.",
)
EXTRA = "Sparse attention patterns cut the quadratic cost of transformers on long documents."


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "a.txt").write_text("Papers\n\n" + "\n\n".join(PAPERS.values()) + "\n", encoding="utf-8")
    # Two papers that stay when a.txt is removed: an index of fewer than two is exact, and writes no FAISS file.
    (folder / "keep.txt").write_text("Kept\n\n" + "\n\n".join(KEPT) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def index(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> Path:
    path = tmp_path / "idx"
    # HNSW writes vectors.faiss (a flat index is built from vectors.npy when opened): the FAISS layer can fail.
    assert run(["index", str(corpus), "--index", str(path), "-q", "--ann", "hnsw"], fake).exit_code == 0
    return path


def operation(kind: str, index: Path, corpus: Path) -> list[str]:
    """The CLI arguments of a writer that changes the index: a refresh, a removal, or a full rebuild."""
    if kind == "refresh":
        (corpus / "b.txt").write_text(f"More\n\n{EXTRA}\n", encoding="utf-8")
        return ["index", "--index", str(index), "-q"]
    if kind == "remove":
        return ["remove", "--source", str(corpus / "a.txt"), "--index", str(index)]
    return ["index", str(corpus), "--index", str(index), "--full", "-q"]


def leftovers(index: Path) -> list[str]:
    return sorted(p.name for p in index.iterdir() if p.name.startswith(".build-") or p.name.endswith(".tmp"))


def assert_intact(index: Path, fake: FakeEmbedder, current: str, live_files: dict[str, str]) -> None:
    assert (index / "CURRENT").read_text().strip() == current
    assert snapshot(index / current) == live_files
    checked = run(["verify", "--index", str(index), "--json"], fake)
    assert checked.exit_code == 0, checked.output
    hits = run(["query", "privacy", "--index", str(index), "--json"], fake)
    assert hits.exit_code == 0 and json.loads(hits.stdout)


@pytest.mark.parametrize("kind", ["refresh", "remove", "full"])
@pytest.mark.parametrize("layer", ["vectors", "lexical", "faiss", "documents", "current"])
def test_disk_full_part_way_keeps_the_published_version(
    index: Path, corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch, kind: str, layer: str
) -> None:
    current = (index / "CURRENT").read_text().strip()
    live_files = snapshot(index / current)
    args = operation(kind, index, corpus)
    with monkeypatch.context() as patch:
        inject(patch, layer)
        result = run(args, fake)
    assert_one_line_error(result, "disk full", str(index), "is unchanged")
    assert leftovers(index) == []
    assert_intact(index, fake, current, live_files)
    # The next run (space freed) succeeds and leaves only published versions behind.
    again = run(args, fake)
    assert again.exit_code == 0, again.output
    assert leftovers(index) == []
    assert (index / "CURRENT").read_text().strip() != current
    assert run(["verify", "--index", str(index)], fake).exit_code == 0


def test_disk_full_on_a_first_build_leaves_nothing(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "new-index"
    with monkeypatch.context() as patch:
        inject(patch, "vectors")
        result = run(["index", str(corpus), "--index", str(target), "-q"], fake)
    assert_one_line_error(result, "disk full")
    assert not target.exists()


def test_io_error_part_way(index: Path, corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch) -> None:
    current = (index / "CURRENT").read_text().strip()
    live_files = snapshot(index / current)
    with monkeypatch.context() as patch:
        inject(patch, "eio")
        result = run(operation("refresh", index, corpus), fake)
    assert_one_line_error(result, "I/O error", "is unchanged")
    assert leftovers(index) == []
    assert_intact(index, fake, current, live_files)


def test_next_run_cleans_what_a_killed_writer_left(index: Path, corpus: Path, fake: FakeEmbedder) -> None:
    dead = index / ".build-999999-deadbeef"
    dead.mkdir()
    (dead / "vectors.npy").write_bytes(b"\x93NUMPY partial")
    (index / ".CURRENT.0badf00d.tmp").write_text("v-0")
    current = (index / "CURRENT").read_text().strip()
    unpublished = index / "v-999999-20000101T000000"  # renamed into place, CURRENT never swapped
    unpublished.mkdir()
    (index / ".publishing").write_text(unpublished.name + "\n")  # the writer's journal says so
    assert run(["query", "privacy", "--index", str(index)], fake).exit_code == 0  # readers do not care
    assert (index / "CURRENT").read_text().strip() == current
    result = run(operation("refresh", index, corpus), fake)
    assert result.exit_code == 0, result.output
    assert leftovers(index) == [] and not unpublished.exists()


# ------------------------------------------------------------------ a real full filesystem


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MB tmpfs (needs root and permission to mount: skipped elsewhere)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_real_full_filesystem(small_disk: Path, corpus: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    index = small_disk / "idx"
    assert run(["index", str(corpus), "--index", str(index), "-q", "--no-near"], fake).exit_code == 0
    current = (index / "CURRENT").read_text().strip()
    live_files = snapshot(index / current)
    # 6,000 abstracts need more than the 2 MB left (cache, vectors, documents, BM25).
    rows = [
        {
            "id": f"n{i}",
            "abstract": f"Abstract {i} on topic {i % 97} with words {i * 7919 % 10007} and more "
            "text about learning systems, models, data and evaluation across many settings.",
        }
        for i in range(6000)
    ]
    (corpus / "many.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = run(["index", "--index", str(index), "-q", "--no-near"], fake)
    assert_one_line_error(result, "disk full", "is unchanged")
    assert leftovers(index) == []
    assert_intact(index, fake, current, live_files)
    (corpus / "many.jsonl").unlink()
    removal = run(["remove", "--source", str(corpus / "a.txt"), "--index", str(index)], fake)
    assert removal.exit_code == 0, removal.output  # a small change still fits
