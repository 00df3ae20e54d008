"""Small file primitives: atomic replacement, fsync, checksums, timestamps, and bounded gunzip for readers."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import secrets
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path


def utc_now() -> str:
    """The current time as an ISO 8601 string in UTC, to the second."""
    return datetime.now(timezone.utc).replace(microsecond=0).isoformat()


def readonly_uri(path: Path) -> str:
    """A SQLite URI that opens a file read-only, whatever characters its path holds."""
    return path.resolve().as_uri() + "?mode=ro"


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def fsync_path(path: Path) -> None:
    """Flush a file or directory to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temporary name beside ``path`` to write to (by any means); renamed over ``path`` when the block succeeds.

    Readers see the old file or the complete new one, never a part; a failed block leaves no temporary behind.
    """
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_path(path.parent)


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write a file so that readers see the old or the new content, never a part (temp file, fsync, rename)."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_text_atomic(path: Path, text: str) -> None:
    """``write_bytes_atomic`` for UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"))


# Decompression bounds. The largest corpus we know (157k abstracts) expands from 80 MB to 280 MB, a ratio of 3.5;
# text rarely compresses past 10x. A small file that expands more than RATIO-fold past RATIO_FLOOR is a bomb.
MAX_DECOMPRESSED_BYTES = 2**30
MAX_RATIO = 50
RATIO_FLOOR = 64 * 2**20
DECOMPRESSED_ENV = "SEMSEARCH_MAX_DECOMPRESSED_MB"  # set: exactly that many MB, no ratio rule
_INFLATE_CHUNK = 2**20


def decompressed_limit(compressed_size: int, env_value: str | None) -> tuple[int, str]:
    """The most bytes a gzip file of this size may expand to, and the rule that sets it with how to lift it.

    Raises ValueError for an environment value that is not a positive number of MB.
    """
    if env_value is not None and env_value.strip():
        mb = float(env_value)
        if not 0 < mb < float("inf"):
            raise ValueError(env_value)
        limit = int(mb * 2**20)
        return limit, f"{DECOMPRESSED_ENV}={env_value.strip()}; raise it to read larger files"
    limit = max(RATIO_FLOOR, MAX_RATIO * compressed_size)
    if limit < MAX_DECOMPRESSED_BYTES:
        rule = f"over {MAX_RATIO}x its compressed size: a decompression bomb?"
    else:
        limit, rule = MAX_DECOMPRESSED_BYTES, "the limit"
    return limit, f"{rule}; set {DECOMPRESSED_ENV}=<MB> to read it"


def inflate_gzip(raw: bytes, limit: int) -> bytearray | None:
    """The decompressed bytes of gzip data (every member), or None once they pass ``limit`` (read no further).

    Streams a chunk at a time, so a bomb costs at most ``limit`` bytes, never its full expansion.
    Corrupt data raises what ``gzip`` raises (OSError, EOFError, zlib.error).
    """
    out = bytearray()
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as stream:
        # One byte past the limit is asked for, to tell "exactly the limit" from "more".
        while chunk := stream.read(min(_INFLATE_CHUNK, limit + 1 - len(out))):
            out += chunk
            if len(out) > limit:
                return None
    return out
