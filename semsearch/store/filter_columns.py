"""The column index behind ``--where``: each field's distinct values and the documents holding each.

Written into ``docs.sqlite`` with the documents, so a filter reads the few values its clauses name (a range of
an index, one short scan for ``~``) instead of decoding every document's JSON metadata. It answers exactly as
``filters.evaluate`` does over the same documents (``tests/store/test_filter_columns.py`` holds them to it); a
version written before it existed has no such tables and is filtered by that scan.
"""

from __future__ import annotations

import fnmatch
import gc
import json
import math
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError
from semsearch.core.records import Arrival, Document
from semsearch.store.documents import SegmentTables
from semsearch.store.filters import (
    FILE_FIELDS,
    Clause,
    Survey,
    check_types,
    compare,
    nothing_matched,
    number,
)
from semsearch.store.layout import doc_num

SCHEMA = """
CREATE TABLE filter_values (       -- each distinct value of each field, as a filter compares it
    field TEXT NOT NULL,           -- lower-case field name: a metadata key, id, title, added, added_version, file
    text TEXT NOT NULL,            -- str(value).lower() (a file's path as written): text comparisons and ~
    numeric INTEGER NOT NULL,      -- 1 when float(value) succeeds (NaN too: it then compares as a number)
    number REAL,                   -- float(value) when that is a number other than NaN, else NULL
    nums BLOB NOT NULL,            -- the documents holding the value: sorted little-endian int64 numbers
    PRIMARY KEY (field, text, numeric)
) WITHOUT ROWID;
CREATE INDEX filter_values_number ON filter_values(field, number) WHERE number IS NOT NULL;
CREATE TABLE filter_fields (        -- what a scan's survey of the documents would say about each field
    field TEXT PRIMARY KEY,
    documents INTEGER NOT NULL,     -- documents with a non-empty value under this (lower-cased) metadata key
    numbers INTEGER NOT NULL,       -- values that are numbers
    texts INTEGER NOT NULL,         -- values that are not
    example TEXT                    -- JSON: the first value, in document order
);
CREATE TABLE filter_documents (     -- one row: every document's number (what != clauses start from)
    count INTEGER NOT NULL,
    nums BLOB NOT NULL
);
"""
_BUILTIN = ("title", "id", "added", "added_version", *FILE_FIELDS)  # fields that metadata keys cannot shadow
_IN_CHUNK = 400  # paths per IN (...): well under SQLite's limit on bound parameters
_NUMS = np.dtype("<i8")

Rows = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]
_NONE = np.zeros(0, dtype=np.int64)
_UNSET = object()


def _leaves(value: Any) -> Iterator[Any]:
    """The scalars a value compares by: a list's elements at any depth (``compare`` recurses), None dropped."""
    if isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif value is not None:
        yield value


