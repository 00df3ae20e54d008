"""What arrived: when each document first entered the index, saved queries, and digest bookmarks.

Every build stamps each document with an ``Arrival`` (``semsearch.write.arrival_stamps``: the sequence number of the
version it first entered, and that build's UTC time), stored in the version's ``docs.sqlite`` (table
``arrivals``) and carried forward by every later build and ``remove``. A document keeps its arrival when

1. its id is in the previous version (same normalized text, same id), or
2. it shares a source position (file, kind, number) with a previous document whose text it near-duplicates
   (an abstract re-wrapped or marked up in place, or a reformatted copy that became the merged document's
   representative), or
3. its nearest previous vector (cosine ≥ ``COPY_COSINE``) belongs to a text it near-duplicates (a reformatted
   copy that arrived in another file).

So a reformatted copy of a known abstract is not news. A document removed and later added again is new again.

Beside the index (not in a version; atomic writes under the state lock of ``semsearch.curate.tags``):
``watches.json`` holds saved queries, ``bookmarks.json`` where each named digest (or ``new --since last``)
stopped.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semsearch.core.errors import QueryError, TagError
from semsearch.core.fileio import utc_now, write_text_atomic
from semsearch.core.safe_text import clean_text
from semsearch.curate.tags import check_name, locked_state

if TYPE_CHECKING:
    from semsearch.query.search import Index

WATCHES_FILE = "watches.json"
BOOKMARKS_FILE = "bookmarks.json"
# `new --since last` keeps its bookmark under a name no digest can take ('@' is not allowed in one), so a digest
# called "new" and `semsearch new` never move each other's place. Before that, both wrote "new".
NEW_BOOKMARK = "@new"
_LEGACY_NEW_BOOKMARK = "new"
VERSION_PATTERN = r"(?:v-)?(\d{1,6})(?:-\d{8}T\d{6})?"
# A date (and time) with its fields in range; the server's OpenAPI description states the same pattern.
DATE_PATTERN = r"\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])(?:[T ](?:[01]\d|2[0-3]):[0-5]\d(?::[0-5]\d)?)?"
_VERSION = re.compile(VERSION_PATTERN)
_DATE = re.compile(DATE_PATTERN)
RRF_K = 60
# A paper is "for" a tag or saved query only when its cosine to the nearest liked paper (or to the query)
# reaches this: all-MiniLM-L6-v2 puts unrelated abstracts at about 0.0-0.2 and same-topic ones at 0.4+.
MIN_COSINE = 0.3


# ---------------------------------------------------------------- --since


def live_seq(index: Index) -> int:
    from semsearch.store.layout import sequence_of

    return max(sequence_of(index.version.name), 0)


def since_where(index: Index, since: str, *, name: str = NEW_BOOKMARK) -> list[str]:
    """``--since`` as --where clauses: VERSION (v-000003-… or 3) → added after it; DATE → added on/after it;
    ``last`` → after the bookmark ``name`` (everything when there is none)."""
    since = since.strip()
    if since == "last":
        marks = read_bookmarks(index.path)
        if name == NEW_BOOKMARK and NEW_BOOKMARK not in marks:
            name = _LEGACY_NEW_BOOKMARK  # a file from before the split
        mark = marks.get(name)
        return [f"added_version>{int(mark['version'])}"] if mark else []
    match = _VERSION.fullmatch(since)
    if match:
        return [f"added_version>{int(match.group(1))}"]
    if _DATE.fullmatch(since):
        # Arrival times are ISO 8601 text, so the bound compares as text (a 30 February is simply 1 March).
        return [f"added>={since.replace(' ', 'T')}"]
    raise QueryError(f"--since {since!r}: give a version (v-000003 or 3), a date (2026-12-01) or 'last'")


# ---------------------------------------------------------------- saved queries and bookmarks


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TagError(f"{path} is unreadable ({exc}); fix or delete it") from exc
    if not isinstance(data, dict):
        raise TagError(f"{path} is malformed; fix or delete it")
    return data


def _write_json(path: Path, data: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")


@dataclass
class Watch:
    """A saved query."""

    name: str
    query: str
    created: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "query": self.query, "created": self.created}


def read_watches(index_dir: Path) -> list[Watch]:
    data = _read_json(Path(index_dir) / WATCHES_FILE)
    return [Watch(str(n), str(w.get("query", "")), str(w.get("created", ""))) for n, w in sorted(data.items())]


def add_watch(index_dir: Path, name: str, query: str) -> Watch:
    check_name(name, "saved query")
    # Saved as one clean line: a CR or an escape in it would reach every terminal that lists it later.
    query = " ".join(clean_text(query, one_line=True).split())
    if not query.strip():
        raise QueryError("the saved query is empty")
    if len(query) > 1000:
        raise QueryError("the saved query is over 1,000 characters")
    from semsearch.curate.watch_reading import check_watch_query  # numpy: not on the way to `--help`

    check_watch_query(query)  # read now as search reads it: a malformed query is refused when saved, not later
    index_dir = Path(index_dir)
    with locked_state(index_dir):
        data = _read_json(index_dir / WATCHES_FILE)
        watch = Watch(name, query.strip(), utc_now())
        data[name] = {"query": watch.query, "created": watch.created}
        _write_json(index_dir / WATCHES_FILE, data)
    return watch


def remove_watch(index_dir: Path, name: str) -> None:
    index_dir = Path(index_dir)
    with locked_state(index_dir):
        data = _read_json(index_dir / WATCHES_FILE)
        if name not in data:
            raise TagError(f"no saved query {name!r} (semsearch watch list shows them)")
        del data[name]
        _write_json(index_dir / WATCHES_FILE, data)


def read_bookmarks(index_dir: Path) -> dict[str, dict[str, Any] | None]:
    return _read_json(Path(index_dir) / BOOKMARKS_FILE)


def set_bookmark(index_dir: Path, name: str, seq: int) -> None:
    """Remember that digest ``name`` (or ``new --since last``: ``NEW_BOOKMARK``) has reported up to version ``seq``."""
    if name != NEW_BOOKMARK:
        check_name(name, "digest")
    index_dir = Path(index_dir)
    with locked_state(index_dir):
        data = read_bookmarks(index_dir)
        # The first write after the split settles what `new --since last` had: the shared "new" entry, or
        # nothing (null), so a digest named "new" moving on later is never read as `new`'s place.
        data.setdefault(NEW_BOOKMARK, data.get(_LEGACY_NEW_BOOKMARK))
        data[name] = {"version": seq, "at": utc_now()}
        _write_json(index_dir / BOOKMARKS_FILE, data)


def new_since(index: Index, since: str | None = None, *, name: str = NEW_BOOKMARK) -> list[str]:
    """The --where clauses of "arrived since": by default the latest arrivals (the last build that added any)."""
    if since is None:
        latest = index.store.latest_arrival()
        seq = latest if latest is not None else live_seq(index)
        return [f"added_version>={int(seq)}"]
    return since_where(index, since, name=name)
