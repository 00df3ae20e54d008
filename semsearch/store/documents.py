"""The document store of a version (``docs.sqlite``): documents, where each came from, and their external ids.

A version with extra segments (segments.py) has one ``docs.sqlite`` per segment. ``open_documents`` opens the
base one and attaches the others, and TEMP views named as the tables (temp objects shadow main's for an
unqualified name) show the live rows of every segment, so each query below reads them as one store.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import IndexCorruptError, QueryError, sqlite_failure
from semsearch.core.fileio import readonly_uri
from semsearch.core.options import MAX_KEY_CHARS
from semsearch.core.records import Arrival, Document, Provenance
from semsearch.store.filter_columns import TABLES as FILTER_TABLES
from semsearch.store.filter_columns import SegmentTables, write_filter_columns
from semsearch.store.layout import DOCS, doc_num
from semsearch.store.people import TABLE as PEOPLE
from semsearch.store.people import VIEW_COLUMNS as PEOPLE_COLUMNS
from semsearch.store.people import find_people, write_people

if TYPE_CHECKING:
    from semsearch.store.manifest import Manifest
    from semsearch.store.segments import Segment

ID_DIGITS = 16  # a document id's hex digits (textnorm.doc_id_for): a longer key is no id's prefix
_SCHEMA = """
CREATE TABLE documents (
    num INTEGER PRIMARY KEY,      -- the FAISS id: int(id, 16)
    id TEXT NOT NULL UNIQUE,
    text_hash TEXT NOT NULL,
    title TEXT,
    text TEXT NOT NULL,
    metadata TEXT NOT NULL,       -- JSON object
    external_ids TEXT NOT NULL    -- JSON array
);
CREATE TABLE provenance (
    num INTEGER NOT NULL REFERENCES documents(num),
    file TEXT NOT NULL,
    kind TEXT NOT NULL,
    number INTEGER NOT NULL
);
CREATE INDEX provenance_num ON provenance(num);
CREATE INDEX provenance_file ON provenance(file);
CREATE TABLE external_ids (
    external_id TEXT NOT NULL,
    num INTEGER NOT NULL REFERENCES documents(num)
);
CREATE INDEX external_ids_id ON external_ids(external_id);
CREATE TABLE document_texts (     -- the other texts merged into a document (its own is documents.text_hash)
    text_hash TEXT NOT NULL,
    num INTEGER NOT NULL REFERENCES documents(num)
);
CREATE INDEX document_texts_num ON document_texts(num);
CREATE TABLE aliases (            -- former ids of a document, which still resolve to it (see identity.py)
    alias TEXT PRIMARY KEY,
    num INTEGER NOT NULL REFERENCES documents(num)
);
CREATE INDEX aliases_num ON aliases(num);
CREATE TABLE arrivals (
    num INTEGER PRIMARY KEY REFERENCES documents(num),
    version INTEGER NOT NULL,     -- sequence number of the version the document first entered
    added_at TEXT NOT NULL        -- UTC time of that build (ISO 8601)
);
CREATE TABLE title_only (         -- documents read without an abstract: their text is their title
    num INTEGER PRIMARY KEY REFERENCES documents(num)
);
"""
# Tables older versions lack; readers treat a missing one as empty.
_OPTIONAL_TABLES = ("document_texts", "aliases", "title_only", "arrivals", PEOPLE)
# The columns each segment view shows. A document's rows all lie in one segment, so a view's rowid (the
# segment's own) still orders the rows of one document as they were written.
_VIEW_COLUMNS = {
    "documents": "num, id, text_hash, title, text, metadata, external_ids",
    "provenance": "rowid AS rowid, num, file, kind, number",
    "external_ids": "external_id, num",
    "document_texts": "rowid AS rowid, text_hash, num",
    "aliases": "alias, num",
    "arrivals": "num, version, added_at",
    "title_only": "num",
    PEOPLE: PEOPLE_COLUMNS,
}
_REQUIRED_TABLES = ("documents", "provenance", "external_ids")


def open_documents(version: Path, manifest: Manifest) -> DocumentStore:
    """The document store of a version: its live documents over all its segments."""
    return DocumentStore.open_version(version, manifest.version_segments(version))


class DocumentStore:
    """Read access to a version's documents (SQLite, opened read-only)."""

    def __init__(self, path: Path, *, segments: Sequence[Segment] = ()) -> None:
        """Open ``path``; with ``segments`` (base first, path being the base's), their live rows as one store."""
        self.path = path
        # One connection may serve several threads (semsearch serve): sqlite3 connections are not safe for
        # concurrent use, so queries take turns.
        self._lock = threading.Lock()
        self._segments: SegmentTables = []
        self._found: list[set[str]] = []  # each segment's tables
        self._count: int | None = None
        try:
            self.conn = sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False)
            if segments:
                tables = self._attach(segments)
            else:
                self.conn.execute("SELECT count(*) FROM documents").fetchone()
                tables = [{r[0] for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}]
        except IndexCorruptError:  # an extra segment's file, named
            self._close_quietly()
            raise
        except sqlite3.Error as exc:
            self._close_quietly()
            raise IndexCorruptError(
                f"{path} is not a readable document store ({exc}); rebuild with: semsearch index --full"
            ) from exc
        # A table some segment lacks (a base older than the table) holds nothing there.
        self._tables = set().union(*tables).intersection(_OPTIONAL_TABLES)
        self._filter_columns = all(t.issuperset(FILTER_TABLES) for t in tables)
        # Name queries need every segment's people: a base written before them would lose its authors' papers.
        self._people = all(PEOPLE in t for t in tables)

    @classmethod
    def open_version(cls, version: Path, segments: Sequence[Segment]) -> DocumentStore:
        """A version's store over its segments (base first); a lone base with nothing hidden opens as it is."""
        if len(segments) <= 1 and not any(len(s.hidden) for s in segments):
            return cls(version / DOCS)
        return cls(version / DOCS, segments=segments)

    def _attach(self, segments: Sequence[Segment]) -> list[set[str]]:
        """Attach the extra segments and create the views of their live rows; returns each one's tables."""
        conn = self.conn
        conn.execute("PRAGMA temp_store = MEMORY")
        tables: list[set[str]] = []
        counts = 0
        for i, segment in enumerate(segments):
            schema = "main" if i == 0 else f"seg{i}"
            path = self.path if i == 0 else segment.folder / DOCS
            try:
                if i:
                    conn.execute(f"ATTACH DATABASE ? AS {schema}", (readonly_uri(path),))
                found = {r[0] for r in conn.execute(f"SELECT name FROM {schema}.sqlite_master WHERE type = 'table'")}
                missing = [t for t in _REQUIRED_TABLES if t not in found]
                if missing:
                    raise sqlite3.DatabaseError(f"no table {missing[0]}")
                counts += int(conn.execute(f"SELECT count(*) FROM {schema}.documents").fetchone()[0])
                hidden = np.asarray(segment.hidden, dtype=np.int64)
                if len(hidden):
                    conn.execute(f"CREATE TEMP TABLE hidden{i} (num INTEGER PRIMARY KEY)")
                    conn.executemany(f"INSERT INTO temp.hidden{i} VALUES (?)", ((int(n),) for n in hidden))
                    sql = f"SELECT count(*) FROM {schema}.documents WHERE num IN (SELECT num FROM temp.hidden{i})"
                    counts -= int(conn.execute(sql).fetchone()[0])
            except sqlite3.Error as exc:
                if not i:
                    raise
                raise IndexCorruptError(
                    f"{path} is not a readable document store ({exc}); rebuild with: semsearch index --full"
                ) from exc
            tables.append(found)
            self._segments.append((schema, hidden))
        for table, columns in _VIEW_COLUMNS.items():
            parts = []
            for i, ((schema, hidden), found) in enumerate(zip(self._segments, tables, strict=True)):
                if table not in found:
                    continue
                live = f" WHERE num NOT IN (SELECT num FROM temp.hidden{i})" if len(hidden) else ""
                parts.append(f"SELECT {columns} FROM {schema}.{table}{live}")
            if parts:
                conn.execute(f"CREATE TEMP VIEW {table} AS " + " UNION ALL ".join(parts))
        self._count = counts
        self._found = tables
        return tables

    def _close_quietly(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        self.conn.close()

    def has_table(self, name: str) -> bool:
        """Whether the store has a table that older versions lack (``document_texts``, ``aliases``, ...)."""
        return name in self._tables

    @property
    def segment_tables(self) -> SegmentTables | None:
        """(schema, hidden numbers) of each segment, base first; None for a store of one file."""
        return list(self._segments) if self._segments else None

    def count(self) -> int:
        if self._count is not None:  # over segments: counted at open (a view would read every row)
            return self._count
        return int(self._query("SELECT count(*) FROM documents")[0][0])

    def ids(self) -> set[str]:
        """Every document id."""
        return {str(r[0]) for r in self._query("SELECT id FROM documents")}

    @property
    def has_filter_columns(self) -> bool:
        """Whether the version has the column index --where reads (versions before it are scanned)."""
        return self._filter_columns

    def people(self, text: str) -> dict[str, list[int]]:
        """The authors ``text`` names (any usual form) and their documents' numbers.

        Empty for a version with a segment written before the people table (``semsearch index --full`` adds it).
        """
        return find_people(self._query, text) if self._people else {}

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one read-only SELECT (what ``filter_columns`` asks of the store)."""
        return self._query(sql, params)

    def joined(self, sql: str) -> list[tuple[Any, ...]]:
        """Run a SELECT joining tables on ``d.num`` (each named ``{db}table``, ``d`` the documents) per segment.

        A join of two segment views is planned as every pair of segments, scanning each table once per
        segment; a document's rows all lie in its own segment, so joining within each one answers alike.
        """
        if not self._segments:
            return self._query(sql.replace("{db}", "") + " WHERE 1")
        parts = []
        for i, (schema, hidden) in enumerate(self._segments):
            if any(f"{{db}}{table}" in sql for table in _OPTIONAL_TABLES if table not in self._found[i]):
                continue  # a segment older than a table holds none of its rows
            live = f"d.num NOT IN (SELECT num FROM temp.hidden{i})" if len(hidden) else "1"
            parts.append(sql.replace("{db}", f"{schema}.") + f" WHERE {live}")
        return self._query(" UNION ALL ".join(parts)) if parts else []

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:  # damage says rebuild; a request past SQLite's limits is a bad request
            raise sqlite_failure(str(self.path), exc) from exc

    def get_many(self, nums: Sequence[int]) -> dict[int, Document]:
        """Documents by FAISS id, with their provenance."""
        if not nums:
            return {}
        marks = ",".join("?" * len(nums))
        rows = self._query(
            f"SELECT num, id, text_hash, title, text, metadata, external_ids FROM documents WHERE num IN ({marks})",
            list(nums),
        )
        sources: dict[int, list[Provenance]] = {}
        for num, file, kind, number in self._query(
            f"SELECT num, file, kind, number FROM provenance WHERE num IN ({marks}) ORDER BY rowid",
            list(nums),
        ):
            sources.setdefault(num, []).append(Provenance(file, kind, number))
        texts: dict[int, list[str]] = {}
        aliases: dict[int, list[str]] = {}
        title_only: set[int] = set()
        if "document_texts" in self._tables:
            sql = f"SELECT num, text_hash FROM document_texts WHERE num IN ({marks}) ORDER BY rowid"
            for num, text_hash in self._query(sql, list(nums)):
                texts.setdefault(num, []).append(text_hash)
        if "aliases" in self._tables:
            for num, alias in self._query(f"SELECT num, alias FROM aliases WHERE num IN ({marks})", list(nums)):
                aliases.setdefault(num, []).append(alias)
        arrivals: dict[int, Arrival] = {}
        if "arrivals" in self._tables:
            sql = f"SELECT num, version, added_at FROM arrivals WHERE num IN ({marks})"
            for num, version, added_at in self._query(sql, list(nums)):
                arrivals[num] = Arrival(int(version), str(added_at))
        if "title_only" in self._tables:
            title_only = {r[0] for r in self._query(f"SELECT num FROM title_only WHERE num IN ({marks})", list(nums))}
        out = {}
        for num, doc_id, text_hash, title, text, metadata, external_ids in rows:
            out[num] = Document(
                id=doc_id,
                text=text,
                title=title,
                sources=sources.get(num, []),
                external_ids=json.loads(external_ids),
                metadata=json.loads(metadata),
                text_hash=text_hash,
                title_only=num in title_only,
                texts=texts.get(num, []),
                aliases=sorted(aliases.get(num, [])),
                added=arrivals.get(num),
            )
        return out

    @property
    def has_arrivals(self) -> bool:
        """Whether the version records when its documents arrived (versions before that do not)."""
        return "arrivals" in self._tables

    def arrivals(self) -> dict[str, Arrival]:
        """Document id -> when it first entered the index (empty for versions without the record)."""
        if not self.has_arrivals:
            return {}
        sql = "SELECT d.id, a.version, a.added_at FROM {db}documents d JOIN {db}arrivals a ON a.num = d.num"
        return {str(i): Arrival(int(v), str(t)) for i, v, t in self.joined(sql)}

    def latest_arrival(self) -> int | None:
        """The sequence number of the latest version that added documents (None without the record)."""
        if not self.has_arrivals:
            return None
        found = self._query("SELECT max(version) FROM arrivals")[0][0]
        return None if found is None else int(found)

    def positions(self) -> dict[tuple[str, str, int], str]:
        """Every source position (file, kind, number) -> the id of the document read there."""
        sql = "SELECT d.id, p.file, p.kind, p.number FROM {db}provenance p JOIN {db}documents d ON d.num = p.num"
        return {(f, k, int(n)): str(i) for i, f, k, n in self.joined(sql)}

    def alias_count(self) -> int:
        """How many former ids resolve to a document of this version."""
        return int(self._query("SELECT count(*) FROM aliases")[0][0]) if "aliases" in self._tables else 0

    def find(self, key: str) -> Document | None:
        """A document by its id, a former id (alias), an unambiguous id prefix (≥ 6 digits), or an external id."""
        key = check_key(key)
        rows = self._query("SELECT num FROM documents WHERE id = ?", (key.lower(),))
        if not rows and "aliases" in self._tables:
            rows = self._query("SELECT num FROM aliases WHERE alias = ?", (key.lower(),))
        if not rows:
            rows = self._query("SELECT num FROM external_ids WHERE external_id = ?", (key,))
        if not rows and 6 <= len(key) <= ID_DIGITS and all(c in "0123456789abcdef" for c in key.lower()):
            rows = self._query("SELECT num FROM documents WHERE id LIKE ? LIMIT 2", (key.lower() + "%",))
            if len(rows) > 1:
                return None
        if not rows:
            return None
        return self.get_many([rows[0][0]]).get(rows[0][0])

    def prefix_ids(self, prefix: str, limit: int = 3) -> list[str]:
        """Ids that start with a hex prefix (at most ``limit``): more than one means the prefix is ambiguous."""
        key = prefix.strip().lower()
        if not key or len(key) > ID_DIGITS or any(c not in "0123456789abcdef" for c in key):
            return []
        rows = self._query("SELECT id FROM documents WHERE id LIKE ? ORDER BY id LIMIT ?", (key + "%", limit))
        return [str(r[0]) for r in rows]

    def iter_documents(self, batch: int = 1000) -> Iterator[Document]:
        """Every document, in id order."""
        nums = [r[0] for r in self._query("SELECT num FROM documents ORDER BY num")]
        for start in range(0, len(nums), batch):
            chunk = self.get_many(nums[start : start + batch])
            for num in nums[start : start + batch]:
                yield chunk[num]


def check_key(key: str) -> str:
    """A lookup key without surrounding space; QueryError when it is longer than any id ingest keeps."""
    key = key.strip()
    if len(key) > MAX_KEY_CHARS:
        raise QueryError(
            f"an id is at most {MAX_KEY_CHARS:,} characters; this one has {len(key):,} (ids appear in search results)"
        )
    return key


def write_documents(path: Path, documents: Sequence[Document], *, filter_columns: bool = True) -> None:
    """Write a new document store, with the column index that --where filters read unless ``filter_columns``
    is False (the filter-columns part then adds it: ``add_filter_columns``)."""
    # In key order, B-tree pages fill one after another; in arrival order every insert lands on a random page,
    # and with SQLite's small page cache each page was written out many times (3.5 GB for a 0.5 GB file at
    # 157k). Row order within a document (its sources, texts, aliases) is kept.
    documents = sorted(documents, key=lambda d: doc_num(d.id))
    metadata = stored_metadata(documents)
    conn = _new_file_connection(path)
    try:
        conn.executescript(_SCHEMA)
        conn.executemany(
            "INSERT INTO documents VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                (
                    doc_num(d.id),
                    d.id,
                    d.text_hash,
                    d.title,
                    d.text,
                    meta,
                    json.dumps(d.external_ids, ensure_ascii=False),
                )
                for d, meta in zip(documents, metadata, strict=True)
            ),
        )
        conn.executemany(
            "INSERT INTO provenance VALUES (?, ?, ?, ?)",
            ((doc_num(d.id), p.file, p.kind, p.number) for d in documents for p in d.sources),
        )
        conn.executemany(
            "INSERT INTO external_ids VALUES (?, ?)",
            ((e, doc_num(d.id)) for d in documents for e in d.external_ids),
        )
        conn.executemany(
            "INSERT INTO document_texts VALUES (?, ?)", ((h, doc_num(d.id)) for d in documents for h in d.texts)
        )
        conn.executemany(
            "INSERT INTO aliases VALUES (?, ?)", ((a, doc_num(d.id)) for d in documents for a in d.aliases)
        )
        conn.executemany("INSERT INTO title_only VALUES (?)", ((doc_num(d.id),) for d in documents if d.title_only))
        conn.executemany(
            "INSERT INTO arrivals VALUES (?, ?, ?)",
            ((doc_num(d.id), d.added.seq, d.added.at) for d in documents if d.added is not None),
        )
        write_people(conn, documents)  # name queries (store/people.py): with every write of documents
        if filter_columns:
            write_filter_columns(conn, documents, metadata)
        conn.commit()
    finally:
        conn.close()


def add_filter_columns(path: Path, documents: Sequence[Document]) -> None:
    """Add the column index that --where filters read to a store ``write_documents`` just wrote of documents."""
    documents = sorted(documents, key=lambda d: doc_num(d.id))
    conn = _new_file_connection(path)
    try:
        # The metadata as stored, read back in number order (the documents' order here): not encoded again.
        metadata = [str(r[0]) for r in conn.execute("SELECT metadata FROM documents ORDER BY num")]
        if len(metadata) != len(documents):
            raise ValueError(f"{path} holds {len(metadata)} documents, not the {len(documents)} given")
        write_filter_columns(conn, documents, metadata)
        conn.commit()
    finally:
        conn.close()


def stored_metadata(documents: Sequence[Document]) -> list[str]:
    """Each document's metadata as the store keeps it (JSON, keys sorted), which the filter columns read."""
    return [json.dumps(d.metadata, ensure_ascii=False, sort_keys=True) for d in documents]


def _new_file_connection(path: Path) -> sqlite3.Connection:
    """A connection to a store file of an unpublished version, without journal or syncs."""
    conn = sqlite3.connect(path)
    # A new file in an unpublished version folder: a crash discards the folder, and publishing fsyncs it,
    # so a rollback journal and per-transaction syncs would protect nothing.
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    return conn
