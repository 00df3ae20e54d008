"""How text becomes BM25 terms: lowercased words of two or more characters, Lucene's stop words out, stemmed."""

from __future__ import annotations

import re
from collections.abc import Sequence

from semsearch.core.latex import latex_to_text

# Lucene's English stop set (the one bm25s and Anserini use): short on purpose, so that queries such as
# "not associated with" keep their content words and BM25's idf handles the rest.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
# bm25s' default splitter is \b\w\w+\b; maximal runs of 2+ word characters make the \b redundant, and slower.
TOKEN_PATTERN = re.compile(r"\w\w+")
ANALYZER_NAME = "lower+word2+lucene-en-stop+snowball-en"


class Analyzer:
    """Lowercases, splits into words, drops English stop words and stems with Snowball English."""

    def __init__(self) -> None:
        import Stemmer

        self._stemmer = Stemmer.Stemmer("english")

    def __call__(self, text: str) -> list[str]:
        """The stemmed, stop-word-filtered tokens of a text, in order."""
        words = [w for w in TOKEN_PATTERN.findall(text.lower()) if w not in STOPWORDS]
        return list(self._stemmer.stemWords(words))

    def spans(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, stem) of each non-stop-word token of a text, in order."""
        found = [(m.start(), m.end(), m.group().lower()) for m in TOKEN_PATTERN.finditer(text)]
        found = [f for f in found if f[2] not in STOPWORDS]
        stems = self._stemmer.stemWords([w for _, _, w in found])
        return [(s, e, stem) for (s, e, _), stem in zip(found, stems, strict=True)]

    def stem_words(self, words: Sequence[str]) -> list[str]:
        """The stems of (lowercased) words."""
        return list(self._stemmer.stemWords(words))

    def stem_map(self, words: Sequence[str]) -> dict[str, str]:
        """Each distinct (lowercased) word -> its stem; stems each distinct word once."""
        unique = list(dict.fromkeys(words))
        return dict(zip(unique, self._stemmer.stemWords(unique), strict=True))

    def stem(self, word: str) -> str:
        """The stem of one (lowercased) word."""
        return str(self._stemmer.stemWord(word.lower()))


def analyze(text: str, analyzer: Analyzer | None = None) -> list[str]:
    """The stemmed, stop-word-filtered tokens of a text, exactly as the lexical index sees them."""
    return (analyzer or Analyzer())(text)


def lexical_text(title: str | None, abstract: str) -> str:
    """The text a document is indexed under: title and abstract with LaTeX decoded, as the dense side embeds them."""
    # The title is not repeated to weigh it more (field boosting): that gained nothing beyond the noise (see
    # docs/explanation/quality.md), so BM25 reads the same text the dense side embeds.
    abstract = latex_to_text(abstract)
    return f"{latex_to_text(title)} {abstract}" if title else abstract


def term_ids(texts: Sequence[str], analyzer: Analyzer, vocab: dict[str, int]) -> list[list[int]]:
    """Each text as term ids (the analyzer's tokens), adding new stems to ``vocab``."""
    # Same result as analyzer(text) per text, but each distinct word is stemmed and looked up once: a corpus
    # holds far fewer distinct words than tokens, and analysis is most of a build's BM25 time.
    word_term: dict[str, int] = {}  # word -> term id, -1 for stop words
    corpus: list[list[int]] = []
    for text in texts:
        words = TOKEN_PATTERN.findall(text.lower())
        new = [w for w in dict.fromkeys(words) if w not in word_term]
        if new:
            for word, stem in zip(new, analyzer.stem_words(new), strict=True):
                word_term[word] = -1 if word in STOPWORDS else vocab.setdefault(stem, len(vocab))
        corpus.append([t for t in map(word_term.__getitem__, words) if t >= 0])
    return corpus
