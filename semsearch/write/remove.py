"""Remove documents from an index, by id or by source file, as a new atomically published version."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import InputError, UnknownDocumentError
from semsearch.core.faults import barrier
from semsearch.core.fileio import utc_now
from semsearch.core.records import Document, Provenance
from semsearch.dedup import near_part
from semsearch.dedup.near_part import no_near_keys
from semsearch.dedup.paper_ids import PDF_KIND
from semsearch.encode.encoder_choice import copy_encoder
from semsearch.ingest.sources import PathLookup
from semsearch.store import passages_part, windows_part
from semsearch.store.ann import open_version_vectors
from semsearch.store.documents import DocumentStore, open_documents
from semsearch.store.layout import ENCODER_DIR, current_version, doc_num
from semsearch.store.manifest import FORMAT_VERSION, Counts, Manifest
from semsearch.store.segments import MERGE_SHARE
from semsearch.store.versions import PreviousVersion, VersionWriter, new_version, next_sequence
from semsearch.write.contents import write_contents
from semsearch.write.segment_writer import SegmentChange, publish_segment, segment_fit
from semsearch.write.settings import BuildOptions, map_method_of

# The provenance kinds whose record can bring a paper's full text (--full-text): a PDF file's page 1, and a Zotero
# item, through its PDF attachments (ingest/pdf_text.py reads those two).
_FULL_TEXT_KINDS = frozenset([PDF_KIND, "item"])


@dataclass
class RemoveSummary:
    """What ``semsearch remove`` did."""

    removed: int
    documents: int
    version: str
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _resolve_source(given: str, manifest: Manifest, files: set[str]) -> tuple[str, set[str]]:
    """The recorded absolute path a user's path names, and the provenance file names that mean it."""
    recorded = PathLookup(s.path for s in manifest.sources)
    wanted = os.path.abspath(given)
    matches = recorded.named(wanted) or (recorded.named(given) if given in files else [])
    if not matches:
        raise InputError(f"no document in the index comes from {given}")
    path = matches[0]
    # Provenance names files as the build saw them: relative to its working directory, or absolute. A relative
    # name that could mean several recorded files (a.jsonl, sub/a.jsonl) means this one only when it is this
    # one from here.
    return path, {f for f in files if _means(f, path, recorded)}


def _resolve_sources(given: str, manifest: Manifest, files: set[str]) -> list[tuple[str, set[str]]]:
    """``_resolve_source`` for a file, or for each recorded file under a folder (one that cannot be read now too)."""
    inside = os.path.abspath(given) + os.sep
    under = [s.path for s in manifest.sources if s.path.startswith(inside)]
    if not under:
        return [_resolve_source(given, manifest, files)]
    recorded = PathLookup(s.path for s in manifest.sources)
    return [(path, {f for f in files if _means(f, path, recorded)}) for path in under]


def _means(name: str, path: str, recorded: PathLookup) -> bool:
    found = recorded.named(name)
    return found == [path] or (path in found and os.path.abspath(name) == path)


def remove_documents(
    index_dir: str | Path,
    *,
    ids: Sequence[str] = (),
    sources: Sequence[str] = (),
    wait: bool = False,
    merge_share: float = MERGE_SHARE,
    map_method: str | None = None,
) -> RemoveSummary:
    """Drop documents by id, and provenance by source file (documents left with none are dropped).

    A later ``semsearch index`` over sources that still provide them brings them back. ``map_method`` is
    how the map is drawn if the removal rewrites it (None: as SEMSEARCH_MAP asks).
    """
    started = time.perf_counter()
    index_path = Path(index_dir)
    if not ids and not sources:
        raise InputError("name documents (ids) or --source files to remove")
    method = map_method_of(BuildOptions(map_method=map_method))  # resolved once, handed to every writer
    current_version(index_path)  # no index here: fail before the lock file is created
    with new_version(index_path, wait=wait) as writer:
        previous = PreviousVersion.load(index_path)
        assert previous is not None  # current_version above found it, and only writers (locked out) remove it
        version, manifest = previous.path, previous.manifest
        store = open_documents(version, manifest)
        try:
            drop: set[str] = set()
            for key in ids:
                doc = store.find(key)
                if doc is None:
                    raise UnknownDocumentError(f"no document {key!r} in {index_path}")
                drop.add(doc.id)
            files = set(store.source_files())
            gone_paths: set[str] = set()
            gone_files: set[str] = set()
            for given in sources:
                for path, names in _resolve_sources(given, manifest, files):
                    gone_paths.add(path)
                    gone_files |= names
            barrier("read")
            touched = _touched(store, drop, gone_files)
            barrier("plan")
            removal = (drop, gone_files, gone_paths)
            appended = _remove_as_segment(writer, previous, touched, removal, bool(ids), started, merge_share, method)
            if appended is not None:
                return appended
            documents = list(store.iter_documents())
        finally:
            store.close()
        kept: list[Document] = []
        bare: set[int] = set()  # kept documents left with no source of full text: no passages, as a full build
        for doc in documents:
            had, doc.sources = doc.sources, [p for p in doc.sources if p.file not in gone_files]
            if doc.id not in drop and doc.sources:
                kept.append(doc)
                if _loses_full_text(had, doc.sources):
                    bare.add(doc_num(doc.id))

        nums = [doc_num(d.id) for d in kept]
        _, exact = open_version_vectors(version, manifest)
        kept_vecs = exact.get(nums)

        if (version / ENCODER_DIR).is_dir():
            copy_encoder(version / ENCODER_DIR, writer.path / ENCODER_DIR)
        ann = manifest.ann or {}
        contents = write_contents(
            writer.path,
            kept,
            kept_vecs,
            ann=str(ann.get("requested", "auto")),
            memory_budget=ann.get("memory_budget") or None,
            previous=previous,
            map_method=method,
            windows=windows_part.carry(version, manifest, nums),
            passages=passages_part.carry(version, manifest, [n for n in nums if n not in bare]),
            near_keys=near_part.carry(version, manifest, nums),
        )
        removed = len(documents) - len(kept)
        counts = replace(
            manifest.counts,
            **_read_counts(kept),
            documents=len(kept),
            vectors=len(kept),
            title_only=sum(d.title_only for d in kept),
            aliases=sum(len(d.aliases) for d in kept),
        )
        # Rewritten whole: one base again.
        rewritten = {"format_version": FORMAT_VERSION, "segments": [], "hidden": 0, **contents}
        final = writer.publish(_after_removal(manifest, counts, gone_paths, bool(ids), rewritten))
    return RemoveSummary(removed, len(kept), final.name, round(time.perf_counter() - started, 3))


