"""A saved query read as ``semsearch query`` reads it: its words to rank by, and the papers its fields admit.

``privacy author:"Zhouchen Lin" year:>=2024 -survey "score matching"`` ranks by "privacy score matching" (the
dense side reads the words as typed, BM25 reads them with typos corrected, as search does) and admits only
papers from 2024 on, by that person (else whose authors contain the name), with the phrase and without the
word "survey" in their title, abstract or authors. A paper the fields do not admit gets no fit from the watch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from semsearch.core.errors import QueryError
from semsearch.query.syntax import ParsedQuery, admits, parse_query, searchable

if TYPE_CHECKING:
    from semsearch.query.search import Index


def check_watch_query(query: str) -> ParsedQuery:
    """The saved query parsed; QueryError (the parser's one line) when it cannot be read or has nothing to follow."""
    parsed = parse_query(query)
    if not parsed.text and not parsed.authors and not any(parsed.fields.get(f) for f in ("title", "venue")):
        raise QueryError(
            f"the saved query {query.strip()!r} has no words to rank by (only year: or -words); add some, "
            'e.g. diffusion year:>=2024 or author:"Zhouchen Lin"'
        )
    return parsed


@dataclass(frozen=True)
class WatchReading:
    """What a saved query ranks by and which papers it admits."""

    parsed: ParsedQuery
    dense_text: str  # the words as typed ("" when only author: is given)
    lexical_text: str  # the words BM25 searches: typos corrected
    where: tuple[str, ...]  # --where clauses: its year:/title:/venue: and the author: names no person matches
    people: np.ndarray | None  # document numbers of the people author: names (None: no person named)

    @property
    def filtered(self) -> bool:
        """Whether any field narrows the papers the watch may fit."""
        return bool(self.where) or self.people is not None or bool(self.parsed.phrases or self.parsed.exclude)


def read_watch(index: Index, query: str) -> WatchReading:
    """A saved query as search reads it; one saved before the query language is read as plain words."""
    try:
        parsed = parse_query(query)
        legacy = False
    except QueryError:  # saved before `watch add` checked the syntax: keep following it as plain words
        parsed = ParsedQuery(raw=query, text=" ".join(query.split()))
        legacy = True
    read = index.read_query(parsed)  # author: people, filters and the words to rank by, as search reads them
    rank_text = read.rank_text
    # Typos are corrected for BM25 only (a person's name is none), as search does; the dense side reads the words.
    lexical = rank_text
    if rank_text and not legacy:
        lexical = index.spell_words(rank_text, phrases=bool(parsed.phrases)).text
    return WatchReading(parsed, rank_text, lexical, read.where, read.people)


def watch_words(query: str) -> str:
    """The words a saved query ranks by (all of it, for one saved before the query language)."""
    try:
        return parse_query(query).text
    except QueryError:
        return query


def admitted(
    index: Index, reading: WatchReading, nums: Sequence[int] | np.ndarray, only: np.ndarray | None = None
) -> np.ndarray:
    """Per document number in ``nums``: whether the watch's fields, people, phrases and -words admit it.

    ``only`` (positions in ``nums``) limits the phrase and -word check, which reads each paper's text, to the
    papers being ranked (what arrived); the others are judged by their fields alone.
    """
    nums = np.asarray(nums, dtype=np.int64)
    ok = np.ones(len(nums), dtype=bool)
    if reading.where:
        allowed = index.allowed_rows(list(reading.where))
        if allowed is not None:
            ok &= np.isin(nums, allowed)
    if reading.people is not None:
        ok &= np.isin(nums, reading.people)
    parsed = reading.parsed
    if parsed.phrases or parsed.exclude:
        at = np.flatnonzero(ok) if only is None else np.intersect1d(np.flatnonzero(ok), only)
        check = [int(n) for n in nums[at]]
        docs = index.store.get_many(check)
        ok[at] = [admits(parsed, searchable(docs[n])) for n in check]
    return ok
