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
from semsearch.store.layout import DOCS
from semsearch.store.people import TABLE as PEOPLE
from semsearch.store.people import VIEW_COLUMNS as PEOPLE_COLUMNS
from semsearch.store.people import find_people

if TYPE_CHECKING:
    from semsearch.store.manifest import Manifest
    from semsearch.store.segments import Segment

ID_DIGITS = 16  # a document id's hex digits (textnorm.doc_id_for): a longer key is no id's prefix
# Tables older versions lack; readers treat a missing one as empty.
# The filter columns' tables (filter_columns.SCHEMA): a version whose every segment holds them answers --where
# from them.
FILTER_TABLES = ("filter_values", "filter_fields", "filter_documents")
SegmentTables = list[tuple[str, np.ndarray]]  # each segment's schema (as attached) and its hidden numbers
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
            _check_whole_pages(self.conn, "main", path)
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
                    _check_whole_pages(conn, schema, path)
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

    def aliases(self) -> list[str]:
        """Every former id that resolves to a document of this version."""
        return [str(r[0]) for r in self._query("SELECT alias FROM aliases")] if self.alias_count() else []

    def held_external_ids(self, ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` that some document carries as an external id."""
        sql = "SELECT DISTINCT external_id FROM external_ids WHERE external_id IN (SELECT value FROM json_each(?))"
        return [str(r[0]) for r in self._query(sql, (json.dumps(list(ids)),))] if ids else []

    def text_owners(self, hashes: Sequence[str]) -> dict[str, str]:
        """Text hash -> id of the document holding that text (its own or a merged copy's), for hashes held."""
        if not hashes:
            return {}
        param = (json.dumps(list(hashes)),)
        rows = self._query(
            "SELECT text_hash, id FROM documents WHERE text_hash IN (SELECT value FROM json_each(?))", param
        )
        if "document_texts" in self._tables:
            rows += self._query(
                "SELECT t.text_hash, d.id FROM document_texts t JOIN documents d ON d.num = t.num "
                "WHERE t.text_hash IN (SELECT value FROM json_each(?))",
                param,
            )
        return {str(h): str(i) for h, i in rows}

    def source_files(self) -> list[str]:
        """Every file name the documents' provenance records."""
        return [str(r[0]) for r in self._query("SELECT DISTINCT file FROM provenance")]

    def nums_read_from(self, files: Sequence[str]) -> list[int]:
        """Numbers of the documents with a source among these file names."""
        if not files:
            return []
        sql = "SELECT DISTINCT num FROM provenance WHERE file IN (SELECT value FROM json_each(?))"
        return [int(r[0]) for r in self._query(sql, (json.dumps(list(files)),))]

    def nums(self) -> set[int]:
        """Every document number."""
        return {int(r[0]) for r in self._query("SELECT num FROM documents")}

    def texts_by_id(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored text of each of these document ids that the store holds."""
        texts: dict[str, str] = {}
        for start in range(0, len(ids), 500):  # below SQLite's bound on a statement's parameters
            chunk = list(ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            texts.update(self._query(f"SELECT id, text FROM documents WHERE id IN ({marks})", chunk))
        return texts

    def identity_rows(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[tuple[str, str]]]:
        """What ids are kept against: (id, own text hash), (merged text hash, id) and (alias, id) rows."""
        own = [(str(i), str(h)) for i, h in self._query("SELECT id, text_hash FROM documents")]
        merged: list[tuple[str, str]] = []
        aliases: list[tuple[str, str]] = []
        if self.has_table("document_texts"):
            sql = "SELECT t.text_hash, d.id FROM {db}document_texts t JOIN {db}documents d ON d.num = t.num"
            merged = [(str(h), str(i)) for h, i in self.joined(sql)]
        if self.has_table("aliases"):
            sql = "SELECT a.alias, d.id FROM {db}aliases a JOIN {db}documents d ON d.num = a.num"
            aliases = [(str(a), str(i)) for a, i in self.joined(sql)]
        return own, merged, aliases

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


def check_store_file(path: Path) -> tuple[str, int]:
    """A store file's integrity check result and its provenance rows that point to no document (sqlite3.Error
    when it cannot be read)."""
    integrity, orphans = _first_values(
        path, "PRAGMA integrity_check", "SELECT count(*) FROM provenance WHERE num NOT IN (SELECT num FROM documents)"
    )
    return str(integrity), int(orphans)


def filter_index_counts(path: Path, tables: Sequence[str]) -> tuple[int, int] | None:
    """(documents the filter columns index, documents the file holds); None when it lacks those ``tables``.

    Raises sqlite3.Error (or TypeError for a count table without its row) when the file cannot say."""
    (found,) = _first_values(path, "SELECT group_concat(name) FROM sqlite_master WHERE type = 'table'")
    if not set(str(found or "").split(",")).issuperset(tables):
        return None
    indexed, held = _first_values(path, "SELECT count FROM filter_documents", "SELECT count(*) FROM documents")
    return indexed, held


def _check_whole_pages(conn: sqlite3.Connection, schema: str, path: Path) -> None:
    """Raise unless the file is a whole number of its pages: SQLite reads a cut last page as zeros, not an error."""
    page = int(conn.execute(f"PRAGMA {schema}.page_size").fetchone()[0])
    size = path.stat().st_size
    if page and size % page:
        raise sqlite3.DatabaseError(f"{size} bytes is not a whole number of {page}-byte pages: the file was cut short")


def _first_values(path: Path, *sql: str) -> list[Any]:
    """The first value of each statement's first row, read-only."""
    conn = sqlite3.connect(readonly_uri(path), uri=True)
    try:
        return [conn.execute(s).fetchone()[0] for s in sql]
    finally:
        conn.close()
