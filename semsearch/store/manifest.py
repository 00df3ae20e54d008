"""A version's manifest (``manifest.json``): read, validated and written in one place, as one typed record.

Every module asks a ``Manifest`` for what it needs (``manifest.model.dimension``, ``manifest.counts.vectors``)
instead of digging in a dict. Keys this release does not know are kept in ``extra`` and written back, so a
newer writer's additions survive a ``remove`` run by an older one.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semsearch.core.errors import IndexCorruptError, IndexFormatError, ModelMismatchError
from semsearch.core.fileio import file_sha256
from semsearch.core.records import SourceFile
from semsearch.store.layout import ENCODER_DIR, INDEX_FORMAT, MANIFEST

if TYPE_CHECKING:
    from semsearch.store.segments import Segment

FORMAT_NAME = INDEX_FORMAT
# 2: vectors.npy + ids.npy beside an ANN index of any kind; 3: extra segments (segments.py); 4: compact sentence
# vectors (windows.npy as int8 codes beside window_scales.npy, windows_part.py). Each is unreadable to releases
# before it; this release reads all of them and writes 4, with segments or without.
FORMAT_VERSION = 4
SEGMENTED_FORMAT_VERSION = FORMAT_VERSION
READABLE_FORMAT_VERSION = FORMAT_VERSION
REBUILD = "rebuild with: semsearch index --full"
REQUIRED_COUNTS = ("read", "documents", "exact_duplicates", "near_duplicates", "vectors")


@dataclass(frozen=True)
class ModelInfo:
    """The encoder that made a version's vectors; queries must use the same one."""

    name: str
    fingerprint: str
    dimension: int
    backend: str = ""
    precision: str = ""
    regime: str = ""  # how the runtime computes vectors (options.ONNX_REGIME); "" before it was recorded
    reading: str = ""  # how a long abstract is read (options.READINGS); "" before it was recorded: truncated
    scheme: str = ""  # the sentence reading's runs (encode/sentence_runs.SCHEME); "" for the others and before it

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        if not self.scheme:  # only the sentence reading has one
            del out["scheme"]
        return out

    def matches(self, fingerprint: str, dimension: int) -> bool:
        """Whether an encoder with this fingerprint and dimension reproduces these vectors."""
        return fingerprint == self.fingerprint and dimension == self.dimension

    def same_encoder(self, other: ModelInfo) -> bool:
        """Whether an encoder loaded for ``other`` reproduces this version's vectors (model and runtime)."""
        return self == other

    def check_embedder(self, name: str, fingerprint: str, dimension: int) -> None:
        """Raise ModelMismatchError when an encoder would not reproduce these vectors."""
        if not self.matches(fingerprint, dimension):
            raise ModelMismatchError(
                f"the index was built with model {self.name!r} ({self.dimension}-d), "
                f"not {name!r} ({dimension}-d); rebuild it with --full to switch models"
            )


