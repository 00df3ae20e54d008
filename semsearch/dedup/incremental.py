"""Incremental dedup: what files arriving in (and leaving) a live version change, decided as a full build would.

A refresh that appends reads only the files that arrived. Their records are deduplicated among themselves, then
against the live version: exact copies by their text hashes, near copies by the LSH band keys every version
keeps of its texts (``near_part.save_near_keys``), each candidate confirmed by the Jaccard similarity of the
texts as a full build confirms it. A record that copies a live document joins it as a late copy: the document
keeps its id, text and vector and gains the copy's source, ids and missing metadata, as a full build with the
live version as its previous one does (``identity.py``). A document whose every source was taken away is
dropped.

Anything this cannot decide as a full build would (a changed file, an arrival read before a live document's
several copies, a document that keeps some sources while losing others, an arrival joining two documents, a
near copy of a merged text that is not stored, an external id a live document has...) raises ``FullBuild``;
the refresh planner then writes the index whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from semsearch.core.records import DedupResult, Document, NearKeys, Provenance, Record
from semsearch.dedup.duplicates import (
    DEFAULT_THRESHOLD,
    deduplicate,
    is_near_duplicate,
    make_document,
    near_similarity,
    normalize_text,
    rep_key,
    text_hash,
)
from semsearch.dedup.near_part import load_near_keys, shared_bands
from semsearch.dedup.paper_ids import PDF_KIND, PaperId, is_pdf, paper_ids
from semsearch.ingest.sources import PathLookup
from semsearch.store.documents import DocumentStore
from semsearch.store.layout import doc_num
from semsearch.store.manifest import Counts
from semsearch.store.passages_part import has_passages
from semsearch.store.versions import PreviousVersion


class FullBuild(Exception):
    """Why a refresh cannot append a segment; raised by the deciding helpers, caught by ``decide``'s caller."""


@dataclass
class Change:
    """The documents a refresh adds, changes and drops, decided against the live version."""

    new: list[Document]  # documents that were not in the live version
    late: list[Document]  # live documents that late copies joined (same id, text and vector)
    dropped: list[Document]  # live documents whose every source left
    dedup: DedupResult  # of the arrived records alone
    joined_groups: int  # exact groups of arrived records whose text a live document already held
    merged: list[Document] = field(default_factory=list)  # live documents an arrival merged into another
    near_keys: NearKeys | None = None  # band keys of the texts the new segment's documents gained

    @property
    def gone(self) -> set[int]:
        """Numbers of the live documents the new version no longer holds."""
        return {doc_num(d.id) for d in (*self.dropped, *self.merged)}


