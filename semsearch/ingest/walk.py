"""The source walk: which files a folder, glob or file argument names, and what it could not read or left out.

A folder is walked depth first, names in order, skipping hidden and backup names. Linked folders are walked like
folders (a folder moved to another disk and replaced by a link keeps its papers), after the plain ones, so a link
to a folder the walk holds anyway changes no path; a link that leads back to a folder it lies in is a loop: named
in a note and not followed (what it leads to is walked already). A linked *file* is read when its target lies in
a folder the walk holds (or with ``follow_links``); one that leads outside is left out with a note. Folders that
cannot be read are listed, not passed over: the caller (which knows what the live version recorded) decides
whether that stops the refresh (``unreadable_notes``). An index folder is never walked, and a name that is not
valid UTF-8 is left out with a note (shown with backslash escapes), never a traceback later.

What a walk needs of the formats (``SourceNames``: which extensions are read, which folders are a whole-file
format's data folder) comes from the extension registry's declarations for the built-in formats
(``declared_names``), so a walk that only compares files with their record imports no reader.
"""

from __future__ import annotations

import errno
import glob
import os
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from semsearch.core import registry
from semsearch.core.errors import InputError
from semsearch.core.wording import count

_GLOB_CHARS = re.compile(r"[*?\[]")
# A semsearch index folder (store/layout.py: CURRENT beside v-<seq>-<time>/ version folders), never a source.
_INDEX_POINTER = "CURRENT"
_VERSION_NAME = re.compile(r"v-\d{6,}-\d{8}T\d{6}")


class SourceNames(Protocol):
    """What a walk asks of the formats (``formats.FormatRegistry`` answers it, and ``DeclaredNames``)."""

    @property
    def extensions(self) -> Mapping[str, str]:
        """Every extension some format reads (lower case, with the dot), to the first such format's name."""
        ...

    def for_name(self, name: str) -> str | None:
        """The format a file name's extension implies, looking through a trailing .gz (None: not read by walks)."""
        ...

    def folder_source(self, folder: Path) -> Path | None:
        """The file a folder argument means when it is a whole-file format's data folder."""
        ...


@dataclass(frozen=True)
class DeclaredNames:
    """The built-in formats' names as the extension registry declares them (``registry.BUILT_IN_NAMES``)."""

    extensions: dict[str, str]
    data_files: tuple[str, ...]  # in the formats' order; a folder holding one is that format's data folder

    def for_name(self, name: str) -> str | None:
        """The format a file name's extension implies, looking through a trailing .gz (None: not read by walks)."""
        return self.extensions.get(suffix(name.lower().removesuffix(".gz")))

    def folder_source(self, folder: Path) -> Path | None:
        """The data file a folder holds when it is a whole-file format's data folder."""
        for name in self.data_files:
            candidate = folder / name
            if folder.is_dir() and candidate.is_file():
                return candidate
        return None


def declared_names() -> DeclaredNames:
    """The built-in formats' names as the registry declares them (a plugin's are its class's: load it)."""
    extensions: dict[str, str] = {}
    data_files: list[str] = []
    for name in registry.built_in_names("format"):
        declared = registry.BUILT_IN_NAMES[name]
        for ext in declared.extensions:
            extensions.setdefault(ext, name)
        if declared.data_file:
            data_files.append(declared.data_file)
    return DeclaredNames(extensions, tuple(data_files))


def suffix(name: str) -> str:
    """``PurePath(name).suffix`` without making a path (a folder walk asks it of every file name)."""
    last = name.rstrip("/").rsplit("/", 1)[-1]
    dot = last.rfind(".")
    return last[dot:] if 0 < dot < len(last) - 1 else ""


@dataclass
class Unreadable:
    """A folder the walk could not list (or a link to one that leads nowhere now)."""

    path: str  # as walked (absolute)
    why: str  # the reason, in words
    quiet: bool = False  # a dead link that may never have been a folder: said only if the index read under it


@dataclass
class Walk:
    """What the source arguments name now: the files, the folders not read, and notes on what was left out."""

    files: list[str] = field(default_factory=list)  # absolute, sorted as a full build reads them
    unreadable: list[Unreadable] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # one line each, for the build summary's ``skipped``


