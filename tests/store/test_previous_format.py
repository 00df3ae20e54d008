"""An index the previous release wrote (format 2: float16 sentence vectors, a float32 cache keyed by hex) still
opens, answers, verifies and refreshes; the refresh writes format 4 and encodes nothing the old cache held.

``tests/fixtures/previous_release/index`` was built by that release's own code (``build_index`` with the
``SentenceFake`` encoder, ``--reading sentences``) from ``papers.jsonl`` and then a copy of it with one paper more.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np

from semsearch import BuildOptions, Index, build_index
from semsearch.encode.cache import EmbeddingCache
from semsearch.store.layout import CACHE_DIR, current_version
from semsearch.store.manifest import FORMAT_VERSION, Manifest
from semsearch.store.windows_part import WINDOW_FILE, WINDOW_SCALES_FILE, read_all
from semsearch.write.verify import verify_index
from tests.helpers import FIXTURES, SentenceFake

OLD = FIXTURES / "previous_release"
QUERY = "counts taken at dawn"


def old_index(tmp_path: Path) -> Path:
    index = tmp_path / "index"
    shutil.copytree(OLD / "index", index)
    return index


def answers(index: Path) -> list[tuple[str, list[str]]]:
    with Index.open(index, embedder=SentenceFake()) as idx:
        return [(h.title or "", h.highlights) for h in idx.search(QUERY, 3, mode="dense")]


def test_the_fixture_is_the_previous_format(tmp_path: Path) -> None:
    version = current_version(old_index(tmp_path))
    assert Manifest.read(version).format_version == 2
    assert np.load(version / WINDOW_FILE).dtype == np.float16 and not (version / WINDOW_SCALES_FILE).exists()
    (cache,) = (OLD / "index" / CACHE_DIR).glob("embeddings-*.sqlite")
    conn = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"vectors"}
    conn.close()


def test_an_old_index_opens_answers_and_verifies(tmp_path: Path) -> None:
    index = old_index(tmp_path)
    assert verify_index(index) == []
    top = answers(index)
    assert top[0] == ("Small mammals of coastal sites", ["Counts were taken at dawn."])


def test_an_old_index_refreshes_into_the_compact_format_from_its_cache(tmp_path: Path) -> None:
    index = old_index(tmp_path)
    before = answers(index)
    papers = tmp_path / "papers.jsonl"
    shutil.copy(OLD / "papers.jsonl", papers)
    with papers.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"title": "Dawn chorus", "abstract": "Birds sing at dawn. We recorded the chorus."}) + "\n")
    fake = SentenceFake()
    result = build_index([str(papers)], index, BuildOptions(progress=False), embedder=fake)
    assert result.encoded == 1  # the new paper only: the old cache's vectors were converted, not encoded again
    version = current_version(index)
    assert Manifest.read(version).format_version == FORMAT_VERSION == 4
    assert np.load(version / WINDOW_FILE).dtype == np.int8
    assert read_all(version, fake.dimension).vectors.dtype == np.float32
    assert verify_index(index) == []
    after = answers(index)
    assert after[0] == before[0]
    (cache,) = (index / CACHE_DIR).glob("embeddings-*.sqlite")
    conn = sqlite3.connect(cache)
    assert {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")} == {"codes"}
    conn.close()
    assert EmbeddingCache.path_for(index / CACHE_DIR, "fake0001", "fake-fp32") == cache
