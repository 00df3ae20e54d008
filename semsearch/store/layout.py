"""The index directory's names, and which version is live.

Layout of an index directory (``indexes/default``)::

    CURRENT              name of the live version folder (swapped atomically by rename)
    v-<seq>-<time>/      one complete, immutable index version (seq counts publications; files shared with the
                         previous version are hard links)
        manifest.json    format version, model, counts, sources, file sizes and checksums (manifest.py)
        vectors.npy      the exact float32 vectors (memory-mapped by readers); ids.npy: their ids (vectors.py)
        vectors.faiss    the ANN index over inner product (IVF, IVF-PQ or HNSW; ann_build.py, ann.py); none for
                         the exact kind, built from vectors.npy when a version is opened
        windows.npy      sentence (window) vectors as int8 codes, window_scales.npy and window_ids.npy beside
                         them, with a sentence or windowed reading (windows_part.py)
        tuning_queries.npy  encoded sample queries the ANN search was tuned on (ann_build.py)
        docs.sqlite      documents, provenance and external ids (documents.py)
        lexical/         the BM25 index, numpy arrays and JSON (lexical.py)
        map.json         the corpus map (corpus_map.py): the last layout; map-*.* beside it keep what an
                         append needs, and each appended version's map-seg-N.json its changes (map_layers.py)
        near/            the near-duplicate band keys of every text, checked by refreshes (dedup.py)
        seg-<seq>/       a segment a refresh appended; hidden.npy: rows no longer live (segments.py)
        encoder/         the ONNX export of the model, when the ONNX backend built it (onnx_backend.py)
    cache/               embedding caches, one SQLite file per model fingerprint and precision, int8 codes (cache.py)
    .lock                held by the one writer (flock; versions.py)
    .build-*             a half-written version; removed by the next writer (versions.py)
    .publishing          the version a writer is moving into place and what CURRENT was then (JSON); a leftover
                         is trusted only while CURRENT is that very file, unchanged (versions.py)
    versions.json        the versions this index wrote and the last number it gave one (version_record.py):
                         pruning deletes only versions named there, and numbers are never given twice

Only ``v-<seq>-<time>`` folders are versions: a ``v-draft/`` or ``v-1.0-release/`` a user keeps beside them is
never listed, never recovered to and never deleted.

Readers resolve CURRENT once and read only that folder, so they always see a complete version.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from semsearch.core.errors import IndexCorruptError, IndexNotFoundError, IndexPointerError

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
VERSIONS_RECORD = "versions.json"
INDEX_FORMAT = "semsearch-index"
# The only names a version folder of this index has (``publish``): anything else beside them is not the index's.
VERSION_NAME = re.compile(r"v-(\d{6,})-(\d{8}T\d{6})")


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


def is_version_name(name: str) -> bool:
    """Whether ``name`` is how this index names a version folder (``v-000012-20261203T120000``)."""
    return VERSION_NAME.fullmatch(name) is not None


def version_folders(index_dir: Path) -> list[Path]:
    """The version folders of an index (``v-<seq>-<time>``), newest (highest publication number) first.

    Folders named otherwise (a user's ``v-draft/``) are not versions: never listed, so never recovered to.
    """
    if not index_dir.is_dir():
        return []
    folders = [p for p in index_dir.glob(f"{VERSION_PREFIX}*") if is_version_name(p.name) and p.is_dir()]
    return sorted(folders, key=lambda p: sequence_of(p.name), reverse=True)


def sequence_of(name: str) -> int:
    """The publication number of a version folder name (``v-000012-…``), or -1 for any other name."""
    match = VERSION_NAME.fullmatch(name)
    return int(match.group(1)) if match else -1


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


def version_damage(version: Path) -> str | None:
    """What is wrong with a version folder, reading every byte (sizes, then each file's sha256), or None.

    The slow check ``sound_version`` stands in for: used where a version is about to be named as the one to
    point back to, so a file it shares (a hard link) with a damaged live version is never trusted by its size.
    """
    if not sound_version(version):
        return f"{version.name} is incomplete (a file is missing or has the wrong size)"
    from semsearch.core.fileio import file_sha256

    try:
        files = json.loads((version / MANIFEST).read_text(encoding="utf-8"))["files"]
        for name, entry in files.items():
            if file_sha256(version / name) != entry["sha256"]:
                return f"{version / name} does not match its checksum"
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
        return f"{version.name} cannot be read ({exc})"
    return None


def older_intact_version(index_dir: Path, live: Path) -> Path | None:
    """The newest version numbered below ``live`` whose every file matches its checksum, or None."""
    live_seq = sequence_of(live.name)
    older = [v for v in version_folders(index_dir) if -1 < sequence_of(v.name) < live_seq]
    return next((v for v in older if version_damage(v) is None), None)


def point_back_hint(index_dir: Path, live: Path) -> str | None:
    """For a damaged live version: the older intact version and the command that points CURRENT back at it.

    None when ``live`` is intact after all (every byte matches its checksum: the problem lies elsewhere), is
    a bare version folder opened on its own, or no older version is intact.
    """
    if live.parent != index_dir and live.resolve().parent != index_dir.resolve():
        return None
    if version_damage(live) is None:
        return None
    older = older_intact_version(index_dir, live)
    if older is None:
        return None
    return (
        f"the newest older sound version is {older.name}: point back to it with: "
        f"semsearch index --recover-to {older.name} --index {index_dir} (or rebuild with: semsearch index --full)"
    )


def with_point_back(index_dir: Path, live: Path, exc: IndexCorruptError) -> IndexCorruptError:
    """``exc`` (the live version is damaged) with the older intact version to point back to, when there is one.

    An error without a hint (a bad CURRENT, an unreadable record of versions, a damaged shared export) carries
    its own remedy and is left as it is.
    """
    if exc.hint is None:
        return exc
    hint = point_back_hint(index_dir, live)
    return exc if hint is None else IndexCorruptError(exc.problem, field=exc.field, hint=hint)


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
