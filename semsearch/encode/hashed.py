"""A deterministic hashed bag-of-words encoder, for tests and benchmarks only: no model, no meaning beyond words.

Each word (a run of lower-case letters and digits) adds +1 or -1 to one hashed dimension, and each row is scaled
to unit length, so texts that share words point the same way and an ANN or a map sees clustered data. It stands
in for a model where a test or a benchmark checks what is not encoding (dedup, BM25, the document store, ANN,
the map, versions). The encoder backend ``hashed`` (registered in ``core/registry.py``) builds and queries an
index with it from every face; never use it for a search someone reads.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

if TYPE_CHECKING:
    from semsearch.encode.embedder import Embedder
    from semsearch.encode.encoder_choice import EncoderChoice, Notify
    from semsearch.store.manifest import Manifest

Hashing = Literal["md5", "blake2b"]
_WORD = re.compile(r"[a-z0-9]+")
DEFAULT_DIMENSION = 384  # the width of the default model, so a stand-in index is as big as a real one


class HashedWords:
    """Hashed bag-of-words vectors of ``dimension`` floats; counts what it encodes and the seconds it spent.

    ``hashing``: "blake2b" (the benchmarks' stand-in: a word's 64-bit little-endian hash picks the dimension, bit
    32 the sign) or "md5" (the tests' fake: the digest's first byte picks the dimension, the second's parity the
    sign). ``record``: keep every call's texts in ``calls`` (a test asks what was encoded).
    """

    precision = "fp32"

    def __init__(
        self,
        dimension: int = DEFAULT_DIMENSION,
        *,
        hashing: Hashing = "blake2b",
        name: str | None = None,
        fingerprint: str | None = None,
        backend: str = "stand-in",
        record: bool = False,
    ) -> None:
        if hashing not in ("md5", "blake2b"):
            raise ValueError(f"unknown hashing {hashing!r} (md5 or blake2b)")
        self.dimension = dimension
        self.hashing: Hashing = hashing
        self.name = name or f"stand-in-hashed-words-{dimension}"
        self.fingerprint = fingerprint or f"hashed-words-{dimension}"
        self.backend = backend
        self.record = record
        self.calls: list[list[str]] = []
        self.encoded = 0
        self.seconds = 0.0

    @property
    def encoded_texts(self) -> list[str]:
        """Every text encoded so far, in order (when recording)."""
        return [text for call in self.calls for text in call]

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """An (n, dimension) float32 array of unit rows (zero rows for texts without a word)."""
        started = time.perf_counter()
        if self.record:
            self.calls.append(list(texts))
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        place = self._md5 if self.hashing == "md5" else self._blake2b
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                column, sign = place(word)
                out[row, column] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        self.encoded += len(texts)
        self.seconds += time.perf_counter() - started
        return out / norms

    def _md5(self, word: str) -> tuple[int, float]:
        digest = hashlib.md5(word.encode()).digest()
        return digest[0] % self.dimension, 1.0 if digest[1] % 2 else -1.0

    def _blake2b(self, word: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        return h % self.dimension, 1.0 if (h >> 32) & 1 else -1.0


class HashedBackend:
    """The encoder backend ``hashed``: ``HashedWords`` (md5) at the model's dimension, for tests and benchmarks.

    The model name is only recorded: a catalogue model gives its dimension, any other name 384. The fingerprint
    says how the vectors were made (``hashed-md5-64``), so a query reproduces them from the manifest alone.
    """

    name = "hashed"

    def open_build(
        self,
        model_name: str,
        *,
        precision: str,
        out_dir: Path,
        previous_version: Path | None = None,
        notify: Notify,
        progress: bool = True,
    ) -> EncoderChoice:
        from semsearch.encode.catalogue import find_spec
        from semsearch.encode.encoder_choice import EncoderChoice

        spec = find_spec(model_name)
        dimension = spec.dimension if spec is not None else DEFAULT_DIMENSION
        return EncoderChoice(self.encoder(model_name, dimension), self.name, "fp32")

    def open_query(self, manifest: Manifest, version: Path, *, notify: Notify, threads: int | None) -> Embedder:
        info = manifest.model
        return self.encoder(info.name, info.dimension)

    def encoder(self, model_name: str, dimension: int) -> HashedWords:
        """The encoder a build or a query of ``model_name`` at ``dimension`` uses."""
        return HashedWords(
            dimension, hashing="md5", name=model_name, fingerprint=f"hashed-md5-{dimension}", backend=self.name
        )
