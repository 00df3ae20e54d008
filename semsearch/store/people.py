"""The people of a version: each author's name parts, written with the documents, so a name query is a look-up.

``docs.sqlite`` holds two ``people`` rows per (author, document), keyed by the two ends of the name each way
round, folded (``semsearch.core.names``): "Lin Zhouchen", "Zhouchen Lin" and "zhouchen lín" are one indexed key,
"Z. Lin" one short range of keys, and a match in Python holds the few names read to the whole rule. The rows are
written wherever the documents are (a full write and every appended segment), and read through the store's
segment views, which leave out hidden (removed or replaced) documents: the people answer as the documents do.
The filter columns could not serve: they key each author by the whole lower-cased string, which neither another
order, an initial nor a missing accent reaches.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from semsearch.core.names import is_name_form, matches, name_ends, name_parts, query_ends
from semsearch.core.paperinfo import authors_of
from semsearch.core.records import Document
from semsearch.store.layout import doc_num

TABLE = "people"
SCHEMA = """
CREATE TABLE people (              -- each author by the ends of the name: what a name query looks up (store/people.py)
    end_part TEXT NOT NULL,        -- the first or the last part of the name, folded (core/names.py)
    other_part TEXT NOT NULL,      -- the part at its other end
    name TEXT NOT NULL,            -- the author's name as the document gives it
    num INTEGER NOT NULL,          -- the document (documents.num)
    PRIMARY KEY (end_part, other_part, name, num)
) WITHOUT ROWID;                   -- the table is its own index: half the bytes of a table and an index
"""
VIEW_COLUMNS = "end_part, other_part, name, num"
_RANGE_END = "\U0010ffff"  # after every part that starts with a letter: "z" <= part < "z" + this

Rows = Callable[[str, Sequence[Any]], list[tuple[Any, ...]]]


def people_rows(documents: Sequence[Document]) -> list[tuple[str, str, str, int]]:
    """(end, other, name, document number) for every author of every document, in key order (written fast)."""
    found: list[tuple[str, str, str, int]] = []
    ends: dict[str, list[tuple[str, str]]] = {}  # a name is folded once, however many papers it signs
    for doc in documents:
        num = doc_num(doc.id)
        for name in dict.fromkeys(authors_of(doc.metadata)):
            keys = ends.get(name)
            if keys is None:
                keys = ends[name] = name_ends(name)
            found.extend((end, other, name, num) for end, other in keys)
    found.sort()
    return found


def write_people(conn: sqlite3.Connection, documents: Sequence[Document]) -> None:
    """Create and fill the people table of a store being written."""
    conn.executescript(SCHEMA)
    conn.executemany("INSERT INTO people VALUES (?, ?, ?, ?)", people_rows(documents))


def find_people(rows: Rows, text: str) -> dict[str, list[int]]:
    """The authors whose name ``text`` is, as typed (any order, case, accents, initials), with their documents.

    Empty when ``text`` is not a name form (one word, a sentence, digits) or names nobody in the index. Each
    distinct stored name is its own entry: namesakes spelled alike are one entry, other spellings are not merged.
    """
    parts = name_parts(text)
    if not is_name_form(parts):
        return {}
    # A name's two ends are among the parts typed: one indexed read per pair of them (one for "Zhouchen Lin"),
    # exact for two whole parts, a range for a whole part and an initial ("Z. Lin": every Lin whose other end
    # starts with z); the names read are then held to the whole rule (``matches``).
    clauses, params = [], []
    for end, other in query_ends(parts):
        if len(other) > 1:
            clauses.append("SELECT name, num FROM people WHERE end_part = ? AND other_part = ?")
            params += [end, other]
        else:
            clauses.append("SELECT name, num FROM people WHERE end_part = ? AND other_part >= ? AND other_part < ?")
            params += [end, other, other + _RANGE_END]
    found: dict[str, set[int]] = {}
    verdict: dict[str, bool] = {}
    for name, num in rows(" UNION ALL ".join(clauses), params):
        if name not in verdict:
            verdict[name] = matches(parts, name_parts(name))
        if verdict[name]:
            found.setdefault(name, set()).add(int(num))
    return {name: sorted(nums) for name, nums in sorted(found.items())}
