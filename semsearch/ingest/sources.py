"""Read abstracts from seed text, JSONL, JSON, CSV and TSV files, in any common encoding.

Seed text: the first non-empty line is the collection header only when it is a single line of at most
120 characters followed by a blank line (or the end of the file); otherwise the file has no header.
Every other blank-line-separated paragraph is one abstract, its lines joined with single spaces.

Format: ``.jsonl``/``.ndjson``, ``.csv`` and ``.tsv`` are trusted; ``.json`` holding one JSON object per
line is read as JSONL; anything else is sniffed: ``[{`` or a whole-JSON object -> JSON, a first line that
is a one-line object with more lines after it -> JSONL, a first line naming a known field and split by
tabs or commas -> TSV or CSV, else seed text. ``.gz`` files are gunzipped first, streaming, and refused once
they expand past ``fileio.decompressed_limit`` (a bomb costs one error line, never the memory it expands to).

A Zotero library (``zotero.sqlite``, or the Zotero data folder holding it) is read by ``zotero.py``.
"""

from __future__ import annotations

import codecs
import csv
import glob
import hashlib
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

from semsearch.core.errors import InputError
from semsearch.core.fileio import DECOMPRESSED_ENV, decompressed_limit, inflate_gzip
from semsearch.core.records import IngestResult, Provenance, Record, SourceFile
from semsearch.ingest.csv_rows import csv_items
from semsearch.ingest.guards import check_duplicate_ids, check_link, check_source_file

_P = TypeVar("_P", str, Path)  # a walk's paths, as strings or as Paths

TITLE_KEY = "title"
ABSTRACT_KEYS = ("abstract", "text", "summary", "body", "content")
ID_KEYS = ("_id", "id", "paper_id", "doc_id", "corpus_id")
NESTED_METADATA_KEY = "metadata"
_KNOWN_FIELDS = frozenset((TITLE_KEY, *ABSTRACT_KEYS, *ID_KEYS))

EXTENSION_FORMATS = MappingProxyType(
    {
        ".txt": "seed",
        ".md": "seed",
        ".jsonl": "jsonl",
        ".ndjson": "jsonl",
        ".json": "json",
        ".csv": "csv",
        ".tsv": "tsv",
        ".bib": "bibtex",  # semsearch.ingest.bibtex (bibtexparser 2)
    }
)
HEADER_MAX_CHARS = 120
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
_GLOB_CHARS = re.compile(r"[*?\[]")
_JSON_ARRAY_START = re.compile(r"\[\s*[{\]]")

# A structured item is either a parsed object or the reason it cannot be one.
_Item = tuple[Provenance, dict[str, Any] | str]


# ---------------------------------------------------------------------------------------------- sources


def expand_sources(sources: Sequence[str]) -> list[Path]:
    """Turn files, directories and glob patterns into a sorted, de-duplicated list of absolute paths."""
    found: set[Path] = set()
    for source in sources:
        found.update(_expand_one(source))
    # Path order is the order of the paths' parts: comparing them as tuples is that order, without a Python
    # __lt__ per comparison (seconds at 100,000 files).
    return sorted(found, key=lambda p: p.parts)


def expand_source_names(sources: Sequence[str]) -> list[str]:
    """``expand_sources`` as strings, in the same order: what a refresh compares with its record.

    A directory is walked without making a Path per file; the paths are absolute and normalised, so their
    parts are their components between separators and sort as ``expand_sources`` sorts them.
    """
    found: set[str] = set()
    for source in sources:
        path = Path(os.path.expanduser(source))
        if path.is_dir() and not _is_library_folder(path):
            found.update(_require_readable(_directory_names(path), source))
        else:
            found.update(str(p) for p in _expand_one(source))
    return sorted(found, key=lambda p: p.split(os.sep))


def _is_library_folder(path: Path) -> bool:
    from semsearch.ingest.zotero import database_in

    return database_in(path) is not None


def _expand_one(source: str) -> list[Path]:
    """The files one source argument names."""
    path = Path(os.path.expanduser(source))
    from semsearch.ingest.zotero import database_in

    zotero = database_in(path)
    if zotero is not None:
        # A Zotero data folder means its library, not the PDFs and snapshots stored beside it.
        return [zotero.resolve()]
    if path.is_dir():
        return _require_readable(_directory_files(path), source)
    if path.exists():
        # A file named explicitly is read whatever its name; only directory walks filter names.
        return [path.resolve()]
    if not _GLOB_CHARS.search(source):
        raise InputError(f"no such file or directory: {source}")
    files = _glob_files(os.path.expanduser(source))
    if not files:
        raise InputError(f"no such file or directory: {source}")
    return _require_readable(files, source)


