"""Embedding cache: vectors keyed by (model fingerprint, runtime, hash of the embedded text).

It lives beside the index versions, so rebuilds with the same model never re-encode known text,
even after ``--full`` or deletions. The runtime key (``EncoderChoice.cache_runtime``) names the exact ONNX
export's sha256, so vectors another export made are never served; a row that is not finite (NaN, inf) is
neither stored nor served (it is encoded again).

A row is small because a cache holds every sentence of every abstract: the key is the first
``KEY_BYTES`` bytes of the sha256 of the text's key (``cache_key``), the vector its int8 codes after a
float32 scale (``encode_rows``). The table keeps its rowids: a build appends its rows, and only the small
key index takes the random inserts. A cache an earlier release wrote (``vectors``: hex key, float32 bytes) is
converted when first opened, so nothing is encoded again.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from semsearch.core.errors import SemsearchError
from semsearch.core.textnorm import normalize_text

KEY_BYTES = 16  # 128 bits of sha256: a collision among billions of texts is still far less likely than a disk error
SCALE_BYTES = 4  # a little-endian float32 before the codes
TABLE = "codes"
LEGACY_TABLE = "vectors"  # what releases before the compact cache wrote
_SCHEMA = f"CREATE TABLE IF NOT EXISTS {TABLE} (key BLOB PRIMARY KEY, code BLOB NOT NULL)"
_CHUNK = 500  # keys per SELECT (under SQLite's bound on variables)


def embedding_key(text: str) -> str:
    """The cache key of a text as given to the encoder."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def cache_key(key: str) -> bytes:
    """The stored form of a key (an ``embedding_key`` or a sentence reading's key)."""
    return hashlib.sha256(key.encode("utf-8")).digest()[:KEY_BYTES]


