"""Ids that never move: what a refresh needs to know about the live version's documents.

A document's id is derived from the text that created it (its *origin*: ``doc_id_for(text_hash)``). Texts
that arrive later and merge into it (a re-wrapped, marked-up, edited or longer copy) never replace that
origin, so the id, the stored text and the vector stay as they were and nothing is encoded again. Each
document remembers the hashes of the texts merged into it (``Document.texts``).

The id changes only when the origin has left every source while other texts of the document remain (or
when an arriving text joins two documents into one): the document then takes the id of its new
representative and the old id becomes an *alias* that keeps resolving (``related``, ``documents``, the
API). Aliases are stored in the version's ``docs.sqlite`` and carried forward by every later version.
An origin that was edited in place (so that none of the document's texts remain) is still recognised when
the edited text is a near-duplicate of the old one: the old id becomes an alias of the new document.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from semsearch.core.errors import IndexCorruptError, IndexFormatError, IndexNotFoundError, SemsearchError
from semsearch.core.records import Document
from semsearch.store.documents import DocumentStore, open_documents
from semsearch.store.layout import DOCS, current_version
from semsearch.store.manifest import read_manifest
from semsearch.store.versions import PreviousVersion


@dataclass
class PreviousIdentity:
    """The live version's documents as a refresh sees them: which texts each holds, and its aliases."""

    version: Path
    owner: dict[str, str]  # every text hash a document holds (its origin and merged copies) -> its id
    origins: frozenset[str]  # the text hashes the ids were derived from
    aliases: dict[str, list[str]] = field(default_factory=dict)  # id -> former ids resolving to it

    def vanishing(self, present: set[str]) -> list[tuple[str, str]]:
        """(id, text) of every previous document none of whose texts is among ``present`` hashes.

        These are the documents a refresh would drop; their texts take part in near-duplicate matching
        so that an abstract edited in place still maps to its old id.
        """
        kept = {doc_id for h, doc_id in self.owner.items() if h in present}
        gone = sorted({doc_id for doc_id in self.owner.values()} - kept)
        if not gone:
            return []
        try:
            store = _open(self.version)
            try:
                texts = store.texts_by_id(gone)
            finally:
                store.close()
        except SemsearchError:
            return []  # a damaged previous version only costs the in-place-edit matching
        return [(doc_id, texts[doc_id]) for doc_id in gone if doc_id in texts]

    def assign_aliases(self, documents: Sequence[Document], touched: Sequence[set[str]]) -> None:
        """Give each document the former ids it now stands for.

        ``touched[i]`` are the previous ids whose texts (or, for vanished ones, near copies) ended up in
        ``documents[i]``. A previous id that is still a live id is no alias; one claimed by several
        documents goes to the first; an alias never shadows a live id.
        """
        live = {d.id for d in documents}
        taken: set[str] = set()
        for doc, ids in zip(documents, touched, strict=True):
            found: list[str] = []
            for old in sorted(ids):
                for alias in [old, *self.aliases.get(old, [])]:
                    if alias not in live and alias not in taken:
                        taken.add(alias)
                        found.append(alias)
            doc.aliases = sorted(found)


def load_previous_identity(index_dir: Path) -> PreviousIdentity | None:
    """The identity facts of the live version of an index; None when there is none or it cannot be read."""
    try:
        version = current_version(index_dir)
    except (IndexNotFoundError, IndexCorruptError, IndexFormatError):
        return None
    return read_identity(version)


def read_identity(version: Path) -> PreviousIdentity | None:
    """The identity facts of one version (None when its document store cannot be read)."""
    if not (version / DOCS).is_file():
        return None
    try:
        store = _open(version)
        try:
            return identity_of(store, version)
        finally:
            store.close()
    except SemsearchError:
        return None


def identity_of(store: DocumentStore, version: Path) -> PreviousIdentity:
    """The identity facts of a version from its open document store."""
    own, merged, alias_rows = store.identity_rows()
    owner = {text_hash: doc_id for doc_id, text_hash in own}
    for text_hash, doc_id in merged:
        owner.setdefault(text_hash, doc_id)
    aliases: dict[str, list[str]] = {}
    for alias, doc_id in alias_rows:
        aliases.setdefault(doc_id, []).append(alias)
    origins = frozenset(text_hash for _, text_hash in own)
    return PreviousIdentity(version=version, owner=owner, origins=origins, aliases=aliases)


def previous_identity(previous: PreviousVersion | None) -> PreviousIdentity | None:
    """The identity facts of the live version a writer opened (its store left open), None when it cannot say."""
    if previous is None or previous.store is None:
        return None
    try:
        return identity_of(previous.store, previous.path)
    except SemsearchError:
        return None


def _open(version: Path) -> DocumentStore:
    """The store of a version's live documents, over its segments."""
    return open_documents(version, read_manifest(version))
