"""The index directory's names, and which version is live.

Layout of an index directory (``indexes/default``)::

    CURRENT              name of the live version folder (swapped atomically by rename)
    v-<seq>-<time>/      one complete, immutable index version (seq counts publications; files shared with the
                         previous version are hard links)
        manifest.json    format version, model, counts, sources, file sizes and checksums (manifest.py)
        vectors.npy      the exact float32 vectors (memory-mapped by readers); ids.npy: their ids (vectors.py)
        vectors.faiss    the ANN index over inner product (exact, IVF, IVF-PQ or HNSW; ann.py)
        tuning_queries.npy  encoded sample queries the ANN search was tuned on (ann.py)
        docs.sqlite      documents, provenance and external ids (documents.py)
        lexical/         the BM25 index, numpy arrays and JSON (lexical.py)
        map.json         the corpus map (corpus_map.py): the last layout; map-*.* beside it keep what an
                         append needs, and each appended version's map-seg-N.json its changes (map_layers.py)
        near/            the near-duplicate band keys of every text, checked by refreshes (dedup.py)
        seg-<seq>/       a segment a refresh appended; hidden.npy: rows no longer live (segments.py)
        encoder/         the ONNX export of the model, when the ONNX backend built it (onnx_backend.py)
    cache/               embedding caches, one SQLite file per model fingerprint and precision (cache.py)
    .lock                held by the one writer (flock; versions.py)
    .build-*             a half-written version; removed by the next writer (versions.py)

Readers resolve CURRENT once and read only that folder, so they always see a complete version.
"""

from __future__ import annotations

from pathlib import Path

from semsearch.core.errors import IndexCorruptError, IndexNotFoundError

CURRENT = "CURRENT"
MANIFEST = "manifest.json"
DOCS = "docs.sqlite"
ENCODER_DIR = "encoder"
LEXICAL_DIR = "lexical"
CACHE_DIR = "cache"
LOCK = ".lock"
BUILD_PREFIX = ".build-"


def doc_num(doc_id: str) -> int:
    """The int64 FAISS id of a document id (16 hex digits)."""
    return int(doc_id, 16)


def doc_id_from_num(num: int) -> str:
    """The document id of an int64 FAISS id."""
    return format(num, "016x")


def read_pointer(index_dir: Path) -> str:
    """The version name in CURRENT ('' when absent or unreadable, e.g. a bare version folder)."""
    try:
        return (index_dir / CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _version_named(index_dir: Path, name: str) -> Path | None:
    """The version folder a CURRENT name points to, or None when it names no version inside the index."""
    if not name or "/" in name or name in (".", ".."):
        return None
    version = index_dir / name
    return version if (version / MANIFEST).is_file() else None


def live_version(index_dir: Path) -> Path | None:
    """The live version folder named by CURRENT, or None when there is none that could be opened."""
    return _version_named(index_dir, read_pointer(index_dir))


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
    version = _version_named(index_dir, name)
    if version is None:
        raise IndexCorruptError(f"{pointer} points to a missing version {name!r}; rebuild with: semsearch index --full")
    return version
