"""Metadata filters: ``--where year>=2024``, ``venue=neurips``, ``file=seeds/000*``, ``collection~Papers``."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from semsearch.core.errors import QueryError
from semsearch.core.records import Document
from semsearch.core.wording import count as counted

# Longest operators first so that ">=" is not read as ">".
_CLAUSE = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(>=|<=|!=|=|>|<|~)\s*(.*?)\s*$", re.DOTALL)
OPERATORS = ("=", "!=", ">=", "<=", ">", "<", "~")
FILE_FIELDS = ("file", "source", "sources")  # the source paths, not a metadata key of that name
MAX_CLAUSE_CHARS = 500  # a filter value is a name or a number, not a text: longer is a mistake (or an attack)


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
        match = _CLAUSE.match(text.replace("\ufeff", " "))  # a byte-order mark pasted along is space
        _check_operator(text, match)
        if not match or not match.group(3):
            raise QueryError(f"malformed --where {text!r}: expected FIELD OP VALUE, e.g. year>=2024 or venue=neurips")
        parsed.append(Clause(match.group(1).lower(), match.group(2), match.group(3)))
    return parsed


# A run of operator-like characters after the field name: ``year=>2024``, ``year==2024``, ``year:2024``.
_ANY_OPERATOR = re.compile(r"^\s*[A-Za-z_][\w.\-]*?\s*([=<>!~:]+)")
_OPERATOR_CHARS = "=<>!~"


def _check_operator(text: str, match: re.Match[str] | None) -> None:
    """Raise QueryError for an operator that is not one of OPERATORS (rather than match nothing silently)."""
    if match is not None:
        value = match.group(3)
        if not value or value[0] not in _OPERATOR_CHARS:
            return
        written = match.group(2) + value[: len(value) - len(value.lstrip(_OPERATOR_CHARS))]
    else:
        loose = _ANY_OPERATOR.match(text)
        if loose is None:
            return
        written = loose.group(1)
    raise QueryError(
        f"unknown operator {written!r} in {{field}} {text!r}: use one of {' '.join(OPERATORS)} (e.g. year>=2024)",
        field="where",
    )


# Every text float() accepts matches this (digits, '_', '.', e, signs; inf, infinity, nan; around spaces), so a
# text that does not is answered without float() raising, which costs more than the whole test.
_MAYBE_NUMBER = re.compile(r"\s*(?:[\d_.eE+-]+|[+-]?(?:inf|infinity|nan))\s*", re.IGNORECASE)


def number(value: Any) -> float | None:
    """The value as a number, or None when it is not one (an integer too large for a float is text)."""
    if isinstance(value, str) and not _MAYBE_NUMBER.fullmatch(value):
        return None
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def compare(actual: Any, op: str, wanted: str) -> bool:
    """Compare one field value with a clause's value (numbers as numbers, text without case)."""
    if isinstance(actual, list):
        # A list field (authors, sources) holds when any element does; != when none equals.
        if op == "!=":
            return not any(compare(a, "=", wanted) for a in actual)
        return any(compare(a, op, wanted) for a in actual)
    if actual is None:
        return op == "!="
    a_num, w_num = number(actual), number(wanted)
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


def field_value(doc: Document, field: str) -> Any:
    if field in FILE_FIELDS:
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
            value = field_value(doc, clause.field)
            if clause.field in FILE_FIELDS and clause.op == "=":
                if not any(fnmatch.fnmatch(f, clause.value) or f == clause.value for f in value):
                    return False
            elif not compare(value, clause.op, clause.value):
                return False
        return True

    return holds


ORDERING = (">=", "<=", ">", "<")
BUILTIN_FIELDS = ("id", "title", "file")
MAX_FIELDS_SHOWN = 25


@dataclass
class FilterResult:
    """Which documents meet every clause, and why none did (warnings) when that is the case."""

    ids: list[str]
    warnings: list[str] = field(default_factory=list)


