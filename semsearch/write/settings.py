"""A build's settings: the options a caller gives, and what they resolve to against the live version."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from semsearch.core import registry
from semsearch.core.errors import SemsearchError
from semsearch.core.options import DEFAULT_BACKEND, DEFAULT_BATCH_SIZE, DEFAULT_READING, READINGS, fusion_entry
from semsearch.store.manifest import Manifest, ModelInfo
from semsearch.store.passages_part import has_passages
from semsearch.store.segments import MERGE_SHARE

MAP_METHODS = ("auto", "pca", "umap", "off")


@dataclass
class BuildOptions:
    """Knobs of a build; the defaults suit a laptop."""

    model: str | None = None  # None: the existing index's model, else DEFAULT_MODEL
    backend: str | None = None  # None: the existing index's, else "onnx"
    precision: str | None = None  # None: the existing index's, else "int8"
    reading: str | None = None  # options.READINGS; None: the existing index's, else DEFAULT_READING ("pooled")
    full: bool = False
    skip_bad: bool = False
    near: bool = True
    batch_size: int = DEFAULT_BATCH_SIZE
    progress: bool = True
    wait: bool = False
    ann: str | None = None  # None: the existing index's choice, else "auto" (by corpus size)
    memory_budget: int | None = None  # bytes of raw vectors before auto picks IVF-PQ; None: the index's
    engine: str = "local"  # "ray": encode on a Ray cluster (semsearch.encode.ray_engine)
    address: str | None = None  # the Ray cluster; None: RAY_ADDRESS, else a local Ray
    actors: int | None = None  # Ray encoder actors; None: one per CPU of the cluster
    catalogues: Sequence[str] | None = None  # catalogue files to take titles etc. from; None: the index's
    rewrite: bool = False  # read, join and write a new version even when nothing changed
    relayout: bool = False  # lay the corpus map out afresh (``full`` does too) instead of placing arrivals on it
    merge_share: float = MERGE_SHARE  # appended segments may hold this share of the corpus before a full rewrite
    map_method: str | None = None  # auto, pca, umap or off; None: as SEMSEARCH_MAP asks (unset: auto)
    follow_links: bool | None = None  # read linked files outside the source folders; None: as the index was built
    drop_unreadable: bool = False  # drop the papers of a source folder that cannot be read (else the build stops)
    strict: bool = False  # any input skipped (a bad PDF, a bad record with skip_bad, ...) fails the build unwritten
    full_text: bool | None = None  # index PDFs' full text as passages; None: as the index was built (else off)


def map_method_of(opts: BuildOptions) -> str:
    """The map method a build draws with, resolved once: the option, else SEMSEARCH_MAP, else auto."""
    if opts.map_method is None:
        from semsearch.atlas.method import requested_method

        return requested_method()
    method = opts.map_method.strip().lower()
    if method not in MAP_METHODS:
        raise SemsearchError(f"{opts.map_method!r} is not a map method; choose auto, pca, umap or off")
    return method


def encoder_settings(opts: BuildOptions, manifest: Manifest | None) -> tuple[str, str]:
    """Backend and precision: as asked, else as the index was built (a refresh keeps its encoder)."""
    model = manifest.model if manifest is not None else None
    recorded = model.backend if model is not None and registry.has("backend", model.backend) else None
    backend = opts.backend or recorded or DEFAULT_BACKEND
    kept = model.precision if model is not None and model.backend == backend else None
    return backend, opts.precision or kept or "int8"


def reading_of(opts: BuildOptions, manifest: Manifest | None) -> str:
    """How documents are read: as asked, else as the index records, else the default."""
    recorded = recorded_reading(manifest.model) if manifest is not None else ""
    reading = opts.reading or recorded or DEFAULT_READING
    if reading not in READINGS:
        raise SemsearchError(f"unknown reading {reading!r} (choose from {', '.join(READINGS)})")
    return reading


def recorded_reading(model: ModelInfo) -> str:
    """The reading a version's vectors were made with: a version from before it was recorded read truncated."""
    return model.reading or "truncated"


def fusion_after(
    before: Manifest | None, model: ModelInfo, source_args: list[str], *, rewrite: bool = True
) -> dict[str, Any]:
    """The "fusion" a new version records, after ``before`` (the live version's manifest, None for a first build).

    A weight chosen on judged queries (eval --tune) describes the collection and how its vectors read it: files
    arriving under the same source arguments keep it, while another encoder, reading or scheme, or other source
    arguments, make it stale and the default replaces it. Any other weighting is kept by an append and replaced
    by today's default in a rewrite (a new build), so a release's new default reaches an index when it is rebuilt.
    """
    if before is not None and before.fusion.get("method") == "tuned":
        if before.model.same_encoder(model) and before.source_args == source_args:
            return dict(before.fusion)
        return fusion_entry()
    if before is None or rewrite:
        return fusion_entry()
    return dict(before.fusion)


def full_text_of(opts: BuildOptions, manifest: Manifest | None) -> bool:
    """Whether a build indexes PDFs' full text as passages: as asked, else as the index was built."""
    if opts.full_text is not None:
        return opts.full_text
    return manifest is not None and has_passages(manifest)


def ann_settings(opts: BuildOptions, manifest: Manifest | None) -> tuple[str, int | None]:
    """ANN type and memory budget: as asked, else as the index was built (a refresh keeps them)."""
    recorded = manifest.ann if manifest is not None and isinstance(manifest.ann, dict) else {}
    ann = opts.ann or str(recorded.get("requested") or "auto")
    budget = opts.memory_budget or recorded.get("memory_budget") or None
    return ann, int(budget) if budget else None
