"""The corpus map: layout, clusters and their terms, map.json in the index, and `semsearch map --out`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, IndexCorruptError, SemsearchError, build_index
from semsearch.atlas.clusters import cluster_count
from semsearch.atlas.compute import compute_map, update_map, write_map
from semsearch.atlas.labels import cluster_terms
from semsearch.atlas.layout import normalize
from semsearch.atlas.method import MAP_ALGORITHM, RELAYOUT_SHARE, UMAP_MIN_DOCS, choose_method
from semsearch.atlas.placing import place_by_neighbours
from semsearch.core.records import Document
from semsearch.faces.map_page import map_html
from semsearch.store.corpus_map import MAP_FILE, load_map
from semsearch.store.layout import current_version
from semsearch.store.manifest import read_manifest
from semsearch.write.verify import verify_index
from tests.helpers import CHROMIUM, FakeEmbedder, assert_one_line_error, run

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


def test_weak_adverbs_and_adjectives_never_label_a_cluster() -> None:
    # Every abstract of cluster 0 says "hardly", "largely" and "simple": frequent there, absent elsewhere.
    docs = [
        Document(id=f"{i:016x}", text=f"diffusion sampling hardly largely simple {i}", title=None, sources=[])
        for i in range(6)
    ] + [Document(id=f"{i + 6:016x}", text=f"graph nodes edges {i}", title=None, sources=[]) for i in range(6)]
    terms = cluster_terms(docs, np.array([0] * 6 + [1] * 6), 2)
    assert set(terms[0]) == {"diffusion", "sampling"}, terms
    assert not {"hardly", "largely", "simple"} & {w for words in terms for w in words}


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
    monkeypatch.setattr("semsearch.atlas.layout.UMAP_FIT_MAX", 150)  # fit 150, place the other 150 by neighbours
    sampled = compute_map(docs, vectors, method="umap", seed=1)
    assert sampled["points"] != whole["points"]
    assert_blobs_apart(sampled, blob)
    assert compute_map(docs, vectors, method="umap", seed=1) == sampled


def test_unfitted_points_land_among_their_nearest_neighbours() -> None:
    vectors, blob = blob_vectors()
    fitted_xy = np.array([[0.1, 0.1], [0.9, 0.1], [0.5, 0.9]])[blob]
    placed = place_by_neighbours(vectors[::2], fitted_xy[::2], vectors[1::2])
    assert np.allclose(placed, fitted_xy[1::2], atol=1e-6)


# ---------------------------------------------------------------- a refresh places arrivals on the last layout

CORNERS = np.array([[0.1, 0.1], [0.9, 0.1], [0.5, 0.9]])
LAID_OUT_AT = "2025-01-01T00:00:00+00:00"


def blob_documents() -> list[Document]:
    return [Document(id=f"{i:016x}", text=f"paper {i}", title=f"blob paper {i}", sources=[]) for i in range(300)]


def laid_out(docs: list[Document], blob: np.ndarray, rows: np.ndarray, *, changed: int = 0) -> dict:
    """The map a full layout of documents ``rows`` would store if it put each blob on its corner, one cluster each."""
    return {
        "method": "pca",
        "documents": len(rows),
        "seed": 0,
        "points": [[docs[r].id, *CORNERS[blob[r]].tolist(), int(blob[r])] for r in rows],
        "labels": [docs[r].title for r in rows],
        "clusters": [
            {"id": b, "label": f"blob {b}", "terms": [f"blob{b}"], "x": x, "y": y, "size": int((blob[rows] == b).sum())}
            for b, (x, y) in enumerate(CORNERS.tolist())
        ],
        "fitted": list(range(len(rows))),
        "algorithm": MAP_ALGORITHM,
        "laid_out_at": LAID_OUT_AT,
        "laid_out_documents": len(rows),
        "changed_since_layout": changed,
    }


def test_arrivals_are_placed_by_their_fitted_neighbours_and_join_the_nearest_cluster() -> None:
    vectors, blob = blob_vectors()
    docs = blob_documents()
    old_rows = np.array([r for r in range(300) if r % 6])  # 250 laid out; every sixth document arrives later
    data = update_map(laid_out(docs, blob, old_rows), docs, vectors)
    assert data is not None
    assert data["documents"] == 300 and [p[0] for p in data["points"]] == [d.id for d in docs]
    assert data["labels"] == [d.title for d in docs]
    xy = np.array([p[1:3] for p in data["points"]])
    assert np.allclose(xy, CORNERS[blob], atol=1e-4)  # arrivals sit on their blob's corner, the rest stay put
    assert [p[3] for p in data["points"]] == blob.tolist()  # and join their blob's cluster
    assert [(c["id"], c["label"], c["size"]) for c in data["clusters"]] == [(b, f"blob {b}", 100) for b in range(3)]
    assert [[c["x"], c["y"]] for c in data["clusters"]] == CORNERS.tolist()
    assert data["fitted"] == old_rows.tolist()  # arrivals are placed, never anchors for later ones
    assert (data["laid_out_at"], data["laid_out_documents"], data["changed_since_layout"]) == (LAID_OUT_AT, 250, 50)


def test_removed_documents_drop_out_and_emptied_clusters_go() -> None:
    vectors, blob = blob_vectors()
    docs = blob_documents()
    old = laid_out(docs, blob, np.arange(300))
    # A fourth cluster of ten blob-2 documents, listed second so the clusters after it are renumbered.
    old["clusters"].insert(1, {"id": 1, "label": "tiny", "terms": ["tiny"], "x": 0.5, "y": 0.9, "size": 10})
    for c, cluster in enumerate(old["clusters"]):
        cluster["id"] = c
    for r, point in enumerate(old["points"]):
        point[3] = 1 if 200 <= r < 210 else [0, 2, 3][blob[r]]
    kept = [r for r in range(300) if not (200 <= r < 210 or r < 5)]
    data = update_map(old, [docs[r] for r in kept], vectors[kept])
    assert data is not None
    assert [p[0] for p in data["points"]] == [docs[r].id for r in kept]
    assert [(c["id"], c["label"], c["size"]) for c in data["clusters"]] == [(0, "blob 0", 95), (1, "blob 1", 100),
                                                                           (2, "blob 2", 90)]  # fmt: skip
    assert [p[3] for p in data["points"]] == blob[kept].tolist()
    assert np.allclose([p[1:3] for p in data["points"]], CORNERS[blob[kept]])
    assert data["fitted"] == list(range(285)) and data["changed_since_layout"] == 15


def test_a_full_layout_is_due_past_the_share_changed_since_the_last() -> None:
    vectors, blob = blob_vectors()
    docs = blob_documents()
    old_rows = np.array([r for r in range(300) if r % 6])
    assert RELAYOUT_SHARE * 250 == 50  # 50 arrivals on a layout of 250 documents is exactly the share
    assert update_map(laid_out(docs, blob, old_rows), docs, vectors) is not None
    assert update_map(laid_out(docs, blob, old_rows, changed=1), docs, vectors) is None  # one more since then
    # Removals count as changes too: 50 arrivals and the removal of a laid-out document.
    rest = [r for r in range(300) if r != 1]
    assert update_map(laid_out(docs, blob, old_rows), [docs[r] for r in rest], vectors[rest]) is None
    # A method that is no longer the one for this many documents lays out again.
    assert update_map(laid_out(docs, blob, old_rows), docs, vectors, method="umap") is None


def test_a_map_without_a_layout_record_is_laid_out_again(tmp_path: Path, fake: FakeEmbedder) -> None:
    docs = topical_documents()
    vectors = embed(docs, fake)
    old = tmp_path / "old"
    old.mkdir()
    before = {k: v for k, v in compute_map(docs[:33], vectors[:33]).items() if k != "fitted"}
    (old / MAP_FILE).write_text(json.dumps(before), encoding="utf-8")  # as written before incremental maps
    assert load_map(old) == before  # still readable: the page and the server show it
    assert update_map(before, docs, vectors) is None
    new = tmp_path / "new"
    new.mkdir()
    entry = write_map(new, docs, vectors, previous=old, now=LAID_OUT_AT)
    assert entry["layout"] == "full" and entry["laid_out_at"] == LAID_OUT_AT and entry["laid_out_documents"] == 36
    data = load_map(new)
    assert data is not None and data["points"] == compute_map(docs, vectors)["points"]
    # A damaged record (a fitted point that does not exist) is no reason to fail: the map is laid out afresh.
    broken = {**data, "fitted": [0, 99]}
    assert update_map(broken, docs, vectors) is None


def test_relayout_recomputes_unless_the_map_already_is_a_layout_of_these_inputs(
    tmp_path: Path, fake: FakeEmbedder
) -> None:
    docs = topical_documents()
    vectors = embed(docs, fake)
    folders = {name: tmp_path / name for name in "abcde"}
    for folder in folders.values():
        folder.mkdir()
    first = write_map(folders["a"], docs[:33], vectors[:33], now=LAID_OUT_AT)
    assert (first["layout"], first["laid_out_documents"], first["changed_since_layout"]) == ("full", 33, 0)
    placed = write_map(folders["b"], docs, vectors, previous=folders["a"], now="2025-02-01T00:00:00+00:00")
    assert (placed["layout"], placed["laid_out_at"], placed["changed_since_layout"]) == ("incremental", LAID_OUT_AT, 3)
    incremental = load_map(folders["b"])
    assert incremental is not None and incremental["points"] != compute_map(docs, vectors)["points"]
    # The same inputs again copy the incremental map (the fingerprint is the inputs', not the history's).
    again = write_map(folders["e"], docs, vectors, previous=folders["b"])
    assert (
        again["layout"] == "reused" and (folders["e"] / MAP_FILE).read_bytes() == (folders["b"] / MAP_FILE).read_bytes()
    )
    fresh = write_map(
        folders["c"], docs, vectors, previous=folders["b"], relayout=True, now="2025-03-01T00:00:00+00:00"
    )
    assert (fresh["layout"], fresh["laid_out_at"], fresh["laid_out_documents"]) == (
        "full",
        "2025-03-01T00:00:00+00:00",
        36,
    )
    assert load_map(folders["c"])["points"] == compute_map(docs, vectors)["points"]  # type: ignore[index]
    # A relayout of a map that is already a full layout of these very inputs would compute the same: copied.
    copied = write_map(folders["d"], docs, vectors, previous=folders["c"], relayout=True)
    assert copied["layout"] == "reused" and copied["laid_out_at"] == "2025-03-01T00:00:00+00:00"


def test_refreshes_place_arrivals_and_relayout_or_full_lay_out_afresh(
    built: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    first = read_manifest(current_version(built)).map
    assert first["layout"] == "full" and first["laid_out_documents"] == 5 and first["laid_out_at"]
    assert load_map(current_version(built))["laid_out_at"] == first["laid_out_at"]  # type: ignore[index]
    small_corpus.write_text(small_corpus.read_text(encoding="utf-8") + "\n\nA new abstract about protein folding.\n")
    build_index([str(small_corpus)], built, BuildOptions(progress=False), embedder=fake)
    second = read_manifest(current_version(built)).map
    assert second["layout"] == "incremental" and load_map(current_version(built))["documents"] == 6  # type: ignore[index]
    assert (second["laid_out_at"], second["laid_out_documents"], second["changed_since_layout"]) == (
        first["laid_out_at"], 5, 1
    )  # fmt: skip
    info = run(["info", "--index", str(built)])
    assert "laid out" in info.output and "on 5 documents (1 added or removed since)" in info.output, info.output
    assert json.loads(run(["info", "--index", str(built), "--json"]).output)["map"]["laid_out_documents"] == 5
    result = run(["index", str(small_corpus), "--index", str(built), "--relayout", "-q"], fake)
    assert result.exit_code == 0, result.output
    data = load_map(current_version(built))
    assert data is not None and (data["laid_out_documents"], data["changed_since_layout"]) == (6, 0)
    assert verify_index(built) == []
    # Asked again with nothing changed, the map already is a full layout of these documents: nothing to write.
    again = build_index([str(small_corpus)], built, BuildOptions(progress=False, relayout=True), embedder=fake)
    assert again.unchanged and load_map(current_version(built)) == data
    # --full lays out afresh too (here the same inputs as the relayout, so that layout is copied).
    small_corpus.write_text(small_corpus.read_text(encoding="utf-8") + "\n\nAnother one, on graph colouring.\n")
    build_index([str(small_corpus)], built, BuildOptions(progress=False, full=True), embedder=fake)
    full = read_manifest(current_version(built)).map
    assert (full["layout"], full["laid_out_documents"], full["changed_since_layout"]) == ("full", 7, 0)


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
    import semsearch.atlas.compute as compute

    monkeypatch.setattr(compute, "compute_map", lambda *a, **k: pytest.fail("the map was computed again"))
    # rewrite: an unchanged refresh otherwise writes no version at all (build._unchanged_version).
    build_index([str(small_corpus)], built, BuildOptions(progress=False, rewrite=True), embedder=fake)
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
    assert f"5 documents · 2 clusters · PCA layout of 5 laid out {data['laid_out_at'][:10]}" in page


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


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install chromium)")
def test_labels_near_the_edge_stay_whole_inside_the_panel(tmp_path: Path) -> None:
    import subprocess

    from semsearch.faces.map_page import MAP_JS

    harness = tmp_path / "labels.html"
    harness.write_text(
        f'<!doctype html><body><script src="{MAP_JS.as_uri()}"></script><script>'
        "var m = SemsearchMap, w = function (t) { return 7 * t.length; };"
        "document.body.setAttribute('data-out', JSON.stringify({"
        " right: m.labelBox(398, 100, 120, 18, 400, 300), left: m.labelBox(3, 2, 120, 18, 400, 300),"
        " middle: m.labelBox(200, 150, 120, 18, 400, 300),"
        " short: m.fitLabel('privacy · federated', 400, w), long: m.fitLabel('privacy · federated · clients', 100, w)"
        "}));</script></body>",
        encoding="utf-8",
    )
    dom = subprocess.run(
        [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
         "--dump-dom", harness.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    import html

    found = re.search(r'data-out="([^"]*)"', dom)
    assert found, dom
    out = json.loads(html.unescape(found.group(1)))
    # A cluster at the right or top-left edge slides in, whole, 6 px from the edge; one in the middle stays put.
    assert out["right"] == [274, 91, 394, 109]
    assert out["left"] == [6, 6, 126, 24]
    assert out["middle"] == [140, 141, 260, 159]
    assert out["short"] == "privacy · federated"
    assert out["long"] == "privacy …" and 7 * len(out["long"]) <= 100


def test_umap_gets_exact_neighbours_itself_first_even_among_duplicates() -> None:
    from semsearch.atlas.layout import exact_neighbours

    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(60, 16)).astype(np.float32)
    vecs[10] = vecs[11] = vecs[12]  # three identical vectors tie for each one's nearest
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    indices, distances = exact_neighbours(vecs, 15)
    assert indices.shape == distances.shape == (60, 15)
    assert (indices[:, 0] == np.arange(60)).all() and (distances[:, 0] == 0).all()
    assert all(len(set(row)) == 15 for row in indices.tolist())  # itself once, 14 others
    assert set(indices[10, 1:3]) == {11, 12} and np.allclose(distances[10, 1:3], 0, atol=1e-6)
    cosine = vecs @ vecs.T
    for i in range(60):  # the 14 others are the 14 most similar, in order
        best = [j for j in np.argsort(-cosine[i], kind="stable") if j != i][:14]
        assert np.allclose(sorted(1 - cosine[i, best]), distances[i, 1:], atol=1e-5)