def _glob_files(pattern: str) -> list[Path]:
    """Files a glob pattern matches; a matched directory contributes the files a walk of it finds."""
    files: list[Path] = []
    for match in sorted(glob.glob(pattern, recursive=True)):
        path = Path(match)
        if path.is_dir():
            files.extend(_directory_files(path))
        elif path.is_file() and not _is_hidden(path.name):
            files.append(path.resolve())
    return files


def _directory_files(directory: Path) -> list[Path]:
    """Candidate abstract files under a directory, recursively, skipping hidden and backup names."""
    return [Path(name) for name in _directory_names(directory)]


def _directory_names(directory: Path) -> list[str]:
    """``_directory_files`` as strings: a refresh of 100,000 files makes no Path per file (a second a walk)."""
    files: list[str] = []
    # The resolved folder, walked as os.walk walks (depth first, names in order, never into linked folders): every
    # plain file's path is then resolved already, and scandir tells plain files apart without a system call per
    # file (resolving each path cost seconds per refresh of 20,000 files).
    pending = [str(directory.resolve())]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError:
            continue  # an unreadable folder is passed over, as os.walk passes it
        subfolders: list[str] = []
        for entry in entries:
            name = entry.name
            if _is_hidden(name):
                continue  # hidden folders such as .git are not entered
            if _entry_is_dir(entry):
                if not entry.is_symlink():
                    subfolders.append(entry.path)
                continue
            if _format_for_name(name) is None:
                continue
            if entry.is_file(follow_symlinks=False):
                files.append(entry.path)
            elif entry.is_symlink():
                path = Path(entry.path)
                if path.is_file():
                    files.append(str(path.resolve()))
                else:
                    check_link(path, str(path))  # a loop or a dangling link is named, not skipped
        pending.extend(reversed(subfolders))
    return files


def _entry_is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False


def _require_readable(files: list[_P], source: str) -> list[_P]:
    """Fail when none of a directory's or pattern's files can be read; else keep them all."""
    if not any(os.access(path, os.R_OK) for path in files):
        suffixes = ", ".join(EXTENSION_FORMATS)
        raise InputError(f"{source}: no readable abstract files (looked for {suffixes}, optionally .gz)")
    # Unreadable ones stay, so that reading them names them instead of dropping them silently.
    return files


def _is_hidden(name: str) -> bool:
    """Whether a file or directory name is hidden or an editor's backup/lock file."""
    return name.startswith((".", "~")) or name.endswith("~")


def _format_for_name(name: str) -> str | None:
    """The format a file name's extension implies, looking through a trailing .gz."""
    return EXTENSION_FORMATS.get(_suffix(name.lower().removesuffix(".gz")))


def _suffix(name: str) -> str:
    """``PurePath(name).suffix`` without making a path (a folder walk asks it of every file name)."""
    last = name.rstrip("/").rsplit("/", 1)[-1]
    dot = last.rfind(".")
    return last[dot:] if 0 < dot < len(last) - 1 else ""


# ------------------------------------------------------------------------------------------------ files


def read_sources(sources: Sequence[str], *, skip_bad: bool = False) -> IngestResult:
    """Read every abstract from the given files, directories and glob patterns."""
    paths = expand_sources(sources)
    if not paths:
        raise InputError("no input files given")
    result = IngestResult(records=[], files=[], skipped=[])
    here = _working_dir()  # once: resolving it and every (already resolved) path per file cost ~5 s at 100k files
    for path in paths:
        records, source_file, skipped = read_file(path, skip_bad=skip_bad, resolved_in=here)
        result.records.extend(records)
        result.files.append(source_file)
        result.skipped.extend(skipped)
    result.records, clashes = check_duplicate_ids(result.records, skip_bad=skip_bad)
    result.skipped.extend(clashes)
    return result


