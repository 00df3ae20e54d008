"""What a writer says when the disk is full or the index directory cannot be written.

Every writer (a build, a refresh, a removal) writes into a hidden ``.build-*`` folder and only then swaps
``CURRENT``, so a failure part-way leaves the published version as it was. These errors say so in one line;
the SQLite, FAISS and numpy layers each report a full disk their own way, all recognised here. A full disk
also says where (the mount point and its device), how much room is left and, where known, how much the
write needed.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sqlite3
from pathlib import Path

from semsearch.core.errors import DiskFullError, IndexReadOnlyError, SemsearchError, WriteIOError

NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
FULL_ERRNOS = NO_SPACE_ERRNOS | {errno.EFBIG}
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_FULL_WORDS = ("no space left", "disk is full", "database or disk is full", "disk quota exceeded")
# numpy's ``tofile`` (behind ``np.save`` to a path) reports a short ``fwrite`` with no errno, only the two sizes; a
# short write to a local file is a full disk (or quota) in practice.
_SHORT_WRITE = re.compile(r"^(\d+) requested and (\d+) written$")


def write_failure(exc: BaseException, index_dir: Path) -> SemsearchError | None:
    """The one-line error for a failed write into ``index_dir``, or None when ``exc`` is no such failure."""
    if isinstance(exc, SemsearchError):
        return None
    code = getattr(exc, "errno", None)
    text = str(exc).lower()
    where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
    kept = f"{index_dir} is unchanged"
    short = _SHORT_WRITE.match(text.strip()) if isinstance(exc, OSError) and code is None else None
    if (
        short is not None
        or code in FULL_ERRNOS
        or (isinstance(exc, (sqlite3.OperationalError, RuntimeError, OSError)) and any(w in text for w in _FULL_WORDS))
    ):
        if short is not None:
            where += f" (a write of {int(short.group(1)):,} bytes stored {int(short.group(2)):,})"
        return DiskFullError(
            f"disk full while writing a new version of {index_dir}{where}: {disk_room(index_dir)} once the "
            f"unfinished version was removed; {kept} (free space, run again)"
        )
    if code in READ_ONLY_ERRNOS or (isinstance(exc, sqlite3.OperationalError) and "readonly" in text):
        return IndexReadOnlyError(
            f"cannot write to {index_dir}: {getattr(exc, 'strerror', None) or exc}{where}; "
            "the index is read-only here (queries still work; build into a writable --index)"
        )
    if code == errno.EIO or (isinstance(exc, sqlite3.OperationalError) and "disk i/o error" in text):
        return WriteIOError(f"I/O error while writing a new version of {index_dir}{where}; {kept}")
    return None


def disk_room(folder: Path, needed: int = 0) -> str:
    """Where a write went and the room there: ``1.2 MB free on /data (/dev/sdb1)``, then ``, 40.0 kB needed``.

    The free space is measured now (after a failed writer removed what it wrote); ``needed``: 0 is not said.
    """
    existing = Path(os.path.abspath(folder))
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # a first build: its folder went with the failure
    mount = _mount_point(existing)
    device = _mount_source(mount)
    try:
        free = f"{human_bytes(shutil.disk_usage(existing).free)} free"
    except OSError:
        free = "free space unknown"
    more = f", {human_bytes(needed)} needed" if needed > 0 else ""
    return f"{free} on {mount}{f' ({device})' if device else ''}{more}"


def human_bytes(n: int) -> str:
    """A byte count as people read it: ``512 bytes``, ``38.8 kB``, ``1.2 GB`` (powers of 1000, as df -H)."""
    if n < 1000:
        return f"{n:,} bytes"
    size = float(n)
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        size /= 1000
        if size < 999.95 or unit == "PB":
            return f"{size:.1f} {unit}"
    return f"{n:,} bytes"  # pragma: no cover - the loop always returns


def _mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding ``path`` (the highest ancestor on the same device)."""
    try:
        device = path.stat().st_dev
        while path != path.parent and path.parent.stat().st_dev == device:
            path = path.parent
    except OSError:
        pass
    return path


def _mount_source(mount: Path) -> str:
    """The device (or filesystem type, for tmpfs and the like) mounted at ``mount``; "" where not known."""
    try:
        lines = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""  # not Linux
    found = ""
    for line in lines:  # the last mount at a point is the one in force
        fields = line.split()
        if len(fields) >= 3 and fields[1].replace("\\040", " ") == str(mount):
            found = fields[0] if fields[0].startswith("/") else fields[2]
    return found
