"""Lexical evidence by meaning: how much of a query's words a paper holds, and the words a paper is about.

BM25 sums its terms, so a paper holding one or two of a query's words ("routing", "load") scores above the
average paper however little else it shares, and over a whole index, where most papers score 0, that part match
stands several standard deviations out. Two measures tell such a match from evidence of the topic:

- ``coverage``: per paper, the share (0..1) of the query's idf mass its words hold; ``covered_bm25`` keeps a
  paper's BM25 in full from ``COVERAGE_FULL`` of that mass up and shrinks it as the cube below (coordination):
  a paper must hold most of what the query says for its words to count;
- ``distinctive_terms``: a paper's own words weighed by tf·idf, which ``related`` holds its neighbours to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np

from semsearch.store.analyzer import Analyzer
from semsearch.store.lexical import BM25Index, lucene_idf

# A paper holding most of the query's idf mass (COVERAGE_FULL) keeps its BM25 in full; below, its BM25 shrinks
# as the cube of its coverage, so one shared word of a long saved query no longer reads as the topic. Chosen on
# judged saved queries among other shapes of the same curve (docs/guides/digest.md).
COVERAGE_FULL = 0.6
COVERAGE_POWER = 3.0
DISTINCTIVE_TERMS = 12  # a paper's subject words for `related`: its title's and abstract's top tf·idf terms


def term_idf(lexical: BM25Index, terms: list[str]) -> dict[str, float]:
    """The idf of each distinct term the index holds (a term no document holds is left out: nothing matches it)."""
    n = len(lexical)
    out: dict[str, float] = {}
    for term in dict.fromkeys(terms):
        df = lexical.document_frequency(term)
        if df > 0:
            out[term] = float(lucene_idf(np.asarray([df]), n)[0])
    return out


def coverage(lexical: BM25Index, query: str | Mapping[str, float]) -> np.ndarray:
    """Per row of the lexical index, the share (0..1) of the query's idf mass (each term times its weight) it holds."""
    weights = Counter(lexical.terms(query)) if isinstance(query, str) else Counter(dict(query))
    idf = term_idf(lexical, list(weights))
    out = np.zeros(len(lexical), dtype=np.float64)
    total = sum(idf[t] * weights[t] for t in idf)
    if total <= 0:
        return out
    for term, value in idf.items():
        _, matched = lexical.scores({term: 1.0})
        out[matched] += value * weights[term]
    return np.asarray(np.minimum(out / total, 1.0))


def coverage_weight(share: np.ndarray) -> np.ndarray:
    """What part of its BM25 a paper keeps for holding ``share`` of the query's idf mass."""
    return np.asarray(np.minimum(1.0, np.asarray(share, dtype=np.float64) / COVERAGE_FULL) ** COVERAGE_POWER)


def covered_bm25(lexical: BM25Index, query: str) -> np.ndarray:
    """Per row, the query's BM25 on the documents that hold a query word (0 elsewhere), weighed by coverage."""
    bm25, matched = lexical.scores(query)
    scores = np.where(matched, bm25, 0.0).astype(np.float64)
    return np.asarray(scores * coverage_weight(coverage(lexical, query)))


def distinctive_terms(lexical: BM25Index, text: str, n: int = DISTINCTIVE_TERMS) -> dict[str, float]:
    """A text's ``n`` words that say most what it is about (tf·idf over the index), each with its count in the text
    (as query weights: BM25 then weighs each by its idf once)."""
    counts = Counter(Analyzer()(text))
    idf = term_idf(lexical, list(counts))
    # A word no other paper uses (a method's own name) says nothing about neighbours: df 1 is the paper itself.
    scored = [(counts[t] * v, t) for t, v in idf.items() if lexical.document_frequency(t) > 1]
    scored.sort(key=lambda item: (-item[0], item[1]))
    return {t: float(counts[t]) for _, t in scored[:n]}
