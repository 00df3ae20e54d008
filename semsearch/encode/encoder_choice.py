"""Choosing the encoder: at build time (the asked backend) and at query time (the backend the manifest records).

A backend is an entry of the extension registry (``core/registry.py``): an object with ``open_build`` (the
encoder a build uses, and how the manifest describes it) and ``open_query`` (the encoder that reproduces an
index's vectors). The built-in ones are ``onnx`` and ``torch`` below and ``hashed`` (``hashed.py``, for tests);
a package adds one through the ``semsearch.backends`` entry-point group. The query path must stay torch-free:
ONNX loads the export kept in the index version, and falls back to sentence-transformers only when that export
is missing or broken and the model is at hand.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from semsearch.core import registry
from semsearch.core.errors import (
    REBUILD_HINT,
    ExportUnsupportedError,
    IndexCorruptError,
    InputError,
    ModelLoadError,
    ModelMismatchError,
    SemsearchError,
)
from semsearch.core.options import DEFAULT_READING, PRECISIONS
from semsearch.encode.embedder import Embedder
from semsearch.store.layout import ENCODER_DIR
from semsearch.store.manifest import Manifest, ModelInfo

if TYPE_CHECKING:
    from semsearch.encode.windows import ReadChars

Notify = Callable[[str], None]


def stderr_notice(message: str) -> None:
    """Print a one-line notice on stderr."""
    print(f"semsearch: {message}", file=sys.stderr)


@dataclass
class EncoderChoice:
    """The encoder a build uses and how the manifest should describe it."""

    embedder: Embedder
    backend: str
    precision: str
    reading: str = DEFAULT_READING  # options.READINGS: whether vectors pool the windows past the cut

    def read_chars(self) -> ReadChars | None:
        """What the encoding needs to find each text's cut (windows.py), or None when vectors read one window."""
        from semsearch.encode.windows import reader_of  # a build's question: the query path never loads it

        return reader_of(self.embedder) if self.reading in ("pooled", "windows") else None

    @property
    def every_window(self) -> bool:
        """Whether the build encodes every sentence window from the start, not only those past the cut."""
        return self.reading == "windows-all"

    @property
    def reads_sentences(self) -> bool:
        """Whether the build pools a vector per sentence from runs over the whole text (sentence_runs.py)."""
        return self.reading == "sentences"

    def can_read_sentences(self) -> bool:
        """Whether the encoder gives token outputs to pool sentences from (the ONNX encoder does)."""
        return callable(getattr(self.embedder, "encode_sentences", None))

    @property
    def regime(self) -> str:
        """How the encoder computes vectors (``options.ONNX_REGIME`` for ONNX; "" when it names none)."""
        return str(getattr(self.embedder, "regime", "") or "")

    def cache_runtime(self) -> str:
        """The embedding cache's runtime key: backend, precision, the encoder's regime and export when it names them.

        The ONNX encoder names how it computes vectors (``alone``: one text per run), so vectors cached by the
        batched int8 encoder before it, which depended on their batch-mates, are never reused as its own; and
        the sha256 of the exact ONNX file it runs (checked at load), so vectors a damaged or other export made
        are never served as this one's.
        """
        digest = str(getattr(self.embedder, "export_digest", "") or "")
        return "-".join(part for part in (self.backend, self.precision, self.regime, digest) if part)

    def superseded_cache_runtimes(self) -> list[str]:
        """The runtime keys of the caches this encoder's keys replaced (never read again): the batched regime's,
        and the regime's before the export's checksum was part of the key (vectors of unknown provenance)."""
        if not self.regime:
            return []
        old = [f"{self.backend}-{self.precision}", f"{self.backend}-{self.precision}-{self.regime}"]
        return [key for key in old if key != self.cache_runtime()]


def copy_encoder(src: Path, dst: Path) -> None:
    """Copy a previous version's ONNX export into a new version, checked (its own inodes: never a hard link).

    Raises IndexCorruptError when the export is damaged: a writer never carries damaged bytes forward.
    """
    from semsearch.encode.encoder_store import copy_checked, damage_of

    if not copy_checked(src, dst):
        raise IndexCorruptError(damage_of(src))


def copy_export(src: Path, dst: Path, precision: str) -> bool:
    """Copy a previous version's ONNX export keeping only the files ``precision`` needs; False when it is damaged.

    An index queries with one precision: the other ONNX file (90 MB for fp32 all-MiniLM-L6-v2) would only
    take room in every version. It is exported again when a build asks for it (``--precision``). Every copied
    byte is checked against the sha256 ``encoder.json`` records, so a damaged export is never reused (nor its
    damaged bytes recorded as the new version's truth); a copy, not a hard link, so no damage is shared.
    """
    from semsearch.encode.encoder_store import copy_checked

    return copy_checked(src, dst, precision)


