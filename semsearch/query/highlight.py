"""Query-aware snippets: the abstract's best sentences, the query words it contains, and terminal highlighting.

Everything here matches on stems from the lexical index's analyzer, so "vitamins" in a query marks "Vitamin"
in an abstract, and what is highlighted is what BM25 matched.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

# The splitter lives in core (the encoder's windows use it too); re-exported here for the snippets' callers.
from semsearch.core.sentences import sentences as sentences
from semsearch.core.sentences import split_sentences as split_sentences
from semsearch.store.analyzer import STOPWORDS, TOKEN_PATTERN, Analyzer

# Snowball English only rewrites suffixes, so a word's stem starts with the word's first letter: only words
# sharing a first letter with a query stem need stemming, and stemming is most of the cost here.
ANSI_MATCH = "\x1b[1;33m"  # bold yellow
ANSI_RESET = "\x1b[0m"
STYLES = ("ansi", "none")


def best_sentences(
    text: str,
    query_terms: Sequence[str],
    query_vec: np.ndarray | None = None,
    sentence_vecs: np.ndarray | None = None,
    n: int = 1,
    *,
    analyzer: Analyzer | None = None,
) -> list[str]:
    """The n sentences that best match the query, best first.

    ``query_terms`` are stems (``LexicalIndex.terms`` / ``lexical.analyze`` of the query). A sentence scores
    (distinct query stems it contains) / (its token count) ** 0.25: coverage first, shorter sentences winning
    among equal coverage. With ``query_vec`` and ``sentence_vecs`` (one unit row per sentence of
    ``sentences(text)``), the score is cosine(query, sentence) + the share of query stems covered, so a
    paraphrase with no shared word can still win, and with no query terms the cosine alone decides; vectors that
    are not one per sentence are not used (the words decide). Ties go to the earlier sentence; with no match at
    all the opening sentences are returned.
    """
    spans = split_sentences(text)
    if not spans or n < 1:
        return []
    wanted = set(query_terms)
    vecs = None if sentence_vecs is None else np.asarray(sentence_vecs, dtype=np.float32)
    cos = None
    if query_vec is not None and vecs is not None and vecs.ndim == 2 and len(vecs) == len(spans):
        cos = (vecs @ np.asarray(query_vec, dtype=np.float32).reshape(-1)).tolist()
    if cos is not None and not wanted:
        scores = cos  # the vectors alone decide (related: no query words): no word is read
    else:
        analyzer = analyzer or Analyzer()
        words = [
            [w for w in TOKEN_PATTERN.findall(text[s:e].lower()) if w not in STOPWORDS] for s, e in spans
        ]  # per sentence
        initials = {t[:1] for t in wanted}
        stems = analyzer.stem_map([w for ws in words for w in ws if w[0] in initials])
        matched = [{stems[w] for w in ws if w in stems} & wanted for ws in words]
        if cos is not None:
            share = len(wanted) or 1
            scores = [c + len(m) / share for c, m in zip(cos, matched, strict=True)]
        else:
            lengths = [len(ws) for ws in words]
            scores = [len(m) / math.pow(max(length, 1), 0.25) for m, length in zip(matched, lengths, strict=True)]
    order = sorted(range(len(spans)), key=lambda j: (-scores[j], j))
    return [text[spans[j][0] : spans[j][1]] for j in order[:n]]


def matching_words(text: str, wanted: set[str], analyzer: Analyzer) -> list[tuple[int, int, str]]:
    """(start, end, stem) of every whole word of text whose stem is wanted; stop words never match.

    The one stem matcher behind highlighting, matched terms and the server's highlight spans.
    """
    initials = {t[0] for t in wanted if t}
    found = [(m.start(), m.end(), m.group().lower()) for m in TOKEN_PATTERN.finditer(text)]
    found = [f for f in found if f[2][0] in initials and f[2] not in STOPWORDS]
    stem_of = analyzer.stem_map([w for _, _, w in found])
    return [(start, end, stem_of[word]) for start, end, word in found if stem_of[word] in wanted]


def matched_terms(text: str, query: str, *, analyzer: Analyzer | None = None) -> list[str]:
    """The query's words whose stems occur in text, each in its first surface form in the text, in query order."""
    analyzer = analyzer or Analyzer()
    stems = analyzer(query)
    wanted = set(stems)
    initials = {t[0] for t in wanted if t}
    # What matching_words finds, without the positions: findall is several times faster than finditer's matches.
    words = TOKEN_PATTERN.findall(text)
    found = [(w, low) for w in words if (low := w.lower())[0] in initials and low not in STOPWORDS]
    stem_of = analyzer.stem_map([low for _, low in found])
    surface: dict[str, str] = {}
    for word, low in found:
        stem = stem_of[low]
        if stem in wanted:
            surface.setdefault(stem, word)
    return list(dict.fromkeys(surface[stem] for stem in stems if stem in surface))


def highlight_spans(sentences: Sequence[str], query: str, *, analyzer: Analyzer | None = None) -> list[list[list[int]]]:
    """Per sentence, the [start, end) of each word whose stem is a query stem (what a page wraps in <mark>)."""
    analyzer = analyzer or Analyzer()
    wanted = set(analyzer(query))
    return [[[start, end] for start, end, _ in matching_words(text, wanted, analyzer)] for text in sentences]


def highlight(text: str, terms: Sequence[str], style: str = "ansi", *, analyzer: Analyzer | None = None) -> str:
    """Text with every whole word whose stem matches a term (a word or a stem, any case) wrapped for the terminal.

    style "ansi" wraps in bold yellow escape codes; "none" returns the text unchanged (for pipes and files).
    """
    if style not in STYLES:
        raise ValueError(f"unknown highlight style {style!r}; choose from {', '.join(STYLES)}")
    if style == "none" or not terms:
        return text
    analyzer = analyzer or Analyzer()
    lowered = [t.lower() for t in terms]
    # Accept both words and stems: re-stemming a stem can change it ("advertis" -> "adverti"), so keep the term too.
    stems = set(lowered) | set(analyzer.stem_words(lowered))
    parts: list[str] = []
    last = 0
    for start, end, _ in matching_words(text, stems, analyzer):
        parts += [text[last:start], ANSI_MATCH, text[start:end], ANSI_RESET]
        last = end
    parts.append(text[last:])
    return "".join(parts)
