"""The build pipeline and the on-disk store, with the fake encoder."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, Index, IndexLockedError, build_index
from semsearch.core.errors import IndexCorruptError, IndexPointerError, InputError, ModelLoadError
from semsearch.store.layout import CURRENT
from semsearch.store.versions import recover, writer_lock
from semsearch.write.verify import verify_index
from tests.helpers import PAPERS, FakeEmbedder


def opts(**kw: object) -> BuildOptions:
    return BuildOptions(progress=False, **kw)  # type: ignore[arg-type]


def live(index: Path) -> Path:
    return index / (index / CURRENT).read_text().strip()


def test_build_writes_a_complete_version(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    summary = build_index([str(small_corpus)], tmp_path / "idx", opts(), embedder=fake)
    version = live(tmp_path / "idx")
    assert version.name == summary.version
    names = sorted(p.name for p in version.iterdir())
    assert names == [
        "docs.sqlite",
        "ids.npy",
        "lexical",
        "manifest.json",
        "map-base-clusters.npy",  # the map's base layout and what an append needs of it (map_layers.py)
        "map-base-nums.npy",
        "map-centroids.npy",
        "map-fitted.json",
        "map-state.json",
        "map.json",
        "near",
        "vectors.npy",  # a flat version's exact index is built from it when opened: no vectors.faiss to repeat it
    ]
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["format_version"] == 4  # 4: compact sentence vectors (store/manifest.py)
    assert manifest["model"] == {
        "name": "fake-bow",
        "fingerprint": "fake0001",
        "dimension": 64,
        "backend": "fake",
        "precision": "fp32",
        "regime": "",  # only the ONNX runtime promises one ("alone")
        "reading": "truncated",  # the default: the encoder's first window (windows.py has the pooled option)
    }
    assert manifest["counts"] == {
        "read": 6,
        "documents": 5,
        "exact_duplicates": 1,
        "near_duplicates": 0,
        "vectors": 5,
        "title_only": 0,
        "aliases": 0,
    }
    source = manifest["sources"][0]
    assert source["path"] == str(small_corpus.resolve()) and source["records"] == 6 and len(source["sha256"]) == 64
    assert {"docs.sqlite", "vectors.npy", "ids.npy", "lexical/params.json", "lexical/ids.npy"} <= set(manifest["files"])
    assert manifest["lexical"]["bm25"]["method"] == "lucene"
    assert not list(version.rglob("*.pkl")) and not list(version.rglob("*.pickle"))


def test_ids_are_stable_across_rebuilds_and_order(tmp_path: Path, fake: FakeEmbedder) -> None:
    a = tmp_path / "a.txt"
    b = tmp_path / "b.txt"
    texts = list(PAPERS.values())
    a.write_text("H\n\n" + "\n\n".join(texts))
    b.write_text("H\n\n" + "\n\n".join(reversed(texts)))
    build_index([str(a)], tmp_path / "i1", opts(), embedder=fake)
    build_index([str(b)], tmp_path / "i2", opts(), embedder=fake)
    with Index.open(tmp_path / "i1") as i1, Index.open(tmp_path / "i2") as i2:
        ids1 = {d.text: d.id for d in i1.store.iter_documents()}
        ids2 = {d.text: d.id for d in i2.store.iter_documents()}
    assert ids1 == ids2 and len(ids1) == 5
    assert all(len(i) == 16 and int(i, 16) < 2**63 for i in ids1.values())


def test_rebuild_encodes_only_new_text(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    first = build_index([str(small_corpus)], index, opts(), embedder=fake)
    assert first.encoded == 5
    again = build_index([str(small_corpus)], index, opts(), embedder=fake)
    assert (again.encoded, again.cached, again.added, again.removed) == (0, 5, 0, 0)
    extra = small_corpus.parent / "more.txt"
    extra.write_text("More\n\nA brand new abstract about protein folding with diffusion models.\n")
    grown = build_index([str(small_corpus.parent)], index, opts(), embedder=fake)
    assert (grown.encoded, grown.added, grown.documents) == (1, 1, 6)
    assert fake.calls[-1] == ["A brand new abstract about protein folding with diffusion models."]
    extra.unlink()
    shrunk = build_index([str(small_corpus.parent)], index, opts(), embedder=fake)
    assert (shrunk.encoded, shrunk.removed, shrunk.documents) == (0, 1, 5)
    # --full still reuses the embedding cache.
    full = build_index([str(small_corpus)], index, opts(full=True), embedder=fake)
    assert full.encoded == 0


def test_old_versions_are_pruned(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch) -> None:
    monkeypatch.setattr("semsearch.store.versions.PRUNE_GRACE_S", 0.0)
    index = tmp_path / "idx"
    names = []
    for _ in range(4):  # well within one second: names must still order by publication
        names.append(build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake).version)
    # The live one, and the one it replaced for readers mid-swap.
    assert sorted(p.name for p in index.glob("v-*")) == sorted(names[-2:])
    assert live(index).name == names[-1]


def test_recently_replaced_versions_survive_the_grace_period(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    names = [build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake).version for _ in range(3)]
    assert sorted(p.name for p in index.glob("v-*")) == sorted(names)


def test_grace_counts_from_when_a_version_was_replaced_not_built(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    import os

    index = tmp_path / "idx"
    names = [build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake).version for _ in range(2)]
    hour_ago = time.time() - 3600
    for name in names:  # both built long ago; the second was replaced only now, by the third
        os.utime(index / name, (hour_ago, hour_ago))
    third = build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake).version
    fourth = build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake).version
    # names[0] was replaced an hour ago: gone. names[1] was replaced a moment ago: kept for its readers.
    assert sorted(p.name for p in index.glob("v-*")) == sorted([names[1], third, fourth])


def test_unpublished_version_is_removed_and_not_kept_as_previous(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch
) -> None:
    monkeypatch.setattr("semsearch.store.versions.PRUNE_GRACE_S", 0.0)
    index = tmp_path / "idx"
    first = build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake).version
    orphan = index / "v-000099-20991231T000000"  # a crash between rename and the CURRENT swap
    orphan.mkdir()
    (index / ".publishing").write_text(orphan.name + "\n")  # the journal the killed writer left
    second = build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake).version
    assert not orphan.exists() and not (index / ".publishing").exists()
    assert sorted(p.name for p in index.glob("v-*")) == sorted([first, second])


def test_interrupt_after_publishing_keeps_the_new_index(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch
) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, opts(), embedder=fake)

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("semsearch.store.versions.prune_versions", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build_index([str(small_corpus)], index, opts(full=True), embedder=fake)
    monkeypatch.undo()
    assert verify_index(index) == []
    with Index.open(index, embedder=fake) as idx:
        assert len(idx) == 5


def test_full_rebuild_recovers_a_corrupt_index(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, opts(), embedder=fake)
    (live(index) / "docs.sqlite").write_bytes(b"garbage" * 100)
    with pytest.raises(IndexCorruptError, match="--full"):
        build_index([str(small_corpus)], index, opts(), embedder=fake)
    summary = build_index([str(small_corpus)], index, opts(full=True), embedder=fake)
    assert summary.documents == 5 and summary.encoded == 0  # the embedding cache survived
    assert verify_index(index) == []
    # A dangling pointer is no damage --full repairs: nothing is deleted, the error says how to point back.
    (index / "CURRENT").write_text("v-gone\n")
    with pytest.raises(IndexPointerError, match=f"newest sound version is {summary.version}.*--recover"):
        build_index([str(small_corpus)], index, opts(full=True), embedder=fake)
    assert recover(index).version == summary.version
    assert build_index([str(small_corpus)], index, opts(full=True), embedder=fake).documents == 5


def test_index_path_with_uri_characters(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "a#b?c%d" / "idx"
    build_index([str(small_corpus)], index, opts(), embedder=fake)
    with Index.open(index, embedder=fake) as idx:
        assert idx.search("graph networks", 1)[0].text == PAPERS["graph"]
    assert verify_index(index) == []
    assert sorted(p.name for p in (tmp_path).iterdir()) == ["a#b?c%d", "corpus"]


class ExplodingEmbedder(FakeEmbedder):
    """Fails after encoding some texts, like a crash in the middle of a build."""

    def __init__(self, fail_after: int) -> None:
        super().__init__()
        self.fail_after = fail_after

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        if len(self.encoded_texts) + len(texts) > self.fail_after:
            raise RuntimeError("boom")
        return super().encode(texts, batch_size=batch_size)


def test_failed_build_keeps_the_old_index(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, opts(), embedder=fake)
    before = live(index)
    extra = small_corpus.parent / "more.txt"
    extra.write_text("More\n\nSomething new about climate models and weather forecasting with transformers.\n")
    with pytest.raises(RuntimeError):
        build_index([str(small_corpus.parent)], index, opts(), embedder=ExplodingEmbedder(0))
    assert live(index) == before
    assert not list(index.glob(".build-*")), "the half-written version must be removed"
    with Index.open(index, embedder=fake) as idx:
        assert len(idx) == 5


class UnloadableEmbedder(FakeEmbedder):
    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        raise ModelLoadError("cannot load model 'fake': weights missing")


def test_failed_first_build_leaves_no_directory(tmp_path: Path, small_corpus: Path) -> None:
    with pytest.raises(ModelLoadError):
        build_index([str(small_corpus)], tmp_path / "idx", opts(), embedder=UnloadableEmbedder())
    assert not (tmp_path / "idx").exists()


def test_bad_input_fails_before_touching_the_index(tmp_path: Path, fake: FakeEmbedder) -> None:
    with pytest.raises(InputError):
        build_index([str(tmp_path / "missing")], tmp_path / "idx", opts(), embedder=fake)
    assert not (tmp_path / "idx").exists()


def test_second_writer_fails_fast(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    with writer_lock(index), pytest.raises(IndexLockedError, match="another semsearch process"):
        build_index([str(small_corpus)], index, opts(), embedder=fake)


def test_stale_build_folders_are_cleaned(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake)
    stale = index / ".build-999999-abcd"
    stale.mkdir()
    (stale / "vectors.faiss").write_bytes(b"half")
    build_index([str(small_corpus)], index, opts(rewrite=True), embedder=fake)
    assert not stale.exists()


def test_cache_is_per_model(tmp_path: Path, small_corpus: Path) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, opts(), embedder=FakeEmbedder())
    other = FakeEmbedder(dimension=32, name="other", fingerprint="other001")
    summary = build_index([str(small_corpus)], index, opts(full=True), embedder=other)
    assert summary.encoded == 5


def test_reader_keeps_working_across_swaps(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus)], index, opts(), embedder=fake)
    reader = Index.open(index, embedder=fake)
    for _ in range(3):
        build_index([str(small_corpus)], index, opts(full=True), embedder=fake)
    # Lexical files load lazily: the version the reader opened must still be there.
    assert reader.search("graph networks", 1)[0].text == PAPERS["graph"]
    reader.close()
    assert os.path.exists(reader.version)


def test_a_build_in_the_one_text_regime_drops_the_batched_cache(tmp_path: Path, small_corpus: Path) -> None:
    from semsearch.encode.cache import EmbeddingCache

    class Alone(FakeEmbedder):
        backend, precision, regime = "onnx", "int8", "alone"

    index, enc = tmp_path / "idx", Alone()
    folder = index / "cache"
    folder.mkdir(parents=True)
    batched = EmbeddingCache.path_for(folder, enc.fingerprint, "onnx-int8")  # written by an earlier semsearch
    other = EmbeddingCache.path_for(folder, "another-model", "onnx-int8")
    batched.write_bytes(b"old vectors")
    other.write_bytes(b"another model's vectors")
    build_index([str(small_corpus)], index, opts(), embedder=enc)
    assert not batched.exists() and other.exists()
    assert EmbeddingCache.path_for(folder, enc.fingerprint, "onnx-int8-alone").is_file()


def test_full_rebuild_from_named_sources_when_no_version_is_sound(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    first = build_index([str(small_corpus)], index, opts(), embedder=fake).version
    (index / first / "manifest.json").write_text("{not json")
    (index / CURRENT).write_text("v-gone\n")
    with pytest.raises(IndexPointerError, match="no version in .* is sound"):
        build_index(None, index, opts(full=True), embedder=fake)  # ./seeds would replace it: refused
    summary = build_index([str(small_corpus)], index, opts(full=True), embedder=fake)
    assert summary.documents == 5 and verify_index(index) == []
    assert (index / first).is_dir()  # the damaged version is kept beside the new one (pruned later as replaced)
