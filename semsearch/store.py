"""The index directory on disk: versions published atomically, a FAISS index, a SQLite document store.

Layout of an index directory (``indexes/default``)::

    CURRENT              name of the live version folder (swapped atomically by rename)
    v-<seq>-<time>/      one complete, immutable index version (seq counts publications)
        manifest.json    format version, model, counts, sources, file sizes and checksums
        vectors.npy      the exact float32 vectors (memory-mapped by readers); ids.npy: their document ids
        vectors.faiss    the ANN index over inner product (exact, IVF, IVF-PQ or HNSW; see ann.py)
        tuning_queries.npy  encoded sample queries the ANN search was tuned on (not for exact indexes)
        docs.sqlite      documents, provenance and external ids
        lexical/         the BM25 index (numpy arrays and JSON)
        encoder/         the ONNX export of the model (when the ONNX backend built it)
    cache/               embedding caches, one SQLite file per model fingerprint and precision
    .lock                held by the one writer (flock)
    .build-*             a half-written version; removed by the next writer

Readers resolve CURRENT once and read only that folder, so they always see a complete version.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from .corpus_map import write_map
from .errors import IndexCorruptError, IndexFormatError, IndexLockedError, IndexNotFoundError
from .records import Arrival, Document, Provenance
from .vectors import IDS_FILE, VECTOR_FILE, VectorStore, write_vector_files

FORMAT_NAME = "semsearch-index"
FORMAT_VERSION = 2  # 2: vectors.npy + ids.npy beside an ANN index of any kind
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
VECTORS = "vectors.faiss"
DOCS = "docs.sqlite"
ENCODER_DIR = "encoder"
LEXICAL_DIR = "lexical"
TUNING_QUERIES = "tuning_queries.npy"
CACHE_DIR = "cache"
LOCK = ".lock"
BUILD_PREFIX = ".build-"
# Versions kept besides the live one, so a reader that resolved CURRENT just before a swap can finish.
KEEP_OLD_VERSIONS = 1
# Replaced versions younger than this are kept too: open readers load some files lazily.
PRUNE_GRACE_S = 300.0

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
CREATE TABLE arrivals (
    num INTEGER PRIMARY KEY REFERENCES documents(num),
    version INTEGER NOT NULL,     -- sequence number of the version the document first entered
    added_at TEXT NOT NULL        -- UTC time of that build (ISO 8601)
);
"""


def doc_num(doc_id: str) -> int:
    """The int64 FAISS id of a document id (16 hex digits)."""
    return int(doc_id, 16)


def doc_id_from_num(num: int) -> str:
    """The document id of an int64 FAISS id."""
    return format(num, "016x")


def utc_now() -> str:
    """The current time as an ISO 8601 string in UTC, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def readonly_uri(path: Path) -> str:
    """A SQLite URI that opens a file read-only, whatever characters its path holds."""
    return path.resolve().as_uri() + "?mode=ro"


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    """Flush a file or directory to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_text_atomic(path: Path, text: str) -> None:
    """Write a file so that readers see the old or the new content, never a part."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_path(path.parent)


# ---------------------------------------------------------------- reading


def current_version(index_dir: Path) -> Path:
    """The folder of the live version of an index; raises IndexNotFoundError when there is none."""
    pointer = index_dir / CURRENT
    if not pointer.is_file():
        if index_dir.is_dir() and (index_dir / MANIFEST).is_file():
            return index_dir  # a bare version folder (e.g. copied out of an index) opens too
        raise IndexNotFoundError(
            f"no index at {index_dir} (build one with: semsearch index SOURCES --index {index_dir})"
        )
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise IndexCorruptError(f"{pointer} is unreadable ({exc}); rebuild with: semsearch index --full") from exc
    version = index_dir / name
    if not name or "/" in name or not (version / MANIFEST).is_file():
        raise IndexCorruptError(f"{pointer} points to a missing version {name!r}; rebuild with: semsearch index --full")
    return version


def read_manifest(version: Path) -> dict[str, Any]:
    """Load and check a version's manifest."""
    path = version / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise IndexCorruptError(f"{path} is missing; rebuild with: semsearch index --full") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexCorruptError(f"{path} is unreadable ({exc}); rebuild with: semsearch index --full") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise IndexCorruptError(f"{path} is not a semsearch manifest")
    version_no = manifest.get("format_version")
    if not isinstance(version_no, int):
        raise IndexCorruptError(f"{path} has no format_version")
    if version_no > FORMAT_VERSION:
        raise IndexFormatError(
            f"{path} is format version {version_no}, newer than this semsearch reads ({FORMAT_VERSION}); "
            "upgrade semsearch"
        )
    shape = {
        "model": (dict, ("name", "fingerprint", "dimension")),
        "counts": (dict, ("read", "documents", "exact_duplicates", "near_duplicates", "vectors")),
        "files": (dict, ()),
        "sources": (list, ()),
    }
    for key, (kind, fields) in shape.items():
        value = manifest.get(key)
        if not isinstance(value, kind) or any(f not in value for f in fields):
            raise IndexCorruptError(f"{path}: {key!r} is missing or malformed; rebuild with: semsearch index --full")
    if not all(isinstance(manifest["counts"][f], int) for f in shape["counts"][1]):
        raise IndexCorruptError(f"{path}: 'counts' is malformed; rebuild with: semsearch index --full")
    return manifest


