"""Sources in: expand file, folder and glob arguments, then read each file with the format it is in.

Formats are the extension registry's (``formats.installed_formats``: seed text, JSONL, JSON, CSV, TSV, BibTeX,
Zotero, and installed plugins; ``formats.py`` says how a format is chosen). A file is read as: a whole-file
format it is in (Zotero's database), else its bytes are gunzipped and decoded (``decoding.py``) and the detected
text format parses them.
A folder walk reads only the files whose extension some format owns (through a trailing ``.gz``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path

from semsearch.core.errors import InputError
from semsearch.core.records import IngestResult, Record, SourceFile
from semsearch.ingest.decoding import decode, gunzip, inflate_limit, read_bytes
from semsearch.ingest.formats import installed_formats
from semsearch.ingest.guards import check_abstract_lengths, check_duplicate_ids, check_source_file
from semsearch.ingest.walk import Walk, unreadable_notes, walk_sources

# ---------------------------------------------------------------------------------------------- sources


def expand_sources(sources: Sequence[str], *, prune: Collection[str] = (), follow_links: bool = False) -> list[Path]:
    """Turn files, directories and glob patterns into a sorted, de-duplicated list of absolute paths."""
    return [Path(p) for p in expand_source_names(sources, prune=prune, follow_links=follow_links)]


def expand_source_names(
    sources: Sequence[str], *, prune: Collection[str] = (), follow_links: bool = False
) -> list[str]:
    """``expand_sources`` as strings, in the same order: what a refresh compares with its record."""
    return walk(sources, prune=prune, follow_links=follow_links).files


def walk(sources: Sequence[str], *, prune: Collection[str] = (), follow_links: bool = False) -> Walk:
    """The files the sources name now, the folders that could not be read and notes (``walk.walk_sources``)."""
    return walk_sources(sources, installed_formats(), prune=prune, follow_links=follow_links)


# ------------------------------------------------------------------------------------------------ files


def read_sources(sources: Sequence[str], *, skip_bad: bool = False) -> IngestResult:
    """Read every abstract from the given files, directories and glob patterns."""
    found = walk(sources)
    result = read_paths(found.files, skip_bad=skip_bad)
    result.skipped[:0] = [*unreadable_notes(found, (), drop=False), *found.notes]
    return result


FileRead = tuple[list[Record], SourceFile, list[str]]  # one file's records, description and skipped records
FileReads = dict[str, FileRead]  # path -> what reading it gave


def read_paths(paths: Sequence[str], *, skip_bad: bool = False) -> IngestResult:
    """Read every abstract from files a walk named (absolute, resolved, in reading order)."""
    return ingested(paths, read_files(paths, skip_bad=skip_bad), skip_bad=skip_bad)


def read_files(paths: Sequence[str], *, skip_bad: bool, into: FileReads | None = None) -> FileReads:
    """Read each of ``paths`` (absolute, resolved, as a walk names them) not already in ``into``.

    A writer keeps what it read: when its plan changes (an append falls back to a rewrite), no file is read twice.
    """
    reads: FileReads = {} if into is None else into
    here = _working_dir()  # once, not per file: resolving it for every path adds up over a big folder
    for path in paths:
        if path not in reads:
            reads[path] = read_file(Path(path), skip_bad=skip_bad, resolved_in=here)
    return reads


def ingested(paths: Sequence[str], reads: FileReads, *, skip_bad: bool) -> IngestResult:
    """The records of these files in this order, with the ids two of them claim checked across files."""
    if not paths:
        raise InputError("no input files given")
    result = IngestResult(records=[], files=[], skipped=[])
    for path in paths:
        records, source_file, skipped = reads[path]
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
        records, source_file, skipped = formats.read(whole_file, path, display, skip_bad)
        records, too_long = check_abstract_lengths(records, skip_bad=skip_bad)
        if too_long:
            source_file = dataclasses.replace(source_file, records=len(records))
        return records, source_file, [*skipped, *too_long]
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
    fmt = formats.detect(inner_name, text, display)
    records, skipped = formats.records(fmt, text, display, skip_bad)
    records, too_long = check_abstract_lengths(records, skip_bad=skip_bad)
    skipped.extend(too_long)
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