def read_file(
    path: Path, *, skip_bad: bool = False, resolved_in: Path | None = None
) -> tuple[list[Record], SourceFile, list[str]]:
    """Read one file's abstracts, with a description of the file and the bad records skipped.

    ``resolved_in``: ``path`` is resolved already (``expand_sources`` gives it so) and this is the resolved
    working directory its display name is relative to.
    """
    path = Path(path)
    absolute = path if resolved_in is not None else path.resolve()
    display = _display_name(absolute, resolved_in if resolved_in is not None else _working_dir())
    from semsearch.ingest.zotero import is_sqlite, read_zotero

    if is_sqlite(path):
        return read_zotero(path, display, skip_bad=skip_bad)
    try:
        # Taken before the read: a file changed while being read then looks stale, never fresh.
        mtime_ns = path.stat().st_mtime_ns
    except OSError:
        mtime_ns = 0  # _read_bytes reports the error
    # Not a FIFO, no line of hundreds of MB (streamed, bounded memory; gzip read no further than it may expand).
    check_source_file(path, display, max_inflated=_inflate_limit(_file_size(path))[0])
    raw = _read_bytes(path, display)
    if not raw:
        raise InputError(f"{display}: empty file")
    data, inner_name = _gunzip(raw, path.name, display)
    text, encoding = _decode(data, display)
    if not text.strip():
        raise InputError(f"{display}: empty file")
    fmt = _detect_format(inner_name, text)
    records, skipped = _parse(fmt, text, display, skip_bad)
    if not records:
        detail = f" ({len(skipped)} bad records skipped)" if skipped else ""
        raise InputError(f"{display}: no abstracts found{detail}")
    source_file = SourceFile(
        path=str(absolute),
        sha256=hashlib.sha256(raw).hexdigest(),
        size=len(raw),
        format=fmt,
        encoding=encoding,
        records=len(records),
        mtime_ns=mtime_ns,
    )
    return records, source_file, skipped


def files_named(name: str, paths: Iterable[str]) -> list[str]:
    """The absolute paths among ``paths`` that a provenance file name can mean.

    Provenance names a file as the build saw it (``_display_name``): absolute, or relative to that build's
    working directory, which is not recorded. A relative name therefore means any path ending with it; more
    than one match (``a.jsonl`` and ``sub/a.jsonl`` both end with ``a.jsonl``) is ambiguous.
    """
    return PathLookup(paths).named(name)


class PathLookup:
    """``files_named`` for many names over the same paths: built once, each look-up costs its matches only.

    A relative name's paths all end with its last component, so paths are kept by that component (a refresh of
    20,000 files otherwise compared every provenance name with every path: 400M ``endswith`` calls).
    """

    def __init__(self, paths: Iterable[str]) -> None:
        self._exact: dict[str, list[str]] = {}
        self._by_last: dict[str, list[str]] = {}
        for path in paths:
            self._exact.setdefault(path, []).append(path)
            self._by_last.setdefault(path.rsplit(os.sep, 1)[-1], []).append(path)

    def named(self, name: str) -> list[str]:
        """The paths ``name`` can mean, in the order they were given (duplicates kept, as ``files_named``)."""
        if os.path.isabs(name):
            return list(self._exact.get(name, ()))
        tail = os.sep + os.path.normpath(name)
        return [p for p in self._by_last.get(tail.rsplit(os.sep, 1)[-1], ()) if p.endswith(tail)]


def _display_name(absolute: Path, here: Path | None) -> str:
    """The (resolved) path relative to the (resolved) working directory when it lies under it, else absolute."""
    if here is None:
        return str(absolute)
    try:
        return str(absolute.relative_to(here))
    except ValueError:
        return str(absolute)


def _working_dir() -> Path | None:
    """The resolved working directory, None when it cannot be known (deleted under the process)."""
    try:
        return Path.cwd().resolve()
    except OSError:
        return None


