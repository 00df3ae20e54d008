"""Finding a search's candidates, and what a search carries between its steps.

A query read against an index (``QueryReading``), hybrid's two candidate lists (``Candidates``), the ranking they
give (``Ranking``) and how it becomes hits (``Shape``); ``Retriever`` finds the dense and BM25 lists of an index
version and fuses the two.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from semsearch.core.limits import check_finite
from semsearch.query.fusion import DEFAULT_DEPTH, DEFAULT_NORM, convex_arrays
from semsearch.query.syntax import ParsedQuery
from semsearch.query.weighting import FusionChoice, FusionPolicy, QuerySignal
from semsearch.store.ann import Searcher
from semsearch.store.lexical import BM25Index
from semsearch.store.windows_part import RESCORE_DEPTH, WindowIndex

if TYPE_CHECKING:
    from semsearch.store.passages_part import PassageIndex

# --diverse: MMR's λ still leans on relevance, so a diverse list loses little of it; a candidate whose cosine is
# below DIVERSITY_FLOOR times the best candidate's is never promoted for being different alone (see
# diversity.diversify). docs/explanation/how-it-works.md gives the figures both were chosen by.
DIVERSITY_LAMBDA = 0.6
DIVERSITY_FLOOR = 0.5


@dataclass
class Ranking:
    """One request's candidates, best first, with the scores seen on the way and what was asked."""

    ranked: list[tuple[int, float]]  # (FAISS id, score in the mode's units)
    dense: dict[int, float]  # cosines of the dense candidates
    lexical: dict[int, float]  # BM25 scores of the lexical candidates
    vector: np.ndarray | None  # the query (or paper) vector; None for a lexical search without MMR
    text: str  # the query text ("" for related)
    mode: str
    fusion: FusionChoice | None = None  # hybrid only: the weight its two sides got, and why


@dataclass(frozen=True)
class QueryReading:
    """A parsed query read against an index (``Index.read_query``)."""

    where: tuple[str, ...]  # --where clauses: its year:/title:/venue: and the author: values that name no one
    authored: dict[int, str]  # papers of the people author: names, each with the name as the paper gives it
    people: np.ndarray | None  # those papers' numbers, in every author: value's (None: no author: names someone)
    rank_text: str  # the words to rank by: the text, else the title:/venue: values and the unresolved names

    @classmethod
    def of(cls, parsed: ParsedQuery, people_of: Callable[[str], dict[str, list[int]]]) -> QueryReading:
        """``parsed`` read against the people an index knows (``people_of``: a name -> their papers by name)."""
        where = list(parsed.where)
        authored: dict[int, str] = {}
        unresolved: list[str] = []
        people: np.ndarray | None = None
        for value in parsed.authors:
            found = people_of(value)
            if not found:
                where.append(f"authors~{value}")
                unresolved.append(value)
                continue
            nums = {n: name for name, ns in found.items() for n in ns}
            authored.update(nums)
            mine = np.array(sorted(nums), dtype=np.int64)
            people = mine if people is None else np.intersect1d(people, mine)
        fielded = [v for f in ("title", "venue") for v in parsed.fields.get(f, [])]
        return cls(tuple(where), authored, people, parsed.text or " ".join([*fielded, *unresolved]))


@dataclass(frozen=True)
class Candidates:
    """Hybrid's two candidate lists for one query, each (FAISS ids, scores) best first, of ``depth`` asked for."""

    dense: tuple[np.ndarray, np.ndarray]
    lexical: tuple[np.ndarray, np.ndarray]
    depth: int
    signal: QuerySignal | None = None  # what the query's words are worth in the index (adaptive fusion reads it)

    def fuse(self, policy: FusionPolicy, want: int) -> tuple[list[tuple[int, float]], FusionChoice]:
        """The best ``want`` as (FAISS id, fused score) under ``policy``, and the weight it chose."""
        choice = policy.choose(self.dense[1], self.lexical[1], self.depth, self.signal)
        # The z-scores take every candidate of both lists; the hits need only the best ``want``.
        ids, fused = convex_arrays(
            *self.dense,
            *self.lexical,
            alpha=choice.alpha,
            norm=DEFAULT_NORM,
            limit=want,
            lexical_depth=choice.lexical_depth,
        )
        return list(zip(ids.tolist(), fused.tolist(), strict=True)), choice


@dataclass(frozen=True)
class Shape:
    """How a ranking becomes hits: how many, a score floor, MMR, and whether to explain each hit."""

    k: int
    min_score: float | None = None
    diverse: bool = False
    diversity: float = DIVERSITY_LAMBDA
    explain: bool = True

    def __post_init__(self) -> None:
        check_finite(self.min_score, "min_score")  # NaN dropped every hit: "no results", as if none matched

    @property
    def want(self) -> int:
        """Candidates to rank: k, or MMR's pool when --diverse."""
        return pool_size(self.k) if self.diverse else self.k


def pool_size(k: int) -> int:
    """Candidates that MMR chooses k hits from when --diverse is on."""
    return max(3 * k, 30)


# ------------------------------------------------------------------------------------------ retrieval