def check_file_sizes(version: Path, manifest: dict[str, Any]) -> None:
    """Cheap load-time check: every recorded file exists with its recorded size (catches truncation).

    The encoder's files are left to the encoder's own loader, which can fall back to the source model.
    """
    for name, meta in manifest["files"].items():
        if name.startswith(f"{ENCODER_DIR}/"):
            continue
        path = version / name
        if not path.is_file():
            raise IndexCorruptError(f"{path} is missing; rebuild with: semsearch index --full")
        if path.stat().st_size != meta["size"]:
            raise IndexCorruptError(
                f"{path} is {path.stat().st_size} bytes, expected {meta['size']} (truncated or changed); "
                "rebuild with: semsearch index --full"
            )


def check_file_hashes(version: Path, manifest: dict[str, Any]) -> list[str]:
    """Full check: every recorded file's sha256; returns one problem line per mismatch."""
    problems = []
    for name, meta in manifest["files"].items():
        path = version / name
        if not path.is_file():
            problems.append(f"{path}: missing")
        elif file_sha256(path) != meta["sha256"]:
            problems.append(f"{path}: checksum mismatch")
    return problems


def read_faiss(path: Path, flags: int = 0) -> Any:
    """Load a FAISS index file (``flags``: FAISS IO flags), turning FAISS's errors into IndexCorruptError."""
    import faiss

    try:
        return faiss.read_index(str(path), flags)
    except Exception as exc:  # faiss raises RuntimeError with a C++ trace
        raise IndexCorruptError(f"{path} is not a readable FAISS index; rebuild with: semsearch index --full") from exc


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
            # Versions written before arrivals were recorded lack the table.
            self.has_arrivals = bool(
                self.conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='arrivals'").fetchone()
            )
        except sqlite3.Error as exc:
            raise IndexCorruptError(
                f"{path} is not a readable document store ({exc}); rebuild with: semsearch index --full"
            ) from exc

    def close(self) -> None:
        self.conn.close()

    def count(self) -> int:
        return int(self._query("SELECT count(*) FROM documents")[0][0])

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
        arrivals: dict[int, Arrival] = {}
        if self.has_arrivals:
            for num, version, added_at in self._query(
                f"SELECT num, version, added_at FROM arrivals WHERE num IN ({marks})", list(nums)
            ):
                arrivals[num] = Arrival(int(version), str(added_at))
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
                added=arrivals.get(num),
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

    def iter_documents(self, batch: int = 1000) -> Iterator[Document]:
        """Every document, in id order."""
        nums = [r[0] for r in self._query("SELECT num FROM documents ORDER BY num")]
        for start in range(0, len(nums), batch):
            chunk = self.get_many(nums[start : start + batch])
            for num in nums[start : start + batch]:
                yield chunk[num]


# ---------------------------------------------------------------- writing


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
        conn.executemany(
            "INSERT INTO arrivals VALUES (?, ?, ?)",
            ((doc_num(d.id), d.added.seq, d.added.at) for d in documents if d.added is not None),
        )
        conn.commit()
    finally:
        conn.close()


