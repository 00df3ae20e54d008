"""The refresh planner: what a build under the writer lock has to do, decided once, before anything is written.

``plan_refresh`` compares the live version (its manifest, read once) with the sources (walked once, each file
stat'ed once) and the settings (map method included, resolved by the caller), and returns one of:

- ``Unchanged``: a build would write exactly the live version; nothing is written;
- ``Append``: whole files came or went and the change fits a segment; the new files are read and the change
  decided against the live version (``append.decide``);
- ``Rewrite``: the index is written whole; ``reason`` says why, and ``reported`` whether the summary's
  ``rewritten_because`` tells the user (a refresh that brought or dropped files but could not append).

Whatever it returns carries what it read (the live version, the files that arrived) for the build to use
rather than read again.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from semsearch.core.errors import InputError, SemsearchError
from semsearch.core.faults import barrier
from semsearch.core.options import encoder_regime
from semsearch.core.records import IngestResult, SourceFile
from semsearch.core.version import __version__
from semsearch.encode.sentence_runs import PREVIOUS_SCHEME, SCHEME
from semsearch.ingest.sources import FileReads, ingested, read_files, unreadable_notes, walk
from semsearch.store.documents import open_documents
from semsearch.store.layout import CURRENT, current_version
from semsearch.store.manifest import FORMAT_VERSION, SEGMENTED_FORMAT_VERSION, Manifest
from semsearch.store.parts import PartSettings
from semsearch.store.passages_part import has_passages
from semsearch.store.versions import PreviousVersion
from semsearch.write.contents import stale_parts
from semsearch.write.freshness import absolute_source_args, catalogues_changed, file_changed, follows_links
from semsearch.write.inputs import WalkRules, walk_rules
from semsearch.write.settings import (
    BuildOptions,
    ann_settings,
    encoder_settings,
    full_text_of,
    reading_of,
    recorded_reading,
)

if TYPE_CHECKING:
    from semsearch.dedup.incremental import Change
    from semsearch.encode.embedder import Embedder
    from semsearch.write.append import Arrived
    from semsearch.write.segment_writer import SegmentFit


@dataclass(frozen=True)
class Live:
    """The live version a plan was made from: its folder and its manifest, read once."""

    version: Path
    manifest: Manifest


@dataclass(frozen=True)
class Unchanged:
    """Nothing changed since the live version: no version is written."""

    live: Live
    notes: tuple[str, ...] = ()  # what the walk left out (a folder it cannot read, a link outside), for the summary


@dataclass(frozen=True)
class Append:
    """Files came or went and the change fits a segment of the live version."""

    previous: PreviousVersion  # the live version, with its document ids
    arrived: Arrived  # the files of the new version, the new ones read
    change: Change  # the documents added, changed and dropped (append.decide)
    fit: SegmentFit  # how the change fits a segment, with the live version's map state
    map_method: str  # the map method the build resolved


@dataclass(frozen=True)
class Rewrite:
    """The index is written whole."""

    reason: str  # why, in words
    reported: bool = False  # whether the build summary says it (``rewritten_because``)
    live: Live | None = None  # the live version's manifest when it was read (the full path plans from it)
    reads: FileReads | None = None  # files read before falling back to a rewrite, not read again
    # The live version as the append attempt opened it, its document store still open: the build uses it and
    # closes it (``PreviousVersion.close``) instead of opening the version again.
    previous: PreviousVersion | None = None


Plan = Unchanged | Append | Rewrite


@dataclass(frozen=True)
class Survey:
    """The sources' files now against the live version's record: one walk of the arguments, one stat a file."""

    args: list[str]  # the source arguments, absolute
    current: list[str]  # every file the arguments name now, in a full build's reading order
    complete: bool  # False when an argument named nothing readable (only a full build can say what is wrong)
    new: list[str]  # files the version does not record
    kept: list[str]  # recorded files still named, in reading order
    gone: list[str]  # recorded files no longer named
    changed: list[str]  # recorded files whose content differs (or went missing), in record order
    libraries: list[str]  # kept Zotero libraries: their records can change without a new file
    notes: list[str]  # what the walk left out, one line each (a folder it cannot read, a link outside, a name)

    def fresh(self, excluded: Sequence[str]) -> bool:
        """Whether the sources are exactly what the version recorded (files taken out by hand stay out).

        A recorded file the walk no longer names is a change even while it exists (a folder became a link, or
        cannot be listed): a build would drop it, so the version is not what a build would write.
        """
        skip = set(excluded)
        return not self.changed and not self.gone and not any(p not in skip for p in self.new)


def survey(args: Sequence[str], manifest: Manifest, rules: WalkRules | None = None) -> Survey:
    """Walk the arguments once and compare each file with its record (``freshness.stale_sources``' rules).

    A folder that cannot be read and holds recorded files makes the survey incomplete (the full path then
    stops on it with one line), unless ``rules`` drop them.
    """
    rules = rules or WalkRules()
    named: list[list[str]] = []
    notes: list[str] = []
    complete = True
    paths = [s.path for s in manifest.sources]
    for arg in args:
        if not os.path.exists(arg) and not glob.has_magic(arg):
            complete = False  # the files it named count as gone
            continue
        try:
            found = walk([arg], prune=rules.prune, follow_links=rules.follow_links)
            notes += [*unreadable_notes(found, paths, drop=rules.drop_unreadable), *found.notes]
        except InputError:
            complete = False
            continue
        named.append(found.files)
    # expand_sources' order (and de-duplication) over all the arguments, as a full build reads them; one
    # argument's files are in that order already.
    current = named[0] if len(named) == 1 else sorted({p for n in named for p in n}, key=lambda p: p.split(os.sep))
    recorded = {s.path: s for s in manifest.sources}
    listed = set(current)
    kept = [p for p in current if p in recorded]
    new = [p for p in current if p not in recorded]
    gone = [p for p in recorded if p not in listed]
    changed = [p for p, s in recorded.items() if _differs(p, s, p in listed)]
    libraries = [p for p in kept if recorded[p].format == "zotero"]
    return Survey(list(args), current, complete, new, kept, gone, changed, libraries, notes)


def _differs(path: str, recorded: SourceFile, listed: bool) -> bool:
    """Whether a recorded file is missing or changed; a file the walk just listed exists."""
    if not listed and not os.path.exists(path):
        return True
    return file_changed(path, recorded)


def read_live(index_path: Path) -> Live | None:
    """The live version and its manifest, or None when there is none that reads."""
    try:
        version = current_version(index_path)
        return Live(version, Manifest.read(version))
    except SemsearchError:
        return None


def plan_refresh(
    sources: Sequence[str] | None,
    index_path: Path,
    opts: BuildOptions,
    embedder: Embedder | None,
    *,
    map_method: str,
    live: Live | None = None,
    live_read: bool = False,
) -> Plan:
    """What a build of ``sources`` with ``opts`` does to the index (the caller holds the writer lock).

    With ``live_read`` the caller read the live version already (``live``: ``read_live``'s answer).
    """
    has_live = (index_path / CURRENT).is_file()
    if not live_read:
        live = read_live(index_path) if has_live else None
    if opts.full:
        return Rewrite("a full rebuild was asked for (--full)", live=live)
    if opts.rewrite:
        return Rewrite("a rewrite was asked for (--optimize)", live=live)
    if not has_live:
        return Rewrite("the index has no live version")
    if live is None:
        return Rewrite("the live version cannot be read")
    manifest = live.manifest
    args = absolute_source_args(sources) if sources is not None else list(manifest.source_args)
    unsettled = settings_differ(manifest, opts, embedder, map_method)
    if unsettled:
        return Rewrite(unsettled, live=live)
    rules = walk_rules(index_path, opts, manifest)
    seen = survey(args, manifest, rules)  # the one walk of the sources: the check below and the append share it
    if _unchanged(live, sources, seen, opts):
        return Unchanged(live, tuple(seen.notes))
    why = _not_appendable(manifest, sources, opts) or ("" if args else "the live version records no sources")
    if why:
        return Rewrite(why, live=live)
    return _append_plan(live, seen, opts, map_method)


def is_unchanged(
    sources: Sequence[str] | None, index_path: Path, opts: BuildOptions, embedder: Embedder | None, map_method: str
) -> bool:
    """Whether a build of these sources with these options would write exactly the live version."""
    live = read_live(index_path)
    if live is None or settings_differ(live.manifest, opts, embedder, map_method):
        return False
    args = absolute_source_args(sources) if sources is not None else list(live.manifest.source_args)
    rules = walk_rules(index_path, opts, live.manifest)
    return _unchanged(live, sources, survey(args, live.manifest, rules), opts)


def _unchanged(live: Live, sources: Sequence[str] | None, seen: Survey, opts: BuildOptions) -> bool:
    """Whether the version is what a build would write: a sound version, the same sources, files and catalogue.

    Decided from the manifest and one stat of each source (a hash only for files touched since), so that a
    refresh of an unchanged index reads and writes nothing.
    """
    manifest = live.manifest
    if sources is not None and (seen.args != manifest.source_args or manifest.excluded_sources):
        return False
    if opts.catalogues is not None and absolute_source_args(opts.catalogues) != manifest.catalogue_args:
        return False
    # --relayout on a map that is already a full layout of these documents has nothing to do; on one that placed
    # arrivals since (or predates layout records) it lays the map out afresh.
    if opts.relayout and manifest.map.get("method") != "off" and manifest.map.get("changed_since_layout") != 0:
        return False
    if opts.follow_links is not None and opts.follow_links != follows_links(None, manifest):
        return False  # the version records the new choice
    if not seen.fresh(manifest.excluded_sources) or (manifest.catalogue_args and catalogues_changed(manifest)):
        return False
    try:
        manifest.check_file_sizes(live.version)  # a damaged version is left to the full path, which says so
    except SemsearchError:
        return False
    return True


def settings_differ(manifest: Manifest, opts: BuildOptions, embedder: Embedder | None, map_method: str) -> str:
    """Why a build with these options would not keep the live version's settings ('' when it would).

    Encoder, dedup, ANN, map and this release's format; ids removed by hand come back on a refresh, so a
    version that removed some never counts as kept.
    """
    if manifest.removed_ids:
        return "documents were removed by id (a refresh brings them back)"
    if manifest.semsearch_version != __version__:
        return f"the index was written by semsearch {manifest.semsearch_version}"
    if manifest.format_version not in (FORMAT_VERSION, SEGMENTED_FORMAT_VERSION):
        return f"the index has format {manifest.format_version}"
    if manifest.dedup.get("near") is not opts.near:
        return "near-duplicate merging was switched"
    if full_text_of(opts, manifest) != has_passages(manifest):
        return "full text was switched " + ("on" if full_text_of(opts, manifest) else "off")
    encoder = encoder_differs(opts, manifest, embedder)
    if encoder:
        return encoder
    if ann_settings(opts, manifest) != ann_settings(BuildOptions(), manifest):
        return "other ANN settings were asked for"
    return parts_differ(manifest, map_method)


def encoder_differs(opts: BuildOptions, manifest: Manifest, embedder: Embedder | None) -> str:
    """Why the build would not encode with the live version's model, backend, precision and reading ('' if so)."""
    model = manifest.model
    if reading_of(opts, manifest) != recorded_reading(model):
        # The vectors are re-made, from the cache where it holds them: leaving or entering `sentences` runs every
        # document of two sentences or more again (its vector is its sentences' mean, not its text's).
        return "another reading was asked for"
    if recorded_reading(model) == "sentences" and (model.scheme or PREVIOUS_SCHEME) != SCHEME:
        return "the sentence reading changed"  # its cache keys name the scheme: every document runs again
    if embedder is not None:
        runtime = (getattr(embedder, "backend", "custom"), getattr(embedder, "precision", "fp32"))
        given = (embedder.name, embedder.fingerprint, embedder.dimension, *runtime, getattr(embedder, "regime", ""))
        same = given == (model.name, model.fingerprint, model.dimension, model.backend, model.precision, model.regime)
        return "" if same else "the encoder differs"
    backend, precision = encoder_settings(opts, manifest)
    if opts.model not in (None, model.name) or (backend, precision) != (model.backend, model.precision):
        return "another model, backend or precision was asked for"
    # A version built before ONNX encoded each text alone records no regime: refreshing it re-encodes.
    if encoder_regime(backend) != model.regime:
        return "the encoder's regime changed"
    # The model's files may have changed under its name (another models folder, `models install --force`).
    from semsearch.encode.encoder_store import source_fingerprint

    on_disk = source_fingerprint(model.name)
    return "" if on_disk is None or on_disk == model.fingerprint else "the model's files changed"


def parts_differ(manifest: Manifest, map_method: str) -> str:
    """Why an index part would be written otherwise now (the map's method and the corpus size, BM25's settings)."""
    return next(iter(stale_parts(manifest, PartSettings(map_method=map_method))), "")


def _not_appendable(manifest: Manifest, sources: Sequence[str] | None, opts: BuildOptions) -> str:
    """Why options or the live version rule out appending ('' when they allow it)."""
    if opts.relayout:
        return "a new map layout was asked for (--relayout)"
    if opts.engine != "local":
        return f"encoding runs on {opts.engine}"
    if opts.catalogues or manifest.catalogue_args:
        return "the index is joined with a catalogue"
    if sources is None and manifest.excluded_sources:
        return "files removed with remove --source are left out of the recorded sources"
    if opts.follow_links is not None and opts.follow_links != follows_links(None, manifest):
        return "links outside the source folders are read otherwise (--follow-links)"
    return ""


def _append_plan(live: Live, seen: Survey, opts: BuildOptions, map_method: str) -> Plan:
    """Read the arrived files and decide the change, or say why the index is rewritten instead."""
    from semsearch.dedup.incremental import FullBuild
    from semsearch.write.append import Arrived, decide

    if not seen.complete:
        return Rewrite("a source names no readable file", live=live)
    manifest = live.manifest
    redo = {*seen.changed, *seen.libraries}  # a Zotero library's records are read again whole
    changed = next((p for p in seen.kept if p in redo), None)
    if changed is not None:
        return Rewrite(f"{changed} changed", reported=True, live=live)
    if not seen.new and not seen.gone:
        return Rewrite("no file came or went", live=live)
    reads = read_files(seen.new, skip_bad=opts.skip_bad)
    arrivals = ingested(seen.new, reads, skip_bad=opts.skip_bad) if seen.new else IngestResult([], [], [])
    if full_text_of(opts, manifest):
        from semsearch.ingest.pdf_text import add_full_text

        add_full_text(arrivals.records)  # only the arrivals: the live documents keep the passages they have
    arrivals.skipped[:0] = seen.notes
    barrier("read")
    recorded = {s.path: s for s in manifest.sources}
    read = {f.path: f for f in arrivals.files} | {p: recorded[p] for p in seen.kept}
    files = [read[p] for p in seen.current if p in read]
    arrived = Arrived(seen.args, files, seen.current, arrivals, seen.gone)
    store = open_documents(live.version, manifest)  # the live version's documents, opened once for the build
    try:
        previous = PreviousVersion(live.version, manifest, store.ids(), store)
        change, fit = decide(arrived, previous, near=opts.near, share=opts.merge_share, map_method=map_method)
    except FullBuild as why:
        return Rewrite(str(why), reported=True, live=live, reads=reads, previous=previous)
    except BaseException:
        store.close()
        raise
    previous.close()
    barrier("plan")
    return Append(previous, arrived, change, fit, map_method)
