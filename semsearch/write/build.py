"""The build pipeline: ingest -> dedup -> encode (through the cache) -> write and publish a new version."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import (
    IndexCorruptError,
    IndexLockedError,
    ModelMismatchError,
    SemsearchError,
    SkippedInputError,
)
from semsearch.core.faults import barrier
from semsearch.core.fileio import utc_now
from semsearch.core.records import Document
from semsearch.core.version import __version__
from semsearch.dedup.identity import previous_identity
from semsearch.encode.cache import EmbeddingCache
from semsearch.encode.catalogue import DEFAULT_MODEL
from semsearch.encode.embedder import Embedder
from semsearch.encode.encoder_choice import EncoderChoice, open_build_encoder
from semsearch.encode.encoding import encode_passages, encode_with_cache, whole_and_windows
from semsearch.encode.sentence_runs import SCHEME as SENTENCE_SCHEME
from semsearch.store.ann_build import query_like_texts
from semsearch.store.ann_kinds import AnnSpec
from semsearch.store.layout import CACHE_DIR, live_version, version_folders, with_point_back
from semsearch.store.manifest import Counts, Manifest, ModelInfo
from semsearch.store.passages_part import FULL_TEXT, PassageSet, has_passages
from semsearch.store.versions import (
    PreviousVersion,
    VersionWriter,
    check_pointer,
    clear_dead_writers,
    next_sequence,
    version_writer,
    write_errors_explained,
    writer_lock,
)
from semsearch.store.windows_part import WINDOWED_READINGS, WindowSet
from semsearch.write.contents import write_contents
from semsearch.write.freshness import FOLLOW_LINKS, absolute_source_args
from semsearch.write.inputs import BuildInput, read_input
from semsearch.write.plan import Append, Live, Rewrite, Unchanged, is_unchanged, plan_refresh
from semsearch.write.settings import (
    BuildOptions,
    ann_settings,
    encoder_settings,
    full_text_of,
    fusion_after,
    map_method_of,
    reading_of,
)


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
    title_only: int = 0  # documents read without an abstract, indexed by their title
    aliases: int = 0  # former ids that resolve to a document of this version
    catalogue: dict[str, Any] | None = None  # the catalogue join (semsearch.write.catalogue), when there was one
    unchanged: bool = False  # nothing changed since the live version: no new version was written
    segments: int = 0  # extra segments of the version (a refresh that appended one: segments.py)
    rewritten_because: str = ""  # why a refresh that brought or dropped files rewrote the index whole

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def of(
        cls,
        counts: Counts,
        *,
        index: Path,
        version: str,
        model: str,
        backend: str,
        files: int,
        ann: str,
        engine: str,
        started: float,
        encoded: int = 0,
        added: int = 0,
        removed: int = 0,
        **rest: Any,
    ) -> BuildSummary:
        """The summary of a build whose version holds ``counts`` (vectors not encoded came from the cache)."""
        return cls(
            read=counts.read,
            documents=counts.documents,
            duplicates=counts.exact_duplicates,
            near_duplicates=counts.near_duplicates,
            encoded=encoded,
            cached=counts.documents - encoded,
            added=added,
            removed=removed,
            seconds=round(time.perf_counter() - started, 3),
            index=str(index),
            version=version,
            model=model,
            backend=backend,
            files=files,
            ann=ann,
            engine=engine,
            title_only=counts.title_only,
            aliases=counts.aliases,
            **rest,
        )


def _check_model(requested: str | None, manifest: Manifest | None, full: bool) -> str:
    """The model to build with; refuses to mix models in one index unless --full."""
    if manifest is None:
        return requested or DEFAULT_MODEL
    existing = manifest.model.name
    if requested is None or requested == existing:
        return existing
    if full:
        return requested
    raise ModelMismatchError(
        f"the index was built with model {existing!r} ({manifest.model.dimension}-d), not {requested!r}; "
        "rebuild it with --full to switch models"
    )


def _open_encoder(
    opts: BuildOptions, previous: PreviousVersion | None, writer: VersionWriter, embedder: Embedder | None
) -> EncoderChoice:
    """The build's encoder: the caller's, or the index's model (ONNX export written into the new version)."""
    manifest = previous.manifest if previous is not None else None
    backend, precision = encoder_settings(opts, manifest)
    if embedder is not None:
        if manifest is not None and not opts.full:
            manifest.model.check_embedder(embedder.name, embedder.fingerprint, embedder.dimension)
        model_name = embedder.name
    else:
        model_name = _check_model(opts.model, manifest, opts.full)
    choice = open_build_encoder(
        model_name,
        backend=backend,
        precision=precision,
        out_dir=writer.path,
        # --full makes the encoder afresh too: the shared store's export, which a newer recipe has replaced.
        previous_version=previous.path if previous is not None and not opts.full else None,
        embedder=embedder,
        progress=opts.progress,  # -q: no line about the one-off export
    )
    reading = reading_of(opts, manifest)
    choice.reading = settle_reading(choice, reading, default=opts.reading is None and manifest is None)
    return choice


