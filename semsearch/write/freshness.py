"""Has an index gone stale? Compare the sources recorded at build time with the files on disk now.

The walk here asks the formats only which names they read (``source_names``): no reader is loaded.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from pathlib import Path

from semsearch.core import registry
from semsearch.core.errors import InputError
from semsearch.core.fileio import file_sha256
from semsearch.core.records import SourceFile
from semsearch.ingest.walk import SourceNames, declared_names, walk_sources
from semsearch.store.manifest import Manifest

FOLLOW_LINKS = "follow_links"  # the manifest key that remembers --follow-links (kept by every refresh)


def follows_links(asked: bool | None, manifest: Manifest | None) -> bool:
    """Whether a walk reads linked files outside the source folders: as asked, else as the index was built."""
    if asked is not None:
        return asked
    return bool(manifest is not None and manifest.extra.get(FOLLOW_LINKS))


def absolute_source_args(sources: Sequence[str]) -> list[str]:
    """Source arguments made absolute, so a later refresh from another directory finds them."""
    return [os.path.abspath(os.path.expanduser(source)) for source in sources]


def file_changed(path: Path | str, recorded: SourceFile) -> bool:
    """Whether a source differs from its record: size, then content when touched (a Zotero library: its times)."""
    if recorded.format == "zotero":
        return _library_changed(Path(path), recorded)
    return _differs(path, recorded)


def _library_changed(path: Path, recorded: SourceFile) -> bool:
    """A Zotero library changed when its size or the later of its and its write-ahead log's times did.

    A running Zotero writes new items to the ``-wal`` file first, so the database file alone can look unchanged.
    """
    try:
        stat = path.stat()
    except OSError:
        return True
    try:
        log_time = path.with_name(path.name + "-wal").stat().st_mtime_ns
    except OSError:
        log_time = 0
    return stat.st_size != recorded.size or max(stat.st_mtime_ns, log_time) != recorded.mtime_ns


def _differs(path: Path | str, recorded: SourceFile) -> bool:
    try:
        stat = os.stat(path)  # a str path: a refresh makes no Path per file
    except OSError:
        return True
    if stat.st_size != recorded.size:
        return True
    if stat.st_mtime_ns == recorded.mtime_ns:
        return False
    # Touched but maybe not edited: only the content decides.
    try:
        return file_sha256(Path(path)) != recorded.sha256
    except OSError:
        return True


def stale_sources(manifest: Manifest, index: Path | None = None) -> dict[str, list[str]]:
    """Source files that are new, changed or missing since the build (empty lists when fresh).

    ``index``: the index folder, never walked when it lies inside a source folder.
    """
    recorded = {s.path: s for s in manifest.sources}
    current: set[str] = set()
    prune = [str(index)] if index is not None else []
    for arg in manifest.source_args:
        if not os.path.exists(arg) and not glob.has_magic(arg):
            continue  # the files it named show up as missing below
        try:
            current.update(_named([arg], prune=prune, follow_links=follows_links(None, manifest)))
        except InputError:
            continue
    report: dict[str, list[str]] = {"new": [], "changed": [], "missing": []}
    excluded = set(manifest.excluded_sources)
    for path in sorted(current - recorded.keys() - excluded):
        report["new"].append(path)
    for path, source in sorted(recorded.items()):
        if not os.path.exists(path) or path not in current:
            report["missing"].append(path)  # gone, or no longer named (a folder that cannot be read now)
        elif file_changed(path, source):
            report["changed"].append(path)
    return report


def catalogues_changed(manifest: Manifest) -> bool:
    """Whether a catalogue file the index was joined with has changed or gone since the build."""
    try:
        recorded = [SourceFile.from_dict(f) for f in manifest.catalogues]
    except (KeyError, TypeError, ValueError):
        return True
    try:
        current = set(_named(manifest.catalogue_args)) if manifest.catalogue_args else set()
    except InputError:
        return True
    if current != {f.path for f in recorded}:
        return True
    return any(file_changed(Path(f.path), f) for f in recorded)


def source_names() -> SourceNames:
    """What the walk needs of the formats: the built-ins' declared names, or the formats themselves with a plugin."""
    if all(e.built_in for e in registry.entries("format")):
        return declared_names()
    from semsearch.ingest.formats import installed_formats  # a plugin's or run-time format's names are its class's

    return installed_formats()


def _named(sources: Sequence[str], *, prune: Sequence[str] = (), follow_links: bool = False) -> list[str]:
    """The files the arguments name now, as a build's walk finds them (``sources.expand_source_names``)."""
    return walk_sources(sources, source_names(), prune=prune, follow_links=follow_links).files


def stale_notice(report: dict[str, list[str]], index_dir: str) -> str | None:
    """One line that says what changed and the command that refreshes the index, or None when fresh."""
    parts = [f"{len(v)} {k}" for k, v in report.items() if v]
    if not parts:
        return None
    return (
        f"the index is stale: {', '.join(parts)} source files since it was built; "
        f"refresh with: semsearch index --index {index_dir}"
    )
