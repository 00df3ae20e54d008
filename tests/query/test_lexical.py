"""The BM25 lexical index: analysis, scoring against the BM25 formula, persistence without pickle, corruption."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semsearch.core.errors import IndexCorruptError
from semsearch.store.analyzer import analyze, lexical_text
from semsearch.store.lexical import (
    ARRAY_FILES,
    PARAMS_FILE,
    VOCAB_FILE,
    BM25Params,
    LexicalIndex,
)

DOCS = {
    101: "Vitamin D supplementation and fracture risk in elderly women",
    202: "Vitamins and minerals: a review of supplementation trials",
    303: "Deep learning for protein structure prediction",
    404: "The effect of exercise on bone density in the elderly",
}


@pytest.fixture
def index() -> LexicalIndex:
    return LexicalIndex.build(list(DOCS), list(DOCS.values()))


def test_analyze_lowercases_drops_stop_words_and_stems() -> None:
    assert analyze("The Effects of Vitamins on the Elderly") == ["effect", "vitamin", "elder"]
    # One-character tokens are dropped (as bm25s does); digits of two or more stay.
    assert analyze("a 5 mg dose, p < 0.05, in 2010") == ["mg", "dose", "05", "2010"]
    assert analyze("") == []


def test_terms_are_the_stemmed_query(index: LexicalIndex) -> None:
    assert index.terms("Is vitamin supplementation useful?") == ["vitamin", "supplement", "use"]


def test_lexical_text_joins_title_and_abstract() -> None:
    assert lexical_text("A title", "The abstract.") == "A title The abstract."
    assert lexical_text(None, "The abstract.") == "The abstract."


def test_search_ranks_by_bm25_and_keeps_only_matches(index: LexicalIndex) -> None:
    hits = index.search("vitamin supplementation", k=10)
    assert [d for d, _ in hits] == [101, 202] or [d for d, _ in hits] == [202, 101]
    assert all(s > 0 for _, s in hits)
    assert hits[0][1] >= hits[1][1]
    assert index.search("elderly", k=1)[0][0] in (101, 404)
    assert index.search("quantum chromodynamics", k=5) == []
    assert index.search("the of and", k=5) == []  # only stop words


def test_scores_follow_the_lucene_bm25_formula() -> None:
    # Three documents; query "cat". Lucene BM25: idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
    # tf part = tf / (tf + k1 * (1 - b + b * dl / avgdl)).
    texts = ["cat cat dog", "cat bird", "dog bird fish"]
    idx = LexicalIndex.build([1, 2, 3], texts, BM25Params("lucene", k1=1.5, b=0.75))
    n, df, avgdl = 3, 2, (3 + 2 + 3) / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))

    def bm25(tf: int, dl: int) -> float:
        return idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * dl / avgdl))

    hits = dict(idx.search("cat", k=3))
    assert hits.keys() == {1, 2}
    assert hits[1] == pytest.approx(bm25(2, 3), rel=1e-5)
    assert hits[2] == pytest.approx(bm25(1, 2), rel=1e-5)
    # A repeated query term counts twice, as Anserini's bag-of-words queries weigh it.
    assert dict(idx.search("cat cat", k=3))[1] == pytest.approx(2 * bm25(2, 3), rel=1e-5)


def test_score_ids_for_a_candidate_set(index: LexicalIndex) -> None:
    full = dict(index.search("vitamin elderly", k=10))
    scores = index.score_ids("vitamin elderly", [303, 101, 999, 404])
    assert scores.dtype == np.float32
    assert scores[0] == 0.0  # no query term
    assert scores[1] == pytest.approx(full[101])
    assert scores[2] == 0.0  # unknown id
    assert scores[3] == pytest.approx(full[404])


def test_weighted_queries(index: LexicalIndex) -> None:
    plain = dict(index.search("vitamin", k=10))
    doubled = dict(index.search({"vitamin": 2.0, "unknownterm": 5.0}, k=10))
    assert doubled.keys() == plain.keys()
    for d in plain:
        assert doubled[d] == pytest.approx(2 * plain[d])


def test_ties_are_broken_by_document_id_whatever_the_row_order() -> None:
    idx = LexicalIndex.build([30, 10, 20], ["same words here", "same words here", "other text"])
    assert [d for d, _ in idx.search("same words", k=2)] == [10, 30]
    assert [d for d, _ in idx.search("same words", k=1)] == [10]


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire", "bm25l", "bm25+"])
def test_save_load_round_trip(tmp_path: Path, method: str) -> None:
    idx = LexicalIndex.build(list(DOCS), list(DOCS.values()), BM25Params(method, k1=1.2, b=0.7))
    idx.save(tmp_path / "lexical")
    back = LexicalIndex.load(tmp_path / "lexical")
    assert back.params == idx.params
    assert back.vocab == idx.vocab
    for q in ("vitamin supplementation", "elderly bone", "protein"):
        assert back.search(q, 4) == idx.search(q, 4)


def test_saved_files_are_plain_arrays_and_json(tmp_path: Path, index: LexicalIndex) -> None:
    folder = tmp_path / "lexical"
    index.save(folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*ARRAY_FILES, PARAMS_FILE, VOCAB_FILE])
    for name in ARRAY_FILES:
        np.load(folder / name, allow_pickle=False)  # raises if anything was pickled
    meta = json.loads((folder / PARAMS_FILE).read_text())
    assert meta["documents"] == 4 and meta["bm25"]["method"] == "lucene"


def test_empty_and_stopword_only_corpora(tmp_path: Path) -> None:
    for texts in ([], ["the of", "a"]):
        idx = LexicalIndex.build(list(range(len(texts))), texts)
        assert idx.search("anything", 3) == []
        idx.save(tmp_path / str(len(texts)))
        assert LexicalIndex.load(tmp_path / str(len(texts))).search("anything", 3) == []


def test_build_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="ids but"):
        LexicalIndex.build([1, 2], ["one"])
    with pytest.raises(ValueError, match="unique"):
        LexicalIndex.build([1, 1], ["one", "two"])
    with pytest.raises(ValueError, match="unknown BM25 method"):
        LexicalIndex.build([1], ["one"], BM25Params("bm42"))


@pytest.mark.parametrize("name", [*ARRAY_FILES, PARAMS_FILE, VOCAB_FILE])
def test_missing_file_is_reported_by_name(tmp_path: Path, index: LexicalIndex, name: str) -> None:
    index.save(tmp_path)
    (tmp_path / name).unlink()
    with pytest.raises(IndexCorruptError, match=name.replace(".", r"\.")) as err:
        LexicalIndex.load(tmp_path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("name", [*ARRAY_FILES, PARAMS_FILE, VOCAB_FILE])
def test_truncated_file_is_reported_by_name(tmp_path: Path, index: LexicalIndex, name: str) -> None:
    index.save(tmp_path)
    path = tmp_path / name
    path.write_bytes(path.read_bytes()[: max(1, path.stat().st_size // 2)])
    with pytest.raises(IndexCorruptError, match=name.replace(".", r"\.")) as err:
        LexicalIndex.load(tmp_path)
    assert "\n" not in str(err.value)


def test_inconsistent_arrays_are_rejected(tmp_path: Path, index: LexicalIndex) -> None:
    index.save(tmp_path)
    np.save(tmp_path / "ids.npy", np.arange(3, dtype=np.int64))  # one id short
    with pytest.raises(IndexCorruptError, match="ids.npy"):
        LexicalIndex.load(tmp_path)
    index.save(tmp_path)
    indices = np.load(tmp_path / "indices.npy")
    indices[0] = 99  # a posting past the last document
    np.save(tmp_path / "indices.npy", indices)
    # Postings are memory-mapped, not scanned at load: the first query that reads the bad one says so.
    loaded = LexicalIndex.load(tmp_path)
    term = loaded.vocab[int(np.searchsorted(loaded.indptr, 0, side="right")) - 1]
    with pytest.raises(IndexCorruptError, match="point past the 4 documents"):
        loaded.scores(term)
    index.save(tmp_path)
    np.save(tmp_path / "data.npy", np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(IndexCorruptError, match="data.npy"):
        LexicalIndex.load(tmp_path)


def test_importing_semsearch_lexical_stays_cheap() -> None:
    code = "import sys, semsearch.store.lexical, semsearch.query.highlight, semsearch.query.fusion, "
    code += "semsearch.eval.metrics; "
    code += "print(sorted(m for m in ('bm25s', 'Stemmer', 'torch', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- top-k against brute force --------------------------------------------------------------------------------------

# A small vocabulary, so that random documents share terms, tie, and sometimes match nothing.
WORDS = ["cell", "cells", "protein", "gene", "genes", "model", "learning", "graph", "vitamin", "the", "of", "zinc"]
texts_strategy = st.lists(st.lists(st.sampled_from(WORDS), max_size=12).map(" ".join), min_size=1, max_size=25)
query_strategy = st.lists(st.sampled_from([*WORDS, "absent", "quark"]), max_size=6).map(" ".join)


def brute_force_top(index: LexicalIndex, query: str, k: int, keep: np.ndarray | None = None) -> list[tuple[int, float]]:
    """Every document's BM25 score from the dense document x term matrix, all of them sorted; the best k."""
    matrix = np.zeros((len(index), len(index.vocab)), dtype=np.float32)
    present = np.zeros(matrix.shape, dtype=bool)
    for t in range(len(index.vocab)):
        start, end = index.indptr[t], index.indptr[t + 1]
        matrix[index.indices[start:end], t] = index.data[start:end]
        present[index.indices[start:end], t] = True
    scores = np.zeros(len(index), dtype=np.float32)
    matched = np.zeros(len(index), dtype=bool)
    for tid, w in index.query_weights(query).items():  # the same float32 additions, in the same order
        if index.nonoccurrence is not None:
            scores += np.float32(w) * index.nonoccurrence[tid]
        scores += np.float32(w) * matrix[:, tid]
        matched |= present[:, tid]
    rows = [r for r in range(len(index)) if matched[r] and scores[r] > 0 and (keep is None or keep[r])]
    rows.sort(key=lambda r: (-scores[r], int(index.ids[r])))
    return [(int(index.ids[r]), float(scores[r])) for r in rows[:k]]