def settle_reading(choice: EncoderChoice, reading: str, *, default: bool) -> str:
    """The reading a build can make: sentences need an encoder's token outputs (the ONNX encoder's).

    The default (nothing asked, a new index) falls back to truncated where it cannot; a reading asked for or
    recorded by the index is an error instead, since the vectors would not be the ones it names.
    """
    if reading != "sentences" or choice.can_read_sentences():
        return reading
    why = f"encoder {choice.embedder.name!r} ({choice.backend}) gives no token outputs to pool sentences from"
    if default:
        return "truncated"
    raise SemsearchError(f"--reading sentences: {why} (use the onnx backend, or pick another --reading)")


def _encode(
    choice: EncoderChoice,
    documents: Sequence[Document],
    index_path: Path,
    writer: VersionWriter,
    opts: BuildOptions,
) -> tuple[np.ndarray, WindowSet | None, int]:
    """Vectors for these documents through the embedding cache, locally or on Ray.

    Returns (vectors, windows, encoded); ``windows`` holds the tail windows' vectors with ``--reading windows``
    (the documents' vectors are then their whole-text ones) or their sentences' with ``--reading sentences`` (the
    documents' vectors are then those sentences' means), else None.
    """
    enc = choice.embedder
    windows = None
    cache = EmbeddingCache(index_path / CACHE_DIR, enc.fingerprint, choice.cache_runtime(), enc.dimension)
    try:
        if opts.engine == "ray":
            from semsearch.encode.ray_engine import encode_with_ray

            vectors, encoded = encode_with_ray(
                choice,
                documents,
                cache,
                batch_size=opts.batch_size,
                progress=opts.progress,
                address=opts.address,
                actors=opts.actors,
                build=writer.path.name,
            )
        else:
            if any((index_path / CACHE_DIR).glob("shards-*")):  # left by a killed Ray build
                from semsearch.encode.ray_engine import recover_shards

                recover_shards(cache)
            vectors, encoded = encode_with_cache(
                enc,
                documents,
                cache,
                batch_size=opts.batch_size,
                progress=opts.progress,
                read_chars=choice.read_chars(),
                every=choice.every_window,
                sentences=choice.reads_sentences,
            )
        if choice.reading in WINDOWED_READINGS:
            vectors, windows = whole_and_windows(
                documents,
                cache,
                choice.read_chars(),
                enc.dimension,
                every=choice.every_window,
                sentences=choice.reads_sentences,
            )
    finally:
        cache.close()
    for superseded in choice.superseded_cache_runtimes():  # vectors nothing reads again
        EmbeddingCache.path_for(index_path / CACHE_DIR, enc.fingerprint, superseded).unlink(missing_ok=True)
    return vectors, windows, encoded


def _encode_passages(
    choice: EncoderChoice, documents: Sequence[Document], index_path: Path, opts: BuildOptions
) -> PassageSet:
    """The documents' passages (``--full-text``) with their vectors, through the embedding cache (encoded here)."""
    enc = choice.embedder
    cache = EmbeddingCache(index_path / CACHE_DIR, enc.fingerprint, choice.cache_runtime(), enc.dimension)
    try:
        passages, _ = encode_passages(enc, documents, cache, batch_size=opts.batch_size, progress=opts.progress)
    finally:
        cache.close()
    return passages