@dataclass(frozen=True)
class Retriever:
    """The candidate lists of one index version, by document number (FAISS id) and score, best first."""

    ann: Searcher
    windows: WindowIndex | None  # window (or sentence) vectors that re-score dense candidates, if the index keeps them
    lexical: Callable[[], BM25Index]  # the BM25 index, loaded on first use (a dense search never reads it)
    fusion: FusionPolicy  # what hybrid fuses with when a request names no other weighting
    passages: PassageIndex | None = None  # a full-text index's passages: its papers' dense side sees them too

    @property
    def count(self) -> int:
        """Documents in the version."""
        return int(self.ann.ntotal)

    def rank(
        self,
        text: str,
        vector: np.ndarray | None,
        mode: str,
        allowed: np.ndarray | None,
        want: int,
        exclude: frozenset[int] = frozenset(),
        *,
        policy: FusionPolicy | None = None,
        windows: bool = False,
        lexical_text: str | None = None,
    ) -> Ranking:
        """Candidates best first as (FAISS id, score), with the dense and lexical scores seen on the way.

        With ``windows`` and a windowed index the dense candidates are re-scored by their best window.
        ``lexical_text``: what BM25 searches instead of ``text`` (the query with its typos corrected).
        """
        words = text if lexical_text is None else lexical_text
        pool = self.count if allowed is None else len(allowed)
        # Hybrid fuses deep lists (steadier z-scores: see query.fusion.DEFAULT_DEPTH); single modes need only k.
        depth = min(pool, max(DEFAULT_DEPTH, want) if mode == "hybrid" else want + len(exclude))
        dense: dict[int, float] = {}
        lexical: dict[int, float] = {}
        if depth == 0:
            return Ranking([], dense, lexical, vector, text, mode)
        empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        dense_top = lexical_top = empty
        if mode in ("dense", "hybrid") and vector is not None:
            dense_top = self.dense_list(vector, depth, allowed, exclude, pool, windows)
            dense = dict(zip(dense_top[0].tolist(), dense_top[1].tolist(), strict=True))
        if mode in ("lexical", "hybrid"):
            lexical_top = self.lexical_top(words, depth, allowed, exclude)
            lexical = dict(zip(lexical_top[0].tolist(), lexical_top[1].tolist(), strict=True))
        if mode == "dense":
            ranked = sorted(dense.items(), key=lambda item: (-item[1], item[0]))
        elif mode == "lexical":
            ranked = sorted(lexical.items(), key=lambda item: (-item[1], item[0]))
        else:
            signal = QuerySignal.measure(self.lexical(), words, lexical_top[0], typed=text)
            ranked, choice = Candidates(dense_top, lexical_top, depth, signal).fuse(policy or self.fusion, want)
            return Ranking(ranked, dense, lexical, vector, words, mode, choice)
        return Ranking(ranked, dense, lexical, vector, words, mode)

    def dense_list(
        self,
        vector: np.ndarray,
        depth: int,
        allowed: np.ndarray | None,
        exclude: frozenset[int],
        pool: int,
        windows: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The dense candidates a search ranks: with ``windows`` and a windowed index, re-scored by their windows."""
        rescored = self.dense_top_windows(vector, depth, allowed, exclude, pool) if windows else None
        nums, scores = rescored or self.dense_top(vector, depth, allowed, exclude)
        if self.passages is None or not windows:
            return nums, scores
        from semsearch.query.passages import rescore  # a full-text index's only

        return rescore(self.passages, nums, scores, vector[0], depth, allowed, exclude)

    def dense_top(
        self, vector: np.ndarray, depth: int, allowed: np.ndarray | None, exclude: frozenset[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(FAISS ids, cosines) of the ``depth`` nearest documents, best first, leaving out ``exclude``."""
        nums, scores = self.ann.top(vector, min(depth + len(exclude), self.count), allowed)
        if exclude:
            keep = ~np.isin(nums, np.fromiter(exclude, dtype=np.int64, count=len(exclude)))
            nums, scores = nums[keep], scores[keep]
        return nums[:depth], scores[:depth]

    def dense_top_windows(
        self, vector: np.ndarray, depth: int, allowed: np.ndarray | None, exclude: frozenset[int], pool: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The dense top, at least RESCORE_DEPTH deep, its first RESCORE_DEPTH re-scored by their windows.

        None when the index keeps no windows.
        """
        if self.windows is None:
            return None
        nums, scores = self.dense_top(vector, min(pool, max(depth, RESCORE_DEPTH)), allowed, exclude)
        nums, scores = self.windows.rescore(nums, scores, vector[0])
        return nums[:depth], scores[:depth]

    def lexical_top(
        self, text: str, depth: int, allowed: np.ndarray | None, exclude: frozenset[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(FAISS ids, BM25 scores) of the ``depth`` best-scoring documents, best first, leaving out ``exclude``."""
        lex = self.lexical()
        keep = None
        if allowed is not None or exclude:
            keep = np.zeros(len(lex), dtype=bool)
            if allowed is None:
                keep[:] = True
            else:
                rows = lex.rows_of(allowed)
                keep[rows[rows >= 0]] = True
            if exclude:
                rows = lex.rows_of(sorted(exclude))
                keep[rows[rows >= 0]] = False
        rows, scores = lex.top(text, depth, keep)
        return lex.ids[rows], scores