def _after_removal(
    manifest: Manifest, counts: Counts, gone_paths: set[str], by_id: bool, contents: dict[str, Any]
) -> Manifest:
    """The manifest of a version that removed documents by id or sources (``contents``: what was written)."""
    fields = _removal_fields(manifest, gone_paths, by_id)
    return replace(manifest, built_at=utc_now(), counts=counts, **fields, files={}, **contents)


def _removal_fields(manifest: Manifest, gone_paths: set[str], by_id: bool) -> dict[str, Any]:
    """The manifest fields a removal changes besides counts and contents: sources, exclusions, removed ids."""
    return {
        "sources": [s for s in manifest.sources if s.path not in gone_paths],
        # Later refreshes from the recorded sources leave these out until they are named again.
        "excluded_sources": sorted(set(manifest.excluded_sources) | gone_paths),
        "removed_ids": manifest.removed_ids or by_id,
    }


def _loses_full_text(before: Sequence[Provenance], after: Sequence[Provenance]) -> bool:
    """Whether a removal takes the last of a document's sources that could bring its full text (a PDF, a Zotero item).

    Its passages were read from one of those: a full build of the sources left gives it none.
    """
    return any(p.kind in _FULL_TEXT_KINDS for p in before) and not any(p.kind in _FULL_TEXT_KINDS for p in after)


def _read_counts(documents: Sequence[Document]) -> dict[str, int]:
    """What these documents count toward ``read``, ``exact_duplicates`` and ``near_duplicates``, as a build counts.

    Every provenance is a record read; a document holds its own text and the near copies merged into it.
    """
    read = sum(len(d.sources) for d in documents)
    texts = sum(1 + len(d.texts) for d in documents)
    return {"read": read, "exact_duplicates": read - texts, "near_duplicates": texts - len(documents)}


def _touched(store: DocumentStore, drop: set[str], gone_files: set[str]) -> list[Document]:
    """The documents a removal changes: those named, and those with a source among the files removed."""
    nums = {doc_num(i) for i in drop} | set(store.nums_read_from(sorted(gone_files)))
    return list(store.get_many(sorted(nums)).values())


def _remove_as_segment(
    writer: VersionWriter,
    previous: PreviousVersion,
    touched: list[Document],
    removal: tuple[set[str], set[str], set[str]],
    by_id: bool,
    started: float,
    share: float,
    map_method: str,
) -> RemoveSummary | None:
    """Publish the removal as a segment of the live version (None when it is too big a change for one, or one that
    takes a kept document's passages: a segment carries those whole).

    ``removal`` is (ids dropped by name, provenance file names removed, their recorded paths).
    """
    drop, gone_files, gone_paths = removal
    manifest = previous.manifest
    dropped: list[Document] = []
    changed: list[Document] = []
    before = _read_counts(touched)
    bare: list[int] = []  # kept documents left with no source of full text
    for doc in touched:
        had, doc.sources = doc.sources, [p for p in doc.sources if p.file not in gone_files]
        (changed if doc.id not in drop and doc.sources else dropped).append(doc)
        if doc.sources and doc.id not in drop and _loses_full_text(had, doc.sources):
            bare.append(doc_num(doc.id))
    held = passages_part.carry(previous.path, manifest, bare) if bare else None
    if held is not None and len(held):
        return None  # a segment carries a rewritten document's passages whole: only a rewrite drops them
    left = _read_counts(changed)
    after = manifest.counts.documents - len(dropped)
    fit = segment_fit(previous, len(touched), after, len(dropped), share=share, map_method=map_method)
    if fit.refused:
        return None
    no_vectors = np.zeros((0, manifest.model.dimension), dtype=np.float32)
    gone = {doc_num(d.id) for d in dropped}
    # The segment gains no text, so it keeps no band keys; an empty set, lest the next refresh take it for a segment
    # written before keys were kept and rewrite the whole index.
    segment = SegmentChange(
        [], no_vectors, changed, gone, no_near_keys(), previous_map=fit.previous_map, map_method=map_method
    )
    counts = replace(
        manifest.counts,
        **{key: getattr(manifest.counts, key) - before[key] + left[key] for key in before},
        documents=after,
        vectors=after,
        title_only=manifest.counts.title_only - sum(d.title_only for d in dropped),
        aliases=manifest.counts.aliases - sum(len(d.aliases) for d in dropped),
    )
    fields = _removal_fields(manifest, gone_paths, by_id)
    done = publish_segment(writer, previous, segment, next_sequence(writer.index_dir), counts=counts, **fields)
    return RemoveSummary(len(dropped), after, done.version.name, round(time.perf_counter() - started, 3))
