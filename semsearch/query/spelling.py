"""Typo correction for the lexical side: a query word the index barely knows becomes its nearest frequent word.

A word is left alone when its stem is in at least ``KNOWN`` documents: a word the corpus uses is never
corrected. Otherwise it is compared, by optimal-string-alignment distance (an adjacent swap is one edit), with
every word at least ``KNOWN`` documents use (``store.words``), and the nearest wins, the more common on a tie:
SymSpell's rule. rapidfuzz computes the distances in C, fast enough to compare a word with every frequent word
of a large index, and needs nothing built first (SymSpell's delete index would be built in every process, which
a one-shot ``semsearch query`` would pay each time). A word that a document or two do use (often a
misspelling in an abstract) is searched as typed and corrected: nothing it matched is lost.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from semsearch.store.analyzer import STOPWORDS, TOKEN_PATTERN

KNOWN = 3  # documents: a word (or stem) this common is never corrected, and only such words are offered
SHORT = 5  # letters: words this short get one edit at most ("grpah" -> "graph"), longer ones two
MIN_LETTERS = 4  # shorter words ("gan", "rl") are too often acronyms to guess at


@dataclass(frozen=True)
class Correction:
    """One query word the lexical side searched differently, and why."""

    word: str  # as typed, lowercased
    to: str  # the frequent word searched for it
    distance: int  # edits between them
    kept: bool = False  # the typed word is in a document or two: searched as well

    def to_dict(self) -> dict[str, Any]:
        return {"word": self.word, "to": self.to, "distance": self.distance, "kept": self.kept}


@dataclass(frozen=True)
class Spelling:
    """A query as the lexical side searches it: its text with corrections applied, and the corrections."""

    text: str
    corrections: tuple[Correction, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.corrections)

    def to_dict(self) -> dict[str, Any]:
        return {"searched_for": self.text, "corrections": [c.to_dict() for c in self.corrections]}

    def describe(self) -> str:
        """One line for a terminal: what was searched instead of what was typed."""
        return f"searched for: {self.text}" + (" (--exact to search as typed)" if self.changed else "")


@dataclass(frozen=True)
class Vocabulary:
    """The words corrections are drawn from (those at least ``KNOWN`` documents use) by length, and every count."""

    counts: Counter[str]
    by_length: dict[int, list[str]]

    @classmethod
    def of(cls, counts: Counter[str]) -> Vocabulary:
        """Group the frequent words once: an open Index keeps this (``Index.memo``)."""
        by_length: dict[int, list[str]] = {}
        for word, count in counts.items():
            if count >= KNOWN and len(word) >= MIN_LETTERS - 1:
                by_length.setdefault(len(word), []).append(word)
        return cls(counts, by_length)

    def within(self, word: str, edits: int) -> list[str]:
        """The frequent words whose length could be ``edits`` edits from ``word``'s (no other could be)."""
        return [w for n in range(len(word) - edits, len(word) + edits + 1) for w in self.by_length.get(n, ())]


def correct(
    text: str,
    stem_frequency: Callable[[str], int],
    vocabulary: Callable[[], Vocabulary | None],
) -> Spelling:
    """The query with each word the index barely knows replaced by its nearest frequent word.

    Args:
        text: the query as typed.
        stem_frequency: how many documents hold a word's stem (the lexical index's document frequency).
        vocabulary: the index's words (``store.words``), loaded only when a word needs correcting; None for
            an index built before word counts were kept (nothing is corrected then).
    """
    tokens = TOKEN_PATTERN.finditer(text)
    suspects = [m for m in tokens if _worth_checking(m.group()) and stem_frequency(m.group()) < KNOWN]
    if not suspects:
        return Spelling(text)
    words = vocabulary()
    if words is None:
        return Spelling(text)
    pieces: list[str] = []
    done = 0
    found: list[Correction] = []
    for match in suspects:
        word = match.group().lower()
        best = nearest(word, words)
        if best is None:
            continue
        to, distance = best
        kept = stem_frequency(word) > 0
        found.append(Correction(word, to, distance, kept))
        pieces += [text[done : match.start()], f"{match.group()} {to}" if kept else to]
        done = match.end()
    if not found:
        return Spelling(text)
    return Spelling("".join(pieces) + text[done:], tuple(found))


def nearest(word: str, vocabulary: Vocabulary) -> tuple[str, int] | None:
    """The frequent word nearest ``word`` (at most 1 edit for short words, else 2), the most common on a tie."""
    from rapidfuzz import process
    from rapidfuzz.distance import OSA

    cutoff = 1 if len(word) <= SHORT else 2
    candidates = vocabulary.within(word, cutoff)
    found = process.extract(word, candidates, scorer=OSA.distance, score_cutoff=cutoff, limit=None)
    if not found:
        return None
    counts = vocabulary.counts
    to, distance, _ = min(found, key=lambda f: (f[1], -counts[f[0]], f[0]))
    return str(to), int(distance)


def _worth_checking(token: str) -> bool:
    """Letters only, long enough, not a stop word, and not written as an acronym or a name of mixed case.

    "DPO", "LoRA" and "RoMa" are method names the index may not hold: capitals after the first letter say so.
    """
    return len(token) >= MIN_LETTERS and token.isalpha() and token[1:].islower() and token.lower() not in STOPWORDS