def write_contents(
    folder: Path,
    documents: Sequence[Document],
    vectors: np.ndarray,
    *,
    ann: str = "auto",
    memory_budget: int | None = None,
    previous: Path | None = None,
    tuning_queries: Any = None,
) -> dict[str, Any]:
    """Write a version's vectors (row i for documents[i]), ANN index, document store and BM25 index.

    ``previous`` is the live version, whose trained ANN structure is updated rather than trained again
    when it still fits. ``tuning_queries`` (vectors, or a function encoding them) tune the ANN search; they
    are kept in the version so that ``remove``, which loads no encoder, tunes on the same queries.
    Returns the manifest entries that describe what was written ("faiss", "ann", "vectors", "lexical", "map").
    """
    from .ann import DEFAULT_MEMORY_BUDGET, build_ann, factory_string

    used: list[np.ndarray] = []

    def queries() -> np.ndarray:
        found = tuning_queries() if callable(tuning_queries) else tuning_queries
        if found is None and previous is not None and (previous / TUNING_QUERIES).is_file():
            with contextlib.suppress(OSError, ValueError):
                found = np.load(previous / TUNING_QUERIES, allow_pickle=False)
        if found is None:
            found = np.zeros((0, vectors.shape[1]), dtype=np.float32)
        used.append(np.ascontiguousarray(found, dtype=np.float32))
        return used[-1]

    ids = np.array([doc_num(d.id) for d in documents], dtype=np.int64)
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or len(vectors) != len(documents):
        raise ValueError(f"{len(documents)} documents but vectors of shape {vectors.shape}")
    write_vector_files(folder, ids, vectors)
    index, spec = build_ann(
        vectors,
        ids,
        requested=ann,
        memory_budget=memory_budget or DEFAULT_MEMORY_BUDGET,
        previous=_previous_ann(previous),
        tuning_queries=queries,
    )
    if used and len(used[-1]) and used[-1].shape[1:] == vectors.shape[1:]:
        np.save(folder / TUNING_QUERIES, used[-1], allow_pickle=False)
    import faiss

    faiss.write_index(index, str(folder / VECTORS))
    del index
    write_documents(folder / DOCS, documents)
    return {
        "faiss": {"type": factory_string(spec), "metric": "inner_product", "normalized": True},
        "ann": spec.to_dict(),
        "vectors": {"file": VECTOR_FILE, "ids": IDS_FILE, "rows": int(len(ids))},
        "lexical": write_lexical(folder / LEXICAL_DIR, documents),
        "map": write_map(folder, documents, vectors),
    }


def _previous_ann(version: Path | None) -> Any:
    """The live version's ANN index and exact vectors, when they can seed an incremental update."""
    if version is None:
        return None
    from .ann import AnnSpec, PreviousAnn

    try:
        manifest = read_manifest(version)
        if "ann" not in manifest:
            return None
        spec = AnnSpec.from_dict(manifest["ann"])
        store = VectorStore.open(
            version, dimension=int(manifest["model"]["dimension"]), count=int(manifest["counts"]["vectors"])
        )
    except (IndexCorruptError, IndexFormatError, KeyError, TypeError, ValueError, EOFError):
        return None  # a damaged previous version is simply not reused
    return PreviousAnn(version / VECTORS, spec, store)


def write_lexical(folder: Path, documents: Sequence[Document]) -> dict[str, Any]:
    """Write the BM25 index of the documents; returns its parameters for the manifest."""
    from dataclasses import asdict

    from .lexical import LexicalIndex, lexical_text

    ids = [doc_num(d.id) for d in documents]
    lexical = LexicalIndex.build(ids, [lexical_text(d.title, d.text) for d in documents])
    lexical.save(folder)
    return {"bm25": asdict(lexical.params), "terms": len(lexical.vocab)}


