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
    .publishing          the version a writer is moving into place; a leftover names one never published

Readers resolve CURRENT once and read only that folder, so they always see a complete version.
"""

from __future__ import annotations

import json
from pathlib import Path

from semsearch.core.errors import IndexNotFoundError, IndexPointerError

CURRENT = "CURRENT"
MANIFEST = "manifest.json"
DOCS = "docs.sqlite"
ENCODER_DIR = "encoder"
LEXICAL_DIR = "lexical"
CACHE_DIR = "cache"
LOCK = ".lock"
BUILD_PREFIX = ".build-"
PUBLISHING = ".publishing"
VERSION_PREFIX = "v-"
INDEX_FORMAT = "semsearch-index"


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


def index_of_version(folder: Path) -> Path | None:
    """The index a version folder belongs to (``IDX`` for ``IDX/v-…``), or None for any other folder."""
    folder = Path(folder)
    parent = folder.resolve().parent
    if folder.name.startswith(VERSION_PREFIX) and (folder / MANIFEST).is_file() and (parent / CURRENT).exists():
        return parent
    return None


def version_folders(index_dir: Path) -> list[Path]:
    """The ``v-*`` folders of an index, newest (highest publication number) first."""
    folders = [p for p in index_dir.glob(f"{VERSION_PREFIX}*") if p.is_dir()] if index_dir.is_dir() else []
    return sorted(folders, key=lambda p: _sequence(p.name), reverse=True)


def _sequence(name: str) -> int:
    parts = name.split("-")
    return int(parts[1]) if len(parts) > 2 and parts[1].isdigit() else -1


def sound_version(version: Path) -> bool:
    """Whether a version folder looks whole: its manifest loads and every file it lists has its recorded size.

    A quick check (no checksums; ``semsearch verify`` reads every byte) used to choose where CURRENT may point.
    """
    try:
        data = json.loads((version / MANIFEST).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
            return False
        files = data.get("files", {})
        return isinstance(files, dict) and all(
            (version / name).stat().st_size == entry["size"] for name, entry in files.items()
        )
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError):
        return False


def newest_sound_version(index_dir: Path) -> Path | None:
    """The highest-numbered version folder that passes ``sound_version``, or None."""
    return next((v for v in version_folders(index_dir) if sound_version(v)), None)


def pointer_problem(index_dir: Path) -> str | None:
    """What is wrong with CURRENT (unreadable, missing beside versions, naming no version), or None.

    An index folder without CURRENT and without versions has no problem: it is new (or a bare version folder).
    """
    pointer = index_dir / CURRENT
    if not pointer.is_file():
        if pointer.exists() or version_folders(index_dir):
            return "is missing" if not pointer.exists() else "is not a file"
        return None
    try:
        name = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        return f"is unreadable ({exc})"
    if _version_named(index_dir, name) is None:
        return f"points to a missing version {name[:80]!r}"
    return None


def pointer_error(index_dir: Path, problem: str) -> IndexPointerError:
    """The one-line error for a bad CURRENT: what is wrong, the newest sound version and how to point back."""
    pointer = index_dir / CURRENT
    newest = newest_sound_version(index_dir)
    if newest is None:
        return IndexPointerError(
            f"{pointer} {problem}, and no version in {index_dir} is sound; nothing was deleted. "
            f"Rebuild with: semsearch index --full SOURCES --index {index_dir}"
        )
    return IndexPointerError(
        f"{pointer} {problem}; nothing was deleted. The newest sound version is {newest.name}: point back to it "
        f"with: semsearch index --recover --index {index_dir} (or by hand: printf {newest.name} > {pointer})"
    )


def current_version(index_dir: Path) -> Path:
    """The folder of the live version of an index; raises IndexNotFoundError when there is none.

    A CURRENT that is unreadable, missing beside versions, or names no version raises IndexPointerError.
    """
    problem = pointer_problem(index_dir)
    if problem is not None:
        raise pointer_error(index_dir, problem)
    version = live_version(index_dir)
    if version is not None:
        return version
    if index_dir.is_dir() and (index_dir / MANIFEST).is_file():
        return index_dir  # a bare version folder (e.g. copied out of an index) opens too
    raise IndexNotFoundError(f"no index at {index_dir} (build one with: semsearch index SOURCES --index {index_dir})")
