"""The parts of an index version the store layer owns, each behind ``parts.IndexPart``.

Each class adapts one file format (``vectors.py``, ``ann.py``, ``documents.py``, ``filter_columns.py``,
``lexical_build.py``, ``windows_part.py``, ``passages_part.py``) to the five steps every part offers; the
near-duplicate keys, owned by the dedup layer, are ``dedup.near_part.NearKeysPart``, and the corpus map, computed by
the atlas layer, ``atlas.map_part.MapPart``. The sqlite checks are imported where they are used: a query never loads
them here.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import SemsearchError
from semsearch.store import passages_part, windows_part
from semsearch.store.analyzer import ANALYZER_NAME
from semsearch.store.ann import VECTORS, SegmentedSearcher, open_version_vectors
from semsearch.store.ann_build import previous_ann, write_ann
from semsearch.store.ann_kinds import AnnSpec
from semsearch.store.documents import (
    FILTER_TABLES,
    DocumentStore,
    check_store_file,
    filter_index_counts,
    open_documents,
)
from semsearch.store.filter_columns import FilterColumns
from semsearch.store.layout import DOCS, LEXICAL_DIR, doc_num
from semsearch.store.lexical import LexicalIndex, bm25_settings
from semsearch.store.lexical_build import write_lexical
from semsearch.store.manifest import Manifest
from semsearch.store.parts import BaseJob, PartSettings, SegmentJob
from semsearch.store.passages_part import PassageIndex, PassageSet, has_passages
from semsearch.store.sections import AnnSection, FaissSection, LexicalSection, VectorsSection
from semsearch.store.vectors import IDS_FILE, VECTOR_FILE, VectorStore, write_vector_files
from semsearch.store.windows_part import WindowIndex, WindowSet, is_windowed


def _live_ids(version: Path, manifest: Manifest) -> set[int]:
    """The numbers of a version's live documents, as its exact vectors hold them."""
    return {int(i) for i in open_version_vectors(version, manifest)[1].ids}


class VectorsPart:
    """The exact float32 vectors and their document numbers (``vectors.npy``, ``ids.npy``) of each segment."""

    name = "vectors"

    def write_base(self, job: BaseJob) -> VectorsSection:
        write_vector_files(job.folder, job.ids, job.vectors)
        return VectorsSection(file=VECTOR_FILE, ids=IDS_FILE, rows=int(len(job.ids)))

    def write_segment(self, job: SegmentJob) -> None:
        if job.segment is not None:
            write_vector_files(job.segment, job.ids, np.ascontiguousarray(job.vectors, dtype=np.float32))

    def open(self, version: Path, manifest: Manifest) -> VectorStore:
        return open_version_vectors(version, manifest)[1]

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        if manifest.ann is not None:  # format 1 kept its vectors in the FAISS index: the ANN part reads them
            VectorStore.open_version(version, manifest)  # raises, naming the file, when a shape is off
        return []

    def describe(self, manifest: Manifest) -> VectorsSection | None:
        return VectorsSection.from_dict(manifest.vectors) if manifest.vectors is not None else None

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        return ""


class WindowsPart:
    """A windowed reading's sentence-window vectors (``windows.npy``, ``window_ids.npy``) of each segment.

    Written only where the job carries windows (``--reading windows`` or ``windows-all``); a version read
    otherwise has none of these files, and the reading (``ModelInfo.reading``) is its record: no section.
    """

    name = "windows"

    def write_base(self, job: BaseJob) -> None:
        if job.windows is not None:
            windows_part.write(job.folder, job.windows)

    def write_segment(self, job: SegmentJob) -> None:
        """The segment's windows: the added documents' own, the rewritten ones' kept from the previous version."""
        manifest = job.previous.manifest
        if job.segment is None or not is_windowed(manifest):
            return
        added = {doc_num(d.id) for d in job.added}
        if added and job.windows is None:
            raise ValueError("a windowed index's added documents need their window vectors")
        rewritten = [int(n) for n in job.ids if int(n) not in added]
        kept = windows_part.carry(job.previous.path, manifest, rewritten)
        dimension = manifest.model.dimension
        own = job.windows if job.windows is not None else WindowSet.empty(dimension)
        windows_part.write(job.segment, WindowSet.concat([own, kept or WindowSet.empty(dimension)], dimension))

    def open(self, version: Path, manifest: Manifest) -> WindowIndex | None:
        """The version's window vectors (None when its reading stores none)."""
        return windows_part.open_windows(version, manifest)

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        return windows_part.verify(version, manifest)

    def describe(self, manifest: Manifest) -> None:
        return None  # the reading is the model's (``ModelInfo.reading``)

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        return ""  # another reading re-encodes everything: the planner rewrites for it (write/plan.py)


