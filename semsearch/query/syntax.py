"""The query language of every face: fields, phrases and exclusions in the query text, as Scholar and GitHub do.

``author:"Zhouchen Lin" diffusion year:>=2024 -survey "score matching"`` reads as: papers by that author,
from 2024 on, ranked for "diffusion score matching", whose text has the phrase "score matching" and not the
word "survey". Fields map onto the ``--where`` filters (``title:x`` is ``title~x``, ``venue:x`` is
``venue~x``, ``year:2025`` is ``year=2025``, ``year:>=2024`` is ``year>=2024``, ``year:2020..2024`` both
bounds); ``author:`` names a person (looked up as a name query is, else ``authors~x``). A word before a colon
that is not one of these fields is text, as on GitHub ("arXiv:2401.01234", "BERT: pre-training"). What cannot
be read (an unclosed quote, a field with no value, a year that is not one) is one QueryError line.

``parse_query`` is pure (text in, ``ParsedQuery`` out): later steps (typo correction, query-aware fusion) read
or extend the dataclass, never the raw text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from semsearch.core.errors import QueryError
from semsearch.core.names import fold
from semsearch.core.paperinfo import authors_of
from semsearch.core.records import Document

FIELDS = ("author", "title", "venue", "year")
ALIASES = {"authors": "author", "intitle": "title", "allintitle": "title"}
_QUOTES = str.maketrans({"“": '"', "”": '"', "„": '"', "«": '"', "»": '"'})
# One term: an optional "-", an optional known-looking "field:", then a quoted phrase or a bare run of non-space.
_TERM = re.compile(r'(-?)(?:([A-Za-z]+):)?("[^"]*"|[^\s"]+)')
_YEAR = re.compile(r"^(>=|<=|>|<|=)?(\d{4})$")
_RANGE = re.compile(r"^(\d{4})?\.\.(\d{4})?$")
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class ParsedQuery:
    """A query read into its parts: what ranks, what filters, what must or must not appear."""

    raw: str
    text: str  # the words that rank (plain words and the phrases' words), in order; "" when only fields
    where: tuple[str, ...] = ()  # --where clauses from title:, venue:, year:
    authors: tuple[str, ...] = ()  # author: values (each a person, else an authors~ filter)
    phrases: tuple[str, ...] = ()  # "exact phrase": each must appear in the title or abstract
    exclude: tuple[str, ...] = ()  # -word / -"phrase": none may appear
    fields: dict[str, list[str]] = field(default_factory=dict)  # each field as typed: {"year": [">=2024"]}

    @property
    def plain(self) -> bool:
        """Whether the text used no syntax at all (then it is searched exactly as typed)."""
        return not (self.where or self.authors or self.phrases or self.exclude)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "fields": self.fields,
            "where": list(self.where),
            "authors": list(self.authors),
            "phrases": list(self.phrases),
            "exclude": list(self.exclude),
        }


def parse_query(text: str) -> ParsedQuery:
    """Read fields, "phrases" and -exclusions out of a query; QueryError (one line) for what cannot be read."""
    raw = text
    text = text.translate(_QUOTES)
    if text.count('"') % 2:
        raise QueryError('the query has an unclosed " : close the phrase, e.g. "exact phrase"')
    words: list[str] = []
    where: list[str] = []
    authors: list[str] = []
    phrases: list[str] = []
    exclude: list[str] = []
    fields: dict[str, list[str]] = {}
    for match in _TERM.finditer(text):
        minus, name, value = match.group(1), match.group(2), match.group(3)
        quoted = value.startswith('"')
        inner = " ".join(value[1:-1].split()) if quoted else value
        known = ALIASES.get(name.lower(), name.lower()) if name else None
        if name and known not in FIELDS:  # "arXiv:2401.01234", "BERT:": text, as GitHub reads an unknown qualifier
            inner, quoted = f"{name}:{inner}", False
            known = None
        if known is not None:
            if not inner:
                raise QueryError(f"{known}: needs a value, e.g. {_example(known)}")
            if minus:
                raise QueryError(f"-{known}: cannot be negated; write -word to leave out papers with a word")
            fields.setdefault(known, []).append(inner)
            if known == "author":
                authors.append(inner)
            elif known == "year":
                where.extend(_year(inner))
            else:
                where.append(f"{known}~{inner}")
            continue
        if not quoted and inner.endswith(":") and ALIASES.get(inner[:-1].lower(), inner[:-1].lower()) in FIELDS:
            field_name = ALIASES.get(inner[:-1].lower(), inner[:-1].lower())
            raise QueryError(f"{field_name}: needs a value, e.g. {_example(field_name)}")
        if not inner:  # "" : nothing to search for
            continue
        if minus and (quoted or _WORD.match(inner)):
            exclude.append(inner)
            continue
        if quoted:
            phrases.append(inner)
        words.append(inner)
    return ParsedQuery(
        raw=raw,
        text=" ".join(words),
        where=tuple(where),
        authors=tuple(authors),
        phrases=tuple(phrases),
        exclude=tuple(exclude),
        fields=fields,
    )


def _year(value: str) -> list[str]:
    """``2025`` -> year=2025, ``>=2024`` -> year>=2024, ``2020..2024`` -> both bounds."""
    found = _YEAR.match(value)
    if found:
        return [f"year{found.group(1) or '='}{found.group(2)}"]
    span = _RANGE.match(value)
    if span and (span.group(1) or span.group(2)):
        low, high = span.group(1), span.group(2)
        return [c for c in (f"year>={low}" if low else "", f"year<={high}" if high else "") if c]
    raise QueryError(f"year:{value} is not a year: write year:2025, year:>=2024 or year:2020..2024")


def _example(name: str) -> str:
    return {"author": 'author:"Zhouchen Lin"', "year": "year:2025", "title": "title:diffusion"}.get(
        name, f"{name}:neurips"
    )


def text_terms(text: str) -> str:
    """A text as phrases and exclusions compare it: folded, its words separated by single spaces, padded."""
    return " " + " ".join(_WORD.findall(fold(text))) + " "


def admits(parsed: ParsedQuery, text: str) -> bool:
    """Whether a document's text (title, abstract, authors) has every phrase and none of the excluded words."""
    if not parsed.phrases and not parsed.exclude:
        return True
    terms = text_terms(text)
    return all(text_terms(p) in terms for p in parsed.phrases) and not any(
        text_terms(x) in terms for x in parsed.exclude
    )


def searchable(doc: Document) -> str:
    """What phrases and -words are looked for in (``admits``): the title, the abstract and the authors' names."""
    return " ".join([doc.title or "", doc.text, *authors_of(doc.metadata)])
