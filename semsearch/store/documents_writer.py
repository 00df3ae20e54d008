"""The document store's writing side: the schema of a ``docs.sqlite`` and the files a new version writes.

Reading is ``documents.py``; the two are the only modules that speak SQL to a version's documents.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from semsearch.core.records import Document
from semsearch.store.filter_columns import write_filter_columns
from semsearch.store.layout import doc_num
from semsearch.store.people import write_people

PAGE_SIZE = 16_384
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


def write_documents(path: Path, documents: Sequence[Document], *, filter_columns: bool = True) -> None:
    """Write a new document store, with the column index that --where filters read unless ``filter_columns``
    is False (the filter-columns part then adds it: ``add_filter_columns``)."""
    # In key order, B-tree pages fill one after another; in arrival order every insert lands on a random page,
    # and with SQLite's small page cache each page was written out many times over. Row order within a
    # document (its sources, texts, aliases) is kept.
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
    # Set before the first table (a no-op on a file that has them): a row holds a whole abstract and its
    # metadata, and pages four times SQLite's default leave far less of each page unused.
    conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    # A new file in an unpublished version folder: a crash discards the folder, and publishing fsyncs it,
    # so a rollback journal and per-transaction syncs would protect nothing.
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    return conn
