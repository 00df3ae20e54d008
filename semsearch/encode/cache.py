"""Embedding cache: vectors keyed by (model fingerprint, runtime, hash of the embedded text).

It lives beside the index versions, so rebuilds with the same model never re-encode known text,
even after ``--full`` or deletions. Vectors are stored as raw little-endian float32 bytes. The runtime
key (``EncoderChoice.cache_runtime``) names the exact ONNX export's sha256, so vectors another export made
are never served; a row that is not finite (NaN, inf) is neither stored nor served (it is encoded again).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from semsearch.core.errors import SemsearchError
from semsearch.core.textnorm import normalize_text


def embedding_key(text: str) -> str:
    """The cache key of a text as given to the encoder."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


class EmbeddingCache:
    """A SQLite table of vectors for one model fingerprint and precision."""

    def __init__(self, folder: Path, fingerprint: str, precision: str, dimension: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = self.path_for(folder, fingerprint, precision)
        self.dimension = dimension
        self.conn = sqlite3.connect(self.path)
        try:
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vector BLOB NOT NULL)"
            )
        except sqlite3.DatabaseError:
            # A damaged cache only costs re-encoding: start a fresh one.
            self.conn.close()
            self.path.unlink(missing_ok=True)
            self.conn = sqlite3.connect(self.path)
            self.conn.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vector BLOB NOT NULL)")

    @staticmethod
    def path_for(folder: Path, fingerprint: str, precision: str) -> Path:
        """The cache file of one model fingerprint and runtime key inside a cache folder."""
        safe = "".join(c for c in f"{fingerprint}-{precision}" if c.isalnum() or c in "-_")
        return folder / f"embeddings-{safe}.sqlite"

    def close(self) -> None:
        self.conn.close()

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the keys that have one."""
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for key, dim, blob in self.conn.execute(
                f"SELECT key, dim, vector FROM vectors WHERE key IN ({marks})", chunk
            ):
                if dim == self.dimension and len(blob) == 4 * dim:
                    vector = np.frombuffer(blob, dtype="<f4").astype(np.float32)
                    if np.isfinite(vector).all():  # a poisoned row is missing: encoded again, replaced
                        found[key] = vector
        return found

    def put_many(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        """Store vectors (committed at once, so an interrupted build keeps what it encoded); refuses non-finite ones."""
        rows = []
        for key, vec in items:
            data = np.asarray(vec, dtype="<f4")
            if not np.isfinite(data).all():
                raise SemsearchError(f"the encoder gave a non-finite vector (NaN or inf) for cache key {key[:12]}")
            rows.append((key, int(data.shape[0]), data.tobytes()))
        self.conn.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?)", rows)
        self.conn.commit()