def _reusable_export(previous_version: Path | None, model_name: str, precision: str) -> Path | None:
    """The previous version's ONNX export when it was made from the same model files and holds ``precision``."""
    if previous_version is None:
        return None
    from semsearch.encode.encoder_store import source_fingerprint
    from semsearch.encode.onnx_backend import read_spec

    folder = previous_version / ENCODER_DIR
    try:
        spec = read_spec(folder)
    except (IndexCorruptError, OSError):
        return None
    if spec.get("source_model") != model_name or precision not in spec.precisions:
        return None
    current = source_fingerprint(model_name)
    # A hub name cannot be fingerprinted without loading it; trust the name in that case.
    if current is not None and current != spec.get("source_fingerprint"):
        return None
    return folder


def _export(model_name: str, folder: Path, precision: str) -> None:
    from semsearch.encode.onnx_export import export_onnx

    export_onnx(model_name, folder, precisions=(precision,))


def _silent(message: str) -> None:
    """A notify that says nothing (``-q``)."""


def shared_export(
    model_name: str, precision: str, target: Path, *, notify: Notify = stderr_notice, progress: bool = True
) -> None:
    """Put the model's ONNX export into ``target``, from the shared encoder store (exported there once).

    ``progress`` says when the one-off export starts and ends (it takes ~25 s); ``notify`` says what went wrong.

    A model that is not a local folder cannot be fingerprinted without loading it, and a store that cannot be
    written (read-only cache) is passed by: both export into ``target`` alone, as every build did before.
    """
    from semsearch.encode import encoder_store
    from semsearch.encode.encoder_store import source_fingerprint

    said = notify if progress else _silent
    fingerprint = source_fingerprint(model_name)
    if fingerprint is not None:
        try:
            encoder_store.provide(model_name, fingerprint, precision, target, _export, notify=notify, progress=said)
            return
        except encoder_store.StoreUnavailable as exc:
            notify(f"cannot use the shared encoder store ({exc}); exporting into this index only")
    if _names_a_missing_folder(model_name):
        said = _silent  # it fails at once with "cannot load model": no "exporting ..." line before that one
    encoder_store.export_direct(model_name, precision, target, _export, progress=said)


def _names_a_missing_folder(model_name: str) -> bool:
    """A model given as a path (not a hub name such as org/model) that does not exist."""
    path = Path(model_name).expanduser()
    looks_like_path = model_name.startswith((os.sep, ".", "~")) or (os.sep in model_name and path.parent.is_dir())
    return looks_like_path and not path.exists()


@runtime_checkable
class EncoderBackend(Protocol):
    """What a registered encoder backend does: open the encoder of a build, and the one that queries an index."""

    def open_build(
        self,
        model_name: str,
        *,
        precision: str,
        out_dir: Path,
        previous_version: Path | None,
        notify: Notify,
        progress: bool,
    ) -> EncoderChoice:
        """The encoder a build of ``model_name`` uses, writing what queries need into ``out_dir``."""
        ...

    def open_query(self, manifest: Manifest, version: Path, *, notify: Notify, threads: int | None) -> Embedder:
        """The encoder that reproduces the vectors of the index version ``version``."""
        ...


def encoder_backend(name: str) -> EncoderBackend:
    """The backend registered under ``name`` (SemsearchError naming those there are when none is)."""
    if not registry.has("backend", name):
        raise SemsearchError(f"unknown backend {name!r} (choose from {', '.join(registry.names('backend'))})")
    loaded = registry.load("backend", name)
    backend = loaded() if isinstance(loaded, type) else loaded
    if not isinstance(backend, EncoderBackend):
        found = registry.entry("backend", name)
        raise InputError(f"{found.describe() if found else name} has no open_build and open_query")
    return backend


def open_build_encoder(
    model_name: str,
    *,
    backend: str,
    precision: str,
    out_dir: Path,
    previous_version: Path | None = None,
    embedder: Embedder | None = None,
    notify: Notify = stderr_notice,
    progress: bool = True,
) -> EncoderChoice:
    """The encoder for a build: the caller's own, else the named backend's (ONNX writes its export to ``out_dir``)."""
    if embedder is not None:
        return EncoderChoice(embedder, getattr(embedder, "backend", "custom"), getattr(embedder, "precision", "fp32"))
    chosen = encoder_backend(backend)
    if precision not in PRECISIONS:
        raise SemsearchError(f"unknown precision {precision!r} (choose from {', '.join(PRECISIONS)})")
    return chosen.open_build(
        model_name,
        precision=precision,
        out_dir=out_dir,
        previous_version=previous_version,
        notify=notify,
        progress=progress,
    )