def change_against(
    store: DocumentStore,
    previous: PreviousVersion,
    records: Sequence[Record],
    order: Sequence[str],
    gone: Sequence[str],
    *,
    near: bool,
) -> Change:
    """What arrived ``records`` and the ``gone`` files change in ``previous`` (whose documents ``store`` holds).

    ``order`` lists every file of the new version in a full build's reading order. Raises FullBuild when only a
    full build can say.
    """
    dropped = _dropped(gone, [f.path for f in previous.manifest.sources], store)
    held = store.held_external_ids([r.external_id for r in records if r.external_id is not None])
    if held:
        raise FullBuild(f"an arriving record has the id {held[0]!r} of an indexed document")
    if near:
        _check_paper_ids(records, store)
    dedup = deduplicate(records, near=near)
    owner = store.text_owners([h for d in dedup.documents for h in (d.text_hash, *d.texts)])
    # Every segment's band keys, read once when arrivals have texts to check: merges re-own them too (two live
    # documents only merge through an arrival's near copies, so without keys of its own nothing is re-owned).
    checked = near and dedup.near_keys is not None and len(dedup.near_keys.keys) > 0
    kept = [load_near_keys(seg.folder) for seg in previous.manifest.version_segments(previous.path)] if checked else []
    near_hits = _near_hits(dedup, kept, store) if checked else {}
    dropped_ids = {d.id for d in dropped}
    hits_of: dict[str, set[str]] = {}  # new document id -> the live documents its texts copy
    joined_groups = 0
    for doc in dedup.documents:
        hits = {owner[h] for h in (doc.text_hash, *doc.texts) if h in owner} | near_hits.get(doc.id, set())
        joined_groups += sum(1 for h in (doc.text_hash, *doc.texts) if h in owner)
        if hits & dropped_ids:
            raise FullBuild("an arriving abstract copies a document whose source left")
        if hits:
            hits_of[doc.id] = hits
    if dropped and _near_any([d for d in dedup.documents if d.id not in hits_of], dropped):
        raise FullBuild("an arriving abstract is an edit of one that left (its old id becomes an alias)")
    live = {d.id: d for d in store.get_many([doc_num(i) for h in hits_of.values() for i in h]).values()}
    groups = _groups(hits_of.values())
    winner_of = {i: _representative([live[j] for j in group]).id for group in groups for i in group}
    rank = _Ranks(order)
    new: list[Document] = []
    clashes = previous.ids | set(store.aliases())
    arrivals: dict[str, list[Document]] = {}  # winner id -> the arrived documents that join it
    for doc in dedup.documents:
        if doc.id in hits_of:
            arrivals.setdefault(winner_of[next(iter(hits_of[doc.id]))], []).append(doc)
        elif doc.id in clashes:
            raise FullBuild(f"an arriving abstract's id {doc.id} was an indexed document's")
        else:
            new.append(doc)
    late: list[Document] = []
    merged: list[Document] = []
    # A merge in a full-text index must keep the passages a full build would: only a full build says whose.
    full_text = has_passages(previous.manifest) or any(r.passages for r in records)
    for group in groups:
        winner = live[winner_of[next(iter(group))]]
        others = sorted((live[i] for i in group if i != winner.id), key=lambda d: d.id)
        joining = arrivals[winner.id]
        wanted = {p for d in joining for p in d.sources}
        members = [r for r in records if r.provenance in wanted]
        if full_text and others:
            # The segment carries the winner's live passages; a full build may keep another member's.
            raise FullBuild("indexed documents merge in a full-text index")
        if full_text and any(r.passages for r in members):
            # Which copy's passages a full build keeps is its representative's: the segment carries the live ones.
            raise FullBuild("an arriving copy with its full text joins an indexed document")
        if not others and len(winner.sources) == 1:
            # Its one record is known whole: merge as the full build does, whichever record represents it.
            late.append(_rebuilt(winner, members, rank))
            continue
        _check_representative(winner, [winner, *others], members)
        _merge(winner, others, members, joining, rank)
        late.append(winner)
        merged.extend(others)
    keys = _segment_near_keys(dedup, {d_id: winner_of[next(iter(h))] for d_id, h in hits_of.items()})
    keys = _with_texts_of(keys, merged, winner_of, kept)
    return Change(new, late, dropped, dedup, joined_groups, merged, keys)


def _check_paper_ids(records: Sequence[Record], store: DocumentStore) -> None:
    """FullBuild when an arriving record and a live document may be one paper by DOI or arXiv id (paper_ids.py).

    An arriving PDF is checked against the live documents read from another source whose metadata mentions one of
    its ids; another source's record against the live documents read from a PDF (two PDFs, or two records of other
    sources, never merge by id). Which of them merge is the full build's to say.
    """
    from_pdfs: set[PaperId] = set()
    from_others: set[PaperId] = set()
    for record in records:
        (from_pdfs if is_pdf(record) else from_others).update(paper_ids(record.metadata))
    if from_others and store.rows("SELECT 1 FROM provenance WHERE kind = ? LIMIT 1", (PDF_KIND,)):
        nums = [int(r[0]) for r in store.rows("SELECT DISTINCT num FROM provenance WHERE kind = ?", (PDF_KIND,))]
        _raise_on_shared(store, nums, from_others, from_pdf=True)
    needles = sorted({value for _, value in from_pdfs})
    for start in range(0, len(needles), _NEEDLES):
        chunk = needles[start : start + _NEEDLES]
        where = " OR ".join(["instr(lower(metadata), ?) > 0"] * len(chunk))
        nums = [int(r[0]) for r in store.rows(f"SELECT num FROM documents WHERE {where}", chunk)]
        _raise_on_shared(store, nums, from_pdfs, from_pdf=False)


_NEEDLES = 200  # ids per query: well under SQLite's bound on a statement's parameters


def _raise_on_shared(store: DocumentStore, nums: Sequence[int], ids: set[PaperId], *, from_pdf: bool) -> None:
    """FullBuild when a live document among ``nums`` names one of ``ids`` and was read from a PDF (``from_pdf``), or
    else from another source."""
    for start in range(0, len(nums), 500):
        for doc in store.get_many(nums[start : start + 500]).values():
            read = {p.kind == PDF_KIND for p in doc.sources}
            if from_pdf in read and paper_ids(doc.metadata) & ids:
                raise FullBuild("an arriving paper shows the DOI or arXiv id of an indexed document")