def _manifest(
    read: BuildInput,
    choice: EncoderChoice,
    contents: dict[str, Any],
    started: float,
    previous: PreviousVersion | None,
    full_text: bool = False,
) -> Manifest:
    enc = choice.embedder
    model = ModelInfo(
        enc.name,
        enc.fingerprint,
        enc.dimension,
        choice.backend,
        choice.precision,
        choice.regime,
        choice.reading,
        SENTENCE_SCHEME if choice.reading == "sentences" else "",
    )
    source_args = absolute_source_args(read.sources)
    return Manifest(
        model=model,
        counts=read.counts,
        sources=list(read.ingested.files),
        semsearch_version=__version__,
        built_at=utc_now(),
        build_seconds=round(time.perf_counter() - started, 3),
        source_args=source_args,
        excluded_sources=read.excluded,
        catalogue_args=absolute_source_args(read.catalogue_args) if read.catalogue is not None else [],
        catalogue=read.catalogue.to_dict() if read.catalogue is not None else None,
        catalogues=[f.to_dict() for f in read.catalogue.files] if read.catalogue is not None else [],
        dedup={"near": read.near},
        fusion=fusion_after(previous.manifest if previous else None, model, source_args),  # query.fusion
        extra={**({FOLLOW_LINKS: True} if read.follow_links else {}), **({FULL_TEXT: True} if full_text else {})},
        **contents,
    )


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
    map_method = map_method_of(opts)  # resolved once (SEMSEARCH_MAP included): every step below is handed it
    existed = index_path.exists()
    try:
        # One lock around everything the build reads and writes: the live version, the recorded sources and
        # exclusions it plans from are the ones it publishes over (a removal cannot land in between).
        with write_errors_explained(index_path), writer_lock(index_path, wait=opts.wait):
            check_pointer(index_path, rebuild=opts.full and sources is not None)
            clear_dead_writers(index_path)  # even when nothing is to be written: what they left is freed now
            plan = plan_refresh(sources, index_path, opts, embedder, map_method=map_method)
            if isinstance(plan, Unchanged):
                if opts.strict:  # what was skipped when the live version was built is read again to be named
                    _refuse_skipped(opts, read_input(sources, index_path, opts, plan.live.manifest).ingested.skipped)
                return _unchanged_summary(plan.live, index_path, opts, started, plan.notes)
            if isinstance(plan, Append):
                if opts.strict and plan.arrived.ingested.skipped:
                    plan.previous.close()
                    _refuse_skipped(opts, plan.arrived.ingested.skipped)
                return _append_segment(plan, index_path, opts, embedder, started)
            return _rewrite(sources, index_path, opts, embedder, started, plan, map_method)
    except IndexLockedError:
        raise
    except SemsearchError as exc:
        if not existed and not version_folders(index_path):
            # A first build that failed (bad input, a model that does not load) leaves no empty index behind.
            shutil.rmtree(index_path, ignore_errors=True)
        if isinstance(exc, IndexCorruptError) and (live := live_version(index_path)) is not None:
            better = with_point_back(index_path, live, exc)  # the live version is damaged: name a way back
            if better is not exc:
                raise better from exc
        raise


def _refuse_skipped(opts: BuildOptions, skipped: Sequence[str]) -> None:
    """A strict build stops before writing anything when an input was skipped (``SkippedInputError`` names each)."""
    if opts.strict and skipped:
        raise SkippedInputError(list(skipped))


def _rewrite(
    sources: Sequence[str] | None,
    index_path: Path,
    opts: BuildOptions,
    embedder: Embedder | None,
    started: float,
    plan: Rewrite,
    map_method: str,
) -> BuildSummary:
    """Read every source and write the index whole (the planner's ``Rewrite``).

    The live version the planner read is opened once here, for its ids, the ids the dedup keeps and the
    arrival stamps; files the planner read already are not read again.
    """
    live, previous = plan.live, plan.previous
    try:
        read = read_input(sources, index_path, opts, live.manifest if live is not None else None, plan.reads)
        _refuse_skipped(opts, read.ingested.skipped)
        if previous is None:
            known = (live.version, live.manifest) if live is not None else None
            previous = PreviousVersion.load(index_path, tolerate_damage=opts.full, live=known, keep_store=True)
        read.deduplicate(previous_identity(previous))
        barrier("plan")
        with version_writer(index_path) as writer:
            documents = read.dedup.documents
            choice = _open_encoder(opts, previous, writer, embedder)
            vectors, windows, encoded = _encode(choice, documents, index_path, writer, opts)
            full_text = full_text_of(opts, live.manifest if live is not None else None)
            passages = _encode_passages(choice, documents, index_path, opts) if full_text else None
            _stamp_arrivals(documents, vectors, previous, index_path)
            ann, budget = ann_settings(opts, previous.manifest if previous is not None else None)
            contents = write_contents(
                writer.path,
                documents,
                vectors,
                ann=ann,
                memory_budget=budget,
                previous=previous,
                retrain=opts.full,
                relayout=opts.full or opts.relayout,
                tuning_queries=lambda: choice.embedder.encode(query_like_texts(documents), batch_size=opts.batch_size),
                near_keys=read.dedup.near_keys,
                map_method=map_method,
                windows=windows,
                passages=passages,
            )
            previous_ids = previous.ids if previous is not None else set()
            final = writer.publish(_manifest(read, choice, contents, started, previous, full_text))
    finally:
        if previous is not None:
            previous.close()

    new_ids = {d.id for d in documents}
    return BuildSummary.of(
        read.counts,
        index=index_path,
        version=final.name,
        model=choice.embedder.name,
        backend=choice.backend,
        files=len(read.ingested.files),
        ann=AnnSpec.from_dict(contents["ann"]).describe(),
        engine=opts.engine,
        started=started,
        encoded=encoded,
        added=len(new_ids - previous_ids),
        removed=len(previous_ids - new_ids),
        skipped=read.ingested.skipped,
        catalogue=read.catalogue.to_dict(with_uncatalogued=True) if read.catalogue is not None else None,
        rewritten_because=plan.reason if plan.reported else "",
    )


