"""What a writer says when the disk is full or the index directory cannot be written.

Every writer (a build, a refresh, a removal) writes into a hidden ``.build-*`` folder and only then swaps
``CURRENT``, so a failure part-way leaves the published version as it was. These errors say so in one line;
the SQLite, FAISS and numpy layers each report a full disk their own way, all recognised here.
"""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

from semsearch.core.errors import DiskFullError, IndexReadOnlyError, SemsearchError, WriteIOError

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_FULL_WORDS = ("no space left", "disk is full", "database or disk is full", "disk quota exceeded")


def write_failure(exc: BaseException, index_dir: Path) -> SemsearchError | None:
    """The one-line error for a failed write into ``index_dir``, or None when ``exc`` is no such failure."""
    if isinstance(exc, SemsearchError):
        return None
    code = getattr(exc, "errno", None)
    text = str(exc).lower()
    where = f" ({exc.filename})" if isinstance(exc, OSError) and exc.filename else ""
    kept = f"{index_dir} is unchanged"
    if code in FULL_ERRNOS or (
        isinstance(exc, (sqlite3.OperationalError, RuntimeError, OSError)) and any(w in text for w in _FULL_WORDS)
    ):
        return DiskFullError(
            f"disk full while writing a new version of {index_dir}{where}; {kept} (free space, run again)"
        )
    if code in READ_ONLY_ERRNOS or (isinstance(exc, sqlite3.OperationalError) and "readonly" in text):
        return IndexReadOnlyError(
            f"cannot write to {index_dir}: {getattr(exc, 'strerror', None) or exc}{where}; "
            "the index is read-only here (queries still work; build into a writable --index)"
        )
    if code == errno.EIO or (isinstance(exc, sqlite3.OperationalError) and "disk i/o error" in text):
        return WriteIOError(f"I/O error while writing a new version of {index_dir}{where}; {kept}")
    return None
