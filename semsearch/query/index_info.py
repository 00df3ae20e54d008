"""What ``semsearch info`` shows of an index version."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semsearch.core.records import SourceFile
from semsearch.store.ann_kinds import AnnSpec
from semsearch.store.manifest import Manifest


@dataclass
class IndexInfo:
    """What ``semsearch info`` shows: the manifest plus what the version holds on disk."""

    path: str
    version: str
    format_version: int
    model: str
    fingerprint: str
    dimension: int
    backend: str
    precision: str
    documents: int
    read: int
    exact_duplicates: int
    near_duplicates: int
    faiss: str
    ann: str
    ann_spec: dict[str, Any]
    built_at: str
    build_seconds: float
    size_bytes: int
    sources: list[SourceFile] = field(default_factory=list)
    title_only: int = 0  # documents indexed by their title alone (no abstract)
    aliases: int = 0  # former ids that still resolve to a document
    catalogue: dict[str, Any] | None = None  # the build's catalogue join (semsearch.write.catalogue), if any
    map: dict[str, Any] = field(default_factory=dict)  # the manifest's map entry: method, clusters, when laid out
    segments: int = 0  # segments appended since the index was last written whole (segments.py)
    hidden: int = 0  # rows of its segments the version no longer holds
    reading: str = "truncated"  # how vectors read long abstracts (options.READINGS)
    windows: int = 0  # window (or sentence) vectors kept beside the documents' vectors
    fusion: str = ""  # how hybrid weighs its two sides, in words (FusionPolicy.describe)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["sources"] = [s.to_dict() for s in self.sources]
        return out

    @classmethod
    def of(
        cls, path: Path, version: Path, manifest: Manifest, *, spec: AnnSpec, aliases: int, windows: int, fusion: str
    ) -> IndexInfo:
        """The manifest's facts plus the version's size on disk (``fusion``: the policy in words)."""
        m = manifest
        size = sum(p.stat().st_size for p in version.rglob("*") if p.is_file())
        return cls(
            path=str(path),
            version=version.name,
            format_version=m.format_version,
            model=m.model.name,
            fingerprint=m.model.fingerprint,
            dimension=m.model.dimension,
            backend=m.model.backend,
            precision=m.model.precision,
            documents=m.counts.documents,
            read=m.counts.read,
            exact_duplicates=m.counts.exact_duplicates,
            near_duplicates=m.counts.near_duplicates,
            faiss=str(m.faiss.get("type", "")),
            ann=spec.describe(),
            ann_spec=spec.to_dict(),
            built_at=m.built_at,
            build_seconds=m.build_seconds,
            size_bytes=size,
            sources=list(m.sources),
            title_only=m.counts.title_only,
            aliases=aliases,
            catalogue=m.catalogue,
            map=dict(m.map),
            segments=len(m.segments),
            hidden=m.hidden,
            reading=m.model.reading or "truncated",
            windows=windows,
            fusion=fusion,
        )