@dataclass(frozen=True)
class Counts:
    """What a build read and kept."""

    read: int
    documents: int
    exact_duplicates: int
    near_duplicates: int
    vectors: int
    title_only: int = 0  # documents read without an abstract, indexed by their title
    aliases: int = 0  # former ids that resolve to a document of this version

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass
class Manifest:
    """Everything a version records about itself; ``files`` is filled in by the version writer at publish."""

    model: ModelInfo
    counts: Counts
    sources: list[SourceFile] = field(default_factory=list)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    format_version: int = FORMAT_VERSION
    semsearch_version: str = ""
    built_at: str = ""
    build_seconds: float = 0.0
    source_args: list[str] = field(default_factory=list)
    excluded_sources: list[str] = field(default_factory=list)
    catalogue_args: list[str] = field(default_factory=list)  # catalogue files re-applied by every refresh
    catalogue: dict[str, Any] | None = None  # what the catalogue join matched (semsearch.write.catalogue)
    catalogues: list[dict[str, Any]] = field(default_factory=list)  # the catalogue files as read
    faiss: dict[str, Any] = field(default_factory=dict)
    ann: dict[str, Any] | None = None  # AnnSpec.to_dict(); absent in format 1
    vectors: dict[str, Any] | None = None
    lexical: dict[str, Any] = field(default_factory=dict)
    map: dict[str, Any] = field(default_factory=dict)
    dedup: dict[str, Any] = field(default_factory=dict)  # how duplicates were merged ({"near": true})
    fusion: dict[str, Any] = field(default_factory=dict)  # how hybrid weighs its sides (query.fusion); {}: alpha 0.5
    removed_ids: bool = False  # `semsearch remove` dropped documents by id: the next refresh brings them back
    segments: list[dict[str, Any]] = field(default_factory=list)  # extra segments, oldest first (segments.py)
    hidden: int = 0  # rows of its segments the version no longer holds (segments.py)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, keys in the order manifest.json has always had."""
        out: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "semsearch_version": self.semsearch_version,
            "built_at": self.built_at,
            "build_seconds": self.build_seconds,
            "model": self.model.to_dict(),
            "faiss": self.faiss,
        }
        if self.ann is not None:
            out["ann"] = self.ann
        if self.vectors is not None:
            out["vectors"] = self.vectors
        out.update(lexical=self.lexical, map=self.map, counts=self.counts.to_dict())
        if self.dedup:
            out["dedup"] = self.dedup
        if self.fusion:
            out["fusion"] = self.fusion
        if self.removed_ids:
            out["removed_ids"] = True
        if self.segments:
            out["segments"] = self.segments
        if self.hidden:
            out["hidden"] = self.hidden
        out.update(
            source_args=self.source_args,
            excluded_sources=self.excluded_sources,
        )
        if self.catalogue is not None:
            out.update(catalogue_args=self.catalogue_args, catalogue=self.catalogue, catalogues=self.catalogues)
        out.update(
            sources=[s.to_dict() for s in self.sources],
            files=self.files,
        )
        out.update(self.extra)
        return out

    def to_json(self) -> str:
        return readable_json(self.to_dict())

    def updated(self, **changes: Any) -> Manifest:
        """A copy with some fields replaced (the next version of an unchanged index, say)."""
        return replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Any, where: str = MANIFEST) -> Manifest:
        """Validate a parsed manifest.json; raises IndexCorruptError naming what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise IndexCorruptError(f"{where} is not a semsearch manifest")
        version_no = data.get("format_version")
        if not isinstance(version_no, int):
            raise IndexCorruptError(f"{where} has no format_version")
        if version_no > READABLE_FORMAT_VERSION:
            raise IndexFormatError(
                f"{where} is format version {version_no}, newer than this semsearch reads ({READABLE_FORMAT_VERSION}); "
                "upgrade semsearch"
            )
        shape = {
            "model": (dict, ("name", "fingerprint", "dimension")),
            "counts": (dict, REQUIRED_COUNTS),
            "files": (dict, ()),
            "sources": (list, ()),
        }
        for key, (kind, parts) in shape.items():
            value = data.get(key)
            if not isinstance(value, kind) or any(p not in value for p in parts):
                raise IndexCorruptError(f"{where}: {key!r} is missing or malformed; {REBUILD}")
        try:
            model = _model(data["model"])
            given = data["counts"]
            counts = Counts(**{f.name: _int(given[f.name]) for f in fields(Counts) if f.name in given})
            files = data["files"]
            sources = [SourceFile.from_dict(s) for s in data["sources"]]
            known = {f.name for f in fields(cls)} | {"format"}
            return cls(
                model=model,
                counts=counts,
                sources=sources,
                files=files,
                format_version=version_no,
                semsearch_version=str(data.get("semsearch_version", "")),
                built_at=str(data.get("built_at", "")),
                build_seconds=float(data.get("build_seconds", 0.0)),
                source_args=[str(s) for s in data.get("source_args", [])],
                excluded_sources=[str(s) for s in data.get("excluded_sources", [])],
                catalogue_args=[str(s) for s in data.get("catalogue_args", [])],
                catalogue=data.get("catalogue"),
                catalogues=list(data.get("catalogues") or []),
                faiss=dict(data.get("faiss") or {}),
                ann=data.get("ann"),
                vectors=data.get("vectors"),
                lexical=dict(data.get("lexical") or {}),
                map=dict(data.get("map") or {}),
                dedup=dict(data.get("dedup") or {}),
                fusion=dict(data.get("fusion") or {}),
                removed_ids=bool(data.get("removed_ids", False)),
                segments=list(data.get("segments") or []),
                hidden=_int(data.get("hidden", 0)),
                extra={k: v for k, v in data.items() if k not in known},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise IndexCorruptError(f"{where}: malformed entry ({type(exc).__name__}: {exc}); {REBUILD}") from None

    @classmethod
    def read(cls, version: Path) -> Manifest:
        """Load and check a version's manifest."""
        path = version / MANIFEST
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise IndexCorruptError(f"{path} is missing; {REBUILD}") from exc
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise IndexCorruptError(f"{path} is unreadable ({exc}); {REBUILD}") from exc
        return cls.from_dict(data, str(path))

    @property
    def segmented(self) -> bool:
        """Whether the version is more than one plain base: extra segments, or rows of its base hidden."""
        return bool(self.segments) or self.hidden > 0

    def version_segments(self, version: Path) -> list[Segment]:
        """The version's segments, base first, with the rows each no longer holds (see segments.py)."""
        from semsearch.store.segments import version_segments

        recorded = self.vectors.get("rows") if isinstance(self.vectors, dict) else None
        base_rows = int(recorded) if isinstance(recorded, int) else self.counts.vectors
        return version_segments(version, base_rows, self.segments)

    def check_file_sizes(self, version: Path) -> None:
        """Cheap load-time check: every recorded file exists with its recorded size (catches truncation).

        The encoder's files are left to the encoder's own loader, which can fall back to the source model.
        """
        for name, meta in self.files.items():
            if name.startswith(f"{ENCODER_DIR}/"):
                continue
            path = version / name
            if not path.is_file():
                raise IndexCorruptError(f"{path} is missing; {REBUILD}")
            if path.stat().st_size != meta["size"]:
                raise IndexCorruptError(
                    f"{path} is {path.stat().st_size} bytes, expected {meta['size']} (truncated or changed); {REBUILD}"
                )

    def check_file_hashes(self, version: Path) -> list[str]:
        """Full check: every recorded file's sha256; returns one problem line per mismatch."""
        problems = []
        for name, meta in self.files.items():
            path = version / name
            if not path.is_file():
                problems.append(f"{path}: missing")
            elif file_sha256(path) != meta["sha256"]:
                problems.append(f"{path}: checksum mismatch")
        return problems


