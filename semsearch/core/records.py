"""Records that flow between the stages: ingest -> dedup -> embed -> store -> search."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from semsearch.core.latex import latex_to_text
from semsearch.core.paperinfo import paper_fields


@dataclass(frozen=True)
class Provenance:
    """Where one abstract was read: a file and its position in it (1-based)."""

    file: str
    kind: str  # "paragraph" (seed text), "line" (JSONL), "record" (JSON array), "row" (CSV/TSV)
    number: int

    def label(self) -> str:
        """Short human form, e.g. ``seeds/a.txt:paragraph 3``."""
        return f"{self.file}:{self.kind} {self.number}"

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "kind": self.kind, "number": self.number}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Provenance:
        return cls(file=str(data["file"]), kind=str(data["kind"]), number=int(data["number"]))


@dataclass(frozen=True)
class Passage:
    """A few sentences of a paper's full text and the 1-based page they are on (``--full-text``)."""

    page: int
    text: str


@dataclass(frozen=True)
class GivenPaper:
    """A paper given as a file to find papers like it (``related --file``), and what names it in an index."""

    text: str  # what is encoded: its title and abstract
    title: str | None = None
    sha256: str | None = None  # a PDF's content hash (a version's manifest records each source file's)
    ids: tuple[tuple[str, str], ...] = ()  # what its first page shows, as metadata fields: ("doi", …), ("arxiv", …)


@dataclass
class Record:
    """One abstract as read from a source, before deduplication."""

    text: str
    provenance: Provenance
    title: str | None = None
    external_id: str | None = None
    collection: str | None = None  # the seed file's header line, e.g. "NeurIPS 2025 Papers"
    metadata: dict[str, Any] = field(default_factory=dict)
    title_only: bool = False  # no abstract: ``text`` is the title
    passages: list[Passage] = field(default_factory=list)  # its full text in passages (--full-text), else none
    pdf_files: list[str] = field(default_factory=list)  # PDFs its full text may come from (a Zotero item's)


@dataclass(frozen=True)
class SourceFile:
    """A file that ingest read, with what is needed to notice later that it changed."""

    path: str  # as resolved from the user's argument (absolute)
    sha256: str
    size: int
    format: str  # "seed", "jsonl", "json", "csv", "tsv"
    encoding: str
    records: int
    mtime_ns: int = 0  # lets a stale check skip hashing files whose size and mtime are unchanged

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "sha256": self.sha256,
            "size": self.size,
            "format": self.format,
            "encoding": self.encoding,
            "records": self.records,
            "mtime_ns": self.mtime_ns,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SourceFile:
        return cls(
            path=str(data["path"]),
            sha256=str(data["sha256"]),
            size=int(data["size"]),
            format=str(data["format"]),
            encoding=str(data["encoding"]),
            records=int(data["records"]),
            mtime_ns=int(data.get("mtime_ns", 0)),
        )


@dataclass
class IngestResult:
    """Everything read from a set of sources."""

    records: list[Record]
    files: list[SourceFile]
    skipped: list[str] = field(default_factory=list)  # "file:line N: reason" for --skip-bad


@dataclass(frozen=True)
class Arrival:
    """When a document first entered the index: the version's sequence number and the build's UTC time."""

    seq: int
    at: str

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.seq, "at": self.at}


@dataclass
class Document:
    """One unique abstract after deduplication; remembers every place it came from."""

    id: str  # 16 hex digits, derived from the content hash of the canonical text
    text: str
    title: str | None
    sources: list[Provenance]
    external_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    text_hash: str = ""  # sha256 of the normalized text; the embedding-cache key
    title_only: bool = False  # the record had no abstract: ``text`` is its title
    texts: list[str] = field(default_factory=list)  # hashes of the other texts merged into it (not text_hash)
    aliases: list[str] = field(default_factory=list)  # former ids of this document that still resolve to it
    added: Arrival | None = None  # first entered the index (carried forward by every build; see arrivals.py)
    # Its full text in passages (--full-text), as read this build: kept in the index's passages part, not the store.
    passages: list[Passage] = field(default_factory=list, compare=False, repr=False)
    # (title, text, decoded title, decoded text) when decoding changed them: a build reads them twice (encoder, BM25).
    _decoded: tuple[str | None, str, str | None, str] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def embedding_text(self) -> str:
        """The text given to the encoder: title and abstract, as BEIR/MTEB join them (the title alone once).

        LaTeX is decoded (``R\\'{e}nyi`` is read as ``Rényi``); the stored text, which the id comes from, is not.
        """
        return self.embedding_parts()[0]

    def embedding_parts(self) -> tuple[str, str, str]:
        """(embedding text, its title or "" when it has none or is its title, its abstract), LaTeX decoded."""
        title, text = self.readable_title_and_text()
        if title and not self.title_only:
            return f"{title} {text}", title, text
        return text, "", text

    def readable_title_and_text(self) -> tuple[str | None, str]:
        """The title and text with LaTeX decoded (``latex.latex_to_text``); the stored ones are not changed."""
        held = self._decoded
        if held is not None and held[0] is self.title and held[1] is self.text:
            return held[2], held[3]
        title = latex_to_text(self.title) if self.title else self.title
        text = latex_to_text(self.text)
        if title is not self.title or text is not self.text:  # only documents with markup hold a second copy
            self._decoded = (self.title, self.text, title, text)
        return title, text

    def to_dict(self) -> dict[str, Any]:
        """The document as the API and ``--json`` show it."""
        return {
            "id": self.id,
            "title": self.title,
            **paper_fields(self.title, self.metadata),  # display_title, authors, byline, link
            "title_only": self.title_only,
            "label": self.label(),
            "text": self.text,
            "aliases": self.aliases,
            "sources": [s.to_dict() for s in self.sources],
            "external_ids": self.external_ids,
            "metadata": self.metadata,
        }

    def label(self, width: int = 80) -> str:
        """The title, or the abstract's opening words when there is no title."""
        if self.title:
            return self.title
        words = self.text.split()
        out = ""
        for w in words:
            if len(out) + len(w) + 1 > width - 1:
                return out + "…"
            out = f"{out} {w}" if out else w
        return out