class PassagesPart:
    """A full-text index's passages (``passages.npy`` and the files beside it: passages_part.py) of each segment.

    Written only where the job carries passages (``--full-text``); an index built without it has none of these
    files, and the manifest's ``full_text`` setting is its record: no section.
    """

    name = "passages"

    def write_base(self, job: BaseJob) -> None:
        if job.passages is not None:
            passages_part.write(job.folder, job.passages)

    def write_segment(self, job: SegmentJob) -> None:
        """The segment's passages: the added documents' own, the rewritten ones' kept from the previous version."""
        manifest = job.previous.manifest
        if job.segment is None or not has_passages(manifest):
            return
        added = {doc_num(d.id) for d in job.added}
        rewritten = [int(n) for n in job.ids if int(n) not in added]
        kept = passages_part.carry(job.previous.path, manifest, rewritten)
        dimension = manifest.model.dimension
        own = job.passages if job.passages is not None else PassageSet.empty(dimension)
        passages_part.write(job.segment, PassageSet.concat([own, kept or PassageSet.empty(dimension)], dimension))

    def open(self, version: Path, manifest: Manifest) -> PassageIndex | None:
        """The version's passages (None when it was built without ``--full-text``)."""
        return passages_part.open_passages(version, manifest)

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        return passages_part.verify(version, manifest)

    def describe(self, manifest: Manifest) -> None:
        return None

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        return ""


class AnnPart:
    """The base's ANN structure (``vectors.faiss``) of a registered kind, and the queries it was tuned on."""

    name = "ann"

    def write_base(self, job: BaseJob) -> AnnSection:
        previous = job.previous
        entries = write_ann(
            job.folder,
            job.vectors,
            job.ids,
            requested=job.ann,
            memory_budget=job.memory_budget,
            previous=None if previous is None or job.retrain else previous_ann(previous.path, previous.manifest),
            tuning_queries=job.tuning_queries,
            fallback_queries=None if previous is None else previous.path,
        )
        return AnnSection(FaissSection.from_dict(entries["faiss"]), AnnSpec.from_dict(entries["ann"]))

    def write_segment(self, job: SegmentJob) -> None:
        """Nothing: an appended segment is searched exactly, the base's structure less its hidden rows."""

    def open(self, version: Path, manifest: Manifest) -> Any:
        return open_version_vectors(version, manifest)[0]

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        searcher, exact = open_version_vectors(version, manifest)
        problems = []
        if searcher.ntotal != manifest.counts.vectors:
            problems.append(f"{version / VECTORS}: {searcher.ntotal} vectors, manifest says {manifest.counts.vectors}")
        if hasattr(searcher.index, "id_map"):
            indexed = exact.ids
            if isinstance(searcher, SegmentedSearcher):
                indexed = searcher.store.parts[0].ids  # the base's FAISS index holds all its rows, hidden ones too
            differ = _faiss_ids(searcher.index) ^ {int(i) for i in indexed}
            if differ:
                problems.append(f"{version / VECTORS}: {len(differ)} ids differ from {VECTOR_FILE}")
        return problems

    def describe(self, manifest: Manifest) -> AnnSection | None:
        if not isinstance(manifest.ann, dict):
            return None
        return AnnSection(FaissSection.from_dict(manifest.faiss), AnnSpec.from_dict(manifest.ann))

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        return ""  # the kind and budget asked for are build options: the writers compare them (build.py)


def _faiss_ids(index: Any) -> set[int]:
    import faiss

    return {int(i) for i in faiss.vector_to_array(index.id_map)}


class DocumentsPart:
    """The documents, their sources, texts, aliases and arrivals (``docs.sqlite`` of each segment)."""

    name = "documents"

    def write_base(self, job: BaseJob) -> None:
        from semsearch.store.documents_writer import write_documents  # a writer's: opening an index never loads it

        write_documents(job.folder / DOCS, job.documents, filter_columns=False)

    def write_segment(self, job: SegmentJob) -> None:
        if job.segment is not None:
            from semsearch.store.documents_writer import write_documents

            write_documents(job.segment / DOCS, job.documents, filter_columns=False)

    def open(self, version: Path, manifest: Manifest) -> DocumentStore:
        return open_documents(version, manifest)

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        try:
            live = _live_ids(version, manifest)
        except SemsearchError as exc:
            return [str(exc)]
        return check_documents(version, manifest, manifest.counts.vectors, live)

    def describe(self, manifest: Manifest) -> None:
        return None  # the documents' counts are the manifest's own (``counts``)

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        return ""


