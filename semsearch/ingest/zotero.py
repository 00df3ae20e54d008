"""Read a Zotero library (``zotero.sqlite``) as abstracts, without ever touching the user's file.

Zotero keeps its library in one SQLite database and may hold it open, in WAL mode with recent changes
still in ``zotero.sqlite-wal``, or in rollback-journal mode in the middle of a write transaction, with
uncommitted pages already in the database file and their committed originals in ``zotero.sqlite-journal``.
Opening that file directly could take a lock Zotero needs, or write to it (recovering the WAL or rolling
back the journal). So the database and its ``-wal`` and ``-journal`` files are copied byte for byte into a
private temporary folder (the ``-shm`` index is never copied: SQLite rebuilds it from the WAL) and the copy
is opened there: SQLite replays the WAL, or rolls the hot journal back, on the copy, which therefore reads
as the last committed state, never a torn one. The copy is taken again if any file changed while it was
being read. A damaged database (``PRAGMA quick_check`` on the tables read, or any SQLite error while
reading) is one error line.

Every regular item that is not in the trash becomes a record: its abstract (or its title alone, marked
title-only), title, creators, date, DOI, URL, tags and the names of the collections it is in. Notes,
attachments, annotations and the items of subscribed feeds are skipped. Metadata keys: ``authors``
(creators, authors first), ``year``, ``date``, ``venue`` (publication, proceedings or book title), ``doi``,
``url``, ``tags``, ``collection`` (a list of collection names, so ``--where collection=Reading`` matches an
item in that collection, as it matches a seed file's header) and ``item_type``. The item's key is its external id,
so ``semsearch related ABCD2345`` works.

An item whose abstract field is empty takes its abstract from its PDF attachment, read as a PDF source is (and
cached by the file's content): a file Zotero stores (``storage:<name>``, in ``storage/<attachment key>/`` beside the
database) or a linked file's absolute path. Its title and authors stay the library's; the record says so
(``abstract_source: "pdf"``, ``pdf``: the file's path). A missing or unreadable attachment leaves the item
title-only, silently: a library holds many. An item with an abstract never has its PDF read.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semsearch.core.errors import InputError
from semsearch.core.records import Provenance, Record, SourceFile
from semsearch.ingest.formats import FileFormat

DATABASE_NAME = "zotero.sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"
SKIPPED_TYPES = ("note", "attachment", "annotation")
VENUE_FIELDS = ("publicationTitle", "proceedingsTitle", "bookTitle", "conferenceName", "university", "publisher")
REQUIRED_TABLES = ("items", "itemData", "itemDataValues", "fields", "itemTypes")
READ_TABLES = (
    *REQUIRED_TABLES,
    *("itemTypesCombined", "fieldsCombined", "deletedItems", "libraries", "itemCreators", "creators"),
    *("creatorTypes", "itemTags", "tags", "collectionItems", "collections", "deletedCollections"),
)
COPY_ATTEMPTS = 5
# Beside the database: the write-ahead log, or the rollback journal of an open write transaction (never -shm).
COMPANIONS = ("-wal", "-journal")
_YEAR = re.compile(r"(?<!\d)(\d{4})(?!\d)")


def database_in(path: Path) -> Path | None:
    """The Zotero database a path names: a Zotero data folder holding zotero.sqlite, else None."""
    candidate = path / DATABASE_NAME
    return candidate if path.is_dir() and candidate.is_file() else None


def is_sqlite(path: Path) -> bool:
    """Whether a file starts with SQLite's header (a Zotero database is read as one).

    Only a regular file is opened: opening a FIFO would wait for a writer (guards.py refuses it afterwards).
    """
    if not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


class Zotero(FileFormat):
    """A Zotero library: its ``zotero.sqlite`` database, or the Zotero data folder holding it."""

    name = "zotero"

    def in_folder(self, folder: Path) -> Path | None:
        """The database in a Zotero data folder (not the PDFs and snapshots stored beside it)."""
        return database_in(folder)

    def sniff_file(self, path: Path) -> bool:
        """Any SQLite database is read as a Zotero library."""
        return is_sqlite(path)

    def read(self, path: Path, display: str, *, skip_bad: bool) -> tuple[list[Record], SourceFile, list[str]]:
        """Every regular, non-deleted item, read from a private copy."""
        return read_zotero(path, display, skip_bad=skip_bad)


@dataclass
class _Item:
    """One Zotero item as the queries assemble it."""

    item_id: int
    key: str
    item_type: str
    fields: dict[str, str] = field(default_factory=dict)
    creators: list[tuple[str, str]] = field(default_factory=list)  # (creator type, name), in order
    tags: list[str] = field(default_factory=list)
    collections: list[str] = field(default_factory=list)
    pdfs: list[tuple[str, str]] = field(default_factory=list)  # its PDF attachments: (key, path as Zotero stores it)


def read_zotero(path: Path, display: str, *, skip_bad: bool = False) -> tuple[list[Record], SourceFile, list[str]]:
    """Records of every regular, non-deleted item of a Zotero database, read from a private copy."""
    with tempfile.TemporaryDirectory(prefix="semsearch-zotero-") as tmp:
        copy, raw, mtime_ns = _private_copy(path, Path(tmp), display)
        items = _read_items(copy, display)
    records: list[Record] = []
    skipped: list[str] = []
    for item in items:
        provenance = Provenance(display, "item", item.item_id)
        record = _to_record(item, provenance)
        if record is not None and record.title_only and item.pdfs:
            record = _with_pdf_abstract(record, item, path.parent)
        if record is not None and item.pdfs:  # where --full-text finds its passages (nothing is opened here)
            record.pdf_files = [str(p) for key, where in item.pdfs if (p := _attachment_path(key, where, path.parent))]
        if record is not None:
            records.append(record)
            continue
        message = f"{provenance.label()}: item {item.key} has no abstract and no title"
        if not skip_bad:
            raise InputError(f"{message} (pass --skip-bad to leave such items out)")
        skipped.append(message)
    if not records:
        detail = f" ({len(skipped)} bad records skipped)" if skipped else ""
        raise InputError(f"{display}: no items with an abstract or a title found in the Zotero library{detail}")
    source = SourceFile(
        path=str(path.resolve()),
        sha256=hashlib.sha256(raw).hexdigest(),
        size=len(raw),
        format="zotero",
        encoding="sqlite",
        records=len(records),
        mtime_ns=mtime_ns,
    )
    return records, source, skipped


def _attachment_file(key: str, where: str, data_folder: Path) -> Path | None:
    """A PDF attachment's file (``storage:<name>`` in its key's folder, or a linked absolute path), if it exists."""
    candidate = _attachment_path(key, where, data_folder)
    return candidate if candidate is not None and candidate.is_file() else None


def _attachment_path(key: str, where: str, data_folder: Path) -> Path | None:
    """Where a PDF attachment's file would be (not looked at): its key's storage folder, or a linked absolute path."""
    if where.startswith("storage:"):
        return data_folder / "storage" / key / where.removeprefix("storage:")
    if Path(where).is_absolute():
        return Path(where)  # a linked file, kept where the user put it
    return None  # relative to a base folder set in Zotero's preferences, which the database does not hold


def _with_pdf_abstract(record: Record, item: _Item, data_folder: Path) -> Record:
    """The record with its abstract read from its first readable PDF attachment (unchanged when none yields one)."""
    from semsearch.ingest.pdf import head_of  # only a library with title-only items pays for the PDF reader

    for key, where in item.pdfs:
        found = _attachment_file(key, where, data_folder)
        if found is None:
            continue
        try:
            head, _, _ = head_of(found)
        except OSError:
            continue
        if isinstance(head, str) or not head.abstract:
            continue
        source = "pdf" if head.abstract_source == "heading" else f"pdf-{head.abstract_source}"
        metadata = {**record.metadata, "abstract_source": source, "pdf": str(found.resolve())}
        return Record(
            text=head.abstract,
            provenance=record.provenance,
            title=record.title,
            external_id=record.external_id,
            metadata=metadata,
            title_only=False,
        )
    return record


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_size, stat.st_mtime_ns


def _private_copy(path: Path, folder: Path, display: str) -> tuple[Path, bytes, int]:
    """Copy the database and its -wal and -journal files into folder; returns (copy, database bytes, mtime).

    The database is read first: pages Zotero overwrites after that have their originals in a journal read
    later, and a commit in between changes the stamps, so the copy is taken again.
    """
    companions = [path.with_name(path.name + suffix) for suffix in COMPANIONS]
    for _ in range(COPY_ATTEMPTS):
        before = [_stamp(path), *(_stamp(c) for c in companions)]
        try:
            raw = path.read_bytes()
            extra = [
                c.read_bytes() if stamp is not None else None for c, stamp in zip(companions, before[1:], strict=True)
            ]
        except FileNotFoundError:
            if not path.exists():
                raise InputError(f"no such file or directory: {display}") from None
            continue  # the -wal or -journal file went away (checkpoint, commit) while being read: again
        except PermissionError:
            raise InputError(f"{display}: permission denied") from None
        except OSError as exc:
            raise InputError(f"{display}: cannot read ({exc.strerror or exc})") from None
        if [_stamp(path), *(_stamp(c) for c in companions)] == before:
            break
    else:
        raise InputError(f"{display}: Zotero kept writing to the database while it was copied; try again")
    copy = folder / DATABASE_NAME
    copy.write_bytes(raw)
    for suffix, data in zip(COMPANIONS, extra, strict=True):
        if data is not None:
            copy.with_name(copy.name + suffix).write_bytes(data)
    # The log's time counts: a running Zotero writes new items there first (freshness.py compares the same).
    # The journal's does not: it holds the committed originals of pages still being changed.
    stamps = [stamp for stamp in before[:2] if stamp is not None]
    return copy, raw, max(stamp[1] for stamp in stamps) if before[0] is not None else 0


def _read_items(copy: Path, display: str) -> list[_Item]:
    """Every regular item not in the trash, with its fields, creators, tags and collections."""
    damaged = (
        f"{display}: the Zotero database is damaged ({{}}); use Zotero's Check Database Integrity "
        "(Settings, Advanced) or restore a backup (zotero.sqlite.bak)"
    )
    try:
        # Read-write, on the private copy only: SQLite may have to roll a hot journal back into it.
        conn = sqlite3.connect(f"{copy.resolve().as_uri()}?mode=rw", uri=True)
    except sqlite3.Error as exc:
        raise InputError(f"{display}: cannot open the Zotero database ({exc})") from None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        missing = [t for t in REQUIRED_TABLES if t not in tables]
        if missing:
            raise InputError(f"{display}: an SQLite database, but not a Zotero library (no table {missing[0]})")
        problem = _damage(conn, tables)
        if problem is not None:
            raise InputError(damaged.format(problem))
        return _query_items(conn, tables)
    except sqlite3.DatabaseError as exc:
        raise InputError(damaged.format(_first_line(exc))) from None
    except sqlite3.Error as exc:
        raise InputError(damaged.format(_first_line(exc) or type(exc).__name__)) from None
    except UnicodeError:
        # A damaged schema can make even SQLite's error message undecodable.
        raise InputError(damaged.format("its schema holds text that is not UTF-8")) from None
    finally:
        conn.close()


def _damage(conn: sqlite3.Connection, tables: set[str]) -> str | None:
    """The first problem ``PRAGMA quick_check`` finds in the tables read (and their indexes), or None."""
    for table in sorted(tables & set(READ_TABLES)):
        row = conn.execute(f'PRAGMA quick_check("{table}")').fetchone()
        if row is None or row[0] != "ok":
            # quick_check reports over several lines ("*** in database main ***\nPage 20: ..."): one line.
            found = " ".join(str(row[0]).replace("*** in database main ***", "").split()) if row else "no answer"
            return f"{table}: {found}"
    return None


def _first_line(exc: BaseException) -> str:
    """An exception's message on one line."""
    return " ".join(str(exc).split())