@dataclass
class Survey:
    """What one scan saw: the fields documents have, and the kinds of value of the fields clauses name."""

    documents: int = 0
    fields: dict[str, int] = field(default_factory=dict)  # field name (lower case) -> documents that have it
    numbers: dict[str, int] = field(default_factory=dict)
    texts: dict[str, int] = field(default_factory=dict)
    example: dict[str, Any] = field(default_factory=dict)

    def observe(self, doc: Document, named: Iterable[str]) -> None:
        self.documents += 1
        self.observe_fields(doc.metadata, doc.title)
        for name in named:
            self.observe_value(name, field_value(doc, name))

    def observe_fields(self, metadata: dict[str, Any], title: str | None) -> None:
        """Count the fields one document has (a non-empty metadata value, a title)."""
        for key, value in metadata.items():
            if value is not None and value != [] and value != "":
                name = key.lower()
                self.fields[name] = self.fields.get(name, 0) + 1
        if title:
            self.fields["title"] = self.fields.get("title", 0) + 1

    def observe_value(self, name: str, value: Any) -> None:
        """Count the kinds of one document's value of a field (a list's elements one by one)."""
        if name in FILE_FIELDS or name == "id":
            return
        for item in value if isinstance(value, list) else [value]:
            if item is not None and not isinstance(item, (dict, list)):
                self.count(name, item, number(item))

    def count(self, name: str, item: Any, found: float | None) -> None:
        """Count one value (not None, a dict or a list) of a field, whose ``number`` is ``found``."""
        kind = self.numbers if found is not None and not isinstance(item, bool) else self.texts
        kind[name] = kind.get(name, 0) + 1
        self.example.setdefault(name, item)

    def has(self, name: str) -> bool:
        return name in FILE_FIELDS or name == "id" or self.fields.get(name, 0) > 0

    def names(self) -> str:
        names = sorted(set(BUILTIN_FIELDS) | set(self.fields))
        shown = ", ".join(names[:MAX_FIELDS_SHOWN])
        return shown + (f", ... ({len(names)} in all)" if len(names) > MAX_FIELDS_SHOWN else "")


def check_types(clauses: Sequence[Clause], survey: Survey) -> None:
    """A clause that compares a numeric field with a value that is not a number is a mistake: say so."""
    for clause in clauses:
        name = clause.field
        if clause.op == "~" or name in FILE_FIELDS or name == "id":
            continue
        numeric, textual = survey.numbers.get(name, 0), survey.texts.get(name, 0)
        if numeric and not textual and number(clause.value) is None:
            raise QueryError(
                f"--where {clause}: {name} holds numbers (e.g. {survey.example[name]!r}) but {clause.value!r} "
                "is not a number"
            )


def evaluate(documents: Iterable[Document], clauses: Sequence[Clause]) -> FilterResult:
    """The ids of the documents meeting every clause, in one pass over ``documents``.

    Raises QueryError when a clause compares a field that holds only numbers with a value that is not one
    (``year>=abc``). When nothing matches, ``warnings`` says why in one line each: a field no document has
    (naming the fields that exist), a clause that alone matches nothing, or clauses that exclude each other.
    """
    holds = matcher(clauses)
    singles = [matcher([c]) for c in clauses] if len(clauses) > 1 else []
    alone = [0] * len(clauses)
    survey = Survey()
    named = {c.field for c in clauses}
    ids = []
    for doc in documents:
        survey.observe(doc, named)
        if holds(doc):
            ids.append(doc.id)
        for i, single in enumerate(singles):
            alone[i] += single(doc)
    check_types(clauses, survey)
    if ids or not survey.documents:
        return FilterResult(ids)
    return FilterResult(ids, nothing_matched(clauses, alone, survey))


def nothing_matched(clauses: Sequence[Clause], alone: Sequence[int], survey: Survey) -> list[str]:
    """Why no document meets every clause, given how many each clause matches on its own (0 for a lone one)."""
    warnings = []
    for clause, count in zip(clauses, alone, strict=True):
        if count:
            continue
        if not survey.has(clause.field) and clause.op != "!=":
            warnings.append(
                f"--where {clause} matches nothing: no document has a field {clause.field!r} (fields: {survey.names()})"
            )
        else:
            warnings.append(f"--where {clause} matches none of the {counted(survey.documents, 'document')}")
    if not warnings:
        warnings.append(
            f"the --where clauses {'; '.join(map(str, clauses))} each match some documents, but none meets them all"
        )
    return warnings
