"""The life of an index version: one writer at a time, written beside the live one, published atomically.

``new_version`` is the one sequence every writer (``build_index``, ``remove_documents``) follows: take the
lock, check that CURRENT names a version, start a hidden ``.build-*`` folder, let the caller write into it and
publish it (manifest, fsync, journal, rename, swap CURRENT); a folder that was not published is removed on the
way out. A writer deletes only what it can account for: under the lock, half-written ``.build-*`` folders (their
writer is dead), the version a leftover ``.publishing`` journal names (renamed into place, never published),
and after publishing, versions replaced long enough ago. With CURRENT unreadable, missing or naming no version
nothing is deleted: the writer stops and says how to point back (``recover``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semsearch.core.errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexNotFoundError,
    IndexPointerError,
    SemsearchError,
)
from semsearch.core.faults import barrier
from semsearch.core.fileio import file_sha256, fsync_path, write_text_atomic
from semsearch.store.documents import open_documents
from semsearch.store.layout import (
    BUILD_PREFIX,
    CURRENT,
    LOCK,
    MANIFEST,
    PUBLISHING,
    current_version,
    newest_sound_version,
    pointer_error,
    pointer_problem,
    read_pointer,
    version_folders,
)
from semsearch.store.manifest import Manifest

# Versions kept besides the live one, so a reader that resolved CURRENT just before a swap can finish.
KEEP_OLD_VERSIONS = 1
# Replaced versions younger than this are kept too: open readers load some files lazily.
PRUNE_GRACE_S = 300.0


@dataclass
class PreviousVersion:
    """The live version a writer builds on, read once: its folder, manifest and document ids."""

    path: Path
    manifest: Manifest
    ids: set[str]

    @classmethod
    def load(cls, index_dir: Path, *, tolerate_damage: bool = False) -> PreviousVersion | None:
        """The live version of ``index_dir``, or None when there is none.

        With ``tolerate_damage`` (``--full``), a damaged or unreadable index counts as absent, so that the
        rebuild that every "corrupt" message recommends really recovers it.
        """
        try:
            version = current_version(index_dir)
            manifest = Manifest.read(version)
            store = open_documents(version, manifest)
            try:
                ids = store.ids()
            finally:
                store.close()
        except IndexNotFoundError:
            return None
        except IndexPointerError:
            if tolerate_damage and newest_sound_version(index_dir) is None:
                return None  # nothing sound to build on: a rebuild from named sources (check_pointer allowed it)
            raise
        except (IndexCorruptError, IndexFormatError):
            if tolerate_damage:
                return None
            raise
        return cls(version, manifest, ids)


@contextlib.contextmanager
def new_version(index_dir: Path, *, wait: bool = False) -> Iterator[VersionWriter]:
    """Hold the writer lock and a new version folder; the caller writes and publishes it.

    A version the block did not publish (an error, an interruption) is removed on the way out; the live one is
    never touched.
    """
    with write_errors_explained(index_dir), writer_lock(index_dir, wait=wait):
        check_pointer(index_dir)
        with version_writer(index_dir) as writer:
            yield writer


@contextlib.contextmanager
def version_writer(index_dir: Path) -> Iterator[VersionWriter]:
    """A new version folder for a caller that holds the writer lock and checked the pointer (``check_pointer``)."""
    writer = VersionWriter.create(index_dir)
    try:
        yield writer
    finally:
        writer.abandon()


def check_pointer(index_dir: Path, *, rebuild: bool = False) -> None:
    """Raise IndexPointerError (deleting nothing) unless CURRENT names a version or the index is new.

    ``rebuild`` (``--full`` from named sources) may go on when no version at all is sound: there is nothing
    to point back to, and the rebuild publishes a new version beside the damaged ones without deleting them.
    """
    problem = pointer_problem(index_dir)
    if problem is None or (rebuild and newest_sound_version(index_dir) is None):
        return
    raise pointer_error(index_dir, problem)


@dataclass
class Recovery:
    """What ``semsearch index --recover`` did."""

    index: str
    version: str  # the version CURRENT names now
    problem: str  # what was wrong with CURRENT ("" when nothing was)
    recovered: bool  # CURRENT was rewritten

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "version": self.version, "problem": self.problem, "recovered": self.recovered}


def recover(index_dir: Path, *, wait: bool = False) -> Recovery:
    """Point a bad CURRENT at the newest sound version, atomically, under the writer lock; delete nothing."""
    if not index_dir.is_dir() or (pointer_problem(index_dir) is None and read_pointer(index_dir) == ""):
        raise IndexNotFoundError(
            f"no index at {index_dir} (build one with: semsearch index SOURCES --index {index_dir})"
        )
    with write_errors_explained(index_dir), writer_lock(index_dir, wait=wait):
        problem = pointer_problem(index_dir)
        if problem is None:
            return Recovery(str(index_dir), read_pointer(index_dir), "", False)
        newest = newest_sound_version(index_dir)
        if newest is None:
            raise pointer_error(index_dir, problem)
        write_text_atomic(index_dir / CURRENT, newest.name + "\n")
    return Recovery(str(index_dir), newest.name, f"CURRENT {problem}", True)


@contextlib.contextmanager
def write_errors_explained(index_dir: Path) -> Iterator[None]:
    """Turn a full disk or a read-only directory met inside the block into one line that says so."""
    try:
        yield
    except Exception as exc:
        from semsearch.core.writefail import write_failure

        failure = write_failure(exc, index_dir)
        if failure is None:
            raise
        raise failure from exc


@dataclass
class VersionWriter:
    """A new version being written beside the live one; ``publish`` makes it live atomically."""

    index_dir: Path
    path: Path

    @classmethod
    def create(cls, index_dir: Path) -> VersionWriter:
        """Start a new version folder; the caller holds the writer lock, so whatever a writer left is dead."""
        index_dir.mkdir(parents=True, exist_ok=True)
        clear_dead_writers(index_dir)
        path = index_dir / f"{BUILD_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        path.mkdir()
        return cls(index_dir, path)

    def record_files(
        self, manifest: Manifest, linked_from: Path | None = None, linked_files: dict[str, Any] | None = None
    ) -> None:
        """Add size and sha256 of every file in the version to the manifest.

        A file hard-linked from ``linked_from`` (the same inode) keeps that version's recorded checksum instead
        of being read again: an appended segment then costs what it wrote, not a hash of the whole corpus.
        ``linked_files`` is that version's recorded file list when the caller has read its manifest already.
        """
        known: dict[str, dict[str, object]] = dict(linked_files or {})
        if linked_from is not None and linked_files is None:
            with contextlib.suppress(OSError, SemsearchError):
                known = Manifest.read(linked_from).files
        files = {}
        for path in sorted(self.path.rglob("*")):
            if path.is_file() and path.name != MANIFEST:
                name = path.relative_to(self.path).as_posix()
                stat = path.stat()
                entry = known.get(name)
                if entry is not None and linked_from is not None and _same_inode(stat, linked_from / name):
                    files[name] = dict(entry)
                    continue
                files[name] = {"size": stat.st_size, "sha256": file_sha256(path)}
        manifest.files = files

    def publish(
        self, manifest: Manifest, linked_from: Path | None = None, linked_files: dict[str, Any] | None = None
    ) -> Path:
        """Write the manifest, flush everything, move the version into place and point CURRENT at it."""
        self.record_files(manifest, linked_from, linked_files)
        (self.path / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")
        for path in self.path.rglob("*"):
            if path.is_file():
                fsync_path(path)
        fsync_path(self.path)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        final = self.index_dir / f"v-{next_sequence(self.index_dir):06d}-{stamp}"
        barrier("publish")
        # The journal names the folder before it takes its place: a writer killed before the swap leaves a
        # version the next one knows was never published (and a rollback of CURRENT by hand is no such thing).
        write_text_atomic(self.index_dir / PUBLISHING, final.name + "\n")
        os.rename(self.path, final)
        fsync_path(self.index_dir)
        barrier("swap")
        replaced = read_pointer(self.index_dir)  # live until this swap, whatever its number
        write_text_atomic(self.index_dir / CURRENT, final.name + "\n")
        self.path = final  # published: abandon() must never touch it now
        with contextlib.suppress(OSError):
            (self.index_dir / PUBLISHING).unlink()
        with contextlib.suppress(OSError):  # leftovers only cost disk; the next writer prunes again
            prune_versions(self.index_dir, keep=(replaced,))
        return final

    def abandon(self) -> None:
        """Remove the half-written version (a no-op once it is published)."""
        if self.path.name.startswith(BUILD_PREFIX):
            shutil.rmtree(self.path, ignore_errors=True)


def _same_inode(stat: os.stat_result, other: Path) -> bool:
    try:
        theirs = other.stat()
    except OSError:
        return False
    return (stat.st_ino, stat.st_dev, stat.st_size) == (theirs.st_ino, theirs.st_dev, theirs.st_size)


def sequence_of(name: str) -> int:
    """The publication number of a version folder name (v-000012-...), or -1."""
    parts = name.split("-")
    return int(parts[1]) if len(parts) > 2 and parts[0] == "v" and parts[1].isdigit() else -1


def next_sequence(index_dir: Path) -> int:
    """One more than the highest version number in the index directory."""
    return 1 + max((sequence_of(p.name) for p in index_dir.glob("v-*")), default=0)


def clear_dead_writers(index_dir: Path) -> None:
    """Remove what dead writers left (under the writer lock): half-written builds, temporary pointers and the
    version a ``.publishing`` journal names when CURRENT never came to name it. Versions are touched only when
    CURRENT names a version: otherwise which one was published is unknown."""
    for stale in index_dir.glob(f"{BUILD_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)  # freed before this build needs the room
    for tmp in index_dir.glob(f".{CURRENT}.*.tmp"):
        tmp.unlink(missing_ok=True)
    journal = index_dir / PUBLISHING
    if not journal.is_file() or pointer_problem(index_dir) is not None:
        return
    try:
        named = journal.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        named = ""
    live = read_pointer(index_dir)
    if named.startswith("v-") and "/" not in named and named != live and sequence_of(named) > sequence_of(live):
        shutil.rmtree(index_dir / named, ignore_errors=True)
    journal.unlink(missing_ok=True)


def prune_versions(index_dir: Path, *, grace_s: float | None = None, keep: Sequence[str] = ()) -> None:
    """Remove replaced versions, temporary files and half-written builds of dead writers.

    Kept: the live version, the one numbered just below it, the ``keep`` ones (``publish`` names the version
    its swap replaced: after a ``recover`` or a rollback that is not the one numbered below), any replaced within
    ``grace_s`` seconds (a reader that resolved CURRENT just before a swap, or an open Index loading files
    lazily, can finish), and any numbered above the live one (CURRENT was pointed back at an older version).
    Nothing is removed unless CURRENT names a version.
    """
    grace_s = PRUNE_GRACE_S if grace_s is None else grace_s
    if pointer_problem(index_dir) is not None or not read_pointer(index_dir):
        return
    live = read_pointer(index_dir)
    live_seq = sequence_of(live)
    published = sorted(version_folders(index_dir), key=lambda p: sequence_of(p.name))
    older = [p for p in published if sequence_of(p.name) < live_seq]
    previous = older[-KEEP_OLD_VERSIONS:]
    # A version was replaced when its successor was published; the successor's folder time says when
    # (a version's own time is its build, which may be long before anyone stopped reading it).
    replaced_at: dict[Path, float] = {}
    below = [p for p in published if sequence_of(p.name) <= live_seq]
    for old, successor in zip(below, below[1:], strict=False):
        with contextlib.suppress(OSError):
            replaced_at[old] = successor.stat().st_mtime
    now = time.time()
    for old in older:
        if old in previous or old.name in keep or now - replaced_at.get(old, 0.0) < grace_s:
            continue
        shutil.rmtree(old, ignore_errors=True)
    for tmp in index_dir.glob(f".{CURRENT}.*.tmp"):
        tmp.unlink(missing_ok=True)
    for stale in index_dir.glob(f"{BUILD_PREFIX}*"):
        pid = stale.name[len(BUILD_PREFIX) :].split("-")[0]
        if pid.isdigit() and int(pid) != os.getpid():
            shutil.rmtree(stale, ignore_errors=True)


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
