"""Fusion that reads the query (issue #36): dense leads a common-words question, BM25 leads one rare word."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.options import (
    ADAPTIVE_ALONE_SHARE,
    ADAPTIVE_COMMON_SHARE,
    ADAPTIVE_DENSE_ALPHA,
    ADAPTIVE_ONE_TERM_ALPHA,
    ADAPTIVE_TYPO_ALPHA,
    fusion_entry,
)
from semsearch.query.fusion import convex_arrays
from semsearch.query.weighting import FusionPolicy, QuerySignal
from semsearch.store.lexical import LexicalIndex
from tests.helpers import FakeEmbedder

QUESTION = "how can you tell whether a photo was made by a computer"
# Five words, each in one abstract of its own (sensor, robots, proof, planar, museums): BM25's best match holds a
# fifth of the query's idf mass, so its list says nothing about what the whole query asks for.
SCATTERED = "a sensor on robots giving proof of planar museums"
ACRONYM = "LoRA"

# Each question word is in a few abstracts and no abstract holds more than two of them: BM25's best match then
# holds a small share of the question's idf mass, however far its score stands out of the rest.
COMMON = [
    "We tell apart two kinds of noise and show how the photo sensor reacts.",
    "A computer vision model made for robots; we ask whether it can generalize.",
    "Whether a proof can be checked by a computer is the question of this work.",
    "You can tell the dataset was made by hand from its label noise.",
    "How to tell whether a graph is planar, made simple by a new algorithm.",
    "We study how the photo collections of museums were made and catalogued.",
]
FILLER = [f"Topic {i}: spectral methods for sparse linear systems and their convergence rates." for i in range(24)]
ABSTRACTS = [
    *COMMON,
    *FILLER,
    "LoRA adapts large language models with low-rank updates to frozen weights.",
    "Quantized LoRA fine-tuning of language models on one GPU.",
]


def _lexical() -> LexicalIndex:
    return LexicalIndex.build(list(range(len(ABSTRACTS))), ABSTRACTS)


def _lists(lexical: LexicalIndex, text: str, dense_head: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dense scores, BM25 ids, BM25 scores): a dense list whose best stands ``dense_head`` above a flat rest."""
    ids, scores = lexical.top(text, len(ABSTRACTS))
    dense = np.concatenate([[0.3 + 0.01 * dense_head], np.full(len(ABSTRACTS) - 1, 0.3)])
    dense[1::2] += 0.01  # a spread, so that the head's z-score is finite
    return np.sort(dense)[::-1], lexical.ids[ids], scores


def test_a_common_words_question_gives_dense_the_lead_and_says_why() -> None:
    lexical = _lexical()
    dense, best, bm25 = _lists(lexical, QUESTION, dense_head=1.0)
    signal = QuerySignal.measure(lexical, QUESTION, best)
    share = signal.best_share()
    assert share is not None and share < ADAPTIVE_COMMON_SHARE  # BM25's best match holds little of the question
    before = FusionPolicy("adaptive", common_share=0.0, one_term_alpha=1.0).choose(dense, bm25, len(ABSTRACTS))
    choice = FusionPolicy("adaptive").choose(dense, bm25, len(ABSTRACTS), signal)
    assert before.alpha < 0.5  # the old rule: BM25's head stands out further, so BM25 led
    assert choice.alpha == pytest.approx(ADAPTIVE_DENSE_ALPHA) and choice.alpha > before.alpha
    assert "dense leads" in choice.reason and "common words" in choice.reason
    assert f"its best match holds {share:.2f} of the query's idf mass" in choice.reason


def test_a_rare_acronym_gives_lexical_the_lead_and_says_why() -> None:
    lexical = _lexical()
    dense, best, bm25 = _lists(lexical, ACRONYM, dense_head=40.0)  # a dense head far out: the old rule gave dense
    signal = QuerySignal.measure(lexical, ACRONYM, best)
    assert signal.one_rare_word(0.005) and signal.dfs == (2,)
    before = FusionPolicy("adaptive", common_share=0.0, one_term_alpha=1.0).choose(dense, bm25, len(ABSTRACTS))
    choice = FusionPolicy("adaptive").choose(dense, bm25, len(ABSTRACTS), signal)
    assert before.alpha > 0.5
    assert choice.alpha == pytest.approx(ADAPTIVE_ONE_TERM_ALPHA) and choice.alpha < 0.5
    said = f"lexical leads: the query is one word shaped like an acronym or identifier (in 2 of {len(ABSTRACTS)}"
    assert said in choice.reason and signal.shaped


def test_a_question_whose_best_match_holds_its_words_keeps_the_lists_weight() -> None:
    lexical = _lexical()
    text = "low-rank updates of frozen language model weights"
    dense, best, bm25 = _lists(lexical, text, dense_head=1.0)
    signal = QuerySignal.measure(lexical, text, best)
    assert (signal.best_share() or 0.0) >= ADAPTIVE_COMMON_SHARE and not signal.one_rare_word(0.005)
    choice = FusionPolicy("adaptive").choose(dense, bm25, len(ABSTRACTS), signal)
    old = FusionPolicy("adaptive", common_share=0.0, one_term_alpha=1.0).choose(dense, bm25, len(ABSTRACTS))
    assert choice.alpha == old.alpha and "leads" not in choice.reason


