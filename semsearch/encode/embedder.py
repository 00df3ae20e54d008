"""What an encoder is: texts in, L2-normalized float32 vectors out; and the content hash that names a model.

The runtimes live beside it: ``onnx_backend.py`` (what queries use) and ``torch_backend.py``
(sentence-transformers); ``encoder_choice.py`` picks one for a build or a query.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

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
