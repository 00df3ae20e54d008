"""The build pipeline: ingest -> dedup -> encode (through the cache) -> write and publish a new version."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import __version__
from .ann import AnnSpec, query_like_texts
from .cache import EmbeddingCache, embedding_key
from .dedup import deduplicate
from .embed import DEFAULT_MODEL, Embedder
from .encoders import BACKENDS, EncoderChoice, check_embedder, open_build_encoder
from .errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexNotFoundError,
    ModelMismatchError,
    SemsearchError,
)
from .freshness import absolute_source_args
from .ingest import expand_sources, read_sources
from .records import Document
from .store import (
    CACHE_DIR,
    DOCS,
    FORMAT_NAME,
    FORMAT_VERSION,
    DocumentStore,
    VersionWriter,
    current_version,
    read_manifest,
    utc_now,
    write_contents,
    writer_lock,
)

# Texts handed to the encoder per progress step; each chunk is cached at once, so an
# interrupted build resumes from the last finished chunk.
ENCODE_CHUNK = 256
DEFAULT_SOURCE = "seeds"


@dataclass
class BuildSummary:
    """What a build did; ``semsearch index --json`` prints it."""

    read: int
    documents: int
    duplicates: int
    near_duplicates: int
    encoded: int
    cached: int
    added: int
    removed: int
    seconds: float
    index: str
    version: str
    model: str
    backend: str
    files: int
    ann: str = ""
    skipped: list[str] = field(default_factory=list)
    engine: str = "local"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class BuildOptions:
    """Knobs of a build; the defaults suit a laptop."""

    model: str | None = None  # None: the existing index's model, else DEFAULT_MODEL
    backend: str | None = None  # None: the existing index's, else "onnx"
    precision: str | None = None  # None: the existing index's, else "int8"
    full: bool = False
    skip_bad: bool = False
    near: bool = True
    batch_size: int = 32
    progress: bool = True
    wait: bool = False
    ann: str | None = None  # None: the existing index's choice, else "auto" (by corpus size)
    memory_budget: int | None = None  # bytes of raw vectors before auto picks IVF-PQ; None: the index's
    engine: str = "local"  # "ray": encode on a Ray cluster (semsearch.ray_engine)
    address: str | None = None  # the Ray cluster; None: RAY_ADDRESS, else a local Ray
    actors: int | None = None  # Ray encoder actors; None: one per CPU of the cluster


def _previous(
    index_dir: Path, *, tolerate_damage: bool = False
) -> tuple[Path | None, dict[str, Any] | None, set[str]]:
    """The live version, its manifest and its document ids, or (None, None, set()) when there is none.

    With ``tolerate_damage`` (``--full``), a damaged or unreadable index counts as absent, so that the
    rebuild that every "corrupt" message recommends really recovers it.
    """
    try:
        version = current_version(index_dir)
        return version, read_manifest(version), _previous_ids(version)
    except IndexNotFoundError:
        return None, None, set()
    except (IndexCorruptError, IndexFormatError):
        if tolerate_damage:
            return None, None, set()
        raise


def _encoder_settings(opts: BuildOptions, manifest: dict[str, Any] | None) -> tuple[str, str]:
    """Backend and precision: as asked, else as the index was built (a refresh keeps its encoder)."""
    model = (manifest or {}).get("model", {})
    backend = opts.backend or (model.get("backend") if model.get("backend") in BACKENDS else None) or "onnx"
    precision = opts.precision or (model.get("precision") if model.get("backend") == backend else None) or "int8"
    return backend, precision


def _ann_settings(opts: BuildOptions, manifest: dict[str, Any] | None) -> tuple[str, int | None]:
    """ANN type and memory budget: as asked, else as the index was built (a refresh keeps them)."""
    recorded = (manifest or {}).get("ann")
    recorded = recorded if isinstance(recorded, dict) else {}
    ann = opts.ann or str(recorded.get("requested") or "auto")
    budget = opts.memory_budget or recorded.get("memory_budget") or None
    return ann, int(budget) if budget else None


def _check_model(requested: str | None, manifest: dict[str, Any] | None, full: bool) -> str:
    """The model to build with; refuses to mix models in one index unless --full."""
    if manifest is None:
        return requested or DEFAULT_MODEL
    existing = str(manifest["model"]["name"])
    if requested is None or requested == existing:
        return existing
    if full:
        return requested
    raise ModelMismatchError(
        f"the index was built with model {existing!r} ({manifest['model']['dimension']}-d), not {requested!r}; "
        "rebuild it with --full to switch models"
    )


def encode_with_cache(
    embedder: Embedder,
    documents: Sequence[Document],
    cache: EmbeddingCache,
    *,
    batch_size: int,
    progress: bool,
) -> tuple[np.ndarray, int]:
    """Vectors for the documents in order, encoding only texts the cache lacks; returns (vectors, encoded)."""
    texts = [d.embedding_text() for d in documents]
    keys = [embedding_key(t) for t in texts]
    known = cache.get_many(keys)
    missing = sorted({k: i for i, k in enumerate(keys) if k not in known}.values())
    if missing:
        bar = _progress_bar(len(missing), progress)
        for start in range(0, len(missing), ENCODE_CHUNK):
            chunk = missing[start : start + ENCODE_CHUNK]
            vectors = embedder.encode([texts[i] for i in chunk], batch_size=batch_size)
            if vectors.shape != (len(chunk), embedder.dimension):
                raise SemsearchError(
                    f"encoder returned shape {vectors.shape}, expected ({len(chunk)}, {embedder.dimension})"
                )
            pairs = [(keys[i], vectors[j]) for j, i in enumerate(chunk)]
            cache.put_many(pairs)
            known.update(pairs)
            bar(len(chunk))
        bar(0, close=True)
    out = np.zeros((len(documents), embedder.dimension), dtype=np.float32)
    for row, key in enumerate(keys):
        out[row] = known[key]
    return out, len(missing)


def _progress_bar(total: int, enabled: bool) -> Callable[..., None]:
    """A tqdm bar on stderr that knows its total, or a no-op when disabled or stderr is not a terminal."""
    if not enabled or total < 64 or not sys.stderr.isatty():
        return lambda n, close=False: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="doc", desc="encoding", file=sys.stderr, dynamic_ncols=True)

    def update(n: int, close: bool = False) -> None:
        bar.update(n)
        if close:
            bar.close()

    return update


def build_index(
    sources: Sequence[str] | None,
    index_dir: str | Path,
    options: BuildOptions | None = None,
    *,
    embedder: Embedder | None = None,
) -> BuildSummary:
    """Build (or rebuild) an index from sources and publish it atomically.

    Args:
        sources: files, directories or globs of abstracts; None re-reads the sources the index was built
            from (``./seeds`` for a new index). The index holds exactly what the sources provide.
        index_dir: the index directory; created when missing.
        options: build knobs (model, backend, precision, ...).
        embedder: an encoder to use instead of loading ``options.model`` (tests, custom models).
    """
    opts = options or BuildOptions()
    started = time.perf_counter()
    index_path = Path(index_dir)
    excluded: list[str] = []
    if sources is None:
        _, recorded, _ = _previous(index_path, tolerate_damage=True)
        sources = list(recorded.get("source_args", [])) if recorded else []
        # Files taken out with `semsearch remove --source` stay out of refreshes until named again.
        excluded = list(recorded.get("excluded_sources", [])) if recorded and sources else []
        sources = sources or [DEFAULT_SOURCE]
    # Everything that can fail on bad input happens before the index directory is touched.
    if opts.engine != "local" or opts.address is not None or opts.actors is not None:
        from .ray_engine import check_options

        check_options(opts.engine, opts.address, opts.actors)
    skip = set(excluded)
    files = [str(p) for p in expand_sources(sources) if str(p) not in skip] if skip else sources
    ingested = read_sources(files, skip_bad=opts.skip_bad)
    dedup = deduplicate(ingested.records, near=opts.near)

    fresh = not index_path.exists()
    try:
        with writer_lock(index_path, wait=opts.wait):
            prev_version, prev_manifest, previous_ids = _previous(index_path, tolerate_damage=opts.full)
            backend, precision = _encoder_settings(opts, prev_manifest)
            if embedder is not None:
                model_name = embedder.name
                if prev_manifest is not None and not opts.full:
                    check_embedder(prev_manifest, embedder)
            else:
                model_name = _check_model(opts.model, prev_manifest, opts.full)

            writer = VersionWriter.create(index_path)
            try:
                choice: EncoderChoice = open_build_encoder(
                    model_name,
                    backend=backend,
                    precision=precision,
                    out_dir=writer.path,
                    previous_version=prev_version,
                    embedder=embedder,
                )
                enc = choice.embedder
                cache = EmbeddingCache(
                    index_path / CACHE_DIR, enc.fingerprint, f"{choice.backend}-{choice.precision}", enc.dimension
                )
                try:
                    if opts.engine == "ray":
                        from .ray_engine import encode_with_ray

                        vectors, encoded = encode_with_ray(
                            choice,
                            dedup.documents,
                            cache,
                            batch_size=opts.batch_size,
                            progress=opts.progress,
                            address=opts.address,
                            actors=opts.actors,
                            build=writer.path.name,
                        )
                    else:
                        if any((index_path / CACHE_DIR).glob("shards-*")):  # left by a killed Ray build
                            from .ray_engine import recover_shards

                            recover_shards(cache)
                        vectors, encoded = encode_with_cache(
                            enc, dedup.documents, cache, batch_size=opts.batch_size, progress=opts.progress
                        )
                finally:
                    cache.close()

                _stamp_arrivals(dedup.documents, vectors, prev_version, index_path)
                ann, budget = _ann_settings(opts, prev_manifest)
                contents = write_contents(
                    writer.path,
                    dedup.documents,
                    vectors,
                    ann=ann,
                    memory_budget=budget,
                    previous=None if opts.full else prev_version,
                    tuning_queries=lambda: enc.encode(query_like_texts(dedup.documents), batch_size=opts.batch_size),
                )

                new_ids = {d.id for d in dedup.documents}
                manifest = {
                    "format": FORMAT_NAME,
                    "format_version": FORMAT_VERSION,
                    "semsearch_version": __version__,
                    "built_at": utc_now(),
                    "build_seconds": 0.0,
                    "model": {
                        "name": enc.name,
                        "fingerprint": enc.fingerprint,
                        "dimension": enc.dimension,
                        "backend": choice.backend,
                        "precision": choice.precision,
                    },
                    **contents,
                    "counts": {
                        "read": dedup.read,
                        "documents": len(dedup.documents),
                        "exact_duplicates": dedup.exact_duplicates,
                        "near_duplicates": dedup.near_duplicates,
                        "vectors": len(dedup.documents),
                    },
                    "source_args": absolute_source_args(sources),
                    "excluded_sources": excluded,
                    "sources": [f.to_dict() for f in ingested.files],
                    "files": {},
                }
                manifest["build_seconds"] = round(time.perf_counter() - started, 3)
                final = writer.publish(manifest)
            except BaseException:
                writer.abandon()
                raise
    except IndexLockedError:
        raise
    except SemsearchError:
        if fresh:
            # A first build that failed (a model that does not load, say) leaves no empty index behind.
            shutil.rmtree(index_path, ignore_errors=True)
        raise

    return BuildSummary(
        read=dedup.read,
        documents=len(dedup.documents),
        duplicates=dedup.exact_duplicates,
        near_duplicates=dedup.near_duplicates,
        encoded=encoded,
        cached=len(dedup.documents) - encoded,
        added=len(new_ids - previous_ids),
        removed=len(previous_ids - new_ids),
        seconds=round(time.perf_counter() - started, 3),
        index=str(index_path),
        version=final.name,
        model=enc.name,
        backend=choice.backend,
        files=len(ingested.files),
        ann=AnnSpec.from_dict(contents["ann"]).describe(),
        skipped=ingested.skipped,
        engine=opts.engine,
    )


def _stamp_arrivals(documents: Sequence[Document], vectors: np.ndarray, previous: Path | None, index: Path) -> None:
    """When each document first entered the index, carried forward from the live version (see arrivals.py)."""
    from .arrivals import stamp_arrivals
    from .store import next_sequence

    try:
        stamp_arrivals(documents, vectors, previous, next_sequence(index), utc_now())
    except IndexCorruptError:  # a damaged live version (--full recovers it): its documents count as new
        stamp_arrivals(documents, vectors, None, next_sequence(index), utc_now())


def _previous_ids(version: Path) -> set[str]:
    store = DocumentStore(version / DOCS)
    try:
        return {r[0] for r in store._query("SELECT id FROM documents")}
    finally:
        store.close()
