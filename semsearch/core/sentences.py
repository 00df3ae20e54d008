"""Sentence boundaries in an abstract: shared by the snippets (query/highlight.py) and the encoder's windows."""

from __future__ import annotations

import re

# A candidate boundary: sentence punctuation, optional closing quotes/brackets, then whitespace.
_BOUNDARY = re.compile(r"[.!?]+[\"'”’)\]]*\s+")
_WINDOW = 16
# Words whose trailing period is not a sentence end (lowercase, without the final period).
_ABBREVIATIONS = frozenset(
    [
        "e.g",
        "i.e",
        "eg",
        "ie",
        "al",
        "vs",
        "cf",
        "approx",
        "ca",
        "viz",
        "resp",
        "incl",
        "dr",
        "mr",
        "mrs",
        "ms",
        "prof",
        "jr",
        "sr",
        "st",
        "dept",
        "univ",
        "inc",
        "ltd",
        "corp",
    ]
)
# Abbreviations that are only such before a number: "Fig. 2", "No. 5"; elsewhere "no." may end a sentence.
_BEFORE_NUMBER = frozenset(["fig", "figs", "no", "nos", "vol", "eq", "eqs", "ref", "refs", "p", "pp", "ch", "sec"])


def split_sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence in text: a break after . ! or ? followed by space and a capital, digit or
    bracket, except after abbreviations (e.g., i.e., et al., vs., Fig. 2). Decimals (0.5) never break."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        nxt = text[m.end() : m.end() + 1]
        if not nxt or not (nxt.isupper() or nxt.isdigit() or nxt in "([\"'“‘"):
            continue
        if _is_abbreviation(text, start, m.start(), nxt):
            continue
        end = m.start() + len(m.group().rstrip())
        if text[start:end].strip():
            spans.append((start, end))
        start = m.end()
    if text[start:].strip():
        spans.append((start, len(text.rstrip())))
    # Trim leading whitespace so each span starts on its first character.
    return [(s + len(text[s:e]) - len(text[s:e].lstrip()), e) for s, e in spans]


def _is_abbreviation(text: str, start: int, dot: int, nxt: str) -> bool:
    # Look at a short window only: abbreviations are short, and scanning back to the sentence start is O(n^2).
    lo = max(start, dot - _WINDOW)
    words = text[lo : dot + 1].split()
    if not words or (lo > start and len(words) == 1 and not text[lo - 1].isspace()):
        return False  # a long word cut by the window is not an abbreviation
    last = words[-1].lower().rstrip(".!?").lstrip("([\"'“‘")
    return last in _ABBREVIATIONS or (last in _BEFORE_NUMBER and nxt.isdigit())


def sentences(text: str) -> list[str]:
    """The sentences of a text (see ``split_sentences``)."""
    return [text[s:e] for s, e in split_sentences(text)]
