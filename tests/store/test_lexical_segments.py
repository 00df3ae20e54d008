"""BM25 over a version's segments scores every live document with exactly the float32 bits of one index built
over the live documents in one go, and never finds or scores a hidden row."""

from __future__ import annotations

import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import IndexCorruptError
from semsearch.store.analyzer import lexical_text
from semsearch.store.lexical import BM25Index, BM25Params, LexicalIndex
from semsearch.store.lexical_build import LENGTHS_FILE, TF_FILE, build_lexical, write_lexical
from semsearch.store.lexical_segments import SegmentedLexicalIndex, load_segments
from semsearch.store.segments import Segment, write_hidden
from tests.helpers import FakeEmbedder

WORDS = ["graph", "neural", "networks", "privacy", "federated", "learning", "the", "of", "robots", "policy"]
WORDS += ["diffusion", "protein", "quantum", "sparse", "attention", "model", "models", "data", "rare", "zebra"]
EMPTY = np.zeros(0, dtype=np.int64)


@dataclass
class Doc:
    """What write_lexical reads of a document."""

    title: str
    text: str
    title_only: bool = False


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))


def write_segment(folder: Path, ids: list[int], texts: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_lexical(folder / "lexical", ids, [Doc("", t) for t in texts])


def make_version(root: Path, rng: random.Random) -> tuple[list[Segment], dict[int, str], set[int]]:
    """Segments written with write_lexical: (segments base first, live id -> text, ids no longer live)."""
    live: dict[int, tuple[int, str]] = {}  # id -> (segment, text)
    hidden: dict[int, set[int]] = {}
    rows: list[int] = []
    next_id = 0
    for seg in range(rng.randint(1, 4)):
        ids, texts = [], []
        if seg and live:  # hide some live documents (deleted), and write some again (updated) in this segment
            for doc in rng.sample(sorted(live), rng.randint(0, min(4, len(live)))):
                old_seg, old_text = live.pop(doc)
                hidden.setdefault(old_seg, set()).add(doc)
                if rng.random() < 0.6:
                    ids.append(doc)
                    texts.append(old_text if rng.random() < 0.5 else text(rng))
        for _ in range(rng.randint(0 if seg else 1, 12)):
            ids.append(next_id)
            texts.append(text(rng))
            next_id += 1
        order = list(range(len(ids)))
        rng.shuffle(order)  # rows are not in id order: ties must still go to the smaller id
        ids, texts = [ids[i] for i in order], [texts[i] for i in order]
        folder = root if seg == 0 else root / f"seg-{seg:06d}"
        write_segment(folder, ids, texts)
        live.update({d: (seg, t) for d, t in zip(ids, texts, strict=True)})
        rows.append(len(ids))
    segments = [
        Segment(
            root if s == 0 else root / f"seg-{s:06d}",
            "" if s == 0 else f"seg-{s:06d}",
            rows[s],
            np.array(sorted(hidden.get(s, ())), dtype=np.int64),
        )
        for s in range(len(rows))
    ]
    gone = set(range(next_id)) - set(live)
    return segments, {d: t for d, (_, t) in live.items()}, gone


def by_id_term(index: BM25Index) -> dict[tuple[int, str], float]:
    """Every posting's weight as (document id, term) -> weight, comparable across row and term orders."""
    data, indices, indptr = index.csc()
    out = {}
    for tid, term in enumerate(index.vocab):
        start, end = int(indptr[tid]), int(indptr[tid + 1])
        for row, w in zip(indices[start:end].tolist(), data[start:end].tolist(), strict=True):
            out[int(index.ids[row]), term] = w
    return out


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_segments_score_exactly_as_one_index_over_the_live_documents(tmp_path_factory, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path_factory.mktemp("v")
    segments, live, gone = make_version(root, rng)
    if not live:
        return
    ref, _, _ = build_lexical(sorted(live), [live[d] for d in sorted(live)])
    seg = load_segments(segments)
    if len(segments) == 1 and not len(segments[0].hidden):
        assert type(seg) is LexicalIndex
    else:
        assert isinstance(seg, SegmentedLexicalIndex)
    live_ids = np.array(sorted(live), dtype=np.int64)
    assert len(seg) == sum(s.rows for s in segments)
    assert np.array_equal(seg.ids[seg.rows_of(live_ids)], live_ids)
    assert (seg.rows_of(sorted(gone)) == -1).all() and (seg.rows_of([-1, 10**9]) == -1).all()
    hidden_rows = np.flatnonzero(seg.ids == -1)
    assert len(hidden_rows) == len(seg) - len(live)
    assert by_id_term(seg) == by_id_term(ref)  # the weights recommend's features use
    for _ in range(6):
        query = " ".join(rng.choice([*WORDS, "unknown"]) for _ in range(rng.randint(1, 5)))
        named = {ref.vocab[t]: w for t, w in ref.query_weights(query).items()}
        assert {seg.vocab[t]: w for t, w in seg.query_weights(query).items()} == named
        ref_scores, ref_matched = ref.scores(query)
        scores, matched = seg.scores(query)
        assert scores.dtype == np.float32
        assert np.array_equal(scores[seg.rows_of(live_ids)], ref_scores[ref.rows_of(live_ids)])
        assert np.array_equal(matched[seg.rows_of(live_ids)], ref_matched[ref.rows_of(live_ids)])
        assert not scores[hidden_rows].any() and not matched[hidden_rows].any()
        asked = np.array([*rng.sample(sorted(live), min(5, len(live))), *sorted(gone)[:3], 10**6], dtype=np.int64)
        assert np.array_equal(seg.score_ids(query, asked), ref.score_ids(query, asked))
        chosen = np.array([d for d in live if rng.random() < 0.5], dtype=np.int64)
        ref_keep = np.zeros(len(ref), dtype=bool)
        ref_keep[ref.rows_of(chosen)] = True
        keep = np.zeros(len(seg), dtype=bool)
        keep[seg.rows_of(chosen)] = True
        keep[hidden_rows] = True  # a mask that lets hidden rows through still never returns them
        for k in (1, 3, 100):
            for seg_keep, ref_mask in ((None, None), (keep, ref_keep)):
                rows, top = seg.top(query, k, seg_keep)
                ref_rows, ref_top = ref.top(query, k, ref_mask)
                assert np.array_equal(seg.ids[rows], ref.ids[ref_rows])
                assert np.array_equal(top, ref_top)
        assert seg.search(query, 5) == ref.search(query, 5)


def test_one_segment_is_an_ordinary_index(tmp_path: Path) -> None:
    write_segment(tmp_path, [3, 1, 2], ["graph neural networks", "federated privacy", "graph attention"])
    index = load_segments([Segment(tmp_path, "", 3, EMPTY)])
    assert type(index) is LexicalIndex
    assert index.search("graph", 5) == LexicalIndex.load(tmp_path / "lexical").search("graph", 5)


def test_a_base_with_hidden_rows_alone_is_scored_over_its_live_rows(tmp_path: Path) -> None:
    write_segment(tmp_path, [0, 1, 2], ["graph neural networks", "graph privacy", "graph attention"])
    index = load_segments([Segment(tmp_path, "", 3, np.array([1], dtype=np.int64))])
    ref, _, _ = build_lexical([0, 2], ["graph neural networks", "graph attention"])
    assert isinstance(index, SegmentedLexicalIndex)
    assert index.search("graph privacy", 5) == ref.search("graph privacy", 5)


def two_segments(tmp_path: Path) -> list[Segment]:
    write_segment(tmp_path, [0, 1], ["graph neural networks", "federated privacy"])
    write_segment(tmp_path / "seg-000002", [2], ["graph attention"])
    return [Segment(tmp_path, "", 2, EMPTY), Segment(tmp_path / "seg-000002", "seg-000002", 1, EMPTY)]


@pytest.mark.parametrize("name", [TF_FILE, LENGTHS_FILE])
def test_a_segment_without_its_term_frequencies_is_corrupt(tmp_path: Path, name: str) -> None:
    segments = two_segments(tmp_path)
    (tmp_path / "seg-000002" / "lexical" / name).unlink()
    with pytest.raises(IndexCorruptError, match=f"{name} is missing") as err:
        load_segments(segments)
    assert "\n" not in str(err.value) and "index --full" in str(err.value)


def test_a_segment_without_a_lexical_folder_is_corrupt(tmp_path: Path) -> None:
    segments = two_segments(tmp_path)
    shutil.rmtree(tmp_path / "seg-000002" / "lexical")
    with pytest.raises(IndexCorruptError, match="seg-000002/lexical is missing"):
        load_segments(segments)


def test_a_version_without_a_lexical_folder_is_corrupt(tmp_path: Path) -> None:
    with pytest.raises(IndexCorruptError, match="lexical is missing; rebuild with: semsearch index --full"):
        load_segments([Segment(tmp_path, "", 0, EMPTY)])


def test_a_segment_of_another_size_than_the_manifest_says_is_corrupt(tmp_path: Path) -> None:
    segments = two_segments(tmp_path)
    segments[1] = Segment(segments[1].folder, segments[1].name, 5, EMPTY)
    with pytest.raises(IndexCorruptError, match="holds 1 documents, expected 5"):
        load_segments(segments)


def test_a_document_live_in_two_segments_is_corrupt(tmp_path: Path) -> None:
    write_segment(tmp_path, [0, 1], ["graph neural networks", "federated privacy"])
    write_segment(tmp_path / "seg-000002", [1], ["graph attention"])  # 1 is not hidden in the base
    segments = [Segment(tmp_path, "", 2, EMPTY), Segment(tmp_path / "seg-000002", "seg-000002", 1, EMPTY)]
    with pytest.raises(IndexCorruptError, match="document 1 is live in two segments"):
        load_segments(segments)


@pytest.mark.parametrize("method", ["base", "extra"])
def test_segments_need_the_same_lucene_settings(tmp_path: Path, method: str) -> None:
    segments = two_segments(tmp_path)
    other = segments[0 if method == "base" else 1].folder / "lexical"
    ids, texts = (list(LexicalIndex.load(other).ids), ["graph"] * len(LexicalIndex.load(other)))
    shutil.rmtree(other)
    LexicalIndex.build(ids, texts, BM25Params(method="robertson")).save(other)
    message = "robertson BM25, not Lucene's" if method == "base" else "other BM25 settings than the version's base"
    with pytest.raises(IndexCorruptError, match=message):
        load_segments(segments)


def test_an_index_with_segments_searches_them_all(tmp_path: Path, small_corpus: Path) -> None:
    build_index([str(small_corpus)], tmp_path / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    with Index.open(tmp_path / "idx", embedder=FakeEmbedder()) as index:
        assert type(index.lexical) is LexicalIndex
        docs = index.store.get_many(index.lexical.ids.tolist())
        texts = {d: lexical_text(None if doc.title_only else doc.title, doc.text) for d, doc in docs.items()}
        updated, added = min(texts), 10**6
        write_segment(index.version / "seg-000002", [updated, added], ["quantum zebra", "zebra privacy data"])
        write_hidden(index.version, {0: np.array([updated], dtype=np.int64)})
        index.manifest.segments = [{"name": "seg-000002", "rows": 2}]
        index._lexical = None
        assert isinstance(index.lexical, SegmentedLexicalIndex)
        texts.update({updated: "quantum zebra", added: "zebra privacy data"})
        ref, _, _ = build_lexical(sorted(texts), [texts[d] for d in sorted(texts)])
        for query in ("zebra", "privacy data", "federated learning privacy"):
            assert index.lexical.search(query, 10) == ref.search(query, 10)
            ids, scores = index._retrieval().lexical_top(
                query, 10, None, frozenset([added])
            )  # the search path's keep mask
            expected = [hit for hit in ref.search(query, 11) if hit[0] != added][:10]
            assert list(zip(ids.tolist(), scores.tolist(), strict=True)) == expected
        (index.version / "seg-000002" / "lexical" / TF_FILE).unlink()
        index._lexical = None
        with pytest.raises(IndexCorruptError, match="tf.npy is missing"):
            _ = index.lexical
