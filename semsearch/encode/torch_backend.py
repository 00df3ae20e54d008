"""The sentence-transformers (torch) runtime: what builds use when a model cannot be exported to ONNX.

torch and sentence-transformers are imported only when an encoder is made, so importing this module is cheap.

Not covered by "one text, one vector": this runtime encodes padded fp32 batches, and whether a text's vector keeps
its bytes across batch-mates was not checked (the ONNX runtime, the default, encodes each text alone: bit-exact).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from semsearch.core.errors import ModelLoadError
from semsearch.encode.catalogue import DEFAULT_MODEL, resolve_model
from semsearch.encode.embedder import fingerprint_folder, normalize_rows

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


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

    def read_chars(self, text: str) -> int:
        """How many leading characters of ``text`` the model reads before its window ends (all: ``len(text)``)."""
        limit = self.model.max_seq_length
        encoded = self.model.tokenizer(text, return_offsets_mapping=True, add_special_tokens=True)
        if limit is None or len(encoded["input_ids"]) <= limit:
            return len(text)
        # The window holds limit - 1 tokens after [CLS] (the last place is [SEP]); offsets are in text characters.
        return max(end for _, end in encoded["offset_mapping"][: limit - 1])