def walk_sources(
    sources: Sequence[str],
    formats: SourceNames,
    *,
    prune: Collection[str] = (),
    follow_links: bool = False,
) -> Walk:
    """Expand files, folders and glob patterns; ``prune``: real paths of folders never entered (the index)."""
    walk = Walk()
    found: set[str] = set()
    pruned = {os.path.realpath(p) for p in prune}
    for source in sources:
        found.update(_expand_one(source, formats, walk, pruned, follow_links))
    kept = [p for p in found if p.isascii() or _encodes(p)]
    if len(kept) < len(found):
        for path in sorted(found.difference(kept)):
            walk.notes.append(f"{display(path)}: its name is not valid UTF-8 (rename it to index it)")
    # Path order is the order of the paths' parts: for absolute, normalised paths that is the order of their
    # components between separators (no Path made per file: a large folder holds many thousands).
    walk.files = sorted(kept, key=lambda p: p.split(os.sep))
    return walk


def unreadable_notes(walk: Walk, recorded: Iterable[str], *, drop: bool) -> list[str]:
    """Stop when a folder the walk could not read holds files the live version recorded; else notes for the summary.

    A source never vanishes silently: its papers stay until the folder reads again, ``remove --source`` takes it
    out, or ``drop`` (``--drop-unreadable``) lets this refresh drop them (said in a note).
    """
    if not walk.unreadable:
        return []
    paths = list(recorded)
    notes: list[str] = []
    for where in walk.unreadable:
        inside = where.path + os.sep
        held = sum(1 for p in paths if p.startswith(inside))
        name = display(where.path)
        files = count(held, "file")
        if held and not drop:
            raise InputError(
                f"{name}: cannot read this folder ({where.why}); the index keeps the papers of its {files} "
                f"(to drop them: --drop-unreadable, or semsearch remove --source {name})"
            )
        if held:
            notes.append(f"{name}: cannot read this folder ({where.why}); the papers of its {files} are dropped")
        elif not where.quiet:
            notes.append(f"{name}: cannot read this folder ({where.why})")
    return notes


def shown(path: str) -> str:
    """A path safe to print: bytes that are not UTF-8 (surrogate escapes) as ``\\xNN``."""
    if path.isascii() or _encodes(path):
        return path
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def display(path: str) -> str:
    """A walked path as messages name it: relative to the working directory when under it, shown safely."""
    try:
        here = os.getcwd()
    except OSError:
        return shown(path)
    relative = path[len(here) + 1 :] if path.startswith(here + os.sep) else path
    return shown(relative or path)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _expand_one(source: str, formats: SourceNames, walk: Walk, pruned: set[str], follow_links: bool) -> list[str]:
    """The files one source argument names."""
    path = Path(os.path.expanduser(source))
    data_file = formats.folder_source(path)
    if data_file is not None:
        # A data folder (Zotero's) means its database, not the PDFs and snapshots stored beside it.
        return [str(data_file.resolve())]
    if path.is_dir():
        files = _walk_folder(str(path), source, formats, walk, pruned, follow_links)
        return _require_readable(files, source, formats)
    if path.exists():
        # A file named explicitly is read whatever its name; only directory walks filter names.
        return [str(path.resolve())]
    if not _GLOB_CHARS.search(source):
        raise InputError(f"no such file or directory: {shown(source)}")
    files = _glob_files(os.path.expanduser(source), formats, walk, pruned, follow_links)
    if not files:
        raise InputError(f"no such file or directory: {shown(source)}")
    return _require_readable(files, source, formats)


def _glob_files(pattern: str, formats: SourceNames, walk: Walk, pruned: set[str], follow: bool) -> list[str]:
    """Files a glob pattern matches; a matched directory contributes the files a walk of it finds."""
    files: list[str] = []
    for match in sorted(glob.glob(pattern, recursive=True)):
        path = Path(match)
        if path.is_dir():
            if not _within(os.path.realpath(match), pruned):
                files.extend(_walk_folder(match, match, formats, walk, pruned, follow))
        elif path.is_file() and not is_hidden(path.name):
            files.append(str(path.resolve()))
    return files


