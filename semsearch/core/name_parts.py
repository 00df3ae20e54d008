"""Authors' names in parts, as reference managers hold them: given, family, particle ("van der"), suffix ("Jr.").

A name written as one string is split by BibTeX's own rules (bibtexparser's ``parse_single_name_into_parts``):
"First von Last", "von Last, First" and "von Last, Jr, First"; the von part (the particle) is the run of
words starting in lower case before the last word, so "Teun van der Weij" is given "Teun", particle "van der",
family "Weij", while a capitalised "Le" or "Van" belongs to the given name ("Luc Van Gool" is family "Gool"),
as in every BibTeX-based tool. Braces group words ("Yann {Le Cun}" is family "Le Cun"). Three additions
for names as records write them (tests/core/test_citation_names.py has each): a trailing generational suffix
("Hal Daumé III", "John Smith, Jr") is the suffix, not the family name; a name with no capital at all
("dehua ma") is First Last, its case saying nothing of particles; and an organisation ("The MLPerf
Consortium", "ACME, Inc.", "OpenAI", a wholly braced name) is one literal, never split. Names given in parts
(CSL-JSON, Zotero-style creators) keep their parts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from semsearch.core.names import SUFFIXES
from semsearch.core.paperinfo import AUTHOR_KEYS, field, name_of, plain_text

# Generational suffixes as people index them (``names.SUFFIXES``), and "Jr." and "Sr." with their dot.
_SUFFIXES = SUFFIXES | {"jr.", "sr."}
# Words naming an organisation, never a person's name (compared case-folded, trailing punctuation dropped).
_ORGANISATION_WORDS = frozenset(
    ("team", "consortium", "collaboration", "group", "laboratory", "laboratories", "lab", "labs", "university")
    + ("institute", "inc", "ltd", "llc", "gmbh", "corporation", "corp", "foundation", "association", "society")
    + ("committee", "council", "initiative", "organization", "organisation", "project", "agency", "ministry")
    + ("department", "research", "and", "&")
)
_ACRONYM_WORDS = frozenset(("AI", "ML", "NLP"))  # "Meta AI", "Google AI": in capitals only (Ai is a given name)
_TWO_CAPITALS = re.compile(r"[A-Z].*[A-Z]")  # one word with two capitals: OpenAI, DeepMind, IBM
_WORD_END = re.compile(r"[.,;:]+$")


@dataclass(frozen=True)
class NameParts:
    """A person's name in BibTeX's parts (First, von, Last, Jr), or an organisation's name whole (``literal``)."""

    family: str = ""
    given: str = ""
    particle: str = ""  # BibTeX's von part, CSL's non-dropping-particle: "van der"
    suffix: str = ""  # BibTeX's Jr part: "Jr.", "III"
    literal: str = ""  # an organisation: written as it is, never split

    @property
    def display(self) -> str:
        """The name as a person writes it: ``Teun van der Weij``, ``Martin Luther King Jr.``."""
        return self.literal or " ".join(p for p in (self.given, self.particle, self.family, self.suffix) if p)


def parse_name(name: str) -> NameParts | None:
    """A name written as one string, in parts (None when it is empty); LaTeX in it is decoded."""
    text = " ".join(name.split())
    if not text:
        return None
    if _wholly_braced(text):
        return NameParts(literal=_plain(text[1:-1]))
    plain = _plain(text)
    if is_organisation(plain):
        return NameParts(literal=plain)
    if plain == text and "," not in text:
        # No markup, no comma: most names. Without a lower-case word (or without a capital) it is First... Last.
        words = text.split(" ")
        suffix = words.pop() if len(words) > 1 and _is_suffix(words[-1]) and not _is_suffix(words[-2]) else ""
        if not any(_starts_lower(w) for w in words) or not any(_starts_upper(w) for w in words):
            return NameParts(family=words[-1], given=" ".join(words[:-1]), suffix=suffix)
    sections = _sections(text)
    if len(sections) > 3 or not all(sections) or (len(sections) == 3 and " " in sections[1]):
        return NameParts(literal=_plain(text))  # several names in one, or a stray comma: kept as written
    if len(sections) == 2 and _is_suffix(sections[1]):  # "John Smith, Jr": records' "First von Last, Jr"
        return _bibtex_parts(sections[0], suffix=sections[1])
    if len(sections) == 1:
        words = sections[0].split(" ")
        if len(words) > 1 and _is_suffix(words[-1]) and not _is_suffix(words[-2]):  # "Hal Daumé III"
            return _bibtex_parts(" ".join(words[:-1]), suffix=words[-1])
    return _bibtex_parts(text)


def is_organisation(name: str) -> bool:
    """Whether a name (plain text) names an organisation: a word like "Team" or "Inc.", or one word like "OpenAI"."""
    # A leading "The" does not make one: it is also a Vietnamese given name ("The Hung Tran").
    words = name.split()
    if not words:
        return False
    if len(words) == 1:
        return bool(_TWO_CAPITALS.search(words[0]))
    if any(w in _ACRONYM_WORDS for w in words):
        return True
    return any(_WORD_END.sub("", w).casefold() in _ORGANISATION_WORDS for w in words)


