"""The BM25 builder: numpy Lucene weights equal bm25s's bit for bit, and a refresh that reuses the live
version's postings gives exactly the index a build from scratch gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semsearch.store.lexical import BM25Params, LexicalIndex
from semsearch.store.lexical_build import KEYS_FILE, LENGTHS_FILE, TF_FILE, build_lexical, write_lexical
from tests.helpers import FIXTURES, PAPERS, FakeEmbedder

WORDS = [
    "graph",
    "neural",
    "networks",
    "privacy",
    "federated",
    "learning",
    "the",
    "of",
    "robots",
    "policy",
    "diffusion",
    "protein",
    "quantum",
    "sparse",
    "attention",
    "model",
    "models",
    "modelling",
    "data",
]
texts_strategy = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=25).map(" ".join), min_size=1, max_size=30
)


def by_id(index: LexicalIndex) -> dict[tuple[int, str], float]:
    """Every posting as (document id, term) -> weight: comparable across row and term orders."""
    out = {}
    for term_id, term in enumerate(index.vocab):
        start, end = int(index.indptr[term_id]), int(index.indptr[term_id + 1])
        for row, weight in zip(index.indices[start:end].tolist(), index.data[start:end].tolist(), strict=True):
            out[int(index.ids[row]), term] = weight
    return out


@settings(max_examples=60, deadline=None)
@given(texts_strategy)
def test_lucene_weights_are_bm25s_weights_bit_for_bit(texts: list[str]) -> None:
    ids = list(range(100, 100 + len(texts)))
    ours, extras, analysed = build_lexical(ids, texts)
    theirs = LexicalIndex.build(ids, texts)
    assert analysed == len(texts)
    assert ours.vocab == theirs.vocab
    assert np.array_equal(ours.indptr, theirs.indptr) and np.array_equal(ours.indices, theirs.indices)
    assert ours.data.tobytes() == theirs.data.tobytes()
    assert int(extras[LENGTHS_FILE].sum()) == sum(len(ours.terms(t)) for t in texts)


@settings(max_examples=60, deadline=None)
@given(texts_strategy, st.data())
def test_a_refresh_on_the_previous_postings_equals_a_build_from_scratch(
    tmp_path_factory: pytest.TempPathFactory, texts: list[str], data: st.DataObject
) -> None:
    folder = tmp_path_factory.mktemp("lex")
    ids = list(range(len(texts)))
    first, extras, _ = build_lexical(ids, texts)
    first.save(folder)
    for name, array in extras.items():
        np.save(folder / name, array)
    # The next version: some documents gone, some with another text, some new, rows in another order.
    rng = random.Random(data.draw(st.integers(0, 10_000)))
    kept = [i for i in ids if rng.random() < 0.7]
    now = {i: (texts[i] if rng.random() < 0.8 else texts[i] + " quantum robots") for i in kept}
    for new_id in range(1000, 1000 + rng.randint(0, 5)):
        now[new_id] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
    order = list(now)
    rng.shuffle(order)
    new_texts = [now[i] for i in order]
    refreshed, r_extras, analysed = build_lexical(order, new_texts, previous=folder)
    scratch, s_extras, _ = build_lexical(order, new_texts)
    assert by_id(refreshed) == by_id(scratch)  # the same floats, not just close ones
    assert sorted(refreshed.vocab) == sorted(scratch.vocab)
    assert np.array_equal(r_extras[LENGTHS_FILE], s_extras[LENGTHS_FILE])
    changed = sum(1 for i in order if i not in kept or now[i] != (texts[i] if i < len(texts) else None))
    assert analysed == changed
    for query in ("graph networks", "quantum robots privacy", "model"):
        assert refreshed.search(query, 10) == scratch.search(query, 10)


def test_an_older_or_different_previous_index_means_a_full_build(tmp_path: Path) -> None:
    texts = ["graph neural networks", "federated privacy", "robots policy"]
    old = LexicalIndex.build([1, 2, 3], texts)  # an index from before tf.npy: nothing to reuse
    old.save(tmp_path / "old")
    assert build_lexical([1, 2, 3], texts, previous=tmp_path / "old")[2] == 3
    index, extras, _ = build_lexical([1, 2, 3], texts, BM25Params())
    index.save(tmp_path / "new")
    for name, array in extras.items():
        np.save(tmp_path / "new" / name, array)
    assert build_lexical([1, 2, 3], texts, previous=tmp_path / "new")[2] == 0
    assert build_lexical([1, 2, 3], texts, BM25Params(k1=1.2), previous=tmp_path / "new")[2] == 3
    (tmp_path / "new" / KEYS_FILE).write_bytes(b"damaged")  # a damaged previous index costs a full build
    assert build_lexical([1, 2, 3], texts, previous=tmp_path / "new")[2] == 3
    assert build_lexical([1, 2, 3], texts, previous=tmp_path / "missing")[2] == 3


def test_other_bm25_variants_are_built_by_bm25s(tmp_path: Path) -> None:
    texts = ["graph neural networks", "federated privacy"]
    params = BM25Params(method="bm25+")
    index, extras, analysed = build_lexical([1, 2], texts, params)
    assert (extras, analysed) == ({}, 2) and index.nonoccurrence is not None


def test_a_refresh_analyses_only_what_arrived(tmp_path: Path, fake: FakeEmbedder) -> None:
    from semsearch.query.search import Index
    from semsearch.write.build import BuildOptions, build_index

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("Papers\n\n" + "\n\n".join(list(PAPERS.values())[:4]) + "\n", encoding="utf-8")
    index = tmp_path / "idx"
    build_index([str(src)], index, BuildOptions(progress=False), embedder=fake)
    (src / "b.txt").write_text("Papers\n\n" + list(PAPERS.values())[4] + "\n", encoding="utf-8")
    build_index([str(src)], index, BuildOptions(progress=False), embedder=fake)
    live = index / (index / "CURRENT").read_text().strip()
    assert json.loads((live / "manifest.json").read_text())["lexical"]["analysed"] == 1
    assert all((live / "lexical" / name).is_file() for name in (TF_FILE, LENGTHS_FILE, KEYS_FILE))
    scratch = tmp_path / "scratch"
    build_index([str(src)], scratch, BuildOptions(progress=False), embedder=fake)
    with Index.open(index, embedder=fake) as grown, Index.open(scratch, embedder=fake) as whole:
        for query in ("robot navigation", "graph networks privacy", "language models"):
            a, b = grown.search(query, 5, mode="lexical"), whole.search(query, 5, mode="lexical")
            assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b]


def test_write_lexical_reports_what_it_analysed(tmp_path: Path) -> None:
    class Doc:
        def __init__(self, title: str | None, text: str) -> None:
            self.title, self.text, self.title_only = title, text, False

    entry = write_lexical(tmp_path / "lex", [5, 6], [Doc("Graphs", "graph networks"), Doc(None, "privacy")])
    assert entry["analysed"] == 2 and entry["terms"] == 3
    again = write_lexical(
        tmp_path / "lex2", [6, 5], [Doc(None, "privacy"), Doc("Graphs", "graph networks")], previous=tmp_path / "lex"
    )
    assert again["analysed"] == 0
    assert LexicalIndex.load(tmp_path / "lex2").search("graph", 1)[0][0] == 5


def test_the_same_corpus_built_at_once_or_in_arrivals_answers_the_same(tmp_path: Path, fake: FakeEmbedder) -> None:
    """The fast twin of test_one_vector's real-model test: every mode, scores to 1e-6, arrivals in any order."""
    import shutil

    from semsearch.query.search import Index
    from semsearch.write.build import BuildOptions, build_index
    from tests.helpers import SEEDS

    arrivals = sorted((FIXTURES / "arrivals").glob("*.txt"))
    at_once, arriving = tmp_path / "at_once", tmp_path / "arriving"
    shutil.copytree(SEEDS, at_once)
    shutil.copytree(SEEDS, arriving)
    for path in arrivals:
        shutil.copy(path, at_once / path.name)
    options = BuildOptions(progress=False)
    build_index([str(at_once)], tmp_path / "one", options, embedder=fake)
    build_index([str(arriving)], tmp_path / "many", options, embedder=fake)
    for path in reversed(arrivals):  # arriving in another order than a listing reads them
        shutil.copy(path, arriving / path.name)
        build_index([str(arriving)], tmp_path / "many", options, embedder=fake)
    queries = ("federated privacy", "graph neural networks", "diffusion models", "reinforcement learning", "llm")
    with Index.open(tmp_path / "one", embedder=fake) as one, Index.open(tmp_path / "many", embedder=fake) as many:
        assert len(one) == len(many) == 151
        for query in queries:
            for mode in ("dense", "lexical", "hybrid"):
                a, b = one.search(query, 10, mode=mode), many.search(query, 10, mode=mode)
                assert [h.id for h in a] == [h.id for h in b], (query, mode)
                assert np.allclose([h.score for h in a], [h.score for h in b], rtol=0, atol=1e-6), (query, mode)
