"""The map as a base layout plus per-segment point files: assembled equal to update_map's, old maps still read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, IndexCorruptError, build_index
from semsearch.atlas.append import append_map, append_state, can_append
from semsearch.atlas.compute import update_map, write_map
from semsearch.core.records import Document
from semsearch.store.corpus_map import MAP_FILE, load_map
from semsearch.store.layout import current_version
from semsearch.store.map_layers import BASE_FILES, CENTROIDS_FILE, STATE_FILE, read_state
from semsearch.write.remove import remove_documents
from semsearch.write.verify import verify_index
from tests.helpers import FakeEmbedder

TOPICS = ["federated privacy clients", "image segmentation scans", "graph nodes message", "policy reward agent"]
LAID_OUT_AT = "2025-01-01T00:00:00+00:00"
OPTS = BuildOptions(progress=False)


def documents(n: int) -> list[Document]:
    """n abstracts over four topics, each with its own words too."""
    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(60)]
    return [
        Document(
            id=f"{i + 1:016x}",
            text=f"{TOPICS[i % 4]} {' '.join(rng.choice(words, 6))} paper {i}",
            title=f"paper {i} on {TOPICS[i % 4]}",
            sources=[],
        )
        for i in range(n)
    ]


@pytest.fixture
def corpus() -> tuple[list[Document], np.ndarray, dict[str, np.ndarray]]:
    docs = documents(140)
    vectors = FakeEmbedder(dimension=32).encode([d.embedding_text() for d in docs])
    return docs, vectors, {d.id: vectors[i] for i, d in enumerate(docs)}


def vectors_of(by_id: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    return lambda ids: np.array([by_id[i] for i in ids], dtype=np.float32).reshape(len(ids), -1)


def assert_same_map(got: dict, want: dict) -> None:
    """Equal, except label centres within the stored positions' rounding (see atlas.append.append_map)."""
    assert [p[0] for p in got["points"]] == [p[0] for p in want["points"]]
    assert got["points"] == want["points"]  # positions and clusters, renumbered alike
    assert got["labels"] == want["labels"] and got["fitted"] == want["fitted"]
    for key in ("method", "documents", "laid_out_at", "laid_out_documents", "changed_since_layout", "algorithm"):
        assert got[key] == want[key], key
    strip = [{k: v for k, v in c.items() if k not in ("x", "y")} for c in got["clusters"]]
    assert strip == [{k: v for k, v in c.items() if k not in ("x", "y")} for c in want["clusters"]]
    for a, b in zip(got["clusters"], want["clusters"], strict=True):
        assert abs(a["x"] - b["x"]) <= 1.5e-4 and abs(a["y"] - b["y"]) <= 1.5e-4


def test_base_plus_segments_assemble_to_what_update_map_places(
    tmp_path: Path, corpus: tuple[list[Document], np.ndarray, dict[str, np.ndarray]]
) -> None:
    docs, vectors, by_id = corpus
    folders = {name: tmp_path / name for name in "abc"}
    for folder in folders.values():
        folder.mkdir()
    write_map(folders["a"], docs[:100], vectors[:100], now=LAID_OUT_AT)
    base = load_map(folders["a"])
    assert base is not None
    # +10 arrivals, 2 laid-out documents removed (fitted ones: PCA fits every point).
    dropped = {docs[3].id, docs[50].id}
    state = append_state(folders["a"])
    assert state is not None and state.legacy is None and can_append(state, 108, 12)
    entry = append_map(folders["b"], state, dropped, docs[100:110], vectors[100:110], vectors_of(by_id))
    assert entry["layout"] == "incremental" and entry["segments"] == 1
    order1 = [d for d in docs[:100] if d.id not in dropped] + docs[100:110]
    want1 = update_map(base, order1, np.array([by_id[d.id] for d in order1]))
    assert want1 is not None
    got1 = load_map(folders["b"])
    assert got1 is not None
    assert_same_map(got1, want1)
    # The appended version wrote its point file, state and centroids; the base is the same file, not a copy.
    for name in BASE_FILES:
        assert (folders["b"] / name).stat().st_ino == (folders["a"] / name).stat().st_ino, name
    written = sum((folders["b"] / n).stat().st_size for n in ("map-seg-000001.json", STATE_FILE, CENTROIDS_FILE))
    assert written < (folders["a"] / MAP_FILE).stat().st_size / 2
    # A second append removes a document the first one placed and one of the base, and adds 6 more (20 changed
    # since the layout of 100: RELAYOUT_SHARE allows that many).
    dropped2 = {docs[105].id, docs[10].id}
    state2 = append_state(folders["b"])
    assert state2 is not None and state2.segments == ["map-seg-000001.json"]
    append_map(folders["c"], state2, dropped2, docs[110:116], vectors[110:116], vectors_of(by_id))
    order2 = [d for d in order1 if d.id not in dropped2] + docs[110:116]
    want2 = update_map(want1, order2, np.array([by_id[d.id] for d in order2]))
    assert want2 is not None
    got2 = load_map(folders["c"])
    assert got2 is not None
    assert_same_map(got2, want2)
    assert got2["documents"] == 112 and got2["changed_since_layout"] == 2 + 10 + 2 + 6
    # The kept centroids are the sums over the members now on the map (subtracted and added, not summed again).
    sums = np.load(folders["c"] / CENTROIDS_FILE)
    placed = {p[0]: p[3] for p in got2["points"]}
    remaining = sorted({c for c in placed.values()})
    assert len(remaining) == len(got2["clusters"])
    state3 = read_state(folders["c"])
    assert state3 is not None
    for c_base, size in enumerate(state3.sizes):
        assert size == 0 or np.count_nonzero(sums[c_base]) > 0
    expected = np.zeros_like(sums)
    for c_new, c_base in enumerate([c for c, size in enumerate(state3.sizes) if size > 0]):
        members = [doc_id for doc_id, c in placed.items() if c == c_new]
        expected[c_base] = np.sum([by_id[m] for m in members], axis=0, dtype=np.float64)
    assert np.allclose(sums, expected, atol=1e-9)