def test_an_adaptive_entry_recorded_before_the_signals_fuses_as_it_did() -> None:
    old_entry = {"method": "adaptive", "peak_top": 1, "power": 1.0, "lexical_scale": 1.5}
    policy = FusionPolicy.from_entry(old_entry)
    assert policy.method == "adaptive" and policy.common_share == 0.0 and policy.one_term_alpha == 1.0
    lexical = _lexical()
    dense, best, bm25 = _lists(lexical, QUESTION, dense_head=1.0)
    signal = QuerySignal.measure(lexical, QUESTION, best)
    assert "leads" not in policy.choose(dense, bm25, len(ABSTRACTS), signal).reason
    recorded = FusionPolicy.from_entry(fusion_entry("adaptive"))  # what a new build records reads the query
    assert recorded.choose(dense, bm25, len(ABSTRACTS), signal).alpha == pytest.approx(ADAPTIVE_DENSE_ALPHA)
    bad = FusionPolicy.from_entry({**fusion_entry("adaptive"), "dense_alpha": 7})
    assert bad.method == "fixed" and "unreadable" in bad.note


def build_abstracts(index: Path, fake: FakeEmbedder) -> None:
    """An index of ABSTRACTS, one paper each."""
    corpus = index.parent / "papers.jsonl"
    rows = [{"id": f"p{i}", "title": f"Paper {i}", "abstract": t} for i, t in enumerate(ABSTRACTS)]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    build_index([str(corpus)], index, BuildOptions(progress=False), embedder=fake)


def test_a_search_on_a_new_index_explains_the_lead(tmp_path: Path, fake: FakeEmbedder) -> None:
    build_abstracts(tmp_path / "idx", fake)
    with Index.open(tmp_path / "idx", embedder=fake) as index:
        question = index.search(QUESTION, k=3)
        acronym = index.search(ACRONYM, k=3)
    assert question[0].fusion is not None and "dense leads" in question[0].fusion["reason"]
    assert question[0].fusion["alpha"] >= ADAPTIVE_DENSE_ALPHA
    assert acronym[0].fusion is not None and "lexical leads" in acronym[0].fusion["reason"]
    assert acronym[0].fusion["alpha"] <= ADAPTIVE_ONE_TERM_ALPHA
    assert {x for h in acronym[:2] for x in h.external_ids} == {"p30", "p31"}  # the two LoRA papers first


def test_a_query_whose_typos_spelling_corrected_gives_lexical_the_lead() -> None:
    lexical = _lexical()
    searched, typed = "language models with low-rank updates", "langauge modles with low-rank updates"
    dense, best, bm25 = _lists(lexical, searched, dense_head=40.0)  # the dense side reads the typos: a head anyway
    signal = QuerySignal.measure(lexical, searched, best, typed=typed)
    assert signal.corrected == 2 and signal.tokens == 5
    before = FusionPolicy("adaptive", common_share=0.0, one_term_alpha=1.0, typo_alpha=1.0)
    assert before.choose(dense, bm25, len(ABSTRACTS), signal).alpha > 0.5
    choice = FusionPolicy("adaptive").choose(dense, bm25, len(ABSTRACTS), signal)
    assert choice.alpha == pytest.approx(ADAPTIVE_TYPO_ALPHA)
    assert "lexical leads: 2 of 5 typed words misspelt, corrected for BM25 (dense reads them as typed)" in choice.reason
    one_slip = QuerySignal.measure(lexical, searched, best, typed="language modles with low-rank updates")
    assert one_slip.corrected == 1  # 1 of 5: below ADAPTIVE_TYPO_SHARE, the dense side still reads the question
    assert "misspelt" not in FusionPolicy("adaptive").choose(dense, bm25, len(ABSTRACTS), one_slip).reason
    assert QuerySignal.measure(lexical, searched, best, typed=searched).corrected == 0


def test_one_word_leads_lexically_by_its_shape_or_its_rarity_and_a_common_word_does_not() -> None:
    def one(df: int, *, shaped: bool = False, tokens: int = 1) -> bool:
        return QuerySignal((df,), 10_000, (True,), tokens=tokens, shaped=shaped).one_rare_word(0.005)

    assert one(50) and not one(51)  # rare: in at most 0.5% of the documents
    assert one(3_000, shaped=True)  # "ViT" in many abstracts is still a name to find exactly
    assert not one(3, tokens=2)  # two words are a phrase, not a name
    lexical = _lexical()
    nothing = np.zeros(0, dtype=np.int64)
    assert QuerySignal.measure(lexical, "LoRA", nothing).shaped
    assert QuerySignal.measure(lexical, "Metric3D", nothing).shaped
    assert not QuerySignal.measure(lexical, "spectral", nothing).shaped
    assert not QuerySignal.measure(lexical, "LoRA adapters", nothing).shaped