def name_from_fields(item: Mapping[str, Any]) -> NameParts | None:
    """A name given in parts (CSL-JSON ``family``/``given``, Zotero ``lastName``/``firstName``) or whole."""
    whole = item.get("name")
    if whole:
        return parse_name(str(whole))
    literal = item.get("literal")
    if literal:
        text = _plain(str(literal))
        return NameParts(literal=text) if text else None
    family = _plain(str(item.get("family") or item.get("lastName") or ""))
    given = _plain(str(item.get("given") or item.get("firstName") or ""))
    particle = " ".join(
        _plain(str(item[k])) for k in ("dropping-particle", "non-dropping-particle") if item.get(k)
    ).strip()
    suffix = _plain(str(item.get("suffix") or ""))
    if not family:
        if not given:
            return None
        family, given = given, ""  # one name only: a mononym is a family name to every format
    elif not particle:
        # A family name that starts with a particle ("van der Weij") has it split off, as citeproc-js does;
        # a lower-case word inside one ("Planas i Lisbona") stays, since the source said it is the family name.
        words = family.split(" ")
        lead = next((i for i, w in enumerate(words) if not _starts_lower(w)), len(words))
        if 0 < lead < len(words):
            particle, family = " ".join(words[:lead]), " ".join(words[lead:])
    return NameParts(family=family, given=given, particle=particle, suffix=suffix)


def author_parts(metadata: Mapping[str, Any]) -> list[NameParts]:
    """The authors of a record in parts, one for each name ``paperinfo.authors_of`` gives, in its order."""
    value = field(metadata, AUTHOR_KEYS)
    found: list[NameParts | None] = []
    if isinstance(value, str):
        pieces = re.split(r"\s+and\s+|;", value) if re.search(r"\s+and\s+|;", value) else [value]
        found = [parse_name(p) for p in pieces if p.strip()]
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str) and item.strip():
                found.append(parse_name(item))
            elif isinstance(item, dict) and name_of(item):  # authors_of's test, so that both lists line up
                found.append(name_from_fields(item) or NameParts(literal=_plain(name_of(item))))
    return [n or NameParts() for n in found]


def _bibtex_parts(text: str, suffix: str = "") -> NameParts:
    """A name in one of BibTeX's three forms, split by BibTeX's rules; ``suffix`` when one was cut off."""
    # Imported here: most names take parse_name's quick way, and bibtexparser's import costs tens of ms.
    from bibtexparser.middlewares.names import parse_single_name_into_parts

    parts = parse_single_name_into_parts(text, strict=False)
    first, von, last = parts.first, parts.von, parts.last
    words = [*first, *von, *last]
    if "," not in text and len(words) > 1:
        # "First von Last" is split here from bibtexparser's words: it takes two words as First Last always
        # and lets von run to a lower-case last word, where BibTeX (and pybtex) read "van Beethoven" as von
        # Last and "Cyprien de Masson d'Autume" as First "Cyprien", von "de", Last "Masson d'Autume".
        lower = [i for i, w in enumerate(words[:-1]) if _starts_lower(w)]
        if not lower or not any(_starts_upper(w) for w in words):
            # No lower-case word; or no capital anywhere ("dehua ma"), when case says nothing of particles.
            first, von, last = words[:-1], [], words[-1:]
        else:
            first, von, last = words[: lower[0]], words[lower[0] : lower[-1] + 1], words[lower[-1] + 1 :]
    jr = _join(parts.jr) or _plain(suffix)
    if not _join(last):  # "{}", "{ }": nothing BibTeX could call a name
        return NameParts(literal=_plain(text))
    return NameParts(family=_join(last), given=_join(first), particle=_join(von), suffix=jr)


def _sections(text: str) -> list[str]:
    """The comma-separated sections of a name at brace depth 0, each stripped."""
    sections, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "{":
            depth += 1
        elif char == "}":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0 and (i == 0 or text[i - 1] != "\\"):
            sections.append(text[start:i].strip())
            start = i + 1
    sections.append(text[start:].strip())
    return sections


def _wholly_braced(text: str) -> bool:
    """Whether the name is one braced group: ``{The MLPerf Consortium}``."""
    if not (text.startswith("{") and text.endswith("}")):
        return False
    depth = 0
    for i, char in enumerate(text):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0 and i < len(text) - 1:
            return False
    return depth == 0


def _is_suffix(word: str) -> bool:
    return word.casefold() in _SUFFIXES


def _starts_lower(word: str) -> bool:
    """Whether a word is lower case as BibTeX reads it (by its first letter): a particle's words are.

    A hyphenated word is lower case only when each piece is: BibTeX and citation-js split "jyh-Jing" at the
    hyphen, pybtex does not, so such a word is taken for a given name, never half a particle.
    """
    if word.startswith("{") and not word.startswith("{\\"):
        return False  # a braced group has no case: "{van} Gogh" keeps "van" out of the particle
    pieces = [p for p in word.split("-") if p]
    return bool(pieces) and all(next((c for c in p if c.isalpha()), "").islower() for p in pieces)


def _starts_upper(word: str) -> bool:
    """Whether a word starts with a capital (its first letter)."""
    letter = next((c for c in word if c.isalpha()), "")
    return letter.isupper()


def _join(words: list[str]) -> str:
    return " ".join(w for w in (_plain(w) for w in words) if w)


def _plain(text: str) -> str:
    """A name part as people read it: LaTeX decoded, braces gone, one line, no soft hyphens (``Gia\\-cin\\-to``)."""
    return " ".join(plain_text(text).replace("\u00ad", "").split())