def check_documents(version: Path, manifest: Manifest, expected: int, live: set[int]) -> list[str]:
    """Each segment's docs.sqlite is sound, and their live documents are ``live`` (the vectors' numbers)."""
    try:
        segments = manifest.version_segments(version)
    except SemsearchError as exc:
        return [str(exc)]
    problems: list[str] = []
    for segment in segments:
        path = segment.folder / DOCS
        try:
            integrity, orphans = check_store_file(path)
        except sqlite3.Error as exc:
            return [*problems, f"{path}: {exc}"]
        if integrity != "ok":
            problems.append(f"{path}: integrity check says {integrity}")
        if orphans:
            problems.append(f"{path}: {orphans} provenance rows point to no document")
    path = version / DOCS
    try:
        store = DocumentStore.open_version(version, segments)
        try:
            nums = store.nums()
        finally:
            store.close()
    except SemsearchError as exc:
        return [str(exc)]
    if len(nums) != expected:
        problems.append(f"{path}: {len(nums)} documents, manifest says {expected}")
    if nums != live:
        problems.append(f"{path}: {len(nums ^ live)} document ids differ from the vector ids")
    return problems


class FilterColumnsPart:
    """The column index behind ``--where`` (``filter_*`` tables beside the documents in each docs.sqlite)."""

    name = "filter columns"

    def write_base(self, job: BaseJob) -> None:
        from semsearch.store.documents_writer import add_filter_columns

        add_filter_columns(job.folder / DOCS, job.documents)

    def write_segment(self, job: SegmentJob) -> None:
        if job.segment is not None:
            from semsearch.store.documents_writer import add_filter_columns

            add_filter_columns(job.segment / DOCS, job.documents)

    def open(self, version: Path, manifest: Manifest) -> Any:
        """The version's filter columns (None for a version written before they existed)."""
        store = open_documents(version, manifest)
        return FilterColumns(store.rows, store.path, store.segment_tables) if store.has_filter_columns else None

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        """Each segment's filter tables, where it has them, index as many documents as it holds."""
        problems = []
        for segment in manifest.version_segments(version):
            path = segment.folder / DOCS
            try:
                counted = filter_index_counts(path, FILTER_TABLES)
                if counted is None:
                    continue  # written before the column index existed: filters scan the metadata instead
                indexed, held = counted
            except (sqlite3.Error, TypeError) as exc:
                problems.append(f"{path}: the filter columns are unreadable ({exc})")
                continue
            if indexed != held:
                problems.append(f"{path}: the filter columns index {indexed} documents, the store holds {held}")
        return problems

    def describe(self, manifest: Manifest) -> None:
        return None

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        return ""


class LexicalPart:
    """The BM25 index (``lexical/`` of each segment): postings, weights and what recomputing them needs."""

    name = "BM25"

    def write_base(self, job: BaseJob) -> LexicalSection:
        previous = None if job.previous is None else job.previous.path / LEXICAL_DIR
        return LexicalSection.from_dict(
            write_lexical(job.folder / LEXICAL_DIR, job.ids, job.documents, previous=previous)
        )

    def write_segment(self, job: SegmentJob) -> LexicalSection:
        if job.segment is not None:
            write_lexical(job.segment / LEXICAL_DIR, job.ids, job.documents)
        return LexicalSection.from_dict({**job.previous.manifest.lexical, "analysed": len(job.documents)})

    def open(self, version: Path, manifest: Manifest) -> Any:
        from semsearch.store.lexical_segments import load_segments  # a reader's module: writers never need it

        return load_segments(manifest.version_segments(version))

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        """Each segment's BM25 index loads and holds that segment's documents."""
        from semsearch.store.lexical_segments import lexical_folder

        problems = []
        for segment in manifest.version_segments(version):
            try:
                folder = lexical_folder(segment)
                held = len(LexicalIndex.load(folder))
            except SemsearchError as exc:
                problems.append(str(exc))
                continue
            if held != segment.rows:
                problems.append(f"{folder}: {held} documents, the segment holds {segment.rows}")
        return problems

    def describe(self, manifest: Manifest) -> LexicalSection:
        return LexicalSection.from_dict(manifest.lexical)

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        """Why the recorded BM25 weights are not the current settings' (what a version records is compared)."""
        section = self.describe(manifest)
        if "bm25" in section.written and section.bm25 != bm25_settings():
            return f"the BM25 settings changed ({_changed(section.bm25, bm25_settings())})"
        if "analyzer" in section.written and section.analyzer != ANALYZER_NAME:
            return f"the BM25 analyzer changed ({section.analyzer} to {ANALYZER_NAME})"
        return ""


def _changed(old: Any, new: Any) -> str:
    """``k1 1.5 to 1.2``: the fields of two dataclasses of one type that differ."""
    before, after = vars(old), vars(new)
    return ", ".join(f"{k} {before[k]} to {after[k]}" for k in before if before[k] != after[k])
