"""Encoding a build's documents through the embedding cache: what is missing, in which chunks, then the matrix.

Both engines follow the same plan (``semsearch index`` locally, ``--engine ray`` on a cluster), so they encode
exactly the same chunks. The ONNX encoder does not need that (it encodes each text alone, so a vector depends
on its text only); sentence-transformers batches with padding, and the shared chunks keep its two engines alike.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from semsearch.core.errors import SemsearchError
from semsearch.core.records import Document
from semsearch.encode.cache import EmbeddingCache, embedding_key
from semsearch.encode.embedder import Embedder

# Texts handed to the encoder per progress step; each chunk is cached at once, so an
# interrupted build resumes from the last finished chunk.
ENCODE_CHUNK = 256
Progress = Callable[..., None]


@dataclass
class CachePlan:
    """The documents' texts and cache keys, the vectors the cache already has, and the rows still to encode."""

    texts: list[str]
    keys: list[str]
    known: dict[str, np.ndarray]
    missing: list[int]  # row numbers, first occurrence of each missing key, in document order

    @classmethod
    def make(cls, documents: Sequence[Document], cache: EmbeddingCache) -> CachePlan:
        texts = [d.embedding_text() for d in documents]
        keys = [embedding_key(t) for t in texts]
        known = cache.get_many(keys)
        missing = sorted({k: i for i, k in enumerate(keys) if k not in known}.values())
        return cls(texts, keys, known, missing)

    def chunks(self, size: int | None = None) -> Iterator[list[int]]:
        """The missing rows in encoder-sized chunks (``ENCODE_CHUNK`` unless told)."""
        size = size or ENCODE_CHUNK
        for start in range(0, len(self.missing), size):
            yield self.missing[start : start + size]

    def absent(self) -> int:
        """How many distinct texts still have no vector."""
        return sum(1 for k in dict.fromkeys(self.keys) if k not in self.known)

    def matrix(self, dimension: int) -> np.ndarray:
        """The (documents, dimension) float32 matrix, row i for document i."""
        out = np.zeros((len(self.keys), dimension), dtype=np.float32)
        for row, key in enumerate(self.keys):
            out[row] = self.known[key]
        return out


def check_shape(vectors: np.ndarray, rows: int, dimension: int) -> None:
    """Raise when an encoder returned something else than one vector per text."""
    if vectors.shape != (rows, dimension):
        raise SemsearchError(f"encoder returned shape {vectors.shape}, expected ({rows}, {dimension})")


def encode_with_cache(
    embedder: Embedder,
    documents: Sequence[Document],
    cache: EmbeddingCache,
    *,
    batch_size: int,
    progress: bool,
) -> tuple[np.ndarray, int]:
    """Vectors for the documents in order, encoding only texts the cache lacks; returns (vectors, encoded)."""
    plan = CachePlan.make(documents, cache)
    if plan.missing:
        bar = progress_bar(len(plan.missing), progress)
        for chunk in plan.chunks():
            vectors = embedder.encode([plan.texts[i] for i in chunk], batch_size=batch_size)
            check_shape(vectors, len(chunk), embedder.dimension)
            pairs = [(plan.keys[i], vectors[j]) for j, i in enumerate(chunk)]
            cache.put_many(pairs)
            plan.known.update(pairs)
            bar(len(chunk))
        bar(0, close=True)
    return plan.matrix(embedder.dimension), len(plan.missing)


def progress_bar(total: int, enabled: bool, desc: str = "encoding") -> Progress:
    """A tqdm bar on stderr that knows its total, or a no-op when disabled or stderr is not a terminal."""
    if not enabled or total < 64 or not sys.stderr.isatty():
        return lambda n, close=False: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="doc", desc=desc, file=sys.stderr, dynamic_ncols=True)

    def update(n: int, close: bool = False) -> None:
        bar.update(n)
        if close:
            bar.close()

    return update