def _file_size(path: Path) -> int:
    """A file's size in bytes, 0 when it cannot be read (the reader then names the problem)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read_bytes(path: Path, display: str) -> bytes:
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


def _gunzip(raw: bytes, name: str, display: str) -> tuple[bytes | bytearray, str]:
    """The decompressed bytes and inner file name of a .gz file; other files pass through.

    Decompression streams and stops at ``_inflate_limit``: a bomb is one error line, not all memory.
    """
    is_gz_name = name.lower().endswith(".gz")
    # The magic number catches gzip data under another name; text never starts with these bytes.
    if not is_gz_name and not raw.startswith(b"\x1f\x8b"):
        return raw, name
    limit, rule = _inflate_limit(len(raw))
    try:
        data = inflate_gzip(raw, limit)
    except (OSError, EOFError, zlib.error) as exc:
        raise InputError(f"{display}: corrupt gzip data ({exc or type(exc).__name__})") from None
    if data is None:
        raise InputError(f"{display}: decompresses to more than {_megabytes(limit)} ({rule})")
    return data, name[:-3] if is_gz_name else name


def _inflate_limit(compressed_size: int) -> tuple[int, str]:
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


def _decode(data: bytes | bytearray, display: str) -> tuple[str, str]:
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


# ------------------------------------------------------------------------------------------ format sniff


def _detect_format(name: str, text: str) -> str:
    """One of "seed", "jsonl", "json", "csv", "tsv", "bibtex", from the file name and its decoded text."""
    fmt = _format_for_name(name)
    if fmt in ("jsonl", "csv", "tsv", "bibtex"):
        return fmt
    if fmt == "json":
        # JSON Lines saved as .json is common; read it for what it is.
        return "jsonl" if _looks_like_jsonl(text) else "json"
    return _sniff_format(text)


def _sniff_format(text: str) -> str:
    """The format of text whose name does not say."""
    head = text.lstrip()
    if _JSON_ARRAY_START.match(head):
        return "json"
    if head.startswith("{"):
        return "jsonl" if _looks_like_jsonl(text) else "json"
    first = _leading_lines(text, 1)[0]
    if "\t" in first and _names_known_field(first.split("\t")):
        return "tsv"
    if "," in first and _names_known_field(next(csv.reader([first]))):
        return "csv"
    return "seed"


def _looks_like_jsonl(text: str) -> bool:
    """Whether the first non-empty line is a one-line JSON object and more lines follow."""
    lines = _leading_lines(text, 2)
    return len(lines) == 2 and lines[0].startswith("{") and lines[0].endswith("}")


def _leading_lines(text: str, count: int) -> list[str]:
    """The first `count` non-empty lines, stripped, without splitting the whole text."""
    lines: list[str] = []
    for line in io.StringIO(text):
        if line.strip():
            lines.append(line.strip())
            if len(lines) == count:
                break
    return lines


def _names_known_field(cells: list[str]) -> bool:
    """Whether a header row names a title, abstract or id field."""
    return any(cell.strip().strip('"').lower() in _KNOWN_FIELDS for cell in cells)


# ------------------------------------------------------------------------------------------------ parse


def _parse(fmt: str, text: str, display: str, skip_bad: bool) -> tuple[list[Record], list[str]]:
    """The records of a decoded file in a known format, and the bad records skipped."""
    if fmt == "seed":
        return _seed_records(text, display), []
    if fmt == "jsonl":
        items = _jsonl_items(text, display)
    elif fmt == "json":
        items = _json_items(text, display)
    elif fmt == "bibtex":
        from semsearch.ingest.bibtex import bibtex_items

        items = bibtex_items(text, display)
    else:
        items = csv_items(text, display, "\t" if fmt == "tsv" else ",")
    return _collect(items, skip_bad)


def _seed_records(text: str, display: str) -> list[Record]:
    """One record per abstract paragraph of a seed text, tagged with its header."""
    paragraphs = _paragraphs(text)
    header = None
    if paragraphs and len(paragraphs[0]) == 1 and len(paragraphs[0][0]) <= HEADER_MAX_CHARS:
        header = paragraphs.pop(0)[0]
    return [
        Record(text=" ".join(lines), provenance=Provenance(display, "paragraph", number), collection=header)
        for number, lines in enumerate(paragraphs, 1)
    ]


def _paragraphs(text: str) -> list[list[str]]:
    """Blank-line-separated paragraphs as lists of stripped lines; whitespace-only lines are blank."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped:
            current.append(stripped)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs


def _jsonl_items(text: str, display: str) -> Iterator[_Item]:
    """One item per non-blank line, numbered by physical line."""
    # Splitting on \n alone: JSON strings cannot hold raw newlines, but may hold U+2028 and friends.
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        provenance = Provenance(display, "line", number)
        try:
            value = _loads(line)
        except (ValueError, RecursionError) as exc:
            yield provenance, f"malformed JSON ({_json_error(exc)})"
            continue
        yield provenance, _as_object(value)


def _json_items(text: str, display: str) -> Iterator[_Item]:
    """One item per element of a JSON array, or of the one list an object holds."""
    try:
        data = _loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{display}: malformed JSON ({_json_error(exc, with_position=True)})") from None
    for number, value in enumerate(_json_record_list(data, display), 1):
        yield Provenance(display, "record", number), _as_object(value)


def _json_record_list(data: Any, display: str) -> list[Any]:
    """The list of records a JSON document holds: itself, its one list of objects, or one record."""
    if isinstance(data, list):
        return data
    if isinstance(data, dict):
        if _lookup(data, ABSTRACT_KEYS, _text_value) is not None:
            return [data]
        lists = [key for key, value in data.items() if isinstance(value, list)]
        with_objects = [key for key in lists if any(isinstance(v, dict) for v in data[key])]
        chosen = with_objects or lists
        if len(chosen) == 1:
            return list(data[chosen[0]])
        if len(chosen) > 1:
            raise InputError(f"{display}: several lists could hold the records ({', '.join(chosen)})")
    raise InputError(f"{display}: expected a JSON array of objects or an object holding one, got {_json_type(data)}")


