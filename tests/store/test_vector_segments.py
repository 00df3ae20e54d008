"""Exact vectors and ANN search of a version with extra segments behave as one version of its live vectors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from semsearch.core.errors import IndexCorruptError
from semsearch.store.ann import AnnSearcher, SegmentedSearcher, open_version_vectors
from semsearch.store.ann_build import previous_ann, write_ann
from semsearch.store.manifest import Counts, Manifest, ModelInfo
from semsearch.store.segments import write_hidden
from semsearch.store.vectors import SegmentedVectorStore, VectorStore, write_vector_files
from semsearch.write.verify import verify_index

D = 16


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    """Unit vectors around a few centres, so IVF lists are uneven as a corpus's are."""
    centres = rng.normal(size=(12, D))
    x = (centres[rng.integers(0, 12, n)] + rng.normal(0, 0.6, (n, D))).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class Layout:
    """A hand-written segmented version: its manifest and the live (id -> vector) it should behave as."""

    def __init__(self, version: Path, kind: str, *, hide_in_base: int = 40) -> None:
        rng = np.random.default_rng(7)
        base_ids = np.arange(1200, dtype=np.int64) * 3 + 5
        base = unit(rng, len(base_ids))
        version.mkdir(parents=True)
        write_vector_files(version, base_ids, base)
        entries = write_ann(version, base, base_ids, requested=kind)
        live = dict(zip(base_ids.tolist(), base, strict=True))
        hidden: dict[int, np.ndarray] = {0: np.sort(rng.choice(base_ids, hide_in_base, replace=False))}
        for num in hidden[0].tolist():
            del live[num]
        # seg 1: new numbers, plus base numbers 5 and hidden[0][0] written again with other vectors;
        # seg 2: hides two of seg 1's rows (one re-added here) and adds more.
        self.readded = int(hidden[0][0])
        hidden[0] = np.union1d(hidden[0], [5])
        live.pop(5, None)
        seg1_ids = np.array([5, self.readded, *range(10_000, 10_060)], dtype=np.int64)
        seg1 = unit(rng, len(seg1_ids))
        seg2_ids = np.array([10_001, *range(20_000, 20_030)], dtype=np.int64)
        seg2 = unit(rng, len(seg2_ids))
        for name, ids, vecs in (("seg-000002", seg1_ids, seg1), ("seg-000003", seg2_ids, seg2)):
            (version / name).mkdir()
            write_vector_files(version / name, ids, vecs)
            live.update(zip(ids.tolist(), vecs, strict=True))
        hidden[1] = np.array([10_001, 10_002], dtype=np.int64)
        live.pop(10_002)
        write_hidden(version, hidden)
        self.version = version
        self.live = live
        self.readded_vector = seg1[1]
        self.manifest = Manifest(
            model=ModelInfo("fake", "f", D, "fake", "fp32"),
            counts=Counts(len(live), len(live), 0, 0, vectors=len(live)),
            faiss=entries["faiss"],
            ann=entries["ann"],
            vectors={"file": "vectors.npy", "ids": "ids.npy", "rows": len(base_ids)},
            segments=[{"name": "seg-000002", "rows": len(seg1_ids)}, {"name": "seg-000003", "rows": len(seg2_ids)}],
        )

    def brute(self, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        nums = np.array(sorted(self.live), dtype=np.int64)
        if allowed is not None:
            nums = nums[np.isin(nums, allowed)]
        scores = np.stack([self.live[int(n)] for n in nums]) @ q
        order = np.lexsort((nums, -scores))[:k]
        return nums[order], scores[order]


@pytest.fixture(scope="module")
def flat(tmp_path_factory: pytest.TempPathFactory) -> Layout:
    return Layout(tmp_path_factory.mktemp("flat") / "v-000003", "flat")


@pytest.fixture(scope="module", params=["ivf", "ivfpq", "hnsw"])
def ivf(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Layout:
    """An approximate base: IVF as asked, and the other kinds whose search takes the same selectors."""
    return Layout(tmp_path_factory.mktemp(request.param) / "v-000003", request.param)


def test_the_store_holds_exactly_the_live_vectors(flat: Layout) -> None:
    _, store = open_version_vectors(flat.version, flat.manifest)
    assert isinstance(store, SegmentedVectorStore)
    assert len(store) == len(flat.live) and store.dimension == D
    assert sorted(store.ids.tolist()) == sorted(flat.live)
    nums = np.array([flat.readded, 10_001, 8, 20_029, 10_000], dtype=np.int64)
    expected = np.stack([flat.live[int(n)] for n in nums])
    np.testing.assert_array_equal(store.get(nums), expected)
    np.testing.assert_array_equal(store.get_one(flat.readded), flat.readded_vector)
    # rows_of and matrix agree with ids; hidden numbers have no row.
    rows = store.rows_of(nums)
    np.testing.assert_array_equal(store.ids[rows], nums)
    np.testing.assert_array_equal(store.matrix[rows], expected)
    assert store.rows_of([10_002, 999_999]).tolist() == [-1, -1]
    with pytest.raises(IndexCorruptError, match="document number 10002 has no vector"):
        store.get([10_002])
    np.testing.assert_array_equal(store.matrix, np.stack([flat.live[int(n)] for n in store.ids]))


@pytest.mark.parametrize("with_filter", [False, True])
def test_exact_segmented_search_is_brute_force_over_the_live_vectors(flat: Layout, with_filter: bool) -> None:
    searcher, _ = open_version_vectors(flat.version, flat.manifest)
    assert isinstance(searcher, SegmentedSearcher)
    assert searcher.ntotal == len(flat.live) and searcher.dimension == D
    rng = np.random.default_rng(3)
    everything = np.array(sorted(flat.live), dtype=np.int64)
    for q in unit(rng, 20):
        allowed = None
        if with_filter:
            # Some live numbers of every segment, some hidden ones and unknown ones: only live ones may come back.
            allowed = np.concatenate([rng.choice(everything, 300, replace=False), [10_002, 7, 999_999, flat.readded]])
        got_nums, got_scores = searcher.top(q, 25, allowed)
        want_nums, want_scores = flat.brute(q, 25, allowed)
        np.testing.assert_array_equal(got_nums, want_nums)
        np.testing.assert_allclose(got_scores, want_scores, rtol=1e-5, atol=1e-6)
    # The re-added number is found with its new vector, never its hidden base one.
    nums, scores = searcher.top(flat.readded_vector, 1)
    assert nums.tolist() == [flat.readded] and scores[0] == pytest.approx(1.0, abs=1e-5)
    assert searcher.search(flat.readded_vector, 3, np.array([10_002], dtype=np.int64)) == []
    assert len(searcher.top(flat.readded_vector, 10_000)[0]) == len(flat.live)


def test_ivf_segmented_search_returns_only_live_numbers(ivf: Layout) -> None:
    searcher, store = open_version_vectors(ivf.version, ivf.manifest)
    assert isinstance(searcher, SegmentedSearcher) and searcher.spec.kind in ("ivf", "ivfpq", "hnsw")
    assert searcher.ntotal == len(ivf.live) == len(store)
    rng = np.random.default_rng(4)
    live = set(ivf.live)
    recall = []
    # Live documents of every segment as queries, as the IVF was tuned on (recall target 0.96).
    for q in store.get(rng.choice(store.ids, 40, replace=False)):
        nums, scores = searcher.top(q, 10)
        assert set(nums.tolist()) <= live and len(nums) == 10
        np.testing.assert_allclose(scores, store.get(nums) @ q, rtol=1e-5, atol=1e-6)
        recall.append(len(set(nums.tolist()) & set(ivf.brute(q, 10)[0].tolist())) / 10)
    assert np.mean(recall) >= 0.9
    # The hidden base row under the re-added number never answers; its new vector does.
    nums, _ = searcher.top(ivf.readded_vector, 1)
    assert nums.tolist() == [ivf.readded]
    hidden_base = ivf.manifest.version_segments(ivf.version)[0].hidden
    for q in store.get(store.ids[:50]):
        assert not np.isin(searcher.top(q, 20)[0], hidden_base[hidden_base != ivf.readded]).any()
    # A filter of hidden and live numbers: only the live ones, ranked exactly.
    allowed = np.concatenate([hidden_base, store.ids[::97]])
    q = unit(rng, 1)[0]
    nums, scores = searcher.top(q, 10, allowed)
    want_nums, want_scores = ivf.brute(q, 10, allowed)
    np.testing.assert_array_equal(nums, want_nums)
    np.testing.assert_allclose(scores, want_scores, rtol=1e-5, atol=1e-6)


def test_a_live_count_other_than_the_manifests_is_corrupt(flat: Layout) -> None:
    manifest = Manifest(
        model=flat.manifest.model,
        counts=Counts(0, 0, 0, 0, vectors=len(flat.live) + 1),
        ann=flat.manifest.ann,
        vectors=flat.manifest.vectors,
        segments=flat.manifest.segments,
    )
    with pytest.raises(IndexCorruptError, match=r"segments hold \d+ live vectors, the manifest says"):
        open_version_vectors(flat.version, manifest)
    wrong_rows = Manifest(
        model=flat.manifest.model,
        counts=flat.manifest.counts,
        ann=flat.manifest.ann,
        vectors=flat.manifest.vectors,
        segments=[{"name": "seg-000002", "rows": 61}, flat.manifest.segments[1]],
    )
    with pytest.raises(IndexCorruptError, match=r"seg-000002/vectors.npy holds float32 \(62, 16\), expected"):
        open_version_vectors(flat.version, wrong_rows)


def test_a_number_live_in_two_segments_is_corrupt(tmp_path: Path) -> None:
    version = tmp_path / "v"
    layout = Layout(version, "flat")
    write_hidden(version, {0: np.array([5], dtype=np.int64)})  # the re-added numbers are live twice now
    # Counted right (1199 base rows, 62 and 31 in the segments), so only the duplicates are wrong.
    manifest = Manifest(
        model=layout.manifest.model,
        counts=Counts(0, 0, 0, 0, vectors=1199 + 62 + 31),
        ann=layout.manifest.ann,
        vectors=layout.manifest.vectors,
        segments=layout.manifest.segments,
    )
    with pytest.raises(IndexCorruptError, match="live in two segments"):
        open_version_vectors(version, manifest)


def test_a_faiss_index_of_other_rows_than_the_base_is_corrupt(tmp_path: Path, flat: Layout) -> None:
    import shutil

    version = tmp_path / "v"
    shutil.copytree(flat.version, version)
    rng = np.random.default_rng(1)
    write_ann(version, unit(rng, 100), np.arange(100, dtype=np.int64), requested="ivf")  # a kind with a file
    with pytest.raises(IndexCorruptError, match="holds 100 vectors, the base segment 1200"):
        open_version_vectors(version, flat.manifest)


def test_an_unsegmented_version_keeps_the_plain_store_and_searcher(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    x, ids = unit(rng, 300), np.arange(300, dtype=np.int64) * 2
    write_vector_files(tmp_path, ids, x)
    entries = write_ann(tmp_path, x, ids, requested="flat")
    manifest = Manifest(
        model=ModelInfo("fake", "f", D, "fake", "fp32"),
        counts=Counts(300, 300, 0, 0, 300),
        ann=entries["ann"],
        vectors={"rows": 300},
    )
    searcher, store = open_version_vectors(tmp_path, manifest)
    assert type(searcher) is AnnSearcher and type(store) is VectorStore and searcher.hidden is None
    assert previous_ann(tmp_path, manifest) is not None


def test_a_segmented_version_seeds_no_incremental_ann_update(flat: Layout) -> None:
    assert previous_ann(flat.version, flat.manifest) is None


def test_close_releases_a_segmented_store(flat: Layout) -> None:
    searcher, store = open_version_vectors(flat.version, flat.manifest)
    searcher.index = None  # what Index.close does
    store.matrix = np.zeros((0, store.dimension), dtype=np.float32)
    assert searcher.index is None and isinstance(store, SegmentedVectorStore) and store.parts == []


def test_verify_compares_the_base_faiss_ids_with_the_base_rows(flat: Layout, monkeypatch: pytest.MonkeyPatch) -> None:
    import semsearch.write.verify as verify

    monkeypatch.setattr(verify, "current_version", lambda _: flat.version)
    monkeypatch.setattr(verify.Manifest, "read", classmethod(lambda cls, _: flat.manifest))
    from semsearch.store.index_parts import AnnPart, VectorsPart

    monkeypatch.setattr(verify, "INDEX_PARTS", (VectorsPart(), AnnPart()))  # the layout holds only vectors
    assert verify_index(flat.version.parent) == []


def test_arrivals_compare_with_the_previous_versions_live_vectors(tmp_path: Path) -> None:
    from semsearch.store.layout import MANIFEST, doc_id_from_num
    from semsearch.write.arrival_stamps import _nearest_previous

    version = tmp_path / "v"
    layout = Layout(version, "flat")
    (version / MANIFEST).write_text(layout.manifest.to_json(), encoding="utf-8")
    # The re-added number's new vector is matched; a hidden base row's old vector is matched by nothing.
    base_vectors = np.load(version / "vectors.npy")
    old_readded = base_vectors[(layout.readded - 5) // 3]
    new = np.stack([layout.readded_vector, old_readded])
    found = _nearest_previous(version, new, [0, 1])
    assert found[0] == doc_id_from_num(layout.readded)
    assert found[1] != doc_id_from_num(layout.readded)
    # A segment whose files are damaged costs only the comparison.
    (version / "seg-000003" / "vectors.npy").write_bytes(b"not numpy")
    assert _nearest_previous(version, new, [0, 1]) == [None, None]