@settings(max_examples=150, deadline=None)
@given(
    texts=texts_strategy,
    query=query_strategy,
    k=st.integers(1, 30),
    method=st.sampled_from(["lucene", "robertson", "bm25+"]),
    seed=st.integers(0, 2**16),
)
def test_top_k_equals_brute_force(texts: list[str], query: str, k: int, method: str, seed: int) -> None:
    ids = np.random.default_rng(seed).permutation(10 * len(texts))[: len(texts)] + 1  # ids not in row order
    index = LexicalIndex.build(ids, texts, BM25Params(method))
    assert index.search(query, k) == brute_force_top(index, query, k)
    keep = np.random.default_rng(seed + 1).random(len(texts)) < 0.5
    rows, scores = index.top(query, k, keep)
    assert list(zip(index.ids[rows].tolist(), scores.tolist(), strict=True)) == brute_force_top(index, query, k, keep)


def test_top_k_edge_cases() -> None:
    texts = ["zinc cell", "zinc cell", "zinc cell", "protein gene", "the of"]
    index = LexicalIndex.build([50, 40, 30, 20, 10], texts)
    # No query term in the vocabulary, or only stop words: nothing, as empty arrays of the right types.
    for query in ("quark", "the of", ""):
        rows, scores = index.top(query, 5)
        assert rows.dtype == np.int64 and scores.dtype == np.float32 and rows.size == scores.size == 0
    # k larger than the matches: only the matching documents; three identical documents tie, in id order.
    assert [d for d, _ in index.search("zinc", 100)] == [30, 40, 50]
    # The tie straddles k: the smaller ids win.
    assert [d for d, _ in index.search("zinc", 2)] == [30, 40]
    assert index.search("zinc", 0) == [] and index.search("zinc", -1) == []
    # A mask that leaves out every match.
    rows, _ = index.top("zinc", 3, np.array([False, False, False, True, True]))
    assert rows.size == 0


def test_a_bad_posting_is_reported_on_every_query(tmp_path: Path, index: LexicalIndex) -> None:
    index.save(tmp_path)
    indices = np.load(tmp_path / "indices.npy")
    indices[0] = 99
    np.save(tmp_path / "indices.npy", indices)
    loaded = LexicalIndex.load(tmp_path)
    term = loaded.vocab[int(np.searchsorted(loaded.indptr, 0, side="right")) - 1]
    for _ in range(2):  # the range check is remembered only for terms that passed it
        with pytest.raises(IndexCorruptError, match="point past the 4 documents"):
            loaded.top(term, 3)
