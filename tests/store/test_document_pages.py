"""docs.sqlite is written with 16 KiB pages, and a file cut inside a page is a named error, not zero-filled rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from semsearch import BuildOptions, build_index
from semsearch.core.errors import IndexCorruptError
from semsearch.store.documents import DocumentStore
from semsearch.store.documents_writer import PAGE_SIZE
from semsearch.store.layout import DOCS, current_version
from semsearch.write.verify import verify_index
from tests.helpers import FakeEmbedder


def test_pages_are_big_and_a_cut_file_is_refused(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, BuildOptions(progress=False), embedder=fake)
    path = current_version(index) / DOCS
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_SIZE == 16_384
    conn.close()
    DocumentStore(path).close()
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size - 4096)  # a quarter page: SQLite alone would read the rest of that page as zeros
    with pytest.raises(IndexCorruptError, match="not a whole number of 16384-byte pages"):
        DocumentStore(path)
    assert any(str(path) in line for line in verify_index(index))
