"""End-to-end checks of an index version: manifest, checksums, counts, ids, model fingerprint."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from semsearch.core.errors import SemsearchError
from semsearch.core.fileio import readonly_uri
from semsearch.store import windows_part
from semsearch.store.ann import VECTORS, SegmentedSearcher, open_version_vectors
from semsearch.store.documents import DocumentStore
from semsearch.store.layout import DOCS, ENCODER_DIR, current_version
from semsearch.store.manifest import Manifest
from semsearch.store.vectors import VECTOR_FILE


def verify_index(index_dir: str | Path) -> list[str]:
    """Every problem found in the live version of an index, one line each; an empty list means sound."""
    try:
        version = current_version(Path(index_dir))
        manifest = Manifest.read(version)
    except SemsearchError as exc:
        return [str(exc)]
    problems = manifest.check_file_hashes(version)
    if problems:
        return problems  # the rest would only repeat what a damaged file breaks
    expected = manifest.counts.vectors
    model = manifest.model
    try:
        searcher, exact = open_version_vectors(version, manifest)
    except SemsearchError as exc:
        return [str(exc)]
    if searcher.ntotal != expected:
        problems.append(f"{version / VECTORS}: {searcher.ntotal} vectors, manifest says {expected}")
    if hasattr(searcher.index, "id_map"):
        indexed = exact.ids
        if isinstance(searcher, SegmentedSearcher):
            indexed = searcher.store.parts[0].ids  # the base's FAISS index holds all its rows, hidden ones too
        differ = _faiss_ids(searcher.index) ^ {int(i) for i in indexed}
        if differ:
            problems.append(f"{version / VECTORS}: {len(differ)} ids differ from {VECTOR_FILE}")
    problems += _check_store(version, manifest, expected, {int(i) for i in exact.ids})
    problems += _check_map(version, {int(i) for i in exact.ids})
    problems += windows_part.verify(version, manifest)
    if model.backend == "onnx":
        problems += _check_encoder(version / ENCODER_DIR, model.fingerprint)
    return problems


def _faiss_ids(vectors: object) -> set[int]:
    import faiss

    return {int(i) for i in faiss.vector_to_array(vectors.id_map)}  # type: ignore[attr-defined]


def _check_store(version: Path, manifest: Manifest, expected: int, faiss_ids: set[int]) -> list[str]:
    """Each segment's docs.sqlite is sound, and their live documents are the vectors' (base alone: docs.sqlite)."""
    try:
        segments = manifest.version_segments(version)
    except SemsearchError as exc:
        return [str(exc)]
    problems: list[str] = []
    for segment in segments:
        path = segment.folder / DOCS
        try:
            conn = sqlite3.connect(readonly_uri(path), uri=True)
            try:
                integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
                orphans = conn.execute(
                    "SELECT count(*) FROM provenance WHERE num NOT IN (SELECT num FROM documents)"
                ).fetchone()[0]
            finally:
                conn.close()
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
            nums = {int(r[0]) for r in store.rows("SELECT num FROM documents")}
        finally:
            store.close()
    except SemsearchError as exc:
        return [str(exc)]
    if len(nums) != expected:
        problems.append(f"{path}: {len(nums)} documents, manifest says {expected}")
    if nums != faiss_ids:
        problems.append(f"{path}: {len(nums ^ faiss_ids)} document ids differ from the vector ids")
    return problems


def _check_map(version: Path, live: set[int]) -> list[str]:
    """The map (base plus segments) assembles, and places exactly the version's documents."""
    from semsearch.store.corpus_map import load_map

    try:
        data = load_map(version)
    except SemsearchError as exc:
        return [str(exc)]
    if data is None:
        return []
    try:
        placed = {int(p[0], 16) for p in data["points"]}
    except (TypeError, ValueError):
        return [f"{version}: the map holds a point whose id is no document id"]
    if placed != live or len(data["points"]) != len(live):
        return [
            f"{version}: the map places {len(data['points'])} documents, {len(placed ^ live)} differ from the index"
        ]
    return []


def _check_encoder(folder: Path, fingerprint: str) -> list[str]:
    from semsearch.encode.onnx_backend import read_spec

    try:
        spec = read_spec(folder)
    except SemsearchError as exc:
        return [str(exc)]
    if spec.get("source_fingerprint") != fingerprint:
        return [f"{folder}: exported from model {spec.get('source_fingerprint')}, the index says {fingerprint}"]
    return []