@dataclass
class VersionWriter:
    """A new version being written beside the live one; ``publish`` makes it live atomically."""

    index_dir: Path
    path: Path

    @classmethod
    def create(cls, index_dir: Path) -> VersionWriter:
        index_dir.mkdir(parents=True, exist_ok=True)
        # A version numbered above the live one was renamed into place but never published (a crash
        # between the rename and the CURRENT swap): drop it before numbering the next one.
        live_seq = _sequence(_read_pointer(index_dir))
        for orphan in index_dir.glob("v-*"):
            if _sequence(orphan.name) > live_seq:
                shutil.rmtree(orphan, ignore_errors=True)
        path = index_dir / f"{BUILD_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        path.mkdir()
        return cls(index_dir, path)

    def record_files(self, manifest: dict[str, Any]) -> None:
        """Add size and sha256 of every file in the version to the manifest."""
        files = {}
        for path in sorted(self.path.rglob("*")):
            if path.is_file() and path.name != MANIFEST:
                files[path.relative_to(self.path).as_posix()] = {
                    "size": path.stat().st_size,
                    "sha256": file_sha256(path),
                }
        manifest["files"] = files

    def publish(self, manifest: dict[str, Any]) -> Path:
        """Write the manifest, flush everything, move the version into place and point CURRENT at it."""
        self.record_files(manifest)
        (self.path / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        for path in self.path.rglob("*"):
            if path.is_file():
                fsync_path(path)
        fsync_path(self.path)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        final = self.index_dir / f"v-{next_sequence(self.index_dir):06d}-{stamp}"
        os.rename(self.path, final)
        fsync_path(self.index_dir)
        write_text_atomic(self.index_dir / CURRENT, final.name + "\n")
        self.path = final  # published: abandon() must never touch it now
        with contextlib.suppress(OSError):  # leftovers only cost disk; the next writer prunes again
            prune_versions(self.index_dir)
        return final

    def abandon(self) -> None:
        """Remove the half-written version (a no-op once it is published)."""
        if self.path.name.startswith(BUILD_PREFIX):
            shutil.rmtree(self.path, ignore_errors=True)


def _sequence(name: str) -> int:
    """The publication number of a version folder name (v-000012-...), or -1."""
    parts = name.split("-")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "v" and parts[1].isdigit() else -1


def next_sequence(index_dir: Path) -> int:
    """One more than the highest version number in the index directory."""
    return 1 + max((_sequence(p.name) for p in index_dir.glob("v-*")), default=0)


def prune_versions(index_dir: Path, *, grace_s: float | None = None) -> None:
    """Remove replaced versions, temporary files and half-written builds of dead writers.

    Kept: the live version, the one it replaced, and any replaced within ``grace_s`` seconds, so a
    reader that resolved CURRENT just before a swap (or an open Index loading files lazily) can finish.
    Versions numbered above the live one were never published (a crash between rename and swap).
    """
    grace_s = PRUNE_GRACE_S if grace_s is None else grace_s
    live = _read_pointer(index_dir)
    live_seq = _sequence(live)
    older = sorted((p for p in index_dir.glob("v-*") if p.is_dir() and p.name != live), key=lambda p: _sequence(p.name))
    previous = [p for p in older if _sequence(p.name) < live_seq][-KEEP_OLD_VERSIONS:]
    # A version was replaced when its successor was published; the successor's folder time says when
    # (a version's own time is its build, which may be long before anyone stopped reading it).
    versions = (p for p in index_dir.glob("v-*") if p.is_dir() and _sequence(p.name) <= live_seq)
    published = sorted(versions, key=lambda p: _sequence(p.name))
    replaced_at: dict[Path, float] = {}
    for old, successor in zip(published, published[1:], strict=False):
        with contextlib.suppress(OSError):
            replaced_at[old] = successor.stat().st_mtime
    now = time.time()
    for old in older:
        unpublished = _sequence(old.name) > live_seq
        if old in previous or (not unpublished and now - replaced_at.get(old, 0.0) < grace_s):
            continue
        shutil.rmtree(old, ignore_errors=True)
    for tmp in index_dir.glob(f".{CURRENT}.*.tmp"):
        tmp.unlink(missing_ok=True)
    for stale in index_dir.glob(f"{BUILD_PREFIX}*"):
        pid = stale.name[len(BUILD_PREFIX) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid():
            shutil.rmtree(stale, ignore_errors=True)


def _read_pointer(index_dir: Path) -> str:
    """The version name in CURRENT ('' when absent or unreadable)."""
    try:
        return (index_dir / CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


@contextlib.contextmanager
def writer_lock(index_dir: Path, *, wait: bool = False) -> Iterator[None]:
    """Hold the index's single-writer lock; fail fast (or wait) when another process has it."""
    index_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(index_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as exc:
            raise IndexLockedError(
                f"another semsearch process is writing {index_dir}; try again when it finishes (or pass --wait)"
            ) from exc
        yield
    finally:
        os.close(fd)
