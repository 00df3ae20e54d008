"""What the web API accepts, stated in its OpenAPI description so that generated clients and fuzzers know.

These patterns say in JSON Schema what the library checks anyway (a query has a non-space character; a filter
is FIELD OP VALUE with a known operator; an id is not blank); the library's errors stay the authority.
"""

from __future__ import annotations

from typing import Any

from semsearch.reader.arrivals import DATE_PATTERN, VERSION_PATTERN

# (The character classes also leave out what Python counts as space and ECMA regexes do not: \x1c-\x1f, \x85.)
QUERY_SCHEMA: dict[str, Any] = {"minLength": 1, "pattern": r"[^\s\x1c-\x1f\x85]"}
# An id list's items: up to 200 characters, with at least one that is neither space nor the comma separator.
IDS_SCHEMA: dict[str, Any] = {"items": {"type": "string", "maxLength": 200, "pattern": r"[^\s\x1c-\x1f\x85,]"}}
WHERE_SCHEMA: dict[str, Any] = {
    "items": {
        "type": "string",
        "maxLength": 500,
        "pattern": r"^\s*[A-Za-z_][\w.\-]*\s*(>=|<=|!=|=|>|<|~)\s*[^\s\x1c-\x1f\x85=<>!~]",
    }
}
# Paper ids or tag names: not blank, at most 200 characters.
KEYS_SCHEMA: dict[str, Any] = {"items": {"type": "string", "maxLength": 200, "pattern": r"[^\s\x1c-\x1f\x85]"}}
# --since in the API: a version (3, v-000003) or a date; empty means the default ("last" follows a CLI bookmark).
SINCE_SCHEMA: dict[str, Any] = {"pattern": f"^\\s*(|{VERSION_PATTERN}|{DATE_PATTERN})\\s*$"}