class _Segmented:
    """A BM25 index seen only through the protocol (as a version of several segments is): the score_ids path."""

    def __init__(self, lexical: LexicalIndex) -> None:
        self.lexical = lexical

    def __len__(self) -> int:
        return len(self.lexical)

    def terms(self, query: str) -> list[str]:
        return self.lexical.terms(query)

    def document_frequency(self, term: str) -> int:
        return self.lexical.document_frequency(term)

    def score_ids(self, query: dict[str, float], ids: np.ndarray) -> np.ndarray:
        return self.lexical.score_ids(query, ids)


def test_the_posting_scan_and_the_score_path_agree_on_what_the_best_match_holds() -> None:
    lexical = _lexical()
    for text in (QUESTION, ACRONYM, "low-rank updates of frozen language model weights", "spectral photo proof"):
        ids, _ = lexical.top(text, 5)
        for best in lexical.ids[ids][:3]:
            one = np.array([best], dtype=np.int64)
            fast, slow = QuerySignal.measure(lexical, text, one), QuerySignal.measure(_Segmented(lexical), text, one)
            assert fast.held == slow.held and any(fast.held), text


def test_a_query_whose_best_match_holds_little_of_it_is_ranked_by_dense_alone() -> None:
    lexical = _lexical()
    dense, best, bm25 = _lists(lexical, SCATTERED, dense_head=1.0)
    signal = QuerySignal.measure(lexical, SCATTERED, best)
    share = signal.best_share()
    assert share is not None and share == pytest.approx(0.2) and share < ADAPTIVE_ALONE_SHARE
    choice = FusionPolicy("adaptive").choose(dense, bm25, len(ABSTRACTS), signal)
    assert choice.alpha == 1.0
    assert f"dense alone, lexical ignored: even its best match holds only {share:.2f}" in choice.reason
    # Without the rule the dense side only leads, and BM25's matches still move the ranking.
    led = FusionPolicy("adaptive", alone_share=0.0).choose(dense, bm25, len(ABSTRACTS), signal)
    assert led.alpha == pytest.approx(ADAPTIVE_DENSE_ALPHA) and "dense alone" not in led.reason
    dense_ids = np.arange(len(ABSTRACTS), dtype=np.int64)[::-1]  # dense's order: the BM25 matches come last
    ranked = np.linspace(0.6, 0.3, len(ABSTRACTS))
    alone, _ = convex_arrays(dense_ids, ranked, best, bm25, alpha=choice.alpha, lexical_depth=choice.lexical_depth)
    mixed, _ = convex_arrays(dense_ids, ranked, best, bm25, alpha=led.alpha, lexical_depth=led.lexical_depth)
    assert alone.tolist() == dense_ids.tolist()
    assert mixed.tolist() != dense_ids.tolist()  # a fusion that only leads still moves BM25's matches up


def test_the_dense_alone_share_is_recorded_and_an_entry_before_it_keeps_fusing_as_it_did() -> None:
    lexical = _lexical()
    dense, best, bm25 = _lists(lexical, SCATTERED, dense_head=1.0)
    signal = QuerySignal.measure(lexical, SCATTERED, best)
    entry = fusion_entry("adaptive")
    assert entry["alone_share"] == ADAPTIVE_ALONE_SHARE
    assert FusionPolicy.from_entry(entry).choose(dense, bm25, len(ABSTRACTS), signal).alpha == 1.0
    before = {k: v for k, v in entry.items() if k != "alone_share"}  # an index built before the rule
    policy = FusionPolicy.from_entry(before)
    assert policy.method == "adaptive" and policy.alone_share == 0.0
    assert policy.choose(dense, bm25, len(ABSTRACTS), signal).alpha == pytest.approx(ADAPTIVE_DENSE_ALPHA)
    for bad in (-0.1, 1.5, "half"):
        unreadable = FusionPolicy.from_entry({**entry, "alone_share": bad})
        assert unreadable.method == "fixed" and "unreadable" in unreadable.note


def test_a_search_whose_bm25_match_is_weak_ranks_as_dense_does_and_says_why(tmp_path: Path, fake: FakeEmbedder) -> None:
    build_abstracts(tmp_path / "idx", fake)
    with Index.open(tmp_path / "idx", embedder=fake) as index:
        hybrid = index.search(SCATTERED, k=len(ABSTRACTS))
        dense = index.search(SCATTERED, k=len(ABSTRACTS), mode="dense")
    assert hybrid[0].fusion is not None and hybrid[0].fusion["alpha"] == 1.0
    assert "dense alone" in hybrid[0].fusion["reason"]
    # The dense order (papers of equal cosine may come in either order): BM25's matches moved nothing.
    assert [h.scores["dense"] for h in hybrid] == pytest.approx([h.score for h in dense], abs=1e-5)
    assert any(h.scores.get("lexical", 0.0) > 0 for h in hybrid)  # BM25 matched some, and was ignored
