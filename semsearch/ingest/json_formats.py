"""JSON Lines (one object per line) and JSON (an array of objects, or an object holding one list of them).

NaN and Infinity are read as null, so that values stay strictly JSON-compatible. JSON Lines saved as ``.json``
is common: a ``.json`` file whose first line is a one-line object with more lines after it is read as JSONL.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from semsearch.core.errors import InputError
from semsearch.core.records import Provenance
from semsearch.ingest.fields import Item, has_abstract, leading_lines
from semsearch.ingest.formats import TextFormat

_JSON_START = re.compile(r"\s*(?:\[\s*[{\]]|\{)")  # an array of objects (or empty), or an object
_OBJECT_START = re.compile(r"\s*\{")


class JsonLines(TextFormat):
    """``.jsonl``/``.ndjson`` (and ``.json`` holding one object per line): one item per non-blank line."""

    name = "jsonl"
    extensions = (".jsonl", ".ndjson", ".json")  # .json: only when sniffed so (JSON owns it otherwise)
    sniff_order = 10

    def sniff(self, text: str) -> bool:
        """Whether the first non-empty line is a one-line JSON object and more lines follow."""
        if not _OBJECT_START.match(text):
            return False  # the cheap test first: every file of a folder is sniffed
        lines = leading_lines(text, 2)
        return len(lines) == 2 and lines[0].startswith("{") and lines[0].endswith("}")

    def items(self, text: str, display: str) -> Iterator[Item]:
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


class Json(TextFormat):
    """``.json``: one item per element of a JSON array, or of the one list an object holds."""

    name = "json"
    extensions = (".json",)
    sniff_order = 20

    def sniff(self, text: str) -> bool:
        """Text that opens a JSON array of objects, or an object."""
        return bool(_JSON_START.match(text))

    def items(self, text: str, display: str) -> Iterator[Item]:
        """One item per record the document holds."""
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
        if has_abstract(data):
            return [data]
        lists = [key for key, value in data.items() if isinstance(value, list)]
        with_objects = [key for key in lists if any(isinstance(v, dict) for v in data[key])]
        chosen = with_objects or lists
        if len(chosen) == 1:
            return list(data[chosen[0]])
        if len(chosen) > 1:
            raise InputError(f"{display}: several lists could hold the records ({', '.join(chosen)})")
    raise InputError(f"{display}: expected a JSON array of objects or an object holding one, got {_json_type(data)}")


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