def test_an_old_format_map_is_read_and_appended_to(
    tmp_path: Path, corpus: tuple[list[Document], np.ndarray, dict[str, np.ndarray]]
) -> None:
    docs, vectors, by_id = corpus
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir()
    new.mkdir()
    write_map(old, docs[:100], vectors[:100], now=LAID_OUT_AT)
    for path in old.iterdir():  # as written before layered maps: map.json alone
        if path.name != MAP_FILE:
            path.unlink()
    before = json.loads((old / MAP_FILE).read_text())
    assert load_map(old) == before  # still read as it is
    state = append_state(old)
    assert state is not None and state.legacy is not None and not state.segments
    dropped = {docs[7].id}
    append_map(new, state, dropped, docs[100:105], vectors[100:105], vectors_of(by_id))
    order = [d for d in docs[:100] if d.id not in dropped] + docs[100:105]
    want = update_map(before, order, np.array([by_id[d.id] for d in order]))
    got = load_map(new)
    assert want is not None and got is not None
    assert_same_map(got, want)
    assert (new / MAP_FILE).stat().st_ino == (old / MAP_FILE).stat().st_ino  # the old map became the base


def test_a_damaged_state_or_point_file_is_one_line_error(
    tmp_path: Path, corpus: tuple[list[Document], np.ndarray, dict[str, np.ndarray]]
) -> None:
    docs, vectors, by_id = corpus
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    write_map(a, docs[:100], vectors[:100], now=LAID_OUT_AT)
    state = append_state(a)
    append_map(b, state, set(), docs[100:104], vectors[100:104], vectors_of(by_id))
    segment = b / "map-seg-000001.json"
    segment.write_text('{"dropped": [], "points": [["x", 0, 0]], "labels": []}', encoding="utf-8")
    with pytest.raises(IndexCorruptError) as err:
        load_map(b)
    assert "map-seg-000001.json" in str(err.value) and "\n" not in str(err.value)
    (b / STATE_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexCorruptError) as err:
        load_map(b)
    assert STATE_FILE in str(err.value) and "\n" not in str(err.value)
    assert append_state(b) is None  # a refresh lays the map out again rather than build on it


def test_refreshes_and_removals_keep_the_assembled_map_the_index(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SEMSEARCH_MAP", "pca")
    src = tmp_path / "src"
    src.mkdir()

    def write(name: str, start: int, n: int) -> Path:
        path = src / name
        rows = [{"id": f"r{i}", "title": d.title, "abstract": d.text} for i, d in enumerate(documents(start + n))]
        path.write_text("".join(json.dumps(r) + "\n" for r in rows[start:]), encoding="utf-8")
        return path

    fake = FakeEmbedder()
    write("a.jsonl", 0, 120)
    idx = tmp_path / "idx"
    build_index([str(src)], idx, OPTS, embedder=fake)
    extra = write("b.jsonl", 120, 6)
    grown = build_index([str(src)], idx, OPTS, embedder=fake)
    assert grown.segments == 1
    remove_documents(idx, sources=[str(extra)])
    version = current_version(idx)
    data = load_map(version)
    assert data is not None and data["documents"] == 120
    assert (version / "map-seg-000002.json").is_file()  # the removal's own point file: what it dropped
    assert verify_index(idx) == []
    # A point file that places a document the index lacks is caught by verify.
    seg = json.loads((version / "map-seg-000001.json").read_text())
    seg["points"][0][0] = "00000000deadbeef"
    path = version / "map-seg-000001.json"
    path.unlink()  # linked from the previous version: replace, do not write through
    path.write_text(json.dumps(seg), encoding="utf-8")
    assert any("map" in problem for problem in verify_index(idx))