def _walk_folder(
    directory: str, source: str, formats: SourceNames, walk: Walk, pruned: set[str], follow_links: bool
) -> list[str]:
    """Candidate abstract files under a folder, recursively: plain folders first, then linked ones."""
    files: list[str] = []
    format_for_name = formats.for_name  # bound once: the walk asks it of every file name
    root = os.path.realpath(directory)
    # The resolved folder, walked as os.walk walks (depth first, names in order): a plain file's path under it is
    # resolved already, and scandir tells plain files apart without a system call per file (resolving each path
    # cost seconds per refresh of 20,000 files). Each folder carries the real paths of the folders it lies in.
    pending: list[tuple[str, str, tuple[str, ...]]] = [(root, root, ())]  # (path, real path, folders above)
    linked: list[tuple[str, tuple[str, ...]]] = []  # linked folders, walked once the plain ones are done
    links: list[tuple[str, str]] = []  # linked files and their targets, checked once every folder is known
    visited = {root}  # the real paths of the folders walked
    while pending or linked:
        if not pending:
            folder, chain = linked.pop(0)
            real = os.path.realpath(folder)
            if any(real == c or c.startswith(real + os.sep) for c in chain):
                # Everything it leads to is walked already (it lies above): said, never followed round and round.
                walk.notes.append(f"{display(folder)}: a symbolic link loop (back to {display(real)}); not followed")
                continue
            if real in visited or _within(real, pruned):
                continue  # another name of a folder walked already (or into the index): its files are in once
            visited.add(real)
            pending.append((folder, real, chain))
            continue
        folder, real, chain = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            if folder == root:
                raise InputError(f"{shown(source)}: cannot read this folder ({_why(exc)})") from None
            walk.unreadable.append(Unreadable(folder, _why(exc)))
            continue
        if folder != root and _is_index(entries):
            continue  # another semsearch index inside the sources: its files are not papers
        inner = (*chain, real)
        subfolders: list[tuple[str, str, tuple[str, ...]]] = []
        for entry in entries:
            name = entry.name
            if is_hidden(name):
                continue  # hidden folders such as .git are not entered
            if _entry_is_dir(entry):
                sub_real = os.path.join(real, name)
                if not (name.isascii() or _encodes(name)):
                    walk.notes.append(f"{display(entry.path)}: its name is not valid UTF-8 (rename it to index it)")
                elif entry.is_symlink():
                    linked.append((entry.path, inner))
                elif sub_real not in pruned:
                    subfolders.append((entry.path, sub_real, inner))
                    visited.add(sub_real)
                continue
            if format_for_name(name) is None:
                if entry.is_symlink() and not os.path.exists(entry.path):
                    # A dead link may be a folder moved away (an unmounted disk): stop if the index read under it.
                    walk.unreadable.append(Unreadable(entry.path, _dead_link(entry.path), quiet=True))
                continue
            if entry.is_file(follow_symlinks=False):
                files.append(entry.path)
            elif entry.is_symlink():
                link = Path(entry.path)
                if link.is_file():
                    links.append((entry.path, str(link.resolve())))
                else:
                    from semsearch.ingest.guards import check_link  # a rare case: the guards load only for it

                    check_link(link, display(entry.path))  # a loop or a dangling link is named, not skipped
        pending.extend(reversed(subfolders))
    for name, target in links:
        if follow_links or _within(target, visited):
            files.append(target)
        else:
            walk.notes.append(
                f"{display(name)}: a symbolic link to a file outside the source folders ({shown(target)}); "
                "not read (--follow-links reads it)"
            )
    return files


def _within(path: str, folders: set[str]) -> bool:
    """Whether ``path`` is or lies in one of ``folders`` (real paths)."""
    if path in folders:
        return True
    parent = os.path.dirname(path)
    while True:
        if parent in folders:
            return True
        up = os.path.dirname(parent)
        if up == parent:
            return False
        parent = up


def _is_index(entries: Sequence[os.DirEntry[str]]) -> bool:
    """Whether a listing is a semsearch index's folder: a CURRENT pointer beside version folders."""
    names = {e.name for e in entries}
    return _INDEX_POINTER in names and any(_VERSION_NAME.fullmatch(n) for n in names)


def _why(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def _dead_link(path: str) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop"
        if exc.errno == errno.ENOENT:
            return f"broken symbolic link to {shown(os.readlink(path))}"
        return _why(exc)
    return "not a folder now"


def _entry_is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _require_readable(files: list[str], source: str, formats: SourceNames) -> list[str]:
    """Fail when none of a directory's or pattern's files can be read; else keep them all."""
    if not any(os.access(path, os.R_OK) for path in files):
        suffixes = ", ".join(formats.extensions)
        raise InputError(f"{shown(source)}: no readable abstract files (looked for {suffixes}, optionally .gz)")
    # Unreadable ones stay, so that reading them names them instead of dropping them silently.
    return files


def is_hidden(name: str) -> bool:
    """Whether a file or directory name is hidden or an editor's backup/lock file."""
    return name.startswith((".", "~")) or name.endswith("~")
