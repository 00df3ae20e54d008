"""The life of an index version: one writer at a time, written beside the live one, published atomically.

``new_version`` is the one sequence every writer (``build_index``, ``remove_documents``) follows: take the
lock, check that CURRENT names a version, start a hidden ``.build-*`` folder, let the caller write into it and
publish it (manifest, fsync, record, journal, rename, swap CURRENT); a folder that was not published is removed
on the way out. A writer deletes only what it can account for: under the lock, half-written ``.build-*`` folders
(their writer is dead), the version a leftover ``.publishing`` journal names when CURRENT is still the very file
the journal saw (renamed into place, never published), and after publishing, versions the index's record
(``version_record``) names that were replaced long enough ago. Version numbers only grow. With CURRENT
unreadable, missing or naming no version nothing is deleted: the writer stops and says how to point back
(``recover``, which can also name any sound version, such as one older than a damaged live version).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semsearch.core.errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexNotFoundError,
    IndexPointerError,
    InputError,
    SemsearchError,
)
from semsearch.core.faults import barrier
from semsearch.core.fileio import file_sha256, fsync_path, write_text_atomic
from semsearch.store.documents import DocumentStore, open_documents
from semsearch.store.layout import (
    BUILD_PREFIX,
    CURRENT,
    LOCK,
    MANIFEST,
    PUBLISHING,
    current_version,
    is_version_name,
    newest_sound_version,
    pointer_error,
    pointer_problem,
    read_pointer,
    sequence_of,
    version_damage,
    version_folders,
    with_point_back,
)
from semsearch.store.manifest import Manifest
from semsearch.store.version_record import claim_version, last_number, owned_versions, read_record

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
    store: DocumentStore | None = field(default=None, compare=False, repr=False)  # left open by ``load(keep=True)``

    @classmethod
    def load(
        cls,
        index_dir: Path,
        *,
        tolerate_damage: bool = False,
        live: tuple[Path, Manifest] | None = None,
        keep_store: bool = False,
    ) -> PreviousVersion | None:
        """The live version of ``index_dir``, or None when there is none.

        With ``tolerate_damage`` (``--full``), a damaged or unreadable index counts as absent, so that the
        rebuild that every "corrupt" message recommends really recovers it. ``live`` is the live folder and
        manifest when the caller read them already; ``keep_store`` leaves its document store open in ``store``
        for the caller, who closes it (``close``).
        """
        version = index_dir
        try:
            if live is not None:
                version, manifest = live
            else:
                version = current_version(index_dir)
                manifest = Manifest.read(version)
            store = open_documents(version, manifest)
            try:
                ids = store.ids()
            except BaseException:
                store.close()
                raise
            if not keep_store:
                store.close()
        except IndexNotFoundError:
            return None
        except IndexPointerError:
            if tolerate_damage and newest_sound_version(index_dir) is None:
                return None  # nothing sound to build on: a rebuild from named sources (check_pointer allowed it)
            raise
        except IndexCorruptError as exc:
            if tolerate_damage:
                return None
            better = with_point_back(index_dir, version, exc)  # the live version is damaged: name a way back
            if better is exc:
                raise
            raise better from exc
        except IndexFormatError:
            if tolerate_damage:
                return None
            raise
        return cls(version, manifest, ids, store if keep_store else None)

    def close(self) -> None:
        """Close the document store ``load(keep_store=True)`` left open."""
        if self.store is not None:
            self.store.close()
            self.store = None


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
    """What ``semsearch index --recover`` (or ``--recover-to NAME``) did."""

    index: str
    version: str  # the version CURRENT names now
    problem: str  # what was wrong with CURRENT ("" when nothing was), or which version it named before
    recovered: bool  # CURRENT was rewritten

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "version": self.version, "problem": self.problem, "recovered": self.recovered}


def recover(index_dir: Path, *, wait: bool = False, to: str | None = None) -> Recovery:
    """Point a bad CURRENT at the newest sound version (or CURRENT at version ``to``, any version of the index
    whose every file matches its checksum), atomically, under the writer lock; delete nothing."""
    if not index_dir.is_dir() or (pointer_problem(index_dir) is None and read_pointer(index_dir) == ""):
        raise IndexNotFoundError(
            f"no index at {index_dir} (build one with: semsearch index SOURCES --index {index_dir})"
        )
    with write_errors_explained(index_dir), writer_lock(index_dir, wait=wait):
        problem = pointer_problem(index_dir)
        if to is not None:
            return _recover_to(index_dir, to.strip(), problem)
        if problem is None:
            return Recovery(str(index_dir), read_pointer(index_dir), "", False)
        newest = newest_sound_version(index_dir)
        if newest is None:
            raise pointer_error(index_dir, problem)
        write_text_atomic(index_dir / CURRENT, newest.name + "\n")
    return Recovery(str(index_dir), newest.name, f"CURRENT {problem}", True)


def _recover_to(index_dir: Path, name: str, problem: str | None) -> Recovery:
    """Point CURRENT at the version ``name`` once every byte of it checks out (the caller holds the lock)."""
    before = read_pointer(index_dir)
    version = index_dir / name
    if not is_version_name(name) or not version.is_dir():
        known = ", ".join(v.name for v in version_folders(index_dir)) or "none"
        raise InputError(f"{index_dir} holds no version {name[:80]!r} (its versions: {known}); CURRENT is unchanged")
    damage = version_damage(version)
    if damage is not None:
        raise IndexCorruptError(f"{damage}; CURRENT is unchanged and still names {before[:80]!r}", hint=None)
    if problem is None and before == name:
        return Recovery(str(index_dir), name, "", False)
    write_text_atomic(index_dir / CURRENT, name + "\n")
    was = f"CURRENT {problem}" if problem is not None else f"CURRENT named {before}"
    return Recovery(str(index_dir), name, was, True)


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
        read_record(index_dir)  # an unreadable record stops the writer now, not after the build
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
        # The record names the folder as the index's own (and its number as given) before it exists.
        claim_version(self.index_dir, final.name)
        replaced = read_pointer(self.index_dir)  # live until this swap, whatever its number
        # The journal names the folder before it takes its place, and the CURRENT file it saw: a writer killed
        # before the swap leaves a version the next one knows was never published; once CURRENT was rewritten
        # (the swap, a rollback by hand, a recover) the journal is stale and deletes nothing.
        write_text_atomic(self.index_dir / PUBLISHING, _journal_text(self.index_dir, final.name, replaced))
        os.rename(self.path, final)
        fsync_path(self.index_dir)
        barrier("swap")
        write_text_atomic(self.index_dir / CURRENT, final.name + "\n")
        self.path = final  # published: abandon() must never touch it now
        barrier("swapped")  # a writer killed here leaves a journal that names the published version
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


def next_sequence(index_dir: Path) -> int:
    """The number the next version gets: one more than any the index gave (recorded, on disk or in CURRENT),
    so a number is never given twice, even after the newest folder was deleted by hand."""
    return 1 + last_number(index_dir)


def _pointer_stamp(index_dir: Path) -> list[int] | None:
    """Which CURRENT file is there now (inode, device, size, mtime): any rewrite, atomic or by hand, changes it."""
    try:
        st = (index_dir / CURRENT).stat()
    except OSError:
        return None
    return [st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns]


def _journal_text(index_dir: Path, name: str, replacing: str) -> str:
    return json.dumps({"version": name, "replacing": replacing, "current": _pointer_stamp(index_dir)}) + "\n"


def _unpublished_by_journal(index_dir: Path, journal: Path, live: str) -> str | None:
    """The version a leftover journal proves was never published, or None when it proves nothing.

    Trusted only when it agrees with CURRENT: CURRENT still names the version the journal saw it name, and is
    the very same file, unrewritten. A writer killed after its swap, followed by a rollback by hand
    (``printf OLDER > CURRENT``) or a ``recover``, leaves a journal naming a version that was published.
    A journal of an older release (one line, no stamp) is trusted only while CURRENT is older than it.
    """
    try:
        text = journal.read_text(encoding="utf-8").strip()
        journal_mtime = journal.stat().st_mtime_ns
    except (OSError, UnicodeDecodeError):
        return None
    try:
        entry = json.loads(text)
    except ValueError:
        entry = None
    if isinstance(entry, dict):
        named = entry.get("version")
        agrees = entry.get("replacing") == live and entry.get("current") == _pointer_stamp(index_dir)
    else:
        named = text
        stamp = _pointer_stamp(index_dir)
        agrees = stamp is not None and stamp[3] <= journal_mtime and sequence_of(text) > sequence_of(live)
    if not agrees or not isinstance(named, str) or not is_version_name(named) or named == live:
        return None
    return named


def clear_dead_writers(index_dir: Path) -> None:
    """Remove what dead writers left (under the writer lock): half-written builds, temporary pointers and the
    version a ``.publishing`` journal names when CURRENT never came to name it (``_unpublished_by_journal``).
    Versions are touched only when CURRENT names a version: otherwise which one was published is unknown."""
    for stale in index_dir.glob(f"{BUILD_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)  # freed before this build needs the room
    for tmp in index_dir.glob(f".{CURRENT}.*.tmp"):
        tmp.unlink(missing_ok=True)
    journal = index_dir / PUBLISHING
    if not journal.is_file() or pointer_problem(index_dir) is not None:
        return
    unpublished = _unpublished_by_journal(index_dir, journal, read_pointer(index_dir))
    if unpublished is not None:
        shutil.rmtree(index_dir / unpublished, ignore_errors=True)
    journal.unlink(missing_ok=True)


def prune_versions(index_dir: Path, *, grace_s: float | None = None, keep: Sequence[str] = ()) -> None:
    """Remove replaced versions the index wrote, temporary files and half-written builds of dead writers.

    Only versions the index's record names (``version_record``) are removed: a folder it did not write is never
    its to delete. Kept: the live version, the one numbered just below it, the ``keep`` ones (``publish`` names
    the version its swap replaced: after a ``recover`` or a rollback that is not the one numbered below), any
    replaced within ``grace_s`` seconds (a reader that resolved CURRENT just before a swap, or an open Index
    loading files lazily, can finish), and any numbered above the live one (CURRENT was pointed back at an older
    version). Nothing is removed unless CURRENT names a version.
    """
    grace_s = PRUNE_GRACE_S if grace_s is None else grace_s
    if pointer_problem(index_dir) is not None or not read_pointer(index_dir):
        return
    try:
        owned = owned_versions(index_dir)
    except IndexCorruptError:
        return  # an unreadable record: which versions are the index's is unknown
    live = read_pointer(index_dir)
    live_seq = sequence_of(live)
    mine = [p for p in version_folders(index_dir) if p.name in owned or p.name == live]
    published = sorted(mine, key=lambda p: sequence_of(p.name))
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
