"""The embedding cache stores compact rows (binary key, int8 codes with a scale) and reads an older release's."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from semsearch.core.errors import SemsearchError
from semsearch.encode.cache import (
    KEY_BYTES,
    SCALE_BYTES,
    EmbeddingCache,
    cache_key,
    decode_vector,
    embedding_key,
    encode_vector,
)

DIM = 384


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def unit_rows(n: int, seed: int = 0) -> np.ndarray:
    rows = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_row_is_a_short_key_and_one_byte_a_value(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "fp", "onnx-int8", DIM)
    vectors = unit_rows(3)
    keys = [embedding_key(f"text {i}") for i in range(2)] + [f"{embedding_key('doc')}:0"]
    served = dict(cache.put_many(zip(keys, vectors, strict=True)))
    stored = cache.conn.execute("SELECT length(key), length(code) FROM codes").fetchall()
    assert stored == [(KEY_BYTES, SCALE_BYTES + DIM)] * 3
    got = cache.get_many([*keys, "absent"])
    assert set(got) == set(keys)
    for key, vector in zip(keys, vectors, strict=True):
        assert np.array_equal(got[key], served[key])  # what a build used is what the next one reads
        assert got[key].dtype == np.float32
        assert cosine(got[key], vector) > 0.9999  # the codes keep the direction
        assert np.abs(got[key] - vector).max() <= np.abs(vector).max() / 254 + 1e-7
    cache.close()


def test_codes_rank_unit_vectors_as_float32_does() -> None:
    docs, queries = unit_rows(500, 1), unit_rows(20, 2)
    decoded = np.stack([v for v in (decode_vector(encode_vector(d), DIM) for d in docs) if v is not None])
    exact, coded = queries @ docs.T, queries @ decoded.T
    assert np.abs(exact - coded).max() < 0.01
    agree = [len(set(np.argsort(-e)[:10]) & set(np.argsort(-c)[:10])) for e, c in zip(exact, coded, strict=True)]
    assert np.mean(agree) >= 9.5


def test_a_zero_vector_and_a_foreign_code(tmp_path: Path) -> None:
    assert np.array_equal(decode_vector(encode_vector(np.zeros(DIM)), DIM), np.zeros(DIM, np.float32))
    assert decode_vector(encode_vector(np.ones(8)), DIM) is None  # another dimension's row is not served
    nan_scale = np.asarray([np.nan], "<f4").tobytes() + bytes(DIM)
    assert decode_vector(nan_scale, DIM) is None


def test_non_finite_rows_are_neither_stored_nor_served(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path, "fp", "onnx-int8", DIM)
    bad = unit_rows(1)[0]
    bad[3] = np.nan
    with pytest.raises(SemsearchError, match="non-finite"):
        cache.put_many([("k", bad)])
    cache.put_many([("k", unit_rows(1)[0])])
    poisoned = np.asarray([np.inf], "<f4").tobytes() + bytes(DIM)
    cache.conn.execute("UPDATE codes SET code = ? WHERE key = ?", (poisoned, cache_key("k")))
    cache.conn.commit()
    assert cache.get_many(["k"]) == {}  # encoded again, then replaced
    cache.put_many([("k", unit_rows(1)[0])])
    assert set(cache.get_many(["k"])) == {"k"}
    cache.close()


def write_legacy(path: Path, rows: list[tuple[str, int, bytes]]) -> None:
    """A cache as releases before the compact one wrote it."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vector BLOB NOT NULL)")
    conn.executemany("INSERT INTO vectors VALUES (?, ?, ?)", rows)
    conn.commit()
    conn.close()


def test_an_older_release_cache_is_converted_not_encoded_again(tmp_path: Path) -> None:
    path = EmbeddingCache.path_for(tmp_path, "fp", "onnx-int8")
    vectors = unit_rows(300, 3)
    keys = [embedding_key(f"abstract {i}") for i in range(len(vectors))]
    nan = np.full(DIM, np.nan, dtype="<f4")
    legacy = [(k, DIM, v.astype("<f4").tobytes()) for k, v in zip(keys, vectors, strict=True)]
    legacy += [("poisoned", DIM, nan.tobytes()), ("short", 8, np.ones(8, "<f4").tobytes())]
    write_legacy(path, legacy)
    before = path.stat().st_size
    cache = EmbeddingCache(tmp_path, "fp", "onnx-int8", DIM)
    got = cache.get_many([*keys, "poisoned", "short"])
    assert set(got) == set(keys)
    assert min(cosine(got[k], v) for k, v in zip(keys, vectors, strict=True)) > 0.9999
    tables = {r[0] for r in cache.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"codes"}
    cache.close()
    assert path.stat().st_size < before / 2.5  # the float32 rows' pages were given back
    again = EmbeddingCache(tmp_path, "fp", "onnx-int8", DIM)  # opening once more converts nothing
    assert set(again.get_many(keys)) == set(keys)
    again.close()


def test_a_damaged_cache_starts_afresh(tmp_path: Path) -> None:
    path = EmbeddingCache.path_for(tmp_path, "fp", "onnx-int8")
    path.write_bytes(b"not a database" * 100)
    cache = EmbeddingCache(tmp_path, "fp", "onnx-int8", DIM)
    assert cache.get_many(["k"]) == {}
    cache.put_many([("k", unit_rows(1)[0])])
    assert set(cache.get_many(["k"])) == {"k"}
    cache.close()


FULL_DISK_CONVERSION = """
import resource, signal, sys
from pathlib import Path
from semsearch.core.errors import SemsearchError
from semsearch.encode.cache import EmbeddingCache
folder, limit = Path(sys.argv[1]), int(sys.argv[2])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:
    EmbeddingCache(folder, "fp", "fp32", 384)
except SemsearchError as exc:
    print("error:", exc)
else:
    print("opened")
"""


def test_a_full_disk_while_converting_an_older_cache_keeps_every_vector(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = EmbeddingCache.path_for(tmp_path, "fp", "fp32")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE vectors (key TEXT PRIMARY KEY, dim INTEGER NOT NULL, vector BLOB NOT NULL)")
    keys = [embedding_key(f"text {i}") for i in range(3000)]
    rows = unit_rows(len(keys))
    conn.executemany(
        "INSERT INTO vectors VALUES (?, ?, ?)",
        [(k, DIM, r.astype("<f4").tobytes()) for k, r in zip(keys, rows, strict=True)],
    )
    conn.commit()
    conn.close()
    # The file may not grow: the converted rows cannot be written beside the old ones.
    run = subprocess.run(
        [sys.executable, "-c", FULL_DISK_CONVERSION, str(tmp_path), str(path.stat().st_size)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("error: cannot open the embedding cache"), run.stdout
    assert "Traceback" not in run.stdout
    cache = EmbeddingCache(tmp_path, "fp", "fp32", DIM)  # room again: converted now, nothing lost
    got = cache.get_many(keys)
    assert len(got) == len(keys)
    assert cosine(got[keys[7]], rows[7]) > 0.9999
    cache.close()
