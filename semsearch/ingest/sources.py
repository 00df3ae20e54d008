"""Sources in: expand file, folder and glob arguments, then read each file with the format it is in.

Formats are the registry's (``registry.py``: seed text, JSONL, JSON, CSV, TSV, BibTeX, Zotero, and installed
plugins; ``formats.py`` says how a format is chosen). A file is read as: a whole-file format it is in (Zotero's
database), else its bytes are gunzipped and decoded (``decoding.py``) and the detected text format parses them.
A folder walk reads only the files whose extension some format owns (through a trailing ``.gz``).
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from semsearch.core.errors import InputError
from semsearch.core.records import IngestResult, Record, SourceFile
from semsearch.ingest.decoding import decode, gunzip, inflate_limit, read_bytes
from semsearch.ingest.formats import FormatRegistry
from semsearch.ingest.guards import check_duplicate_ids, check_link, check_source_file
from semsearch.ingest.registry import installed_formats

_P = TypeVar("_P", str, Path)  # a walk's paths, as strings or as Paths
_GLOB_CHARS = re.compile(r"[*?\[]")


# ---------------------------------------------------------------------------------------------- sources


def expand_sources(sources: Sequence[str]) -> list[Path]:
    """Turn files, directories and glob patterns into a sorted, de-duplicated list of absolute paths."""
    formats = installed_formats()
    found: set[Path] = set()
    for source in sources:
        found.update(_expand_one(source, formats))
    # Path order is the order of the paths' parts: comparing them as tuples is that order, without a Python
    # __lt__ per comparison (seconds at 100,000 files).
    return sorted(found, key=lambda p: p.parts)


def expand_source_names(sources: Sequence[str]) -> list[str]:
    """``expand_sources`` as strings, in the same order: what a refresh compares with its record.

    A directory is walked without making a Path per file; the paths are absolute and normalised, so their
    parts are their components between separators and sort as ``expand_sources`` sorts them.
    """
    formats = installed_formats()
    found: set[str] = set()
    for source in sources:
        path = Path(os.path.expanduser(source))
        if path.is_dir() and formats.folder_source(path) is None:
            found.update(_require_readable(_directory_names(path, formats), source, formats))
        else:
            found.update(str(p) for p in _expand_one(source, formats))
    return sorted(found, key=lambda p: p.split(os.sep))


def _expand_one(source: str, formats: FormatRegistry) -> list[Path]:
    """The files one source argument names."""
    path = Path(os.path.expanduser(source))
    data_file = formats.folder_source(path)
    if data_file is not None:
        # A data folder (Zotero's) means its database, not the PDFs and snapshots stored beside it.
        return [data_file.resolve()]
    if path.is_dir():
        return _require_readable(_directory_files(path, formats), source, formats)
    if path.exists():
        # A file named explicitly is read whatever its name; only directory walks filter names.
        return [path.resolve()]
    if not _GLOB_CHARS.search(source):
        raise InputError(f"no such file or directory: {source}")
    files = _glob_files(os.path.expanduser(source), formats)
    if not files:
        raise InputError(f"no such file or directory: {source}")
    return _require_readable(files, source, formats)


def _glob_files(pattern: str, formats: FormatRegistry) -> list[Path]:
    """Files a glob pattern matches; a matched directory contributes the files a walk of it finds."""
    files: list[Path] = []
    for match in sorted(glob.glob(pattern, recursive=True)):
        path = Path(match)
        if path.is_dir():
            files.extend(_directory_files(path, formats))
        elif path.is_file() and not _is_hidden(path.name):
            files.append(path.resolve())
    return files


def _directory_files(directory: Path, formats: FormatRegistry) -> list[Path]:
    """Candidate abstract files under a directory, recursively, skipping hidden and backup names."""
    return [Path(name) for name in _directory_names(directory, formats)]


def _directory_names(directory: Path, formats: FormatRegistry) -> list[str]:
    """``_directory_files`` as strings: a refresh of 100,000 files makes no Path per file (a second a walk)."""
    files: list[str] = []
    format_for_name = formats.for_name  # bound once: the walk asks it of every file name
    # The resolved folder, walked as os.walk walks (depth first, names in order, never into linked folders): every
    # plain file's path is then resolved already, and scandir tells plain files apart without a system call per
    # file (resolving each path cost seconds per refresh of 20,000 files).
    pending = [str(directory.resolve())]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue  # an unreadable folder is passed over, as os.walk passes it
        subfolders: list[str] = []
        for entry in entries:
            name = entry.name
            if _is_hidden(name):
                continue  # hidden folders such as .git are not entered
            if _entry_is_dir(entry):
                if not entry.is_symlink():
                    subfolders.append(entry.path)
                continue
            if format_for_name(name) is None:
                continue
            if entry.is_file(follow_symlinks=False):
                files.append(entry.path)
            elif entry.is_symlink():
                path = Path(entry.path)
                if path.is_file():
                    files.append(str(path.resolve()))
                else:
                    check_link(path, str(path))  # a loop or a dangling link is named, not skipped
        pending.extend(reversed(subfolders))
    return files


def _entry_is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _require_readable(files: list[_P], source: str, formats: FormatRegistry) -> list[_P]:
    """Fail when none of a directory's or pattern's files can be read; else keep them all."""
    if not any(os.access(path, os.R_OK) for path in files):
        suffixes = ", ".join(formats.extensions)
        raise InputError(f"{source}: no readable abstract files (looked for {suffixes}, optionally .gz)")
    # Unreadable ones stay, so that reading them names them instead of dropping them silently.
    return files


def _is_hidden(name: str) -> bool:
    """Whether a file or directory name is hidden or an editor's backup/lock file."""
    return name.startswith((".", "~")) or name.endswith("~")


