"""People's names as people type them: folded for comparison, split into parts, matched in any usual form.

One folding serves the index (each author's parts, written with the documents) and the query: NFKD with the
combining marks dropped, casefolded, and the few Latin letters NFKD leaves whole (ł, ø, đ, æ, œ, ı, ß) spelled
as ASCII, so "Łukasz Kaiser", "lukasz kaiser" and "LUKASZ KAISER" are one name. Hyphens, dots and commas
separate parts ("Jean-Pierre" is "jean" "pierre", "Z.Lin" is "z" "lin"); apostrophes join ("O'Brien" is
"obrien"). A part of one letter is an initial. A generational suffix at the end ("Jr.", "III") is no part of
the name's ends: "Hal Daumé III" is found as "Hal Daumé", as he is cited. unidecode would transliterate more
scripts, but a name typed in Latin letters never matches one stored in another script either way, and this
needs no dependency.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

MAX_NAME_PARTS = 5  # a longer query is a sentence, not a name
_COMBINING = re.compile(r"[\u0300-\u036f]")
_LETTERS = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "æ": "ae", "œ": "oe", "ı": "i", "ð": "d", "þ": "th"})
_JOINERS = re.compile(r"['’`´]")
_SEPARATORS = re.compile(r"[^\w]+|_")
SUFFIXES = frozenset(("jr", "sr", "ii", "iii", "iv"))  # generational suffixes, folded; "v" is as often an initial


def fold(text: str) -> str:
    """Lower case without diacritics: ``Łukasz Müller`` -> ``lukasz muller``."""
    decomposed = _COMBINING.sub("", unicodedata.normalize("NFKD", text)).casefold()
    return decomposed.translate(_LETTERS)


def name_parts(name: str) -> list[str]:
    """A name's folded parts in order: ``Lin, Zhouchen`` -> ``["lin", "zhouchen"]``; initials are one letter."""
    parts = [p for p in _SEPARATORS.split(_JOINERS.sub("", fold(name))) if p]
    if len(parts) > 2 and parts[-1] in SUFFIXES:
        parts.pop()
    return parts


def name_ends(name: str) -> list[tuple[str, str]]:
    """An author's name as a look-up finds it: its first and last parts, each way round (empty below two parts).

    A query must match both ends of a name (``matches``), so "Lin Zhouchen" and "Zhouchen Lin" are both the
    key ("lin", "zhouchen"), and "Z. Lin" the range of keys ("lin", "z…").
    """
    parts = name_parts(name)
    if len(parts) < 2:
        return []
    return sorted({(parts[0], parts[-1]), (parts[-1], parts[0])})


def query_ends(parts: Sequence[str]) -> list[tuple[str, str]]:
    """The (end, other end) keys a typed name could have: each pair of its parts, a whole part first.

    The other end is a whole part (an exact key) or an initial (a range: every part starting with it).
    """
    keys = set()
    for i, a in enumerate(parts):
        for b in parts[i + 1 :]:
            if len(a) > 1:
                keys.add((a, b))
            elif len(b) > 1:
                keys.add((b, a))
    return sorted(keys)


def is_name_form(parts: Sequence[str]) -> bool:
    """Whether parts could be a name as typed: two to five parts, at least one of them whole (not an initial).

    A single word is never a name: a surname alone ("Long", "Song", "Hall") is also a word people search for.
    """
    return 2 <= len(parts) <= MAX_NAME_PARTS and any(len(p) > 1 for p in parts) and not any(p.isdigit() for p in parts)


def matches(query: Sequence[str], author: Sequence[str]) -> bool:
    """Whether name parts typed (``query``) name this author (``author``: its stored name's parts).

    Every whole part typed is a distinct part of the name, and every initial typed the first letter of another;
    in any order ("Zhouchen Lin", "Lin Zhouchen", "Lin, Zhouchen", "Z. Lin"). The name's first and last parts
    must both be among those matched (its middle names and initials may be left out: "Zhouchen Lin" is
    "Zhouchen C. Lin"), so "Emma Wang" is not "Wei Emma Wang", and a typed whole part never matches a stored
    initial ("Zhouchen Lin" is not "Z. Lin", who may be someone else).
    """
    if not is_name_form(query) or len(author) < 2 or len(query) > len(author):
        return False
    used: set[int] = set()
    # Whole parts first (they must match exactly), then initials, each trying the name's two ends first.
    order = [0, len(author) - 1, *range(1, len(author) - 1)]
    for part in sorted(query, key=len, reverse=True):
        spot = next((i for i in order if i not in used and _fits(part, author[i])), None)
        if spot is None:
            return False
        used.add(spot)
    return 0 in used and len(author) - 1 in used


def _fits(typed: str, part: str) -> bool:
    """A whole part typed is the part itself; an initial typed is its first letter."""
    return typed == part if len(typed) > 1 else part[0] == typed
