"""Tags: named sets of papers kept beside the index (``tags.json``), not inside a version.

A tag remembers each paper by its document id (the content hash of its abstract), with the text hash, label
and external ids it had when tagged. Builds, ``--full`` rebuilds and ``remove`` never touch the file, so tags
survive them. A tagged paper that the live version no longer holds is *dangling*: kept and reported, and
live again as soon as its text returns (same text, same id), or when a paper with one of its external ids
comes back with an edited abstract.

Writers take ``.tags.lock`` (flock, not the build's ``.lock``: tagging never waits for a build), read,
change, and replace the file atomically (temp file, fsync, rename), so a server or a build reading the file
sees the old or the new content, never a part.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semsearch.core.errors import (
    IndexReadOnlyError,
    InputError,
    NotTaggedError,
    QueryError,
    TagError,
    UnknownDocumentError,
)
from semsearch.core.faults import barrier
from semsearch.core.fileio import utc_now, write_text_atomic
from semsearch.core.records import Document

if TYPE_CHECKING:
    from semsearch.query.search import Index

TAGS_FILE = "tags.json"
TAGS_LOCK = ".state.lock"  # tags, saved queries and digest bookmarks
FORMAT_NAME = "semsearch-tags"
FORMAT_VERSION = 1
# Tags that say "not for me" unless ``tag create NAME --positive`` says otherwise; every other tag is an
# interest unless created ``--negative``.
DEFAULT_NEGATIVE = frozenset({"not-for-me"})
POLARITIES = ("positive", "negative")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$")
_DOI = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)?(10\.\d{4,9}/\S+)$", re.IGNORECASE)


@dataclass(slots=True)
class TagEntry:
    """One tagged paper, as it was when tagged."""

    id: str
    label: str
    text_hash: str = ""
    external_ids: list[str] = field(default_factory=list)
    tagged_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TagEntry:
        get = data.get  # positional and one lookup each: 50,000 entries are read per listing of 50,000 tags
        return cls(
            str(data["id"]),
            str(get("label", "")),
            str(get("text_hash", "")),
            [str(e) for e in get("external_ids", ())],
            str(get("tagged_at", "")),
        )

    @classmethod
    def of(cls, doc: Document) -> TagEntry:
        return cls(doc.id, doc.label(), doc.text_hash, list(doc.external_ids), utc_now())


@dataclass
class TagMember:
    """A tag entry resolved against the live version: ``live_id`` is None while the paper is dangling."""

    tag: str
    entry: TagEntry
    live_id: str | None

    @property
    def dangling(self) -> bool:
        return self.live_id is None

    def to_dict(self) -> dict[str, Any]:
        return {"tag": self.tag, **self.entry.to_dict(), "live_id": self.live_id, "dangling": self.dangling}


@contextlib.contextmanager
def locked_state(index_dir: Path) -> Iterator[None]:
    """Hold the lock of the user state kept beside an index (tags, saved queries, digest bookmarks)."""
    if not index_dir.is_dir():
        raise TagError(f"no index at {index_dir}")
    from semsearch.store.layout import index_of_version

    owner = index_of_version(index_dir)
    if owner is not None:  # state written there would vanish with the version when it is cleaned up
        raise TagError(
            f"{index_dir} is one version of the index {owner}: tags, saved queries and bookmarks live beside "
            f"the index, so give {owner}"
        )
    # A read-only folder shows at the lock's open, or (the lock file there already) at the holder's write: one
    # line for every kind of state (tags, saved queries, bookmarks); their reads turn OSError into TagError first.
    with _read_only_explained(index_dir):
        fd = os.open(index_dir / TAGS_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


@contextlib.contextmanager
def _read_only_explained(index_dir: Path) -> Iterator[None]:
    """Turn an OSError that says the folder cannot be written into ``read_only_error``'s one line."""
    try:
        yield
    except OSError as exc:
        error = read_only_error(exc, index_dir)
        if error is None:
            raise
        raise error from exc


def read_only_error(exc: OSError, index_dir: Path) -> IndexReadOnlyError | None:
    """The one-line error for state that cannot be written beside a read-only index, or None for other errors."""
    from semsearch.core.writefail import READ_ONLY_ERRNOS

    if exc.errno not in READ_ONLY_ERRNOS:
        return None
    return IndexReadOnlyError(
        f"cannot write to {index_dir}: {exc.strerror or exc}; the index is read-only here, so tags, saved "
        "queries and bookmarks cannot be changed (queries still work)"
    )