# ------------------------------------------------------------------------------------------------ files


def read_sources(sources: Sequence[str], *, skip_bad: bool = False) -> IngestResult:
    """Read every abstract from the given files, directories and glob patterns."""
    paths = expand_sources(sources)
    if not paths:
        raise InputError("no input files given")
    result = IngestResult(records=[], files=[], skipped=[])
    here = _working_dir()  # once: resolving it and every (already resolved) path per file cost ~5 s at 100k files
    for path in paths:
        records, source_file, skipped = read_file(path, skip_bad=skip_bad, resolved_in=here)
        result.records.extend(records)
        result.files.append(source_file)
        result.skipped.extend(skipped)
    result.records, clashes = check_duplicate_ids(result.records, skip_bad=skip_bad)
    result.skipped.extend(clashes)
    return result


def read_file(
    path: Path, *, skip_bad: bool = False, resolved_in: Path | None = None
) -> tuple[list[Record], SourceFile, list[str]]:
    """Read one file's abstracts, with a description of the file and the bad records skipped.

    ``resolved_in``: ``path`` is resolved already (``expand_sources`` gives it so) and this is the resolved
    working directory its display name is relative to.
    """
    path = Path(path)
    absolute = path if resolved_in is not None else path.resolve()
    display = _display_name(absolute, resolved_in if resolved_in is not None else _working_dir())
    formats = installed_formats()
    whole_file = formats.file_format(path)
    if whole_file is not None:
        return whole_file.read(path, display, skip_bad=skip_bad)
    try:
        # Taken before the read: a file changed while being read then looks stale, never fresh.
        mtime_ns = path.stat().st_mtime_ns
    except OSError:
        mtime_ns = 0  # read_bytes reports the error
    # Not a FIFO, no line of hundreds of MB (streamed, bounded memory; gzip read no further than it may expand).
    check_source_file(path, display, max_inflated=inflate_limit(_file_size(path))[0])
    raw = read_bytes(path, display)
    if not raw:
        raise InputError(f"{display}: empty file")
    data, inner_name = gunzip(raw, path.name, display)
    text, encoding = decode(data, display)
    if not text.strip():
        raise InputError(f"{display}: empty file")
    fmt = formats.detect(inner_name, text)
    records, skipped = fmt.records(text, display, skip_bad)
    if not records:
        detail = f" ({len(skipped)} bad records skipped)" if skipped else ""
        raise InputError(f"{display}: no abstracts found{detail}")
    source_file = SourceFile(
        path=str(absolute),
        sha256=hashlib.sha256(raw).hexdigest(),
        size=len(raw),
        format=fmt.name,
        encoding=encoding,
        records=len(records),
        mtime_ns=mtime_ns,
    )
    return records, source_file, skipped


def files_named(name: str, paths: Iterable[str]) -> list[str]:
    """The absolute paths among ``paths`` that a provenance file name can mean.

    Provenance names a file as the build saw it (``_display_name``): absolute, or relative to that build's
    working directory, which is not recorded. A relative name therefore means any path ending with it; more
    than one match (``a.jsonl`` and ``sub/a.jsonl`` both end with ``a.jsonl``) is ambiguous.
    """
    return PathLookup(paths).named(name)


class PathLookup:
    """``files_named`` for many names over the same paths: built once, each look-up costs its matches only.

    A relative name's paths all end with its last component, so paths are kept by that component (a refresh of
    20,000 files otherwise compared every provenance name with every path: 400M ``endswith`` calls).
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self._exact: dict[str, list[str]] = {}
        self._by_last: dict[str, list[str]] = {}
        for path in paths:
            self._exact.setdefault(path, []).append(path)
            self._by_last.setdefault(path.rsplit(os.sep, 1)[-1], []).append(path)

    def named(self, name: str) -> list[str]:
        """The paths ``name`` can mean, in the order they were given (duplicates kept, as ``files_named``)."""
        if os.path.isabs(name):
            return list(self._exact.get(name, ()))
        tail = os.sep + os.path.normpath(name)
        return [p for p in self._by_last.get(tail.rsplit(os.sep, 1)[-1], ()) if p.endswith(tail)]


def _display_name(absolute: Path, here: Path | None) -> str:
    """The (resolved) path relative to the (resolved) working directory when it lies under it, else absolute."""
    if here is None:
        return str(absolute)
    try:
        return str(absolute.relative_to(here))
    except ValueError:
        return str(absolute)


def _working_dir() -> Path | None:
    """The resolved working directory, None when it cannot be known (deleted under the process)."""
    try:
        return Path.cwd().resolve()
    except OSError:
        return None


def _file_size(path: Path) -> int:
    """A file's size in bytes, 0 when it cannot be read (the reader then names the problem)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0
