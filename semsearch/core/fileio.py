"""Small file primitives: atomic replacement, the one ``--out`` writer, fsync, checksums, timestamps, bounded gunzip."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import re
import secrets
import stat
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

from semsearch.core.errors import OutputError


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


# ---------------------------------------------------------------- --out

# Names of a process's own descriptors (``--out /dev/stdout``, bash's ``>(cmd)``): what they lead to was opened by
# someone else (a shell's ``>>`` file, a pipe), so it is written as a stream, never swapped for a new file.
_DESCRIPTOR_PATH = re.compile(r"^/(?:dev/(?:stdout|stderr|fd/\d+)|proc/(?:self|thread-self|\d+)/fd/\d+)$")


def write_output(path: Path, data: str | bytes) -> None:
    """Write a command's ``--out`` without ever replacing what ``path`` points at; OutputError says why not.

    A regular file (or a new one) is replaced atomically, keeping its permissions (and owner, where allowed): a
    reader sees the old or the whole new file, a failure leaves the old. A symlink is written through: its
    final target is replaced the same way, in the target's folder, so the link stays a link (a dangling link
    gets its target made). A FIFO, a character device (``/dev/null``, a terminal) or a descriptor name
    (``/dev/stdout``) is opened and written as a stream, never created or truncated. A folder, a block device
    and a socket are refused.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path = Path(path)
    try:
        info: os.stat_result | None = os.stat(path)  # follows links: what a write would reach
    except FileNotFoundError:
        info = None  # nothing there yet, or a dangling link: the file it names is made
    except OSError as exc:  # a link loop, a path through a file, a folder we may not enter
        raise _output_error(path, exc) from exc
    if info is not None and not stat.S_ISREG(info.st_mode):
        kind = _special_kind(info.st_mode)
        if kind is not None:
            raise OutputError(f"cannot write {path}: it is {kind}; give a file name for --out")
        _write_stream(path, raw, append=False)
        return
    if info is not None and _DESCRIPTOR_PATH.match(os.path.abspath(path)):
        _write_stream(path, raw, append=True)  # a shell's `> file` or `>> file` behind /dev/stdout
        return
    target = Path(os.path.realpath(path))  # the final target of a link, even a dangling one
    if not target.parent.is_dir():
        raise OutputError(f"cannot write {path}: there is no folder {target.parent}")
    try:
        with atomic_path(target) as tmp:
            tmp.write_bytes(raw)
            if info is not None:
                _keep_mode_and_owner(tmp, info)
    except OSError as exc:
        raise _output_error(path, exc, target=target, needed=len(raw), kept=info is not None) from exc


def _special_kind(mode: int) -> str | None:
    """What a non-regular ``--out`` is, when it is one we refuse (None: a stream we write)."""
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISBLK(mode):
        return "a block device (a disk: writing would destroy what it holds)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _write_stream(path: Path, raw: bytes, *, append: bool) -> None:
    """Write to what is already there (a FIFO blocks until a reader opens it, as a shell's ``>`` does)."""
    flags = os.O_WRONLY | (os.O_APPEND if append else 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)  # no O_CREAT, no O_TRUNC: the node stays what it is
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
    except OSError as exc:
        raise _output_error(path, exc) from exc


def _keep_mode_and_owner(tmp: Path, info: os.stat_result) -> None:
    """Give the new file the permissions (and, where allowed, the owner) of the one it replaces."""
    os.chmod(tmp, stat.S_IMODE(info.st_mode))
    if hasattr(os, "chown") and (info.st_uid, info.st_gid) != (os.getuid(), os.getgid()):
        with contextlib.suppress(OSError):  # only root may give a file away; the mode is what guards it
            os.chown(tmp, info.st_uid, info.st_gid)


def _output_error(
    path: Path, exc: OSError, *, target: Path | None = None, needed: int = 0, kept: bool = False
) -> OutputError:
    """One line for a failed ``--out`` write: the OS's reason, and for a full disk the room left and needed."""
    from semsearch.core.writefail import NO_SPACE_ERRNOS, disk_room

    reason = exc.strerror or str(exc)
    if exc.errno in NO_SPACE_ERRNOS and target is not None:
        unchanged = f"; {path} is unchanged" if kept else ""
        return OutputError(f"cannot write {path}: disk full ({disk_room(target.parent, needed)}){unchanged}")
    return OutputError(f"cannot write {path}: {reason}")


# Decompression bounds. Abstracts compress a few times over and text rarely past tenfold, so a small file that
# expands more than MAX_RATIO-fold past RATIO_FLOOR is a bomb; MAX_DECOMPRESSED_BYTES is several times the
# largest corpus we know.
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
