"""The document store of a version (``docs.sqlite``): documents, where each came from, and their external ids."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .errors import IndexCorruptError
from .fileio import readonly_uri
from .layout import doc_num
from .records import Document, Provenance

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
"""



class DocumentStore:
    """Read access to a version's documents (SQLite, opened read-only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        # One connection may serve several threads (semsearch serve): sqlite3 connections are not safe for
        # concurrent use, so queries take turns.
        self._lock = threading.Lock()
        try:
            self.conn = sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False)
            self.conn.execute("SELECT count(*) FROM documents").fetchone()
        except sqlite3.Error as exc:
            raise IndexCorruptError(
                f"{path} is not a readable document store ({exc}); rebuild with: semsearch index --full"
            ) from exc

    def close(self) -> None:
        self.conn.close()

    def count(self) -> int:
        return int(self._query("SELECT count(*) FROM documents")[0][0])

    def ids(self) -> set[str]:
        """Every document id."""
        return {str(r[0]) for r in self._query("SELECT id FROM documents")}

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            with self._lock:
                return self.conn.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise IndexCorruptError(f"{self.path}: {exc}; rebuild with: semsearch index --full") from exc

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
            )
        return out

    def find(self, key: str) -> Document | None:
        """A document by its id, an unambiguous id prefix (≥ 6 digits), or an external id."""
        key = key.strip()
        rows = self._query("SELECT num FROM documents WHERE id = ?", (key.lower(),))
        if not rows:
            rows = self._query("SELECT num FROM external_ids WHERE external_id = ?", (key,))
        if not rows and len(key) >= 6 and all(c in "0123456789abcdef" for c in key.lower()):
            rows = self._query("SELECT num FROM documents WHERE id LIKE ? LIMIT 2", (key.lower() + "%",))
            if len(rows) > 1:
                return None
        if not rows:
            return None
        return self.get_many([rows[0][0]]).get(rows[0][0])

    def prefix_ids(self, prefix: str, limit: int = 3) -> list[str]:
        """Ids that start with a hex prefix (at most ``limit``): more than one means the prefix is ambiguous."""
        key = prefix.strip().lower()
        if not key or any(c not in "0123456789abcdef" for c in key):
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


def write_documents(path: Path, documents: Sequence[Document]) -> None:
    """Write a new document store."""
    conn = sqlite3.connect(path)
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
                    json.dumps(d.metadata, ensure_ascii=False, sort_keys=True),
                    json.dumps(d.external_ids, ensure_ascii=False),
                )
                for d in documents
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
        conn.commit()
    finally:
        conn.close()