def _query_items(conn: sqlite3.Connection, tables: set[str]) -> list[_Item]:
    # Zotero 5+ keeps built-in and custom types and fields together in the *Combined tables.
    item_types = "itemTypesCombined" if "itemTypesCombined" in tables else "itemTypes"
    fields = "fieldsCombined" if "fieldsCombined" in tables else "fields"
    marks = ",".join("?" * len(SKIPPED_TYPES))
    deleted = "AND i.itemID NOT IN (SELECT itemID FROM deletedItems)" if "deletedItems" in tables else ""
    if "libraries" in tables and "type" in {r[1] for r in conn.execute("PRAGMA table_info(libraries)")}:
        # Items of subscribed RSS feeds live in feed libraries; they are not the user's papers.
        deleted += " AND i.libraryID NOT IN (SELECT libraryID FROM libraries WHERE type = 'feed')"
    items: dict[int, _Item] = {}
    for item_id, key, type_name in conn.execute(
        f"SELECT i.itemID, i.key, t.typeName FROM items i JOIN {item_types} t ON t.itemTypeID = i.itemTypeID "
        f"WHERE t.typeName NOT IN ({marks}) {deleted} ORDER BY i.itemID",
        SKIPPED_TYPES,
    ):
        items[item_id] = _Item(item_id, str(key), str(type_name))
    for item_id, name, value in conn.execute(
        f"SELECT d.itemID, f.fieldName, v.value FROM itemData d JOIN {fields} f ON f.fieldID = d.fieldID "
        "JOIN itemDataValues v ON v.valueID = d.valueID"
    ):
        if item_id in items and value is not None:
            items[item_id].fields[str(name)] = str(value)
    if {"itemCreators", "creators"} <= tables:
        kind = "ct.creatorType" if "creatorTypes" in tables else "'author'"
        join = "LEFT JOIN creatorTypes ct ON ct.creatorTypeID = ic.creatorTypeID" if "creatorTypes" in tables else ""
        for item_id, creator_type, first, last, mode in conn.execute(
            f"SELECT ic.itemID, {kind}, c.firstName, c.lastName, c.fieldMode FROM itemCreators ic "
            f"JOIN creators c ON c.creatorID = ic.creatorID {join} ORDER BY ic.itemID, ic.orderIndex"
        ):
            name = _creator_name(first, last, mode)
            if item_id in items and name:
                items[item_id].creators.append((str(creator_type or "author"), name))
    if {"itemTags", "tags"} <= tables:
        for item_id, name in conn.execute(
            "SELECT it.itemID, t.name FROM itemTags it JOIN tags t ON t.tagID = it.tagID ORDER BY it.itemID, t.name"
        ):
            if item_id in items:
                items[item_id].tags.append(str(name))
    if {"collectionItems", "collections"} <= tables:
        trashed = (
            "WHERE c.collectionID NOT IN (SELECT collectionID FROM deletedCollections)"
            if "deletedCollections" in tables
            else ""
        )
        for item_id, name in conn.execute(
            "SELECT ci.itemID, c.collectionName FROM collectionItems ci "
            f"JOIN collections c ON c.collectionID = ci.collectionID {trashed} ORDER BY ci.itemID, c.collectionName"
        ):
            if item_id in items:
                items[item_id].collections.append(str(name))
    if "itemAttachments" in tables:
        trashed = "AND a.itemID NOT IN (SELECT itemID FROM deletedItems)" if "deletedItems" in tables else ""
        for parent_id, key, stored in conn.execute(
            "SELECT a.parentItemID, i.key, a.path FROM itemAttachments a JOIN items i ON i.itemID = a.itemID "
            f"WHERE a.contentType = 'application/pdf' AND a.path IS NOT NULL {trashed} ORDER BY a.itemID"
        ):
            if parent_id in items:
                items[parent_id].pdfs.append((str(key), str(stored)))
    return list(items.values())