def _collect(items: Iterator[_Item], skip_bad: bool) -> tuple[list[Record], list[str]]:
    """Records from items; a bad item fails the read, or with skip_bad is listed and passed over."""
    records: list[Record] = []
    skipped: list[str] = []
    for provenance, item in items:
        outcome = _to_record(item, provenance) if isinstance(item, dict) else item
        if isinstance(outcome, Record):
            records.append(outcome)
            continue
        message = f"{provenance.label()}: {outcome}"
        if not skip_bad:
            raise InputError(message)
        skipped.append(message)
    return records, skipped


# ----------------------------------------------------------------------------------------------- fields


def _to_record(obj: dict[str, Any], provenance: Provenance) -> Record | str:
    """A record from one parsed object, or the reason it has none."""
    abstract_key = _lookup(obj, ABSTRACT_KEYS, _text_value)
    title_key = _find_key(obj, TITLE_KEY)
    title = _scalar_text(obj[title_key]) if title_key is not None else None
    if abstract_key is None and title is None:
        present = [key for key in (_find_key(obj, name) for name in ABSTRACT_KEYS) if key is not None]
        if present:
            return f"empty abstract (field {present[0]!r}) and no title"
        return f"no abstract field (looked for {', '.join(ABSTRACT_KEYS)}) and no title"
    id_key = _lookup(obj, ID_KEYS, _scalar_text)
    # A record with a title and no abstract is indexed by its title, and marked so.
    text = _text_value(obj[abstract_key]) if abstract_key is not None else None
    used = {abstract_key, title_key, id_key}
    if abstract_key is None:
        # Empty abstract fields say nothing: they do not become metadata.
        used |= {key for key in (_find_key(obj, name) for name in ABSTRACT_KEYS) if key is not None}
    return Record(
        text=text or title or "",
        provenance=provenance,
        title=title,
        external_id=_scalar_text(obj[id_key]) if id_key is not None else None,
        metadata=_metadata(obj, used),
        title_only=text is None,
    )


def _lookup(obj: dict[str, Any], names: Sequence[str], reader: Callable[[Any], str | None]) -> str | None:
    """The actual key of the first of `names` (any case) whose value `reader` turns into text."""
    for name in names:
        key = _find_key(obj, name)
        if key is not None and reader(obj[key]):
            return key
    return None


def _find_key(obj: dict[str, Any], name: str) -> str | None:
    """The key of `obj` equal to `name` ignoring case and surrounding spaces."""
    if name in obj:
        return name
    for key in obj:
        if key.strip().lower() == name:
            return key
    return None


def _text_value(value: Any) -> str | None:
    """Abstract text: a non-empty string, or a list of sentence strings joined with spaces."""
    if isinstance(value, list) and value and all(isinstance(part, str) for part in value):
        value = " ".join(part.strip() for part in value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _scalar_text(value: Any) -> str | None:
    """A title or id as text: strings stripped, numbers converted, empty or anything else None."""
    if isinstance(value, str):
        return value.strip() or None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _metadata(obj: dict[str, Any], used: set[str | None]) -> dict[str, Any]:
    """Every field not used for text, title or id; a nested metadata object is merged in flat."""
    metadata: dict[str, Any] = {}
    nested: dict[str, Any] = {}
    for key, value in obj.items():
        if key in used:
            continue
        if key.strip().lower() == NESTED_METADATA_KEY and isinstance(value, dict):
            nested = value
        else:
            metadata[key] = value
    # Top-level fields win over nested ones of the same name.
    for key, value in nested.items():
        metadata.setdefault(str(key), value)
    return metadata


# ------------------------------------------------------------------------------------------------- json


def _loads(text: str) -> Any:
    """Parse JSON, reading NaN and Infinity as null so that values stay strictly JSON-compatible."""
    return json.loads(text, parse_constant=lambda _name: None)


def _as_object(value: Any) -> dict[str, Any] | str:
    """The value if it is a JSON object, else why it cannot be a record."""
    if isinstance(value, dict):
        return value
    return f"not a JSON object (got {_json_type(value)})"


def _json_error(exc: Exception, *, with_position: bool = False) -> str:
    """A short description of a JSON parse failure."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}" if with_position else exc.msg
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    return str(exc) or type(exc).__name__


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"
