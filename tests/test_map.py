"""The corpus map: layout, clusters and their terms, map.json in the index, and `semsearch map --out`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result
from conftest import CHROMIUM, FakeEmbedder

from semsearch import BuildOptions, IndexCorruptError, SemsearchError, build_index
from semsearch.cli import cli
from semsearch.corpus_map import (
    MAP_FILE,
    UMAP_MIN_DOCS,
    choose_method,
    cluster_count,
    compute_map,
    load_map,
    normalize,
    place_by_neighbours,
)
from semsearch.layout import current_version
from semsearch.manifest import read_manifest
from semsearch.map_page import map_html
from semsearch.records import Document
from semsearch.verify import verify_index

TOPICS = {
    "fed": ["federated", "privacy", "clients", "aggregation", "differential", "server"],
    "vision": ["segmentation", "images", "pixels", "convolutional", "medical", "scans"],
    "graph": ["graph", "nodes", "edges", "message", "oversmoothing", "neighbours"],
}
FILLER = "we propose a new method and report experiments on standard benchmarks showing gains"


def topical_documents(per_topic: int = 12) -> list[Document]:
    """Abstracts that each use four words of one topic and the same filler sentence."""
    rng = np.random.default_rng(7)
    docs = []
    for topic, words in TOPICS.items():
        for i in range(per_topic):
            picked = " ".join(rng.choice(words, 4, replace=False))
            text = f"{picked} {FILLER} {i}"
            docs.append(Document(id=f"{len(docs):016x}", text=text, title=f"{topic} paper {i}", sources=[]))
    return docs


def embed(docs: list[Document], fake: FakeEmbedder) -> np.ndarray:
    return fake.encode([d.embedding_text() for d in docs])


def run(args: list[str], embedder: FakeEmbedder | None = None) -> Result:
    return CliRunner().invoke(cli, args, obj={"embedder": embedder} if embedder else None)


def assert_one_line_error(result: Result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.strip().splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


@pytest.fixture
def built(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> Path:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, BuildOptions(progress=False), embedder=fake)
    return index


# ---------------------------------------------------------------- compute_map


def test_pca_map_shape_ranges_and_clusters(fake: FakeEmbedder) -> None:
    docs = topical_documents()
    data = compute_map(docs, embed(docs, fake))
    assert data["method"] == "pca" and data["documents"] == len(docs) == 36
    assert [p[0] for p in data["points"]] == [d.id for d in docs]
    xy = np.array([p[1:3] for p in data["points"]])
    assert xy.min() >= 0.0 and xy.max() <= 1.0
    assert np.isclose(np.ptp(xy, axis=0).max(), 1.0, atol=1e-3)  # one axis spans the whole unit square
    assert data["labels"] == [d.title for d in docs]
    clusters = data["clusters"]
    assert len(clusters) == cluster_count(36) == 4
    assert [c["id"] for c in clusters] == list(range(4))
    assert sum(c["size"] for c in clusters) == 36
    assert sorted(c["size"] for c in clusters) == sorted(np.bincount([p[3] for p in data["points"]]).tolist())
    assert all(0 <= c["x"] <= 1 and 0 <= c["y"] <= 1 for c in clusters)


def test_cluster_terms_are_the_topics_distinctive_words(fake: FakeEmbedder) -> None:
    docs = topical_documents()
    data = compute_map(docs, embed(docs, fake))
    topic_words = {w for words in TOPICS.values() for w in words} | set(TOPICS)
    for cluster, members in _members(data).items():
        terms = data["clusters"][cluster]["terms"]
        assert 2 <= len(terms) <= 3
        # Words shared by every abstract (the filler) are never distinctive; topic words are.
        assert set(terms) <= topic_words, terms
        assert data["clusters"][cluster]["label"] == " · ".join(terms)
        # Each cluster is dominated by one topic, and its terms come from that topic.
        topics = [data["labels"][i].split()[0] for i in members]
        main = max(set(topics), key=topics.count)
        assert sum(t in [*TOPICS[main], main] for t in terms) >= 2, (main, terms)


def _members(data: dict) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, point in enumerate(data["points"]):
        out.setdefault(point[3], []).append(i)
    return out


def test_map_is_deterministic_for_a_seed(fake: FakeEmbedder) -> None:
    docs = topical_documents()
    vectors = embed(docs, fake)
    assert compute_map(docs, vectors, seed=3) == compute_map(docs, vectors, seed=3)


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_tiny_corpora_get_a_degenerate_map(n: int, fake: FakeEmbedder) -> None:
    docs = topical_documents()[:n]
    data = compute_map(docs, embed(docs, fake).reshape(n, fake.dimension))
    assert data["documents"] == n and len(data["points"]) == n and len(data["labels"]) == n
    assert len(data["clusters"]) == cluster_count(n) == (0 if n == 0 else 1)
    assert all(0 <= p[1] <= 1 and 0 <= p[2] <= 1 for p in data["points"])
    if n == 1:
        assert data["points"][0][1:3] == [0.5, 0.5]
    json.dumps(data)  # plain JSON, no numpy scalars


def test_identical_vectors_sit_in_the_middle() -> None:
    docs = topical_documents()[:5]
    vectors = np.tile(np.eye(1, 8, dtype=np.float32), (5, 1))
    data = compute_map(docs, vectors)
    assert {tuple(p[1:3]) for p in data["points"]} == {(0.5, 0.5)}


def test_far_outliers_do_not_squash_a_large_map() -> None:
    xy = np.random.default_rng(0).uniform(size=(2000, 2))
    xy[:2] = [[50.0, 50.0], [-40.0, 0.5]]  # UMAP's far-away islands
    out = normalize(xy)
    assert out.min() >= 0 and out.max() <= 1
    assert np.ptp(out[2:], axis=0).min() > 0.95  # the body still fills the frame
    assert out[0].tolist() == [1.0, 1.0] and out[1][0] == 0.0  # the outliers sit on its edge


def test_labels_fall_back_to_opening_words_and_are_short() -> None:
    long = Document(id="00000000000000aa", text="word " * 60, title=None, sources=[])
    data = compute_map([long], np.ones((1, 4), dtype=np.float32))
    assert len(data["labels"][0]) <= 90 and data["labels"][0].startswith("word word") and data["labels"][0][-1] == "…"


def test_auto_method_switches_to_umap_at_the_threshold() -> None:
    assert choose_method(91) == "pca"
    assert choose_method(UMAP_MIN_DOCS - 1) == "pca"
    assert choose_method(UMAP_MIN_DOCS) == "umap"
    assert choose_method(15, "umap") == "pca" and choose_method(16, "umap") == "umap"
    assert cluster_count(5) == 2 and cluster_count(91) == 7 and cluster_count(150_000) == 40


def blob_vectors() -> tuple[np.ndarray, np.ndarray]:
    """300 unit vectors in three tight blobs (32-d), and the blob of each."""
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(3, 32))
    vectors = np.concatenate([c + 0.15 * rng.normal(size=(100, 32)) for c in centers]).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True), np.repeat(np.arange(3), 100)


def assert_blobs_apart(data: dict, blob: np.ndarray) -> None:
    xy = np.array([p[1:3] for p in data["points"]])
    assert xy.min() >= 0 and xy.max() <= 1
    means = np.array([xy[blob == b].mean(axis=0) for b in range(3)])
    spread = max(np.linalg.norm(xy[blob == b] - means[b], axis=1).mean() for b in range(3))
    gaps = min(np.linalg.norm(means[a] - means[b]) for a in range(3) for b in range(a + 1, 3))
    assert gaps > 2 * spread, (gaps, spread)


@pytest.mark.slow  # numba compiles UMAP on first use: 15-30 s on a busy 2-core machine
def test_umap_layout_separates_blobs_fitted_whole_or_on_a_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    vectors, blob = blob_vectors()
    docs = [Document(id=f"{i:016x}", text=f"paper {i}", title=None, sources=[]) for i in range(300)]
    whole = compute_map(docs, vectors, method="umap", seed=1)
    assert whole["method"] == "umap"
    assert_blobs_apart(whole, blob)
    monkeypatch.setattr("semsearch.corpus_map.UMAP_FIT_MAX", 150)  # fit 150, place the other 150 by neighbours
    sampled = compute_map(docs, vectors, method="umap", seed=1)
    assert sampled["points"] != whole["points"]
    assert_blobs_apart(sampled, blob)
    assert compute_map(docs, vectors, method="umap", seed=1) == sampled


def test_unfitted_points_land_among_their_nearest_neighbours() -> None:
    vectors, blob = blob_vectors()
    fitted_xy = np.array([[0.1, 0.1], [0.9, 0.1], [0.5, 0.9]])[blob]
    placed = place_by_neighbours(vectors[::2], fitted_xy[::2], vectors[1::2])
    assert np.allclose(placed, fitted_xy[1::2], atol=1e-6)


# ---------------------------------------------------------------- in the index


def test_build_writes_map_json_recorded_in_the_manifest(built: Path) -> None:
    version = current_version(built)
    manifest = read_manifest(version)
    assert manifest.map["method"] == "pca" and manifest.map["clusters"] == 2
    assert manifest.map["seconds"] >= 0
    assert MAP_FILE in manifest.files  # so verify and the load-time size check cover it
    data = load_map(version)
    assert data is not None and data["documents"] == manifest.counts.documents == 5
    assert verify_index(built) == []


def test_a_refresh_that_changes_nothing_reuses_the_map(
    built: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = current_version(built)
    assert read_manifest(first).to_dict()["map"]["reused"] is False
    import semsearch.corpus_map as corpus_map

    monkeypatch.setattr(corpus_map, "compute_map", lambda *a, **k: pytest.fail("the map was computed again"))
    build_index([str(small_corpus)], built, BuildOptions(progress=False), embedder=fake)
    second = current_version(built)
    assert second != first and read_manifest(second).to_dict()["map"]["reused"] is True
    assert (second / MAP_FILE).read_bytes() == (first / MAP_FILE).read_bytes()
    assert verify_index(built) == []
    monkeypatch.undo()
    small_corpus.write_text(small_corpus.read_text(encoding="utf-8") + "\n\nA new abstract about protein folding.\n")
    build_index([str(small_corpus)], built, BuildOptions(progress=False), embedder=fake)
    third = current_version(built)
    assert read_manifest(third).to_dict()["map"]["reused"] is False
    assert load_map(third)["documents"] == 6  # type: ignore[index]


def test_map_can_be_turned_off_or_forced_at_build(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEMSEARCH_MAP", "off")
    build_index([str(small_corpus)], tmp_path / "off", BuildOptions(progress=False), embedder=fake)
    version = current_version(tmp_path / "off")
    assert load_map(version) is None and read_manifest(version).to_dict()["map"]["method"] == "off"
    assert verify_index(tmp_path / "off") == []
    monkeypatch.setenv("SEMSEARCH_MAP", "sideways")
    with pytest.raises(SemsearchError, match="SEMSEARCH_MAP='sideways'"):
        build_index([str(small_corpus)], tmp_path / "bad", BuildOptions(progress=False), embedder=fake)
    assert not (tmp_path / "bad").exists()


def test_verify_notices_a_changed_map(built: Path) -> None:
    path = current_version(built) / MAP_FILE
    path.write_text(path.read_text(encoding="utf-8").replace('"pca"', '"PCA"'), encoding="utf-8")
    assert any("map.json" in line and "checksum" in line for line in verify_index(built))


def test_load_map_absent_is_none_and_corrupt_is_one_line_error(tmp_path: Path) -> None:
    assert load_map(tmp_path) is None
    (tmp_path / MAP_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexCorruptError) as err:
        load_map(tmp_path)
    assert "\n" not in str(err.value) and "map.json" in str(err.value)
    (tmp_path / MAP_FILE).write_text(json.dumps({"method": "pca", "documents": 2, "points": []}), encoding="utf-8")
    with pytest.raises(IndexCorruptError, match="'labels' is missing"):
        load_map(tmp_path)


# ---------------------------------------------------------------- semsearch map --out


def test_map_command_writes_a_self_contained_page(built: Path, tmp_path: Path) -> None:
    out = tmp_path / "map.html"
    result = run(["map", "--index", str(built), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "5 documents" in result.output
    page = out.read_text(encoding="utf-8")
    data = load_map(current_version(built))
    assert data is not None
    assert "global.SemsearchMap = {" in page and "SemsearchMap.render(" in page
    for point in data["points"]:
        assert point[0] in page
    assert "http://" not in page and "https://" not in page
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    embedded = re.search(r'<script id="map-data" type="application/json">(.*?)</script>', page, re.S)
    assert embedded is not None and json.loads(embedded.group(1))["map"] == data


def test_page_data_cannot_close_its_script_element() -> None:
    doc = Document(id="00000000000000ab", text="a </script><script>alert(1)</script> b", title=None, sources=[])
    page = map_html(compute_map([doc], np.ones((1, 4), dtype=np.float32)), texts={doc.id: doc.text})
    assert page.count("</script>") == 3  # map.js, the data and the page's own script, and no more
    assert page.count("<script") == 3


def test_map_command_without_an_index(tmp_path: Path) -> None:
    assert_one_line_error(
        run(["map", "--index", str(tmp_path / "none"), "--out", str(tmp_path / "m.html")]), "no index"
    )
    assert not (tmp_path / "m.html").exists()


def test_map_command_on_an_index_built_before_maps(built: Path, tmp_path: Path) -> None:
    version = current_version(built)
    (version / MAP_FILE).unlink()
    manifest = read_manifest(version).to_dict()
    del manifest["files"][MAP_FILE], manifest["map"]
    (version / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    result = run(["map", "--index", str(built), "--out", str(tmp_path / "m.html")])
    assert_one_line_error(result, "has no map", "rebuild it with: semsearch index")
    assert verify_index(built) == []  # an old index without a map is still sound


def test_map_command_with_a_corrupt_map(built: Path, tmp_path: Path) -> None:
    (current_version(built) / MAP_FILE).write_text("[]", encoding="utf-8")
    assert_one_line_error(run(["map", "--index", str(built), "--out", str(tmp_path / "m.html")]), "map.json")


@pytest.mark.parametrize("where", ["missing-dir/map.html", "a-file/map.html"])
def test_map_command_with_an_unwritable_out(built: Path, tmp_path: Path, where: str) -> None:
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    out = tmp_path / where
    assert_one_line_error(run(["map", "--index", str(built), "--out", str(out)]), str(out))


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_standalone_page_runs_in_a_browser(built: Path, tmp_path: Path) -> None:
    import subprocess

    out = tmp_path / "map.html"
    assert run(["map", "--index", str(built), "--out", str(out)]).exit_code == 0
    data = load_map(current_version(built))
    assert data is not None
    doc_id = data["points"][0][0]
    # The URL's #id= selects a paper as a click does: the side box then shows it, proving the script ran.
    dom = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--dump-dom", f"{out.as_uri()}#id={doc_id}&q=privacy"],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert 'aria-label="Map of 5 documents in 2 clusters"' in dom
    side = dom[dom.index('<aside id="side">') :]
    assert f"id {doc_id}" in side and data["labels"][0][:30] in side