def write_problem(index_dir: Path) -> str | None:
    """Why user state cannot be written beside the index at ``index_dir`` (None: it can), found by opening the
    state lock for writing as every writer does first."""
    try:
        os.close(os.open(index_dir / TAGS_LOCK, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        error = read_only_error(exc, index_dir)
        return str(error) if error else f"cannot write to {index_dir}: {exc.strerror or exc}"
    return None


def check_name(name: str, what: str = "tag") -> str:
    """A tag name: letters, digits, ``_ . -``, up to 64 characters."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise TagError(f"invalid {what} name {name!r}: use letters, digits, '_', '.', '-' (at most 64, no spaces)")
    return name


class TagStore:
    """The tags of one index directory."""

    def __init__(self, index_dir: str | Path) -> None:
        self.index_dir = Path(index_dir)
        self.path = self.index_dir / TAGS_FILE
        self._stated: dict[str, str] = {}  # the polarities read by the edit in progress
        # The last file read, by its identity: readers asking again (tags, then polarities) parse it once.
        self._seen: tuple[tuple[int, int, int], dict[str, list[TagEntry]], dict[str, str]] | None = None

    def read(self) -> dict[str, list[TagEntry]]:
        """Every tag and its entries (an empty dict when nothing was tagged yet)."""
        return self._read_current()[0]

    def polarities(self) -> dict[str, str]:
        """Each known tag's polarity (``positive``: an interest, ``negative``: counter-examples)."""
        tags, stated = self._read_current()
        return {name: _polarity(name, stated) for name in sorted(set(tags) | set(stated))}

    def polarity(self, name: str) -> str:
        return _polarity(name, self._read_current()[1])

    def _read_current(self) -> tuple[dict[str, list[TagEntry]], dict[str, str]]:
        """The file as ``_read_all`` reads it, parsed again only when it was replaced since (for readers only)."""
        try:
            st = self.path.stat()
        except OSError:
            return self._read_all()  # missing (nothing tagged yet) or unreadable: say so as _read_all does
        key = (st.st_ino, st.st_mtime_ns, st.st_size)  # writers replace the file: a new inode
        if self._seen is None or self._seen[0] != key:
            tags, stated = self._read_all()
            self._seen = (key, tags, stated)
        _, tags, stated = self._seen
        return {n: list(es) for n, es in tags.items()}, dict(stated)  # the caller's own dict and lists

    def positive_names(self) -> list[str]:
        return [n for n, p in self.polarities().items() if p == "positive" and n in self.read()]

    def negative_names(self) -> list[str]:
        return [n for n, p in self.polarities().items() if p == "negative" and n in self.read()]

    def create(self, name: str, *, negative: bool) -> bool:
        """Create a tag (or set an existing one's polarity); returns True when the polarity changed."""
        check_name(name)
        want = "negative" if negative else "positive"
        with self._editing() as tags:
            tags.setdefault(name, [])
            stated = self._stated
            before = _polarity(name, stated)
            stated[name] = want
        return before != want

    def _read_all(self) -> tuple[dict[str, list[TagEntry]], dict[str, str]]:
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return {}, {}
        except (OSError, UnicodeDecodeError) as exc:
            raise TagError(f"{self.path} is unreadable ({exc})") from exc
        try:
            data = json.loads(raw)
            if data.get("format") != FORMAT_NAME:
                raise ValueError("not a semsearch tags file")
            if int(data.get("format_version", 0)) > FORMAT_VERSION:
                raise TagError(f"{self.path} was written by a newer semsearch; upgrade semsearch")
            tags = {
                str(name): [TagEntry.from_dict(e) for e in entries] for name, entries in data.get("tags", {}).items()
            }
            # Files from before polarities simply lack the key: every tag then has its default polarity.
            stated = {str(n): str(p) for n, p in data.get("polarity", {}).items() if p in POLARITIES}
            for name in stated:
                tags.setdefault(name, [])  # a created tag with no papers yet
            return tags, stated
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise TagError(f"{self.path} is malformed ({exc}); fix or delete it") from exc

    def names(self) -> list[str]:
        return sorted(self.read())

    def entries(self, name: str) -> list[TagEntry]:
        """The entries of one tag; raises TagError naming the known tags when it does not exist."""
        tags = self.read()
        if name not in tags:
            known = ", ".join(sorted(tags)) or "none yet"
            raise TagError(f"no tag {name!r} in {self.index_dir} (tags: {known})")
        return tags[name]

    def tagged_ids(self, names: Sequence[str] | None = None) -> set[str]:
        """Document ids in the named tags (all tags when None)."""
        tags = self.read()
        chosen = tags if names is None else {n: tags.get(n, []) for n in names}
        return {e.id for entries in chosen.values() for e in entries}

    @contextlib.contextmanager
    def _editing(self) -> Iterator[dict[str, list[TagEntry]]]:
        """Read under the tags lock, let the caller change the dict, then replace the file atomically."""
        with locked_state(self.index_dir):
            tags, self._stated = self._read_all()
            barrier("read")
            yield tags
            barrier("publish")
            stated = {n: p for n, p in sorted(self._stated.items()) if n in tags}
            data: dict[str, Any] = {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,  # "polarity" is an optional key: older readers ignore it
                "tags": {
                    name: [e.to_dict() for e in entries]
                    for name, entries in sorted(tags.items())
                    if entries or name in stated
                },
            }
            if stated:
                data["polarity"] = stated
            write_text_atomic(self.path, json.dumps(data, indent=1, ensure_ascii=False) + "\n")  # see locked_state

    def add(self, name: str, docs: Sequence[Document]) -> int:
        """Tag documents; returns how many were not in the tag already."""
        check_name(name)
        with self._editing() as tags:
            entries = tags.setdefault(name, [])
            have = {e.id for e in entries}
            added = 0
            for doc in docs:
                if doc.id not in have:
                    entries.append(TagEntry.of(doc))
                    have.add(doc.id)
                    added += 1
        return added

    def remove(self, name: str, keys: Sequence[str]) -> int:
        """Untag entries named by id, unambiguous id prefix or external id (dangling ones too).

        Raises TagError (and changes nothing) when a key matches no entry of the tag.
        """
        check_name(name)
        with self._editing() as tags:
            if name not in tags:
                raise TagError(f"no tag {name!r} in {self.index_dir}")
            entries = tags[name]
            drop: set[str] = set()
            for key in keys:
                found = _match_entry(entries, key)
                if found is None:
                    raise TagError(f"{key!r} is not tagged {name!r} (or names several entries)")
                drop.add(found.id)
            tags[name] = [e for e in entries if e.id not in drop]
        return len(drop)

    def edit(self, name: str, docs: Sequence[Document], remove: Sequence[str]) -> tuple[int, int, int]:
        """Add ``docs`` to a tag and untag ``remove`` in one write: (added, removed, papers now).

        All or nothing: a key that names no entry of the tag (or a key also being added) raises and the file
        is left as it was.
        """
        check_name(name)
        adding = {d.id for d in docs}
        with self._editing() as tags:
            entries = tags.get(name, [])
            drop: set[str] = set()
            for key in remove:
                found = _match_entry(entries, key)
                if found is None:
                    raise NotTaggedError(f"{key.strip()!r} is not tagged {name!r} (or names several entries)")
                if found.id in adding:
                    raise QueryError(f"{key.strip()!r} is both added to and removed from {name!r}")
                drop.add(found.id)
            kept = [e for e in entries if e.id not in drop]
            have = {e.id for e in kept}
            fresh = []
            for doc in docs:
                if doc.id not in have:
                    fresh.append(TagEntry.of(doc))
                    have.add(doc.id)
            tags[name] = kept + fresh
        return len(fresh), len(drop), len(tags[name])

    def repoint(self, name: str, moves: dict[str, Document]) -> None:
        """Replace entries (old id -> the live document they now resolve to) after an edited abstract returned."""
        self.repoint_all({name: moves})

    def repoint_all(self, moves: dict[str, dict[str, Document]]) -> None:
        """``repoint`` for several tags in one write (tag -> old id -> live document)."""
        with self._editing() as tags:
            for name, moved in moves.items():
                tags[name] = [TagEntry.of(moved[e.id]) if e.id in moved else e for e in tags.get(name, [])]


def _polarity(name: str, stated: dict[str, str]) -> str:
    return stated.get(name) or ("negative" if name in DEFAULT_NEGATIVE else "positive")


def _match_entry(entries: Sequence[TagEntry], key: str) -> TagEntry | None:
    key = key.strip()
    for e in entries:
        if e.id == key.lower() or key in e.external_ids:
            return e
    if len(key) >= 6:
        prefixed = [e for e in entries if e.id.startswith(key.lower())]
        if len(prefixed) == 1:
            return prefixed[0]
    return None


# ---------------------------------------------------------------- resolving against a live version


def resolve_papers(index: Index, keys: Sequence[str]) -> list[Document]:
    """Documents named by id, id prefix, external id (citation key), or DOI; raises on the first unknown."""
    docs = []
    dois: dict[str, Document] | None = None
    for key in keys:
        key = key.strip()
        if not key:
            continue
        doc = index.store.find(key)
        if doc is None and _DOI.match(key):
            if dois is None:
                dois = _doi_map(index)
            doc = dois.get(_normal_doi(key))
        if doc is None:
            raise UnknownDocumentError(f"no document {key!r} in {index.path} (an id, external id, or DOI)")
        docs.append(doc)
    return docs


def _normal_doi(text: str) -> str:
    match = _DOI.match(text.strip())
    return match.group(1).lower() if match else text.strip().lower()


def _doi_map(index: Index) -> dict[str, Document]:
    out: dict[str, Document] = {}
    for doc in index.store.iter_documents():
        value = doc.metadata.get("doi")
        if isinstance(value, str) and value.strip():
            out.setdefault(_normal_doi(value), doc)
    return out


def read_id_file(path: Path) -> list[str]:
    """Keys from a file: one id, external id, citation key or DOI a line; blank lines and # comments skipped."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    keys = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    keys = [k for k in keys if k]
    if not keys:
        raise InputError(f"{path} names no papers (one id, external id or DOI a line)")
    return keys


def members(index: Index, store: TagStore, name: str, *, repoint: bool = True) -> list[TagMember]:
    """A tag's entries resolved against the index's live version.

    An entry is live when its id is in the version, or when one of its external ids now names a document
    (its abstract was edited); such entries are re-pointed to the live document in the tags file (unless
    ``repoint`` is False: a read-only server).
    """
    return all_members(index, store, [name], repoint=repoint)[name]


def all_members(
    index: Index, store: TagStore, names: Sequence[str] | None = None, *, repoint: bool = True
) -> dict[str, list[TagMember]]:
    """Each named tag's members (every tag, sorted by name, when ``names`` is None), as ``members`` resolves
    them, from one read of the tags file and at most one write: linear in the tags and entries."""
    tags = store.read()
    if names is None:
        names = sorted(tags)
    for name in names:
        if name not in tags:
            known = ", ".join(sorted(tags)) or "none yet"
            raise TagError(f"no tag {name!r} in {store.index_dir} (tags: {known})")
    out: dict[str, list[TagMember]] = {}
    moves: dict[str, dict[str, Document]] = {}
    # One look-up of every paper the tags name: a query per tag made 50,000 one-paper tags take 9 s.
    present = _present(index, sorted({e.id for name in names for e in tags[name]}))
    for name in names:
        out[name], moved = _resolve(index, name, tags[name], present)
        if moved:
            moves[name] = moved
    if moves and repoint:
        with contextlib.suppress(OSError, TagError):  # a read-only place still answers; it just re-resolves
            store.repoint_all(moves)
    return out


def _resolve(
    index: Index, name: str, entries: Sequence[TagEntry], present: set[str]
) -> tuple[list[TagMember], dict[str, Document]]:
    """One tag's members, and the entries whose paper now lives under another id (old id -> document).

    ``present``: the ids among the entries' that the live version holds.
    """
    out = []
    moves: dict[str, Document] = {}
    for entry in entries:
        live = entry.id if entry.id in present else None
        if live is None:
            for ext in entry.external_ids:
                doc = index.store.find(ext)
                if doc is not None:
                    moves[entry.id] = doc
                    live = doc.id
                    break
        out.append(TagMember(name, entry, live))
    return out, moves


def _present(index: Index, ids: Sequence[str]) -> set[str]:
    from semsearch.store.layout import doc_num

    nums = [doc_num(i) for i in ids]
    return {d.id for d in index.store.get_many(nums).values()}
