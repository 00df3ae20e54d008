"""From a file's bytes to its text: read, gunzip (bounded), detect the encoding, normalise line ends.

``.gz`` files (or gzip data under any name) are gunzipped first, streaming, and refused once they expand past
``fileio.decompressed_limit``: a bomb costs one error line, never the memory it expands to. Text is decoded by its
BOM, else as strict UTF-8, else as plausible GB18030; binary data is refused.
"""

from __future__ import annotations

import codecs
import os
import re
import zlib
from pathlib import Path

from semsearch.core.errors import InputError
from semsearch.core.fileio import DECOMPRESSED_ENV, decompressed_limit, inflate_gzip

_BINARY_PROBE_BYTES = 8192
# UTF-32 BOMs come first because the UTF-32-LE BOM starts with the UTF-16-LE one.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8", "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "utf-16-be"),
)
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def read_bytes(path: Path, display: str) -> bytes:
    """A file's bytes, with OS errors turned into one-line input errors."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"no such file or directory: {display}") from None
    except IsADirectoryError:
        raise InputError(f"{display}: is a directory, not a file") from None
    except PermissionError:
        raise InputError(f"{display}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{display}: cannot read ({exc.strerror or exc})") from None


def gunzip(raw: bytes, name: str, display: str) -> tuple[bytes | bytearray, str]:
    """The decompressed bytes and inner file name of a .gz file; other files pass through.

    Decompression streams and stops at ``inflate_limit``: a bomb is one error line, not all memory.
    """
    is_gz_name = name.lower().endswith(".gz")
    # The magic number catches gzip data under another name; text never starts with these bytes.
    if not is_gz_name and not raw.startswith(b"\x1f\x8b"):
        return raw, name
    limit, rule = inflate_limit(len(raw))
    try:
        data = inflate_gzip(raw, limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{display}: corrupt gzip data ({exc or type(exc).__name__})") from None
    if data is None:
        raise InputError(f"{display}: decompresses to more than {_megabytes(limit)} ({rule})")
    return data, name[:-3] if is_gz_name else name


def inflate_limit(compressed_size: int) -> tuple[int, str]:
    """The decompressed size a gzip source may reach, and why (read from the environment at each call)."""
    value = os.environ.get(DECOMPRESSED_ENV)
    try:
        return decompressed_limit(compressed_size, value)
    except ValueError:
        raise InputError(f"{DECOMPRESSED_ENV} must be a positive number of MB, got {value!r}") from None


def _megabytes(size: int) -> str:
    """A byte count in MB for messages: whole when it is, else to one decimal."""
    mb = size / 2**20
    return f"{mb:.0f} MB" if mb == int(mb) else f"{mb:.1f} MB"


def decode(data: bytes | bytearray, display: str) -> tuple[str, str]:
    """Decode text (BOM, then strict UTF-8, then plausible GB18030) with line ends normalised to \\n."""
    text, encoding = _decode_raw(data, display)
    return text.replace("\r\n", "\n").replace("\r", "\n"), encoding


def _decode_raw(data: bytes | bytearray, display: str) -> tuple[str, str]:
    """The decoded text and the name of the encoding that decoded it."""
    undetectable = f"cannot detect the text encoding of {display} (tried utf-8, utf-16, gb18030)"
    for bom, codec, name in _BOMS:
        if data.startswith(bom):
            try:
                return data[len(bom) :].decode(codec), name
            except UnicodeDecodeError:
                raise InputError(undetectable) from None
    # Only checked after the BOMs: UTF-16 text is full of NUL bytes.
    if b"\x00" in data[:_BINARY_PROBE_BYTES]:
        raise InputError(f"{display}: binary file, not text")
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        raise InputError(undetectable) from None
    # GB18030 maps almost any byte string to characters; control characters betray binary data.
    if _CONTROL_CHARS.search(text):
        raise InputError(f"{display}: binary file, not text")
    return text, "gb18030"
