"""Catalogue join: give documents the title, authors, venue, links and ids of the catalogue record they match.

A catalogue is a file of paper records in any format the index reads (the ML Anthology dumps, a BEIR
corpus, a ``.bib`` file, ...). Its records never become documents. A document takes the metadata of the
catalogue record whose abstract is the same text as its own: first exactly (after ``normalize_text``:
Unicode NFKC and whitespace), else as a near-duplicate by the very rule deduplication merges with (MinHash
LSH over word 3-shingles of ``canonical_for_near``, verified Jaccard >= ``DEFAULT_THRESHOLD``). An exact
match beats a near one and a higher Jaccard beats a lower one; two records that match a document equally
well are a tie: the first in catalogue order wins and the tie is reported.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from semsearch.core.errors import InputError
from semsearch.core.records import Document, Record, SourceFile
from semsearch.core.wording import count
from semsearch.dedup.duplicates import DEFAULT_THRESHOLD, near_duplicate_pairs, normalize_text
from semsearch.ingest.sources import read_sources

# Catalogue metadata a matched document takes over (besides title and id); keys compared ignoring case.
# Any other key that ends in "_url" (pdf_url, openreview_url, venue_url, ...) is taken too.
CARRIED_KEYS = frozenset(
    ("authors", "author", "year", "venue", "venue_type", "journal", "booktitle", "doi", "url", "eprint")
    + ("archiveprefix",)
)
MATCH_KEY = "catalogue"  # metadata key recording which record matched and how


@dataclass(frozen=True)
class CatalogueMatch:
    """How one document matched: the record's place in its file, exact or near, and the Jaccard."""

    record: str  # the record's provenance label, e.g. "neurips2025.jsonl.gz:line 12"
    kind: str  # "exact" or "near"
    similarity: float  # 1.0 for exact matches

    def to_dict(self) -> dict[str, Any]:
        return {"record": self.record, "match": self.kind, "similarity": round(self.similarity, 4)}


@dataclass
class CatalogueReport:
    """What a catalogue join did; part of the build summary."""

    files: list[SourceFile]
    records: int  # catalogue records with an abstract (the ones that can match)
    documents: int  # documents the join looked at
    exact: int
    near: int
    ties: list[str] = field(default_factory=list)  # "DOCID: A and B match equally (exact)"
    uncatalogued: list[tuple[str, str]] = field(default_factory=list)  # (id, label) of documents none matched
    skipped: list[str] = field(default_factory=list)  # catalogue records that could not be read
    seconds: float = 0.0

    @property
    def catalogued(self) -> int:
        return self.exact + self.near

    def to_dict(self, *, with_uncatalogued: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "catalogued": self.catalogued,
            "of": self.documents,
            "exact": self.exact,
            "near": self.near,
            "ties": self.ties,
            "records": self.records,
            "files": [f.path for f in self.files],
            "skipped": len(self.skipped),
            "seconds": round(self.seconds, 3),
        }
        if with_uncatalogued:
            out["uncatalogued"] = [{"id": i, "label": label} for i, label in self.uncatalogued]
        return out


def summary_line(report: dict[str, Any]) -> str:
    """``catalogued: 91 of 91 (12 exact, 79 near; 0 ties) from 5823 records in 1 file`` from to_dict()."""
    files = len(report["files"])
    return (
        f"catalogued: {report['catalogued']} of {report['of']} ({report['exact']} exact, {report['near']} near; "
        f"{count(len(report['ties']), 'tie')}) from {count(report['records'], 'record')} in {count(files, 'file')}"
    )


def read_catalogue(paths: Sequence[str]) -> tuple[list[Record], list[SourceFile], list[str]]:
    """The records of the catalogue files that carry an abstract, the files, and the records skipped.

    Records a catalogue cannot use (no abstract, malformed) are skipped rather than failing the build:
    a catalogue is consulted, not indexed.
    """
    if not paths:
        return [], [], []
    ingested = read_sources(paths, skip_bad=True)
    usable = [r for r in ingested.records if _has_abstract(r)]
    if not usable:
        raise InputError(f"catalogue {', '.join(paths)}: no record with an abstract to match documents by")
    return usable, ingested.files, ingested.skipped


def _has_abstract(record: Record) -> bool:
    """Whether a record has abstract text of its own (title-only records are indexed by their title)."""
    text = normalize_text(record.text)
    return bool(text) and text != normalize_text(record.title or "")