@dataclass
class DedupResult:
    """The unique documents and the counts of what was merged."""

    documents: list[Document]
    read: int
    exact_duplicates: int  # records merged because their normalized text was identical
    near_duplicates: int  # records merged because they were near-identical
    near_pairs: list[tuple[str, str, float]] = field(default_factory=list)  # (kept id, merged label, similarity)
    near_keys: NearKeys | None = None  # LSH band keys of every text, when near-duplicates were looked for


@dataclass
class NearKeys:
    """The LSH band keys of the texts an index holds (dedup.py), kept so a refresh checks only its arrivals."""

    keys: Any  # (texts, bands) uint64 numpy array
    nums: Any  # int64 number of the document holding each text
    origin: Any  # bool: the text is its document's own (stored) text, not a merged copy


@dataclass
class Hit:
    """One search result."""

    rank: int
    score: float
    id: str
    title: str | None
    label: str
    text: str
    sources: list[Provenance]
    metadata: dict[str, Any] = field(default_factory=dict)
    external_ids: list[str] = field(default_factory=list)  # ids the sources gave (BEIR _id, paper id, ...)
    mode: str = ""  # "hybrid", "dense" or "lexical": what the score means
    scores: dict[str, float] = field(default_factory=dict)  # the parts: "dense" (cosine), "lexical" (BM25)
    highlights: list[str] = field(default_factory=list)  # the abstract's sentence(s) that best match the query
    matched_terms: list[str] = field(default_factory=list)  # query words found in title or abstract
    title_only: bool = False  # the paper has no abstract; it was found by its title
    relevance_rank: int | None = None  # its rank by relevance alone, when --diverse re-ordered the list
    fusion: dict[str, Any] | None = None  # hybrid only: the dense weight (alpha) its query got, and why
    by: str | None = None  # the author the query named (a name query or author:), as the paper gives the name
    passage: dict[str, Any] | None = None  # a full-text index: its passage nearest the query (page, text, score)

    @classmethod
    def of(cls, rank: int, score: float, doc: Document, mode: str) -> Hit:
        """A document as the hit of a ranking, with its rank, score and what the score means."""
        return cls(
            rank=rank,
            score=score,
            id=doc.id,
            title=doc.title,
            label=doc.label(),
            text=doc.text,
            sources=doc.sources,
            metadata=doc.metadata,
            external_ids=doc.external_ids,
            mode=mode,
            title_only=doc.title_only,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "score": round(float(self.score), 6),
            "mode": self.mode,
            "scores": self.scores,
            "highlights": self.highlights,
            "matched_terms": self.matched_terms,
            "id": self.id,
            "title": self.title,
            "title_only": self.title_only,
            **paper_fields(self.title, self.metadata),  # display_title, authors, byline, link
            "label": self.label,
            "text": self.text,
            "sources": [s.to_dict() for s in self.sources],
            "external_ids": self.external_ids,
            "metadata": self.metadata,
            # Only a --diverse list says so (keeps plain results as they were): the order is not by score.
            **({"order": "diverse", "relevance_rank": self.relevance_rank} if self.relevance_rank is not None else {}),
            **({"fusion": self.fusion} if self.fusion is not None else {}),
            **({"by": self.by} if self.by is not None else {}),  # found as that person's paper
            **({"passage": self.passage} if self.passage is not None else {}),  # a full-text index's
        }
