"""Remove documents from an index, by id or by source file, as a new atomically published version."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from .ann import open_version_vectors
from .contents import write_contents
from .documents import DocumentStore
from .encoder_choice import copy_encoder
from .errors import InputError, UnknownDocumentError
from .fileio import utc_now
from .layout import DOCS, ENCODER_DIR, current_version, doc_num
from .manifest import FORMAT_VERSION, Manifest
from .records import Document
from .versions import PreviousVersion, new_version


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
    recorded = [s.path for s in manifest.sources]
    wanted = os.path.abspath(given)
    matches = [p for p in recorded if p == wanted] or [p for p in recorded if given in files and _same(p, given)]
    if not matches:
        raise InputError(f"no document in the index comes from {given}")
    path = matches[0]
    # Provenance names files as the build saw them: relative to its working directory, or absolute.
    return path, {f for f in files if _same(path, f)}


def _same(absolute: str, name: str) -> bool:
    return absolute == name or absolute.endswith(os.sep + name.lstrip("./"))


def remove_documents(
    index_dir: str | Path, *, ids: Sequence[str] = (), sources: Sequence[str] = (), wait: bool = False
) -> RemoveSummary:
    """Drop documents by id, and provenance by source file (documents left with none are dropped).

    A later ``semsearch index`` over sources that still provide them brings them back.
    """
    started = time.perf_counter()
    index_path = Path(index_dir)
    if not ids and not sources:
        raise InputError("name documents (ids) or --source files to remove")
    current_version(index_path)  # no index here: fail before the lock file is created
    with new_version(index_path, wait=wait) as writer:
        previous = PreviousVersion.load(index_path)
        assert previous is not None  # current_version above found it, and only writers (locked out) remove it
        version, manifest = previous.path, previous.manifest
        store = DocumentStore(version / DOCS)
        try:
            drop: set[str] = set()
            for key in ids:
                doc = store.find(key)
                if doc is None:
                    raise UnknownDocumentError(f"no document {key!r} in {index_path}")
                drop.add(doc.id)
            documents = list(store.iter_documents())
        finally:
            store.close()
        files = {p.file for d in documents for p in d.sources}
        gone_paths: set[str] = set()
        gone_files: set[str] = set()
        for given in sources:
            path, names = _resolve_source(given, manifest, files)
            gone_paths.add(path)
            gone_files |= names
        kept: list[Document] = []
        for doc in documents:
            doc.sources = [p for p in doc.sources if p.file not in gone_files]
            if doc.id not in drop and doc.sources:
                kept.append(doc)

        _, exact = open_version_vectors(version, manifest)
        kept_vecs = exact.get([doc_num(d.id) for d in kept])

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
        )
        removed = len(documents) - len(kept)
        counts = replace(
            manifest.counts,
            documents=len(kept),
            vectors=len(kept),
            title_only=sum(d.title_only for d in kept),
            aliases=sum(len(d.aliases) for d in kept),
        )
        final = writer.publish(
            replace(
                manifest,
                format_version=FORMAT_VERSION,
                built_at=utc_now(),
                counts=counts,
                sources=[s for s in manifest.sources if s.path not in gone_paths],
                # Later refreshes from the recorded sources leave these out until they are named again.
                excluded_sources=sorted(set(manifest.excluded_sources) | gone_paths),
                removed_ids=manifest.removed_ids or bool(ids),
                files={},
                **contents,
            )
        )
    return RemoveSummary(removed, len(kept), final.name, round(time.perf_counter() - started, 3))
