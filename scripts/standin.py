"""A stand-in encoder for benchmarks: a hashed bag of words, unit length, deterministic per text.

It stands in for the model where a benchmark measures what is not encoding (dedup, BM25, SQLite, ANN, the
map, versions): each word adds +-1 to one hashed dimension, so texts that share words point the same way and
the ANN and map see clustered data. It counts what it encodes and the seconds it spent, so a benchmark can
report a refresh "excluding encoding".
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


class HashedWords:
    """Hashed bag-of-words vectors of ``dimension`` floats (384 by default, MiniLM's width)."""

    backend = "stand-in"
    precision = "fp32"

    def __init__(self, dimension: int = 384) -> None:
        self.dimension = dimension
        self.name = f"stand-in-hashed-words-{dimension}"
        self.fingerprint = f"hashed-words-{dimension}"
        self.encoded = 0
        self.seconds = 0.0

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        started = time.perf_counter()
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
                out[row, h % self.dimension] += 1.0 if (h >> 32) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        self.encoded += len(texts)
        self.seconds += time.perf_counter() - started
        return out / norms
