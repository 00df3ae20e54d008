"""Snippets: sentence splitting, best-sentence choice, matched query words and terminal highlighting."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semsearch.query.highlight import (
    ANSI_MATCH,
    ANSI_RESET,
    best_sentences,
    highlight,
    matched_terms,
    matching_words,
    sentences,
    split_sentences,
)
from semsearch.store.analyzer import Analyzer, analyze


def test_split_handles_abbreviations_decimals_and_citations() -> None:
    text = (
        "Vitamin D is common, e.g. in elderly patients (Smith et al. 2010). "
        "The mean dose was 0.5 mg vs. 1.5 mg in controls, i.e. a third. "
        "See Fig. 2 for details. Results were null! Is it causal? "
        "No. 5 was excluded."
    )
    assert sentences(text) == [
        "Vitamin D is common, e.g. in elderly patients (Smith et al. 2010).",
        "The mean dose was 0.5 mg vs. 1.5 mg in controls, i.e. a third.",
        "See Fig. 2 for details.",
        "Results were null!",
        "Is it causal?",
        "No. 5 was excluded.",
    ]


def test_split_edge_cases() -> None:
    assert sentences("") == []
    assert sentences("   ") == []
    assert sentences("No final period") == ["No final period"]
    # A lowercase start does not open a sentence (gene names and units are often lowercase after a period).
    assert sentences("Levels rose by 2 mg. mRNA was stable.") == ["Levels rose by 2 mg. mRNA was stable."]
    # Digits and brackets do; closing quotes and brackets stay with their sentence.
    assert sentences('He said "stop." (Then left.) 12 patients died.') == [
        'He said "stop."',
        "(Then left.)",
        "12 patients died.",
    ]
    # "no." ends a sentence unless a number follows.
    assert sentences("The answer was no. The end.") == ["The answer was no.", "The end."]
    text = "  First one.  Second one.  "
    assert [text[s:e] for s, e in split_sentences(text)] == ["First one.", "Second one."]


ABSTRACT = (
    "Obesity is a major risk factor for type 2 diabetes. "
    "We studied 1,200 adults over 10 years. "
    "Vitamin D supplementation reduced the risk of diabetes in obese adults. "
    "Adverse events were rare."
)


def test_best_sentence_by_stem_overlap() -> None:
    terms = analyze("Does vitamin D supplementation reduce diabetes risk?")  # vitamin supplement reduc diabet risk
    assert best_sentences(ABSTRACT, terms) == [
        "Vitamin D supplementation reduced the risk of diabetes in obese adults."
    ]
    # n = 2: the runner-up (diabetes + risk) comes second.
    assert best_sentences(ABSTRACT, terms, n=2)[1] == "Obesity is a major risk factor for type 2 diabetes."


def test_best_sentence_length_normalization_and_ties() -> None:
    # Both sentences hold the one query stem; the shorter (3 tokens vs 9) scores 1/3^0.25 = 0.760 > 1/9^0.25 = 0.577.
    text = "Insulin resistance rose in many groups of young and old people. Insulin levels fell."
    assert best_sentences(text, ["insulin"]) == ["Insulin levels fell."]
    # Equal length and overlap: the earlier sentence wins.
    assert best_sentences("Insulin levels rose. Insulin levels fell.", ["insulin"]) == ["Insulin levels rose."]
    # No overlap at all: the opening sentence.
    assert best_sentences(ABSTRACT, ["quantum"]) == ["Obesity is a major risk factor for type 2 diabetes."]
    assert best_sentences("", ["x"]) == []
    assert best_sentences(ABSTRACT, ["diabet"], n=0) == []


def test_best_sentence_with_vectors() -> None:
    # Four sentences; the query vector points at the last one, which shares no stem with the query.
    q = np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)
    vecs = np.eye(4, dtype=np.float32)
    # Sentence 3 ("Vitamin D ... diabetes ...") covers 2 of 2 stems: 0 + 2/2 = 1.0; sentence 4: cos 1 + 0 = 1.0;
    # tie -> the earlier; with a slightly stronger cosine, the paraphrase wins.
    assert best_sentences(ABSTRACT, ["vitamin", "diabet"], q, vecs) == [sentences(ABSTRACT)[2]]
    vecs[3] *= 1.01
    assert best_sentences(ABSTRACT, ["vitamin", "diabet"], q, vecs) == ["Adverse events were rare."]


def test_matched_terms_surface_forms_in_query_order() -> None:
    query = "do vitamins reduce Diabetes risks in the elderly?"
    # vitamins -> "Vitamin", reduce -> "reduced", Diabetes -> "diabetes" (first occurrence), risks -> "risk";
    # "elderly" is not in the text; "do", "in", "the" are stop words or unmatched.
    assert matched_terms(ABSTRACT, query) == ["Vitamin", "reduced", "diabetes", "risk"]
    assert matched_terms(ABSTRACT, "the of and") == []


def spans_matched_terms(text: str, query: str) -> list[str]:
    """matched_terms as first written, on matching_words' spans: the reference for the faster version."""
    analyzer = Analyzer()
    stems = analyzer(query)
    surface: dict[str, str] = {}
    for start, end, stem in matching_words(text, set(stems), analyzer):
        surface.setdefault(stem, text[start:end])
    return list(dict.fromkeys(surface[stem] for stem in stems if stem in surface))


# Words that stem together, stop words, capitals, and letters whose lowercase is longer or another letter.
_PIECES = [
    "Vitamins",
    "vitamin",
    "VITAMIN",
    "the",
    "The",
    "of",
    "\u0130nsulin",
    "insulin",
    "\u212aelvin",
    "kelvin",
    "ß",
    "ﬁsh",
]
texts = st.lists(st.sampled_from(_PIECES) | st.text(max_size=8), max_size=20).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(text=texts, query=texts)
def test_matched_terms_equals_the_span_based_version(text: str, query: str) -> None:
    assert matched_terms(text, query) == spans_matched_terms(text, query)


def test_highlight_wraps_whole_words_by_stem() -> None:
    text = "Diabetic and diabetes patients; prediabetes excluded. DIABETES!"
    out = highlight(text, ["diabetes"])
    b, e = ANSI_MATCH, ANSI_RESET
    # "Diabetic" stems to "diabet" like "diabetes"; "prediabetes" is another word and stays plain.
    assert out == f"{b}Diabetic{e} and {b}diabetes{e} patients; prediabetes excluded. {b}DIABETES{e}!"
    # Stems work as terms too, and "none" leaves the text alone.
    assert highlight(text, ["diabet"]) == out
    assert highlight(text, ["diabetes"], style="none") == text
    assert highlight(text, []) == text
    with pytest.raises(ValueError, match="style"):
        highlight(text, ["x"], style="html")


def test_vectors_that_are_not_one_per_sentence_leave_the_words_to_decide() -> None:
    q = np.array([0.0, 0.0, 0.0, 1.0], dtype=np.float32)
    words = best_sentences(ABSTRACT, ["vitamin", "diabet"])
    for vecs in (np.eye(4, dtype=np.float32)[:3], np.eye(2, dtype=np.float32), np.ones(8, dtype=np.float32)):
        assert best_sentences(ABSTRACT, ["vitamin", "diabet"], q, vecs) == words  # 3 rows, 2 rows, flat 8 values
