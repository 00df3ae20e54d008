"""A build's input: the sources resolved, each file read once, the records deduplicated against the live version.

A refresh reads the files that arrived while planning; when the plan then falls back to writing the index
whole, those reads are handed here (``FileReads``) and only the other files are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from semsearch.core.errors import IndexCorruptError, IndexFormatError, IndexNotFoundError, InputError
from semsearch.core.faults import barrier
from semsearch.core.records import DedupResult, IngestResult
from semsearch.dedup.duplicates import deduplicate
from semsearch.dedup.identity import PreviousIdentity
from semsearch.ingest.sources import FileReads, ingested, read_files, unreadable_notes, walk
from semsearch.store.layout import current_version, version_folders
from semsearch.store.manifest import Counts, Manifest
from semsearch.write.freshness import follows_links
from semsearch.write.settings import BuildOptions, full_text_of

if TYPE_CHECKING:
    from semsearch.write.catalogue import CatalogueReport

DEFAULT_SOURCE = "seeds"


@dataclass(frozen=True)
class WalkRules:
    """How a refresh walks its sources: the index folder it never enters, links, unreadable folders."""

    prune: tuple[str, ...] = ()  # folders never walked (the index itself, when it lies inside a source)
    follow_links: bool = False  # read linked files whose targets lie outside the source folders
    drop_unreadable: bool = False  # drop the recorded files of a folder that cannot be read (else stop)


def walk_rules(index_path: Path, opts: BuildOptions, manifest: Manifest | None) -> WalkRules:
    """The walk a build of ``index_path`` with ``opts`` makes (``--follow-links`` is remembered by the index)."""
    return WalkRules((str(index_path),), follows_links(opts.follow_links, manifest), opts.drop_unreadable)


@dataclass
class BuildInput:
    """The build's input, read and deduplicated before the index directory is touched."""

    sources: list[str]  # the arguments as given (recorded for refreshes)
    excluded: list[str]  # files `semsearch remove --source` took out, still left out
    ingested: IngestResult
    near: bool
    catalogue_args: list[str]  # catalogue files whose records name the documents (semsearch.write.catalogue)
    follow_links: bool = False  # linked files outside the source folders were read (remembered by the index)
    dedup: DedupResult = field(default_factory=lambda: DedupResult([], 0, 0, 0))  # set by ``deduplicate``
    catalogue: CatalogueReport | None = None

    def deduplicate(self, identity: PreviousIdentity | None) -> None:
        """Deduplicate the records, keeping the ids of ``identity``'s documents, then join the catalogue."""
        # The live version's documents keep their ids when copies of their texts arrive (see identity.py).
        self.dedup = deduplicate(self.ingested.records, near=self.near, previous=identity)
        if self.catalogue_args:
            from semsearch.write.catalogue import apply_catalogue

            self.catalogue = apply_catalogue(self.dedup.documents, self.catalogue_args, near=self.near)

    @property
    def counts(self) -> Counts:
        docs = self.dedup.documents
        return Counts(
            read=self.dedup.read,
            documents=len(docs),
            exact_duplicates=self.dedup.exact_duplicates,
            near_duplicates=self.dedup.near_duplicates,
            vectors=len(docs),
            title_only=sum(d.title_only for d in docs),
            aliases=sum(len(d.aliases) for d in docs),
        )


def _recorded_manifest(index_path: Path) -> Manifest | None:
    """The live version's manifest for a refresh's source list, or None when there is no readable one."""
    try:
        return Manifest.read(current_version(index_path))
    except (IndexNotFoundError, IndexCorruptError, IndexFormatError):
        return None


def read_input(
    sources: Sequence[str] | None,
    index_path: Path,
    opts: BuildOptions,
    live: Manifest | None,
    reads: FileReads | None = None,
) -> BuildInput:
    """Resolve the sources (a refresh re-reads the recorded ones) and read them; ``deduplicate`` comes next.

    ``live`` is the live version's manifest when the planner read it (else it is read here, if needed);
    ``reads`` are files the planner read already.
    """
    excluded: list[str] = []
    wanted = sources is None or opts.catalogues is None
    recorded = (live if live is not None else _recorded_manifest(index_path)) if wanted else None
    # A catalogue is kept by every refresh, with or without SOURCES, until another (or none) is given.
    kept = recorded.catalogue_args if recorded is not None else []
    catalogues = list(opts.catalogues) if opts.catalogues is not None else list(kept)
    if sources is None:
        sources = list(recorded.source_args) if recorded else []
        # Files taken out with `semsearch remove --source` stay out of refreshes until named again.
        excluded = list(recorded.excluded_sources) if recorded and sources else []
        if not sources and version_folders(index_path):
            # Never replace an index that holds versions by whatever ./seeds holds here.
            raise InputError(
                f"{index_path}'s live version records no sources that can be read again; "
                f"name the SOURCES: semsearch index SOURCES --index {index_path}"
            )
        sources = sources or [DEFAULT_SOURCE]
    if opts.engine != "local" or opts.address is not None or opts.actors is not None:
        from semsearch.encode.ray_engine import check_options

        check_options(opts.engine, opts.address, opts.actors)
    # The walk never enters the index, and a folder read last time that cannot be read now stops the build
    # (its papers stay) unless --drop-unreadable; what it leaves out is said in the summary.
    previous = recorded if recorded is not None else (live if live is not None else _recorded_manifest(index_path))
    rules = walk_rules(index_path, opts, previous)
    found = walk(sources, prune=rules.prune, follow_links=rules.follow_links)
    live_paths = [s.path for s in previous.sources] if previous is not None else []
    notes = unreadable_notes(found, live_paths, drop=rules.drop_unreadable) + found.notes
    skip = set(excluded)
    paths = [p for p in found.files if p not in skip]
    result = ingested(paths, read_files(paths, skip_bad=opts.skip_bad, into=reads), skip_bad=opts.skip_bad)
    result.skipped[:0] = notes
    if full_text_of(opts, previous):
        from semsearch.ingest.pdf_text import add_full_text  # an abstract-only build never loads the reader

        add_full_text(result.records)
    barrier("read")
    return BuildInput(list(sources), excluded, result, opts.near, catalogues, rules.follow_links)