def _groups(hits: Iterable[set[str]]) -> list[set[str]]:
    """Live documents that arrivals join into one: the connected sets of ids that some arrival copies together."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for ids in hits:
        first, *rest = sorted(ids)
        find(first)
        for other in rest:
            parent[find(other)] = find(first)
    out: dict[str, set[str]] = {}
    for x in list(parent):
        out.setdefault(find(x), set()).add(x)
    return list(out.values())


def _representative(docs: Sequence[Document]) -> Document:
    """The live document whose text a full build keeps when arrivals join these (dedup.deduplicate's rep_of).

    All their texts created documents, so the representative key decides: titled, longest, smallest hash.
    """
    return min(docs, key=lambda d: (d.title is None, -len(normalize_text(d.text)), d.text_hash))


class _Ranks:
    """Where a source position comes in a full build's reading order: (file's place, record number)."""

    def __init__(self, order: Sequence[str]) -> None:
        self._place = {path: i for i, path in enumerate(order)}
        self._paths: PathLookup | None = None  # made on first use: most refreshes rank nothing
        self._known: dict[str, int] = {}

    def __call__(self, p: Provenance) -> tuple[int, int]:
        place = self._known.get(p.file)
        if place is None:
            if self._paths is None:
                self._paths = PathLookup(self._place)
            path = _file_of(p.file, self._paths)
            place = self._known[p.file] = self._place[path] if path is not None else -1
        return place, p.number


def _file_of(name: str, paths: PathLookup) -> str | None:
    """The one path a provenance file name means; FullBuild when it could mean several."""
    found = paths.named(name)
    if len(found) > 1:
        raise FullBuild(f"the source name {name!r} could mean {len(found)} files")
    return found[0] if found else None


def _near_hits(dedup: DedupResult, kept: Sequence[NearKeys | None], store: DocumentStore) -> dict[str, set[str]]:
    """New document id -> live documents it is a near copy of (``kept``: each segment's band keys)."""
    if dedup.near_keys is None or not len(dedup.near_keys.keys):
        return {}
    texts_of = {d.id: d for d in dedup.documents}
    candidates: set[tuple[int, int, bool]] = set()
    for old in kept:
        if old is None:
            raise FullBuild("the index predates kept near-duplicate keys (written by this build)")
        candidates.update(shared_bands(dedup.near_keys, old))
    if not candidates:
        return {}
    live_nums = {num for _, num, _ in candidates}
    live = store.get_many(sorted(live_nums))
    out: dict[str, set[str]] = {}
    for row, num, origin in sorted(candidates):
        old_doc = live.get(num)
        if old_doc is None:
            continue  # a text of a document this version no longer holds
        new_doc = texts_of.get(format(int(dedup.near_keys.nums[row]), "016x"))
        if new_doc is None or not origin or not bool(dedup.near_keys.origin[row]):
            # Only a document's own text is stored: a merged copy's cannot be compared here.
            raise FullBuild("an arriving abstract may be a near copy of a merged text")
        if near_similarity(new_doc.text, old_doc.text) >= DEFAULT_THRESHOLD:
            out.setdefault(new_doc.id, set()).add(old_doc.id)
    return out


def _near_any(new: Sequence[Document], dropped: Sequence[Document]) -> bool:
    """Whether any new text is a near copy of a dropped document's text."""
    return any(is_near_duplicate(a.text, b.text) for a in new for b in dropped)


def _dropped(gone: Sequence[str], recorded: Iterable[str], store: DocumentStore) -> list[Document]:
    """Live documents every source of which left; raises FullBuild when some also keep other sources."""
    if not gone:
        return []
    names = store.source_files()
    known = PathLookup({*recorded, *gone})
    leaving = set(gone)
    files = {n for n in names if _file_of(n, known) in leaving}
    if not files:
        return []
    docs = store.get_many(store.nums_read_from(sorted(files)))
    if any(p.file not in files for d in docs.values() for p in d.sources):
        raise FullBuild("a document keeps some of its sources and loses others")
    return list(docs.values())


def _rebuilt(live: Document, records: Sequence[Record], rank: _Ranks) -> Document:
    """A live document read from one record, merged with arriving records exactly as a full build merges them.

    Its record is rebuilt from the document (text, title, id, position, metadata, collection), and dedup's own
    rules elect the representative among the copies of its text: an arriving copy may win (a smaller title or
    id) and lend its title and metadata first. FullBuild when the winner's text would embed differently.
    """
    metadata = {k: v for k, v in live.metadata.items() if k != "collection"}
    own = Record(
        text=live.text,
        provenance=live.sources[0],
        title=live.title,
        external_id=live.external_ids[0] if live.external_ids else None,
        collection=live.metadata.get("collection"),
        metadata=metadata,
        title_only=live.title_only,
    )
    members = sorted([own, *records], key=lambda r: rank(r.provenance))
    hashes = [text_hash(r.text) for r in members]
    lengths = [len(normalize_text(r.text)) for r in members]
    rep = min(
        range(len(members)),
        key=lambda i: (hashes[i] != live.text_hash, *rep_key(members[i], lengths[i], hashes[i])),
    )
    doc = make_document(members, list(range(len(members))), rep, hashes[rep], hashes)
    if doc.id != live.id or doc.embedding_text() != live.embedding_text():
        raise FullBuild("an arriving copy becomes a document's representative and changes the text it embeds")
    doc.aliases, doc.added = list(live.aliases), live.added
    return doc


def _check_representative(winner: Document, live: Sequence[Document], records: Sequence[Record]) -> None:
    """Raise FullBuild when an arriving exact copy of a live text could become its document's representative.

    Copies of a text that created a document rank with it (dedup's rep_of), then by title, id and position:
    an arriving copy that sorts first would lend its title, metadata and raw text. Only a live document read
    from one source tells its representative's id and position for certain.
    """
    for record in records:
        digest = text_hash(record.text)
        for doc in live:
            if digest != doc.text_hash:
                continue
            if (record.title is None) != (doc.title is None):
                raise FullBuild("an arriving copy with or without a title may become a document's representative")
            if doc is not winner or _interchangeable(record, doc):
                continue
            mine = (record.title or "", record.external_id or "", *_position(record.provenance))
            if len(doc.sources) == 1:
                theirs = (doc.title or "", doc.external_ids[0] if doc.external_ids else "", *_position(doc.sources[0]))
                if mine < theirs:
                    raise FullBuild("an arriving copy sorts before its document's representative and replaces it")
            elif mine[0] <= (doc.title or ""):
                raise FullBuild("an arriving copy may sort before its document's representative")


def _interchangeable(record: Record, doc: Document) -> bool:
    """Whether the document comes out the same whichever of the two represents it: same text, title, metadata."""
    meta = _with_collection(record.metadata, record.collection)
    same_meta = all(doc.metadata.get(k, v) == v for k, v in meta.items())
    return record.text == doc.text and record.title == doc.title and same_meta


def _position(p: Provenance) -> tuple[str, str, int]:
    return p.file, p.kind, p.number


def _merge(
    winner: Document, others: Sequence[Document], records: Sequence[Record], joining: Sequence[Document], rank: _Ranks
) -> None:
    """Merge live documents and arrived records into ``winner``, as a full build would merge them.

    The winner's own text stays the representative: a full build puts its title, metadata and collection first,
    then every other member's in reading order. Sources and ids follow that reading order. A live document
    that merged several members stores their ids in order (one each) or as one block, which must then not
    have other members read among its own; a metadata value that differs between members whose order cannot
    be rebuilt raises FullBuild. (A live document's title is taken as its representative's: a build elects a
    titled representative unless an untitled text created the document first.)
    """
    ranked: list[tuple[tuple[int, int], dict[str, Any]]] = []  # every non-representative contribution, by place
    ids: list[tuple[tuple[int, int], list[str]]] = []
    blocks: list[tuple[tuple[int, int], tuple[int, int]]] = []
    for doc in (winner, *others):
        places = sorted(rank(p) for p in doc.sources)
        if len(doc.external_ids) == len(places):
            ids.extend((place, [i]) for place, i in zip(places, doc.external_ids, strict=True))
        else:
            ids.append((places[0], list(doc.external_ids)))
            blocks.append((places[0], places[-1]))
        if doc is not winner:
            ranked.append((places[0], _with_collection(doc.metadata, None)))
    for record in records:
        place = rank(record.provenance)
        ids.extend([(place, [record.external_id])] if record.external_id is not None else [])
        ranked.append((place, _with_collection(record.metadata, record.collection)))
    every = sorted(place for place, _ in ids)
    if any(sum(lo < place < hi for place in every) for lo, hi in blocks):
        raise FullBuild("an arriving copy's id cannot be placed among the ids of a merged document")
    winner.external_ids = list(dict.fromkeys(i for _, group in sorted(ids, key=lambda x: x[0]) for i in group))
    winner.metadata = _merged_metadata(winner, ranked, max(rank(p) for p in winner.sources))
    if winner.title is None:
        titled = [(min(rank(p) for p in d.sources), d.title) for d in others if d.title]
        titled += [(rank(r.provenance), r.title) for r in records if r.title]
        winner.title = min(titled)[1] if titled else None
    winner.sources = sorted(
        dict.fromkeys([*winner.sources, *(p for d in others for p in d.sources), *(r.provenance for r in records)]),
        key=rank,
    )
    held = {h for d in (winner, *others, *joining) for h in (d.text_hash, *d.texts)}
    winner.texts = sorted(held - {winner.text_hash})
    winner.aliases = sorted(set(winner.aliases) | {a for d in others for a in (d.id, *d.aliases)})


def _with_collection(metadata: dict[str, Any], collection: str | None) -> dict[str, Any]:
    return {**metadata, "collection": collection} if collection is not None else dict(metadata)


def _merged_metadata(
    winner: Document, ranked: Sequence[tuple[tuple[int, int], dict[str, Any]]], last: tuple[int, int]
) -> dict[str, Any]:
    """The winner's metadata, then each other member's keys in reading order (a full build's setdefault)."""
    out = dict(winner.metadata)
    alone = len(winner.sources) == 1  # every key the winner holds is its representative's: it comes first
    seen: dict[str, tuple[tuple[int, int], Any]] = {}
    for place, metadata in sorted(ranked, key=lambda x: x[0]):
        for key, value in metadata.items():
            if key in winner.metadata:
                if value != winner.metadata[key] and not alone and place < last:
                    raise FullBuild(f"an arriving copy's {key!r} cannot be placed among a merged document's")
            elif key in seen:
                if seen[key][1] != value:
                    raise FullBuild(f"merged documents give {key!r} different values")
            else:
                seen[key] = (place, value)
                out[key] = value
    return out


def _segment_near_keys(dedup: DedupResult, joins: dict[str, str]) -> NearKeys | None:
    """The arrivals' band keys, each owned by the document its text ends up in (a live one for late copies)."""
    keys = dedup.near_keys
    if keys is None or not joins:
        return keys
    owner = {doc_num(new): doc_num(live) for new, live in joins.items()}
    nums = np.array([owner.get(int(n), int(n)) for n in keys.nums], dtype=np.int64)
    origin = np.array([bool(o) and int(n) not in owner for n, o in zip(keys.nums, keys.origin, strict=True)])
    return NearKeys(keys.keys, nums, origin)


def _with_texts_of(
    keys: NearKeys | None, merged: Sequence[Document], winner_of: dict[str, str], kept: Sequence[NearKeys | None]
) -> NearKeys | None:
    """``keys`` plus the band keys of merged-away documents' texts, now held by the document they joined."""
    if keys is None or not merged:
        return keys
    gone = {doc_num(d.id): doc_num(winner_of[d.id]) for d in merged}
    parts = [keys]
    for old in kept:
        if old is None:
            continue
        rows = np.isin(old.nums, np.fromiter(gone, dtype=np.int64))
        if rows.any():
            nums = np.array([gone[int(n)] for n in old.nums[rows]], dtype=np.int64)
            parts.append(NearKeys(old.keys[rows], nums, np.zeros(int(rows.sum()), dtype=bool)))
    return NearKeys(
        np.concatenate([p.keys for p in parts]),
        np.concatenate([p.nums for p in parts]),
        np.concatenate([p.origin for p in parts]),
    )


def counts_after(before: Counts, change: Change) -> Counts:
    """The new version's counts, as a full build would count the same records."""
    dedup, new, dropped, merged = change.dedup, change.new, change.dropped, change.merged
    read = before.read + dedup.read - sum(len(d.sources) for d in dropped)
    texts = before.read - before.exact_duplicates  # distinct texts (exact groups) before
    texts += dedup.read - dedup.exact_duplicates - change.joined_groups - sum(1 + len(d.texts) for d in dropped)
    documents = before.documents + len(new) - len(dropped) - len(merged)
    title_only = sum(d.title_only for d in new) - sum(d.title_only for d in (*dropped, *merged))
    return Counts(
        read=read,
        documents=documents,
        exact_duplicates=read - texts,
        near_duplicates=texts - documents,
        vectors=documents,
        title_only=before.title_only + title_only,
        # A merged-away document's id becomes an alias of the one it joined, which takes its aliases too.
        aliases=before.aliases - sum(len(d.aliases) for d in dropped) + len(merged),
    )
