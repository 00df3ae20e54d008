"""Metadata filters: ``--where year>=2024``, ``venue=neurips``, ``file=seeds/000*``, ``collection~Papers``."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import QueryError
from .records import Document

# Longest operators first so that ">=" is not read as ">".
_CLAUSE = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(>=|<=|!=|=|>|<|~)\s*(.*?)\s*$")
OPERATORS = ("=", "!=", ">=", "<=", ">", "<", "~")
MAX_CLAUSE_CHARS = 500  # a filter value is a name or a number, not a text: longer is a mistake (or an attack)
WHERE_HELP = (
    "FIELD OP VALUE with OP one of = != >= <= > < ~ (contains); numbers compare as numbers, text ignores case. "
    "Fields: any metadata key (venue, year, authors, ...), title, collection, id, file (the source path; "
    "= takes shell wildcards), added (when it first entered the index, e.g. added>=2026-12-01) and "
    "added_version. Repeat to combine (all must hold)."
)


@dataclass(frozen=True)
class Clause:
    """One parsed ``FIELD OP VALUE`` condition."""

    field: str
    op: str
    value: str

    def __str__(self) -> str:
        return f"{self.field}{self.op}{self.value}"


def parse_where(clauses: Sequence[str]) -> list[Clause]:
    """Parse ``--where`` strings; raises QueryError naming the malformed one."""
    parsed = []
    for text in clauses:
        if len(text) > MAX_CLAUSE_CHARS:
            raise QueryError(f"a where clause is {len(text)} characters; the limit is {MAX_CLAUSE_CHARS}")
        match = _CLAUSE.match(text)
        if not match or not match.group(3):
            raise QueryError(f"malformed --where {text!r}: expected FIELD OP VALUE, e.g. year>=2024 or venue=neurips")
        parsed.append(Clause(match.group(1).lower(), match.group(2), match.group(3)))
    return parsed


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _compare(actual: Any, op: str, wanted: str) -> bool:
    """Compare one field value with a clause's value (numbers as numbers, text without case)."""
    if isinstance(actual, list):
        # A list field (authors, sources) holds when any element does; != when none equals.
        if op == "!=":
            return not any(_compare(a, "=", wanted) for a in actual)
        return any(_compare(a, op, wanted) for a in actual)
    if actual is None:
        return op == "!="
    a_num, w_num = _number(actual), _number(wanted)
    if op in (">=", "<=", ">", "<"):
        if a_num is not None and w_num is not None:
            x: Any
            y: Any
            x, y = a_num, w_num
        else:
            x, y = str(actual).lower(), wanted.lower()
        return {">=": x >= y, "<=": x <= y, ">": x > y, "<": x < y}[op]
    text = str(actual).lower()
    if op == "~":
        return wanted.lower() in text
    equal = (a_num == w_num) if a_num is not None and w_num is not None else text == wanted.lower()
    return equal if op == "=" else not equal


def _field_value(doc: Document, field: str) -> Any:
    if field in ("file", "source", "sources"):
        return [p.file for p in doc.sources]
    if field == "title":
        return doc.title
    if field == "id":
        return doc.id
    if field == "added":  # when the document first entered the index (UTC, ISO 8601): added>=2026-12-01
        return doc.added.at if doc.added is not None else None
    if field == "added_version":  # the sequence number of that version: added_version>3
        return doc.added.seq if doc.added is not None else None
    for key, value in doc.metadata.items():
        if key.lower() == field:
            return value
    return None


def matcher(clauses: Sequence[Clause]) -> Callable[[Document], bool]:
    """A predicate that holds for documents meeting every clause."""

    def holds(doc: Document) -> bool:
        for clause in clauses:
            value = _field_value(doc, clause.field)
            if clause.field in ("file", "source", "sources") and clause.op == "=":
                if not any(fnmatch.fnmatch(f, clause.value) or f == clause.value for f in value):
                    return False
            elif not _compare(value, clause.op, clause.value):
                return False
        return True

    return holds
