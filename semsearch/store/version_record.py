"""What an index wrote: the version folders it published and the last number it gave one (``versions.json``).

Pruning deletes only versions named here, so a folder a user keeps in the index folder (``v-draft/``, a copy
of an old version under another name) is never the index's to delete. The number only grows: a version folder
deleted by hand, or one CURRENT was rolled back from, never gives its number to a new version, so arrival
stamps and digest bookmarks (``added_version>N``) keep their order. Written atomically, under the writer lock,
before the folder it names is moved into place.

An index from before this record adopts, at its first publish, the ``v-<seq>-<time>`` folders beside the
version CURRENT names; with CURRENT unsound nothing is adopted (whose they are is unknown).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from semsearch.core.errors import IndexCorruptError
from semsearch.core.fileio import write_text_atomic
from semsearch.store.layout import (
    MANIFEST,
    VERSIONS_RECORD,
    is_version_name,
    pointer_problem,
    read_pointer,
    sequence_of,
    version_folders,
)

RECORD_FORMAT = "semsearch-versions"


@dataclass
class VersionRecord:
    """The versions an index wrote (still on disk when last written) and the highest number it gave one."""

    last: int = 0
    written: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"format": RECORD_FORMAT, "last": self.last, "written": self.written}, indent=1) + "\n"


def read_record(index_dir: Path) -> VersionRecord | None:
    """The record of ``index_dir``, or None when it has none yet; raises IndexCorruptError when unreadable."""
    path = index_dir / VERSIONS_RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _unreadable(path, str(exc)) from None
    written = data.get("written") if isinstance(data, dict) else None
    last = data.get("last") if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or data.get("format") != RECORD_FORMAT
        or not isinstance(last, int)
        or not isinstance(written, list)
        or not all(isinstance(n, str) and is_version_name(n) for n in written)
    ):
        raise _unreadable(path, "not a record of versions")
    return VersionRecord(last, list(written))


def _unreadable(path: Path, why: str) -> IndexCorruptError:
    return IndexCorruptError(
        f"{path} is unreadable ({why}); nothing was changed. It records which versions the index wrote: delete it "
        f"and the next writer adopts the v-<number>-<time> folders beside the live version again",
        hint=None,
    )


def owned_versions(index_dir: Path) -> set[str]:
    """The version folders the index may delete: those its record names (adopted ones for an older index)."""
    record = read_record(index_dir)
    return set(record.written) if record is not None else set(_adoptable(index_dir))


def _adoptable(index_dir: Path) -> list[str]:
    """An index without a record (written by an older release): its ``v-<seq>-<time>`` versions, when CURRENT
    names one of them; otherwise none (a folder with a broken pointer may hold anything)."""
    if pointer_problem(index_dir) is not None or not is_version_name(read_pointer(index_dir)):
        return []
    return [v.name for v in version_folders(index_dir) if (v / MANIFEST).is_file()]


def last_number(index_dir: Path) -> int:
    """The highest version number the index has given: recorded, on disk or in CURRENT, whichever is highest."""
    record = read_record(index_dir)
    on_disk = max((sequence_of(v.name) for v in version_folders(index_dir)), default=0)
    return max(record.last if record is not None else 0, on_disk, sequence_of(read_pointer(index_dir)), 0)


def claim_version(index_dir: Path, name: str) -> None:
    """Record ``name`` as written by the index (before it is moved into place); forgets folders gone since."""
    record = read_record(index_dir)
    known = record.written if record is not None else _adoptable(index_dir)
    written = [n for n in known if n != name and (index_dir / n).is_dir()]
    last = max(last_number(index_dir), sequence_of(name))
    write_text_atomic(index_dir / VERSIONS_RECORD, VersionRecord(last, [*written, name]).to_json())