def _fields(doc: Document, metadata: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    """(field, value) as ``field_value`` finds each field of a document: the first key that matches wins."""
    yield "id", doc.id
    yield "title", doc.title
    yield "file", [p.file for p in doc.sources]
    if doc.added is not None:
        yield "added", doc.added.at
        yield "added_version", doc.added.seq
    seen: set[str] = set()
    for key, value in metadata.items():
        name = key.lower()
        if name not in _BUILTIN and name not in seen:
            seen.add(name)
            yield name, value


@dataclass
class _Column:
    """One field's values as read, before they become rows: each distinct one with its documents."""

    # str, int, float and bool values (keyed with their type: 1, 1.0 and True are one dict key) -> the
    # number of each document holding it, once per occurrence (a list may hold it twice: the survey counts both)
    plain: dict[tuple[type, Any], list[int]] = field(default_factory=dict)
    other: list[tuple[int, Any]] = field(default_factory=list)  # (document, dict or nested list)
    example: Any = _UNSET  # the first value a scan in document order meets


_PLAIN = (str, int, float, bool)


def _rows(name: str, column: _Column, survey: Survey) -> Iterator[tuple[str, str, int, float | None, bytes]]:
    """The filter_values rows of one field, in key order; counts its values into ``survey`` as a scan would."""
    values: dict[tuple[str, bool], tuple[float | None, list[list[int]]]] = {}

    def add(leaf: Any, nums: list[int]) -> float | None:
        if name == "file":  # compared in Python as written (= is a shell pattern, case-sensitive)
            text, found = leaf, None
        else:
            text, found = str(leaf).lower(), number(leaf)
        # str(v).lower() and whether float(v) succeeds decide float(v) for every JSON value (True and "true"
        # differ in the flag), so (text, numeric) names one value.
        key = (text, found is not None)
        entry = values.get(key)
        if entry is None:
            entry = values[key] = (None if found is None or math.isnan(found) else found, [])
        entry[1].append(nums)
        return found

    counted = name not in FILE_FIELDS and name != "id"  # as Survey.observe_value: neither is surveyed
    numbers = texts = 0
    for (_, item), nums in column.plain.items():
        found = add(item, nums)
        if found is not None and not isinstance(item, bool):
            numbers += len(nums)
        else:
            texts += len(nums)
    if counted and numbers:
        survey.numbers[name] = survey.numbers.get(name, 0) + numbers
    if counted and texts:
        survey.texts[name] = survey.texts.get(name, 0) + texts
    for num, item in column.other:  # dicts compare by their text; a nested list by its elements (uncounted)
        for leaf in _leaves(item) if isinstance(item, list) else (item,):
            add(leaf, [num])
    if counted and column.example is not _UNSET:
        survey.example[name] = column.example
    for key in sorted(values):  # in key order, so the B-tree is written left to right (fast, its pages full)
        found, parts = values[key]
        yield name, key[0], int(key[1]), found, _blob(parts)


def _blob(parts: list[list[int]]) -> bytes:
    """Sorted distinct document numbers as little-endian int64."""
    if len(parts) == 1:  # one value as read: its documents came in order, a list may repeat one
        nums = parts[0]
        if len(nums) == 1:  # most values (titles, links) belong to one document
            return nums[0].to_bytes(8, "little", signed=True)
        return np.array(list(dict.fromkeys(nums)), dtype=_NUMS).tobytes()
    return _distinct(np.concatenate([np.array(p, dtype=np.int64) for p in parts])).astype(_NUMS).tobytes()


def write_filter_columns(conn: sqlite3.Connection, documents: Sequence[Document], metadata: Sequence[str]) -> None:
    """Fill the filter tables for ``documents`` (``metadata[i]``: documents[i]'s metadata as stored, JSON)."""
    # Millions of small lists and tuples stay alive until the end, so every cyclic collection on the way
    # walks all of them, a large share of this function's time on a big index. None of them forms a cycle.
    collecting = gc.isenabled()
    gc.disable()
    try:
        _write(conn, documents, metadata)
    finally:
        if collecting:
            gc.enable()


def _write(conn: sqlite3.Connection, documents: Sequence[Document], metadata: Sequence[str]) -> None:
    conn.executescript(SCHEMA)
    columns: dict[str, _Column] = {}
    survey = Survey()
    order = sorted(range(len(documents)), key=lambda i: doc_num(documents[i].id))
    for i in order:  # in document order, as a scan reads them: each field's example is the first it meets
        doc = documents[i]
        num = doc_num(doc.id)
        # The stored JSON, read back: the scan sees its key order (sorted) and its value types.
        stored = json.loads(metadata[i])
        survey.observe_fields(stored, doc.title)
        for name, value in _fields(doc, stored):
            column = columns.get(name)
            if column is None:
                column = columns[name] = _Column()
            plain = column.plain  # the loop below runs for every value of every document: kept flat
            for item in value if type(value) is list else (value,):
                kind = type(item)
                if kind in _PLAIN:
                    nums = plain.get((kind, item))
                    if nums is None:
                        plain[kind, item] = [num]
                    else:
                        nums.append(num)
                    if column.example is _UNSET:
                        column.example = item
                elif item is not None:
                    column.other.append((num, item))
    for name in sorted(columns):
        conn.executemany("INSERT INTO filter_values VALUES (?, ?, ?, ?, ?)", _rows(name, columns[name], survey))
    conn.executemany(
        "INSERT INTO filter_fields VALUES (?, ?, ?, ?, ?)",
        (
            (
                name,
                survey.fields.get(name, 0),
                survey.numbers.get(name, 0),
                survey.texts.get(name, 0),
                json.dumps(survey.example[name], ensure_ascii=False) if name in survey.example else None,
            )
            for name in sorted(set(survey.fields) | set(survey.numbers) | set(survey.texts))
        ),
    )
    every = np.sort(np.array([doc_num(d.id) for d in documents], dtype=_NUMS))
    conn.execute("INSERT INTO filter_documents VALUES (?, ?)", (len(documents), every.tobytes()))


@dataclass
class ColumnResult:
    """The numbers of the documents meeting every clause (sorted), and why none did when that is the case."""

    nums: np.ndarray
    warnings: list[str]


class FilterColumns:
    """Evaluate parsed clauses against a document store's filter tables (``rows`` runs one SELECT).

    Over a version with extra segments (``segments``: each one's schema and hidden numbers, base first), a
    value's documents are the union over the segments of its documents there, less that segment's hidden ones.
    """

    def __init__(self, rows: Rows, source: str | Path, segments: SegmentTables | None = None) -> None:
        self._rows = rows
        self._source = source
        # Each segment's schema prefix for a table name ("" for a store of one file) and its hidden numbers.
        self._parts = [(f"{schema}.", hidden) for schema, hidden in segments] if segments else [("", _NONE)]
        every = []
        for db, hidden in self._parts:
            found = rows(f"SELECT count, nums FROM {db}filter_documents", ())
            if len(found) != 1 or not isinstance(found[0][1], bytes) or len(found[0][1]) != 8 * found[0][0]:
                raise self._corrupt("filter_documents does not list the documents")
            nums = np.frombuffer(found[0][1], dtype=_NUMS).astype(np.int64)
            every.append(_minus(nums, hidden) if len(hidden) else nums)
        self.all = _merge(every)
        self.count = len(self.all)
        self._hidden: Survey | None = None  # what the survey counted of the hidden rows, read when first needed

    def _corrupt(self, problem: str) -> IndexCorruptError:
        return IndexCorruptError(f"{self._source}: {problem}; rebuild with: semsearch index --full")

    def evaluate(self, clauses: Sequence[Clause]) -> ColumnResult:
        """What ``filters.evaluate`` answers over the store's documents, read from the columns."""
        survey = self._survey(clauses)
        check_types(clauses, survey)  # before any work: the scan raises this after its pass, with nothing else
        matched = [self._clause(c) for c in clauses]
        nums = matched[0]
        for more in matched[1:]:
            nums = _intersect(nums, more)
        if nums.size or not self.count:
            return ColumnResult(nums, [])
        alone = [len(m) for m in matched] if len(clauses) > 1 else [0]
        survey.fields = {}
        for db, _ in self._parts:
            for name, count in self._rows(f"SELECT field, documents FROM {db}filter_fields WHERE documents > 0", ()):
                survey.fields[str(name)] = survey.fields.get(str(name), 0) + int(count)
        _less(survey.fields, self._hidden_survey().fields)
        return ColumnResult(nums, nothing_matched(clauses, alone, survey))

    def _survey(self, clauses: Sequence[Clause]) -> Survey:
        names = sorted({c.field for c in clauses})
        marks = ",".join("?" * len(names))
        survey = Survey(documents=self.count)
        for db, _ in self._parts:
            sql = f"SELECT field, documents, numbers, texts, example FROM {db}filter_fields WHERE field IN ({marks})"
            for name, documents, numbers, texts, example in self._rows(sql, names):
                for counts, found in ((survey.fields, documents), (survey.numbers, numbers), (survey.texts, texts)):
                    if found:
                        counts[name] = counts.get(name, 0) + int(found)
                # Over segments, the first segment's example stands for the field, though the scan's is the
                # value of the lowest-numbered live document: it only shows in the message of a type mistake.
                if example is not None and name not in survey.example:
                    survey.example[name] = json.loads(example)
        if not any(len(hidden) for _, hidden in self._parts) or not _typed(clauses, survey):
            return survey  # the hidden rows' share of the counts could change nothing check_types says
        hidden = self._hidden_survey()
        _less(survey.fields, hidden.fields)
        _less(survey.numbers, hidden.numbers)
        _less(survey.texts, hidden.texts)
        return survey

    def _hidden_survey(self) -> Survey:
        """The survey of the hidden rows (what the segments' filter_fields counted for them), read once."""
        if self._hidden is not None:
            return self._hidden
        survey = Survey()
        for db, hidden in self._parts:
            if not len(hidden):
                continue
            dated = self._rows(f"SELECT count(*) FROM {db}sqlite_master WHERE name = 'arrivals'", ())[0][0]
            sql = f"SELECT d.id, d.title, d.metadata, {'a.version, a.added_at' if dated else 'NULL, NULL'} "
            sql += f"FROM {db}documents d "
            sql += f"LEFT JOIN {db}arrivals a ON a.num = d.num " if dated else ""
            for start in range(0, len(hidden), _IN_CHUNK):
                chunk = [int(n) for n in hidden[start : start + _IN_CHUNK]]
                where = f"WHERE d.num IN ({','.join('?' * len(chunk))})"
                for doc_id, title, metadata, seq, at in self._rows(sql + where, chunk):
                    stored = json.loads(metadata)
                    added = None if seq is None else Arrival(int(seq), str(at))
                    doc = Document(str(doc_id), "", title, [], metadata=stored, added=added)
                    survey.observe_fields(stored, title)
                    for name, value in _fields(doc, stored):  # counted as _rows counts them when written
                        if name in FILE_FIELDS or name == "id":
                            continue
                        for item in value if type(value) is list else (value,):
                            if type(item) in _PLAIN:
                                survey.count(name, item, number(item))
        self._hidden = survey
        return survey

    def _clause(self, clause: Clause) -> np.ndarray:
        """The sorted numbers of the documents one clause holds for."""
        if clause.field in FILE_FIELDS:
            return self._files(clause)
        op = "=" if clause.op == "!=" else clause.op
        lower, wanted_number = clause.value.lower(), number(clause.value)
        base = "SELECT v.nums FROM {db}filter_values v WHERE v.field = ?"
        field = clause.field
        if op == "~":
            found = self._nums(base + " AND instr(v.text, ?) > 0", (field, lower))
        elif wanted_number is None:  # every value compares as text
            found = self._nums(base + f" AND v.text {op} ?", (field, lower))
        else:  # numbers compare as numbers (NaN with nothing), the other values as text
            parts = [self._nums(base + " AND v.numeric = 0 AND v.text " + op + " ?", (field, lower))]
            if not math.isnan(wanted_number):
                parts.append(self._nums(base + f" AND v.number {op} ?", (field, wanted_number)))
            found = _union(*parts) if len(parts) == 2 else parts[0]
        return _minus(self.all, found) if clause.op == "!=" else found

    def _files(self, clause: Clause) -> np.ndarray:
        """A file clause, judged in Python on each distinct path (``=`` is a shell pattern, as in ``matcher``)."""
        op, wanted = clause.op, clause.value
        chosen = []
        paths: dict[tuple[str, int], None] = {}
        for db, _ in self._parts:
            paths.update(
                dict.fromkeys(self._rows(f"SELECT text, numeric FROM {db}filter_values WHERE field = 'file'", ()))
            )
        for path, numeric in paths:
            if op == "=":
                holds = fnmatch.fnmatch(path, wanted) or path == wanted
            elif op == "!=":
                holds = compare(path, "=", wanted)  # != holds where no path equals: the complement below
            else:
                holds = compare(path, op, wanted)
            if holds:
                chosen.append((path, numeric))
        found = np.zeros(0, dtype=np.int64)
        for start in range(0, len(chosen), _IN_CHUNK):
            part = chosen[start : start + _IN_CHUNK]
            sql = "SELECT nums FROM {db}filter_values WHERE field = 'file' AND (text, numeric) IN (VALUES "
            sql += ",".join(["(?, ?)"] * len(part)) + ")"
            found = _union(found, self._nums(sql, [x for pair in part for x in pair]))
        return _minus(self.all, found) if op == "!=" else found

    def _nums(self, sql: str, params: Sequence[Any]) -> np.ndarray:
        """The union of the live document lists the query's rows hold (``{db}``: each segment's schema)."""
        found = []
        for db, hidden in self._parts:
            blobs = [b for (b,) in self._rows(sql.replace("{db}", db), params)]
            if not all(isinstance(b, bytes) and b and len(b) % 8 == 0 for b in blobs):
                raise self._corrupt("a filter_values row holds no list of documents")
            nums = np.frombuffer(b"".join(blobs), dtype=_NUMS).astype(np.int64)
            nums = nums if len(blobs) == 1 else _distinct(nums)
            found.append(_minus(nums, hidden) if len(hidden) else nums)
        return _merge(found)


def _typed(clauses: Sequence[Clause], survey: Survey) -> bool:
    """Whether check_types could object to a clause, given the counts (which hidden rows may only inflate)."""
    return any(
        c.op != "~"
        and c.field not in FILE_FIELDS
        and c.field != "id"
        and number(c.value) is None
        and survey.numbers.get(c.field, 0)
        for c in clauses
    )


def _less(counts: dict[str, int], less: dict[str, int]) -> None:
    """Take the hidden rows' counts out of a survey's (a count that reaches 0 goes, as the scan never made it)."""
    for name, n in less.items():
        if name in counts:
            left = counts[name] - n
            if left > 0:
                counts[name] = left
            else:
                del counts[name]


# Sets of document numbers are sorted int64 arrays without repeats. np.unique and the set routines built on
# it hash their input in NumPy 2, slower on a large index than a sort, so these sort and compare neighbours.


def _distinct(nums: np.ndarray) -> np.ndarray:
    nums = np.sort(nums)
    return nums[np.concatenate(([True], nums[1:] != nums[:-1]))] if len(nums) else nums


def _merge(sets: list[np.ndarray]) -> np.ndarray:
    """The union of sorted sets (one per segment): a stable sort merges their runs in one pass."""
    if len(sets) == 1:
        return sets[0]
    nums = np.sort(np.concatenate(sets), kind="stable")
    return nums[np.concatenate(([True], nums[1:] != nums[:-1]))] if len(nums) else nums


def _union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _distinct(np.concatenate((a, b)))


def _intersect(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[_contains(b, a)]


def _minus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(b) < len(a):  # look the smaller set up in the larger: a segment's few hidden rows in all its rows
        at = np.minimum(np.searchsorted(a, b), len(a) - 1)
        return np.delete(a, at[a[at] == b])
    return a[~_contains(b, a)]


def _contains(sorted_set: np.ndarray, nums: np.ndarray) -> np.ndarray:
    """For each of ``nums``, whether ``sorted_set`` holds it."""
    if not len(sorted_set):
        return np.zeros(len(nums), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_set, nums), len(sorted_set) - 1)
    return sorted_set[at] == nums