def join_catalogue(
    documents: Sequence[Document],
    catalogue: Sequence[Record],
    *,
    near: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
) -> tuple[dict[int, tuple[int, CatalogueMatch]], list[str]]:
    """Best catalogue record per document: {document index: (record index, match)}, and the ties."""
    by_hash: dict[str, list[int]] = {}
    for j, rec in enumerate(catalogue):
        by_hash.setdefault(_hash(rec.text), []).append(j)
    best: dict[int, tuple[int, CatalogueMatch]] = {}
    ties: list[str] = []
    unmatched: list[int] = []
    for i, doc in enumerate(documents):
        found = by_hash.get(doc.text_hash or _hash(doc.text))
        if not found:
            unmatched.append(i)
            continue
        best[i] = (found[0], CatalogueMatch(catalogue[found[0]].provenance.label(), "exact", 1.0))
        if len(found) > 1:
            ties.append(_tie(doc, [catalogue[j] for j in found], "exact"))
    if near and unmatched:
        # A record equal to one document cannot be a near-duplicate of another: deduplication would have
        # merged the two documents. Leaving those records out spares most of the MinHash work when the
        # catalogue largely is the sources.
        exact_used = {j for i in best for j in by_hash[documents[i].text_hash or _hash(documents[i].text)]}
        rest = [j for j in range(len(catalogue)) if j not in exact_used]
        candidates = _near_candidates([documents[i] for i in unmatched], [catalogue[j] for j in rest], threshold)
        for local, options in candidates.items():
            i = unmatched[local]
            top = max(sim for _, sim in options)
            winners = sorted(rest[j] for j, sim in options if sim == top)
            best[i] = (winners[0], CatalogueMatch(catalogue[winners[0]].provenance.label(), "near", top))
            if len(winners) > 1:
                ties.append(_tie(documents[i], [catalogue[j] for j in winners], f"near, {top:.3f}"))
    return best, ties


def _hash(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def _near_candidates(
    documents: Sequence[Document], catalogue: Sequence[Record], threshold: float
) -> dict[int, list[tuple[int, float]]]:
    """{document index: [(record index, Jaccard), ...]} for verified near-duplicate pairs across the two."""
    n = len(documents)
    out: dict[int, list[tuple[int, float]]] = {}
    texts = [d.text for d in documents] + [r.text for r in catalogue]
    for i, j, sim in near_duplicate_pairs(texts, threshold=threshold):
        # Pairs within either side are of no interest; i < j, so a cross pair has i on the document side.
        if i < n <= j:
            out.setdefault(i, []).append((j - n, sim))
    return out


def _tie(doc: Document, records: Sequence[Record], how: str) -> str:
    labels = " and ".join(r.provenance.label() + (f" ({r.external_id})" if r.external_id else "") for r in records)
    return f"{doc.id}: {labels} match equally ({how}); the first is used"


def apply_catalogue(
    documents: Sequence[Document],
    paths: Sequence[str],
    *,
    near: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
) -> CatalogueReport:
    """Read the catalogue files and give each matching document its record's metadata (in place)."""
    import time

    started = time.perf_counter()
    records, files, skipped = read_catalogue(paths)
    matches, ties = join_catalogue(documents, records, near=near, threshold=threshold)
    for i, (j, match) in matches.items():
        take_metadata(documents[i], records[j], match)
    return CatalogueReport(
        files=files,
        records=len(records),
        documents=len(documents),
        exact=sum(1 for _, m in matches.values() if m.kind == "exact"),
        near=sum(1 for _, m in matches.values() if m.kind == "near"),
        ties=ties,
        uncatalogued=[(d.id, d.label()) for i, d in enumerate(documents) if i not in matches],
        skipped=skipped,
        seconds=time.perf_counter() - started,
    )


def take_metadata(doc: Document, record: Record, match: CatalogueMatch) -> None:
    """Give a document the catalogue record's title, bibliographic fields and id (the text is kept)."""
    if record.title:
        doc.title = record.title
    for key, value in record.metadata.items():
        lower = key.strip().lower()
        if (lower in CARRIED_KEYS or lower.endswith("_url")) and _present(value):
            doc.metadata[key] = value
    doc.metadata[MATCH_KEY] = match.to_dict()
    if record.external_id and record.external_id not in doc.external_ids:
        doc.external_ids.append(record.external_id)


def _present(value: Any) -> bool:
    """Whether a metadata value says something (empty strings and lists, as in ``"doi": ""``, do not)."""
    if value is None:
        return False
    if isinstance(value, (str, list, dict)):
        return bool(value.strip() if isinstance(value, str) else value)
    return True