def _append_segment(
    plan: Append, index_path: Path, opts: BuildOptions, embedder: Embedder | None, started: float
) -> BuildSummary:
    """Encode the arrivals and publish them as a segment of the live version (the planner's ``Append``)."""
    from semsearch.write.append import write_appended

    previous, arrived, change = plan.previous, plan.arrived, plan.change
    with version_writer(index_path) as writer:
        choice = _open_encoder(opts, previous, writer, embedder)
        vectors, windows, encoded = _encode(choice, change.new, index_path, writer, opts)
        passages = _encode_passages(choice, change.new, index_path, opts) if has_passages(previous.manifest) else None
        done = write_appended(
            change,
            arrived,
            previous,
            writer,
            vectors,
            started,
            windows,
            previous_map=plan.fit.previous_map,
            map_method=plan.map_method,
            passages=passages,
        )
    return BuildSummary.of(
        done.counts,
        index=index_path,
        version=done.version.name,
        model=choice.embedder.name,
        backend=choice.backend,
        files=len(arrived.files),
        ann=_ann_line(previous.manifest),
        engine=opts.engine,
        started=started,
        encoded=encoded,
        added=len(change.new),
        removed=len(change.dropped),
        skipped=arrived.ingested.skipped,
        segments=done.segments,
    )


def _stamp_arrivals(
    documents: Sequence[Document], vectors: np.ndarray, previous: PreviousVersion | None, index: Path
) -> None:
    """When each document first entered the index, carried forward from the live version (see arrivals.py)."""
    from semsearch.write.arrival_stamps import stamp_arrivals

    version = previous.path if previous is not None else None
    opened = (previous.store, previous.manifest) if previous is not None and previous.store is not None else None
    try:
        stamp_arrivals(documents, vectors, version, next_sequence(index), utc_now(), opened=opened)
    except IndexCorruptError:  # a damaged live version (--full recovers it): its documents count as new
        stamp_arrivals(documents, vectors, None, next_sequence(index), utc_now())


def up_to_date(
    sources: Sequence[str] | None,
    index_dir: str | Path,
    options: BuildOptions | None = None,
    *,
    embedder: Embedder | None = None,
) -> bool:
    """Whether a build of these sources with these options would write exactly the live version."""
    opts = options or BuildOptions()
    try:
        method = map_method_of(opts)
    except SemsearchError:
        return False  # the build reports the bad setting
    return is_unchanged(sources, Path(index_dir), opts, embedder, method)


def _ann_line(manifest: Manifest) -> str:
    """The live version's ANN structure in words, as a build summary gives it."""
    return AnnSpec.from_dict(manifest.ann).describe() if isinstance(manifest.ann, dict) else "flat (exact)"


def _unchanged_summary(
    live: Live, index_path: Path, opts: BuildOptions, started: float, notes: Sequence[str] = ()
) -> BuildSummary:
    """What a refresh that found nothing to do reports: the live version's figures, nothing encoded or written."""
    manifest = live.manifest
    return BuildSummary.of(
        manifest.counts,  # every vector is the live version's: none encoded, all cached
        index=index_path,
        version=live.version.name,
        model=manifest.model.name,
        backend=manifest.model.backend or "",
        files=len(manifest.sources),
        ann=_ann_line(manifest),
        engine=opts.engine,
        started=started,
        catalogue=manifest.catalogue,
        skipped=list(notes),
        unchanged=True,
    )