def encode_rows(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Finite float rows as their stored codes (float32 scale, then one int8 per value) and as the cache serves them."""
    rows = np.asarray(matrix, dtype=np.float32).reshape(len(matrix), -1)
    scales = (np.abs(rows).max(axis=1) / np.float32(127.0)).astype(np.float32) if rows.size else np.zeros(len(rows))
    scales = scales.astype(np.float32)
    safe = np.where(scales == 0, np.float32(1.0), scales)
    codes = np.rint(rows / safe[:, None]).clip(-127, 127).astype(np.int8)
    codes[scales == 0] = 0
    stored = np.empty((len(rows), SCALE_BYTES + rows.shape[1]), dtype=np.uint8)
    stored[:, :SCALE_BYTES] = scales.astype("<f4").view(np.uint8).reshape(len(rows), SCALE_BYTES)
    stored[:, SCALE_BYTES:] = codes.view(np.uint8)
    return stored, codes.astype(np.float32) * scales[:, None]


def decode_rows(data: bytes, dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """The float32 rows of concatenated codes of ``dimension`` values each, and which rows have a finite scale."""
    stored = np.frombuffer(data, dtype=np.uint8).reshape(-1, SCALE_BYTES + dimension)
    scales = stored[:, :SCALE_BYTES].copy().view("<f4").reshape(-1).astype(np.float32)
    ok = np.isfinite(scales)
    codes = stored[:, SCALE_BYTES:].view(np.int8).astype(np.float32)
    return codes * np.where(ok, scales, np.float32(0.0))[:, None], ok


def encode_vector(vector: np.ndarray) -> bytes:
    """A finite vector as its stored code: float32 scale, then one int8 per value (value = code * scale)."""
    stored, _ = encode_rows(np.asarray(vector, dtype=np.float32).reshape(1, -1))
    return stored[0].tobytes()


def decode_vector(code: bytes, dimension: int) -> np.ndarray | None:
    """The float32 vector of a stored code, or None when it is not one of ``dimension`` finite values."""
    if len(code) != SCALE_BYTES + dimension:
        return None
    vectors, ok = decode_rows(code, dimension)
    return vectors[0] if ok[0] else None


class EmbeddingCache:
    """A SQLite table of vector codes for one model fingerprint and precision."""

    def __init__(self, folder: Path, fingerprint: str, precision: str, dimension: int) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = self.path_for(folder, fingerprint, precision)
        self.dimension = dimension
        self.conn = sqlite3.connect(self.path)
        try:
            self.conn.execute(_SCHEMA)
            self._convert_legacy()
        except sqlite3.OperationalError as exc:
            # A full disk or a lock says nothing about the file: keep every vector it holds for the next try.
            self.conn.close()
            raise SemsearchError(f"cannot open the embedding cache {self.path.name}: {exc}") from None
        except sqlite3.DatabaseError:
            # A damaged cache only costs re-encoding: start a fresh one.
            self.conn.close()
            self.path.unlink(missing_ok=True)
            self.conn = sqlite3.connect(self.path)
            self.conn.execute(_SCHEMA)

    @staticmethod
    def path_for(folder: Path, fingerprint: str, precision: str) -> Path:
        """The cache file of one model fingerprint and runtime key inside a cache folder."""
        safe = "".join(c for c in f"{fingerprint}-{precision}" if c.isalnum() or c in "-_")
        return folder / f"embeddings-{safe}.sqlite"

    def close(self) -> None:
        self.conn.close()

    def _convert_legacy(self) -> None:
        """Move an earlier release's float32 rows into the compact table, then drop theirs and give back the space."""
        found = self.conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (LEGACY_TABLE,))
        if found.fetchone() is None:
            return
        rows = self.conn.execute(f"SELECT key, dim, vector FROM {LEGACY_TABLE}")
        while batch := rows.fetchmany(_CHUNK * 4):
            converted = []
            for key, dim, blob in batch:
                if dim != self.dimension or not isinstance(blob, bytes) or len(blob) != 4 * dim:
                    continue  # another dimension's row was never served either
                vector = np.frombuffer(blob, dtype="<f4")
                if np.isfinite(vector).all():
                    converted.append((cache_key(str(key)), encode_vector(vector)))
            self.conn.executemany(f"INSERT OR IGNORE INTO {TABLE} VALUES (?, ?)", converted)
        self.conn.execute(f"DROP TABLE {LEGACY_TABLE}")
        self.conn.commit()
        # The rows are converted and committed: without room to vacuum, the space comes back at a later one.
        with contextlib.suppress(sqlite3.OperationalError):
            self.conn.execute("VACUUM")

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors for the keys that have one."""
        found: dict[str, np.ndarray] = {}
        width = SCALE_BYTES + self.dimension
        for start in range(0, len(keys), _CHUNK):
            chunk = {cache_key(k): k for k in keys[start : start + _CHUNK]}
            marks = ",".join("?" * len(chunk))
            rows = self.conn.execute(f"SELECT key, code FROM {TABLE} WHERE key IN ({marks})", list(chunk)).fetchall()
            # A poisoned or foreign row is missing: encoded again, replaced.
            rows = [(stored, code) for stored, code in rows if isinstance(code, bytes) and len(code) == width]
            if not rows:
                continue
            vectors, ok = decode_rows(b"".join(code for _, code in rows), self.dimension)
            for (stored, _), vector, good in zip(rows, vectors, ok, strict=True):
                if good:
                    found[chunk[stored]] = vector
        return found

    def put_many(self, items: Iterable[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]]:
        """Store vectors (committed at once, so an interrupted build keeps what it encoded); refuses non-finite ones.

        Returns each vector as the cache serves it from now on, so a build that just encoded a text uses the
        vector a later build would read.
        """
        pairs = list(items)
        if not pairs:
            return []
        keys = [key for key, _ in pairs]
        matrix = np.stack([np.asarray(vec, dtype=np.float32).reshape(-1) for _, vec in pairs])
        finite = np.isfinite(matrix).all(axis=1)
        if not finite.all():
            key = keys[int(np.argmin(finite))]
            raise SemsearchError(f"the encoder gave a non-finite vector (NaN or inf) for cache key {key[:12]}")
        codes, served = encode_rows(matrix)
        self.conn.executemany(
            f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?)",
            [(cache_key(key), bytes(code)) for key, code in zip(keys, codes, strict=True)],
        )
        self.conn.commit()
        return list(zip(keys, served, strict=True))