def read_manifest(version: Path) -> Manifest:
    """Load and check a version's manifest."""
    return Manifest.read(version)


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"'counts' holds {value!r}, not a count")
    return value


def _model(data: Any) -> ModelInfo:
    if not isinstance(data, dict):
        raise TypeError("model")
    return ModelInfo(
        name=str(data["name"]),
        fingerprint=str(data["fingerprint"]),
        dimension=int(data["dimension"]),
        backend=str(data.get("backend") or ""),
        precision=str(data.get("precision") or ""),
        regime=str(data.get("regime") or ""),
        reading=str(data.get("reading") or ""),
        scheme=str(data.get("scheme") or ""),
    )


# Lists longer than this are written one compact element per line (the sources of a folder of many files).
_LONG_LIST = 32


def readable_json(data: dict[str, Any]) -> str:
    """``json.dumps(data, indent=2)``, but a long list has one compact element per line.

    Indented output goes through json's pure-Python encoder (seconds for 100,000 sources); one element at a
    time goes through its C encoder, and the file stays one source per line.
    """
    entries = []
    compact = json.JSONEncoder(ensure_ascii=False).encode  # one encoder: json.dumps makes one per call
    for key, value in data.items():
        name = json.dumps(key, ensure_ascii=False)
        if isinstance(value, list) and len(value) > _LONG_LIST:
            rows = ",\n".join("    " + compact(v) for v in value)
            entries.append(f"  {name}: [\n{rows}\n  ]")
        else:
            entries.append(f"  {name}: " + json.dumps(value, indent=2, ensure_ascii=False).replace("\n", "\n  "))
    return "{\n" + ",\n".join(entries) + "\n}\n" if entries else "{}\n"
