"""Ingest's field rules: how one parsed object (a JSON object, a CSV row, a BibTeX entry) becomes a record.

The abstract is the first of ``ABSTRACT_KEYS`` holding text, the title ``title``, the external id the first of
``ID_KEYS``, all in any case; every other field is metadata (a nested ``metadata`` object merged in flat). An object
with neither abstract nor title is a bad record: ``collect`` fails the read on it, or lists it with ``skip_bad``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from semsearch.core.errors import InputError
from semsearch.core.options import MAX_KEY_CHARS
from semsearch.core.records import Provenance, Record

TITLE_KEY = "title"
ABSTRACT_KEYS = ("abstract", "text", "summary", "body", "content")
ID_KEYS = ("_id", "id", "paper_id", "doc_id", "corpus_id")
NESTED_METADATA_KEY = "metadata"
KNOWN_FIELDS = frozenset((TITLE_KEY, *ABSTRACT_KEYS, *ID_KEYS))

# A structured item is either a parsed object or the reason it cannot be one.
Item = tuple[Provenance, dict[str, Any] | str]


def collect(items: Iterable[Item], skip_bad: bool) -> tuple[list[Record], list[str]]:
    """Records from items; a bad item fails the read, or with skip_bad is listed and passed over."""
    records: list[Record] = []
    skipped: list[str] = []
    for provenance, item in items:
        outcome = to_record(item, provenance) if isinstance(item, dict) else item
        if isinstance(outcome, Record):
            records.append(outcome)
            continue
        message = f"{provenance.label()}: {outcome}"
        if not skip_bad:
            raise InputError(message)
        skipped.append(message)
    return records, skipped


def leading_lines(text: str, count: int) -> list[str]:
    """The first `count` non-empty lines, stripped, without splitting the whole text."""
    lines: list[str] = []
    start = 0
    # str.find, not a line iterator: every file of a folder is sniffed, and most need one line or two.
    while len(lines) < count and start <= len(text):
        end = text.find("\n", start)
        line = (text[start:] if end < 0 else text[start:end]).strip()
        if line:
            lines.append(line)
        if end < 0:
            break
        start = end + 1
    return lines


def header_names_known_field(text: str, delimiter: str) -> bool:
    """Whether the first non-empty line, split by ``delimiter``, names a title, abstract or id field."""
    if delimiter not in text:
        return False  # not in the first line either (most seed files hold no tab)
    first = leading_lines(text, 1)[0]
    if delimiter not in first:
        return False
    cells = first.split("\t") if delimiter == "\t" else next(csv.reader([first]))
    return any(cell.strip().strip('"').lower() in KNOWN_FIELDS for cell in cells)


def to_record(obj: dict[str, Any], provenance: Provenance) -> Record | str:
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
    external_id = _scalar_text(obj[id_key]) if id_key is not None else None
    if external_id is not None and len(external_id) > MAX_KEY_CHARS:  # no lookup would ever take it
        return f"an id of {len(external_id):,} characters (field {id_key!r}; the limit is {MAX_KEY_CHARS:,})"
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
        external_id=external_id,
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


def has_abstract(obj: dict[str, Any]) -> bool:
    """Whether an object holds abstract text under one of ``ABSTRACT_KEYS``."""
    return _lookup(obj, ABSTRACT_KEYS, _text_value) is not None