class OnnxBackend:
    """The ONNX runtime: a build exports the model into the index version, queries load that export alone."""

    name = "onnx"

    def open_build(
        self,
        model_name: str,
        *,
        precision: str,
        out_dir: Path,
        previous_version: Path | None = None,
        notify: Notify = stderr_notice,
        progress: bool = True,
    ) -> EncoderChoice:
        from semsearch.encode.onnx_backend import OnnxEmbedder

        target = out_dir / ENCODER_DIR
        reusable = _reusable_export(previous_version, model_name, precision)
        try:
            if reusable is not None and not copy_export(reusable, target, precision):
                from semsearch.encode.encoder_store import damage_of

                notify(f"{damage_of(reusable)}; not reused: taking {model_name}'s from the shared encoder store")
                reusable = None
            if reusable is None:
                shared_export(model_name, precision, target, notify=notify, progress=progress)
            # Builds encode many texts: one text per core at once keeps every core busy where splitting each
            # text's operators over the cores leaves them waiting; both give the same bytes, queries keep "ops".
            return EncoderChoice(OnnxEmbedder.load(target, precision, parallel="texts"), self.name, precision)
        except ExportUnsupportedError as exc:
            shutil.rmtree(target, ignore_errors=True)
            notify(f"{exc}; encoding with sentence-transformers (torch) instead")
        return TorchBackend().open_build(model_name, precision=precision, out_dir=out_dir, notify=notify)

    def open_query(
        self, manifest: Manifest, version: Path, *, notify: Notify = stderr_notice, threads: int | None = None
    ) -> Embedder:
        from semsearch.encode.onnx_backend import OnnxEmbedder

        info = manifest.model
        try:
            return OnnxEmbedder.load(version / ENCODER_DIR, info.precision or "int8", threads=threads)
        except IndexCorruptError as exc:
            fallback = _torch_fallback(info)
            if fallback is None:
                raise IndexCorruptError(exc.problem) from exc
            notify(f"{exc.problem}; using sentence-transformers instead ({REBUILD_HINT})")
            return fallback


class TorchBackend:
    """sentence-transformers on torch: the model itself encodes, at build and at query time."""

    name = "torch"

    def open_build(
        self,
        model_name: str,
        *,
        precision: str,
        out_dir: Path,
        previous_version: Path | None = None,
        notify: Notify = stderr_notice,
        progress: bool = True,
    ) -> EncoderChoice:
        from semsearch.encode.torch_backend import SentenceTransformerEmbedder

        return EncoderChoice(SentenceTransformerEmbedder(model_name), self.name, "fp32")

    def open_query(
        self, manifest: Manifest, version: Path, *, notify: Notify = stderr_notice, threads: int | None = None
    ) -> Embedder:
        from semsearch.encode.torch_backend import SentenceTransformerEmbedder

        info = manifest.model
        loaded = SentenceTransformerEmbedder(info.name)
        if not info.matches(loaded.fingerprint, loaded.dimension):
            raise ModelMismatchError(
                f"model {info.name!r} on this machine differs from the one that built the index; "
                "rebuild with: semsearch index --full"
            )
        return loaded


def check_requested_model(manifest: Manifest, model: str) -> None:
    """Raise ModelMismatchError when a caller asks for another model than the index's."""
    info = manifest.model
    if model != info.name:
        raise ModelMismatchError(
            f"the index was built with model {info.name!r} ({info.dimension}-d), not {model!r}; "
            f"query without --model, or rebuild with: semsearch index --full --model {model}"
        )


def open_query_encoder(
    manifest: Manifest, version: Path, *, notify: Notify = stderr_notice, threads: int | None = None
) -> Embedder:
    """The encoder that reproduces the index's vectors for queries, by the backend its manifest records.

    An index whose recorded backend is no registered one (a caller's own encoder) is queried with
    sentence-transformers, as torch indexes are. ``threads``: the ONNX session's operator threads (default: every
    core, the fastest single query).
    """
    recorded = manifest.model.backend
    name = recorded if recorded and registry.has("backend", recorded) else "torch"
    return encoder_backend(name).open_query(manifest, version, notify=notify, threads=threads)


def _torch_fallback(info: ModelInfo) -> Embedder | None:
    """sentence-transformers with the index's model, when it loads here and matches the index."""
    from semsearch.encode.torch_backend import SentenceTransformerEmbedder

    try:
        loaded = SentenceTransformerEmbedder(info.name)
    except ModelLoadError:
        return None
    return loaded if info.matches(loaded.fingerprint, loaded.dimension) else None
