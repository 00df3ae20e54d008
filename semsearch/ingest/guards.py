"""Input guards: refuse what is not an abstract file before reading it, ids that name two abstracts, and an
abstract too long to be one.

A source that is a FIFO or a device would block or never end; a symbolic link that loops or dangles would be
skipped without a word; a line of hundreds of megabytes is not an abstract and would be read whole into
memory. These checks stream (one chunk in memory at a time) and each failure is one ``InputError`` line.
"""

from __future__ import annotations

import errno
import gzip
import os
import stat
import zlib
from collections.abc import Sequence
from pathlib import Path

from semsearch.core.errors import InputError
from semsearch.core.records import Record
from semsearch.core.textnorm import text_hash

# The longest line a source may hold. An abstract is a few KB; a JSON array written on one line may be a few MB.
MAX_LINE_BYTES = 16 * 2**20
CHUNK_BYTES = 2**20
# The longest abstract a record may hold: real ones are a few thousand characters. Each costs its sentences'
# encoding at every build (100 KB: 12 s), while the model reads only its first 256 tokens.
MAX_ABSTRACT_CHARS = 20_000
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def check_link(path: Path, display: str) -> None:
    """Raise for a symbolic link that loops or points nowhere (a walk would otherwise skip it silently)."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(f"{display}: symbolic link loop") from None
        if exc.errno == errno.ENOENT:
            raise InputError(f"{display}: broken symbolic link (its target {os.readlink(path)!r} is missing)") from None
        raise InputError(f"{display}: cannot read ({exc.strerror or exc})") from None


def check_source_file(
    path: Path, display: str, *, max_line: int = MAX_LINE_BYTES, max_inflated: int | None = None
) -> None:
    """Raise InputError unless ``path`` is a regular file whose lines are at most ``max_line`` bytes.

    Reads the file (gunzipped when it is gzip) once in ``CHUNK_BYTES`` chunks, so a huge file costs one
    chunk of memory; a gzip stream is read no further than ``max_inflated`` bytes. Errors the reader reports
    better (a missing file, corrupt gzip, a gzip past its limit) are left to it.
    """
    if path.is_symlink():
        check_link(path, display)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # the reader names the problem
    for test, kind in _KINDS:
        if test(mode):
            raise InputError(f"{display}: is {kind}, not a regular file")
    if not stat.S_ISREG(mode):
        return
    if _longest_line_over(path, max_line, max_inflated):
        raise InputError(
            f"{display}: a line of more than {max_line // 2**20} MB (the limit); an abstract is a few KB: "
            "is this the right file? (a JSON array on one line: write it as JSONL)"
        )


def _longest_line_over(path: Path, limit: int, max_inflated: int | None = None) -> int:
    """The bytes read without a line break when that run first exceeded ``limit`` (0 when none did)."""
    try:
        with path.open("rb") as raw:
            magic = raw.read(2)
            raw.seek(0)
            stream = gzip.GzipFile(fileobj=raw) if magic == b"\x1f\x8b" else raw
            since = 0  # bytes since the last line break
            total = 0
            while chunk := stream.read(CHUNK_BYTES):
                total += len(chunk)
                if stream is not raw and max_inflated is not None and total > max_inflated:
                    return 0  # a bomb: the reader refuses it, naming the limit, without inflating the rest
                # Runs inside one chunk are shorter than the limit; only a run across chunks can exceed it.
                first = min((i for i in (chunk.find(b"\n"), chunk.find(b"\r")) if i >= 0), default=-1)
                if first < 0:
                    since += len(chunk)
                    if since > limit:
                        return since
                    continue
                if since + first > limit:
                    return since + first
                since = len(chunk) - 1 - max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
    except (OSError, EOFError, zlib.error):
        return 0  # unreadable or corrupt gzip: the reader says so
    return 0


def check_abstract_lengths(
    records: Sequence[Record], *, skip_bad: bool = False, limit: int = MAX_ABSTRACT_CHARS
) -> tuple[list[Record], list[str]]:
    """Refuse an abstract longer than ``limit`` characters (or, with ``skip_bad``, skip it and list it)."""
    kept: list[Record] = []
    skipped: list[str] = []
    for record in records:
        if len(record.text) <= limit:
            kept.append(record)
            continue
        reason = (
            f"{record.provenance.label()}: an abstract of {len(record.text):,} characters "
            f"(the limit is {limit:,}; is it a full text?)"
        )
        if not skip_bad:
            raise InputError(f"{reason}; --skip-bad skips it")
        skipped.append(reason)
    return kept, skipped


def check_duplicate_ids(records: Sequence[Record], *, skip_bad: bool = False) -> tuple[list[Record], list[str]]:
    """Refuse an id that two sources give to different abstracts (or, with ``skip_bad``, skip the later ones).

    The same id with the same (normalized) abstract is one paper read twice, which deduplication merges.
    """
    seen: dict[str, tuple[str, Record]] = {}
    kept: list[Record] = []
    skipped: list[str] = []
    for record in records:
        key = record.external_id
        if key is None:
            kept.append(record)
            continue
        digest = text_hash(record.text)
        first = seen.setdefault(key, (digest, record))
        if first[0] == digest:
            kept.append(record)
            continue
        reason = f"id {key!r} was already given to another abstract at {first[1].provenance.label()}"
        if not skip_bad:
            raise InputError(f"{record.provenance.label()}: {reason} (ids must be unique; --skip-bad skips it)")
        skipped.append(f"{record.provenance.label()}: {reason}")
    return kept, skipped