def _creator_name(first: Any, last: Any, mode: Any) -> str:
    """A creator as people write it: "First Last", or the single name of a one-field creator."""
    first = str(first or "").strip()
    last = str(last or "").strip()
    if mode == 1 or not first:
        return last
    return f"{first} {last}".strip()


def _to_record(item: _Item, provenance: Provenance) -> Record | None:
    """A record of one item (None when it has neither abstract nor title)."""
    abstract = " ".join(item.fields.get("abstractNote", "").split())
    title = " ".join(item.fields.get("title", "").split()) or None
    if not abstract and title is None:
        return None
    metadata: dict[str, Any] = {"item_type": item.item_type}
    authors = [name for kind, name in item.creators if kind == "author"] or [name for _, name in item.creators]
    if authors:
        metadata["authors"] = authors
    date = item.fields.get("date", "").strip()
    if date:
        # Zotero stores "2021-05-00 May 2021": a sortable SQL date, then the date as the user typed it.
        sortable, _, typed = date.partition(" ")
        metadata["date"] = typed.strip() or sortable
        year = _YEAR.search(sortable)
        if year and year.group(1) != "0000":
            metadata["year"] = int(year.group(1))
    venue = next((item.fields[f] for f in VENUE_FIELDS if item.fields.get(f, "").strip()), None)
    if venue:
        metadata["venue"] = venue.strip()
    for name, key in (("DOI", "doi"), ("url", "url")):
        if item.fields.get(name, "").strip():
            metadata[key] = item.fields[name].strip()
    if item.tags:
        metadata["tags"] = item.tags
    if item.collections:
        metadata["collection"] = item.collections
    return Record(
        text=abstract or title or "",
        provenance=provenance,
        title=title,
        external_id=item.key,
        metadata=metadata,
        title_only=not abstract,
    )
