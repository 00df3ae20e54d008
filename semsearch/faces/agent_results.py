"""What an agent gets back: short paper cards, pages bounded by a character budget, one full paper on request.

Agents pay for every token, so a list carries per paper only what lets an agent choose (id, title, authors,
year, score, best sentence, link) and a page stops before it would pass a character budget; the full abstract
comes only from ``paper()``. Everything here is plain data (dataclasses that become JSON) built from ``Index``
calls, so the MCP face (``mcp_server.py``) is one line per tool and this module is testable without MCP.

Abstract text is data: it goes into fields of these records, never into a description or a prompt.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from semsearch.app import operations as ops
from semsearch.app.application import Application, Arrived, Exported, Found, Got, Recommended
from semsearch.app.application import check_page as check_page
from semsearch.app.operations import MAX_QUERY_CHARS
from semsearch.core import paperinfo
from semsearch.core.errors import QueryError, UnknownDocumentError
from semsearch.core.limits import check_length
from semsearch.core.options import MAX_K, MODES
from semsearch.core.records import Document, Hit
from semsearch.query.search import Index

DEFAULT_BUDGET = 8000  # characters of JSON per tool result: about 2,000 tokens
MIN_BUDGET = 1000  # below this not even one card with its sentence fits
DEFAULT_K = 10
MAX_SENTENCE_CHARS = 300  # a "sentence" can be a whole run-on abstract
MAX_AUTHORS = 8  # then "+N more": a consortium paper can list hundreds


def compact_json(data: Any) -> str:
    """The JSON an agent reads: no indentation, non-ASCII kept (what the budget counts)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def check_budget(budget: int) -> int:
    """A valid character budget, or a one-line QueryError."""
    if not isinstance(budget, int) or isinstance(budget, bool) or budget < MIN_BUDGET:
        raise QueryError(f"the character budget must be an integer of at least {MIN_BUDGET}, got {budget!r}")
    return budget


@dataclass
class PaperCard:
    """One paper in a result list: enough to choose it, not its abstract."""

    id: str
    title: str  # the title, or the abstract's opening words when the source gave none
    authors: list[str] | None = None
    year: int | None = None
    score: float | None = None
    best_sentence: str | None = None  # the abstract's sentence that best matches the query (or the paper)
    link: str | None = None
    why: str | None = None  # recommend / whats_new: the liked paper, tag or saved query; search: "by <name>"
    passage: dict[str, Any] | None = None  # search of a full-text index: {"page", "text"} of the passage that matched

    @classmethod
    def of(cls, doc: Document | Hit, *, score: float | None = None, sentence: str | None = None) -> PaperCard:
        return cls(
            id=doc.id,
            title=paperinfo.plain_text(doc.title or (doc.label if isinstance(doc, Hit) else doc.label())),
            authors=authors_of(doc.metadata),
            year=year_of(doc.metadata),
            score=None if score is None else round(float(score), 4),
            best_sentence=_clip(paperinfo.plain_text(sentence), MAX_SENTENCE_CHARS) if sentence else None,
            link=link_of(doc.metadata),
        )


@dataclass
class Page:
    """One page of a ranked list: cards in rank order, and where the next page starts (None: no more)."""

    items: list[PaperCard]
    offset: int  # rank of the first item, counted from 0
    next_offset: int | None
    cut_by_budget: bool  # fewer than k items because the next one would pass the character budget
    version: str  # the index version that answered (pages of one list should share it)
    order: str = "relevance"  # "diverse": re-ranked for diversity (search with diverse), so not in score order
    searched_for: str | None = None  # search only: the words BM25 searched, when typos were corrected


@dataclass
class Paper:
    """One paper in full: the abstract (clipped only if it alone passes the budget), metadata and sources."""

    id: str
    title: str
    text: str
    text_truncated: bool
    authors: list[str] | None
    year: int | None
    link: str | None
    metadata: dict[str, Any]
    sources: list[str]
    external_ids: list[str]
    version: str


@dataclass
class Citations:
    """Papers as citation text (BibTeX, RIS, CSL-JSON or CSV), as many whole entries as the budget holds."""

    format: str
    text: str
    ids: list[str]  # the papers in ``text``, in the order asked
    rest: list[str]  # ids asked for that did not fit the budget: ask again with these


@dataclass
class IndexSummary:
    """What an agent needs to know about the index before searching it."""

    version: str
    documents: int
    model: str
    mode_default: str
    modes: list[str]
    max_k: int
    built_at: str
    reading: str = ""  # how the dense side read each abstract (truncated, sentences, ...); "" unknown
    windows: int = 0  # window or sentence vectors kept beside the documents' own (Index.info().windows)
    fusion: str = ""  # how hybrid weighs its two sides, in words (Index.info().fusion)
    sources: list[str] = field(default_factory=list)  # source files (at most 20)
    sources_total: int = 0
    budget_chars: int = DEFAULT_BUDGET


def citations(index: Index, ids: Sequence[str], fmt: str, *, budget: int = DEFAULT_BUDGET) -> Citations:
    """The papers named by ids (document ids, former ids, external ids or prefixes) as citations in ``fmt``."""
    request = ops.Export(ids=tuple(ids), format=fmt)  # type: ignore[arg-type]
    return citations_of(Application.over(index).export(request), budget=budget)


def citations_of(done: Exported, *, budget: int = DEFAULT_BUDGET) -> Citations:
    """An export's citations within the budget.

    Entries are never cut: when all of them would pass the budget, the first ones that fit are given and the
    rest are named for another call (always at least one, so every call makes progress).
    """
    from semsearch.curate.export import export

    docs = done.documents
    count = len(docs)
    text = done.text
    if count > 1 and len(text) > budget:
        count = max(1, min(count - 1, count * budget // len(text)))  # entries are about the same size
        text = export(docs[:count], done.format)
    while count > 1 and len(text) > budget:
        count -= 1
        text = export(docs[:count], done.format)
    return Citations(done.format, text, [d.id for d in docs[:count]], [d.id for d in docs[count:]])


# Every record a tool can return (a new kind joins here).
Record = PaperCard | Page | Paper | IndexSummary | Citations


def to_dict(record: Record) -> dict[str, Any]:
    """The record as JSON-ready data; a card leaves out what it lacks (no "authors": null on every line)."""
    data = asdict(record)
    if isinstance(record, PaperCard):
        return _present(data)
    if isinstance(record, Page):
        data["items"] = [_present(item) for item in data["items"]]
    return data


def _present(card: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in card.items() if value is not None}


def authors_of(metadata: dict[str, Any]) -> list[str] | None:
    """Authors as paperinfo reads them (lists, BibTeX strings, CSL names), at most MAX_AUTHORS."""
    names = [paperinfo.plain_text(a) for a in paperinfo.authors_of(metadata)]
    if len(names) > MAX_AUTHORS:
        names = names[:MAX_AUTHORS] + [f"+{len(names) - MAX_AUTHORS} more"]
    return names or None


def year_of(metadata: dict[str, Any]) -> int | None:
    """The publication year as a number (paperinfo finds it in ``year`` or a date)."""
    year = paperinfo.year_of(metadata)
    return int(year) if year else None


link_of = paperinfo.link_of


def document(index: Index, doc_id: str) -> Document:
    """A paper by id (or external id, or unambiguous prefix); the error names the tools that give ids."""
    with agent_ids(doc_id):
        return index.get(doc_id)


@contextlib.contextmanager
def agent_ids(doc_id: str) -> Iterator[None]:
    """An unknown paper id, said as an agent reads it: where ids come from."""
    try:
        yield
    except UnknownDocumentError:
        raise UnknownDocumentError(
            f"no paper {doc_id!r} in the index (ids come from search or related results)"
        ) from None


def _clauses(where: Sequence[str] | str) -> list[str]:
    """--where clauses: a list, or one string (a single clause)."""
    return [where] if isinstance(where, str) else list(where)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def paginate(cards: Sequence[PaperCard], *, offset: int, k: int, more: bool, budget: int, version: str) -> Page:
    """The page of ``cards`` (already ranks offset.. of the list) that fits the budget.

    At least one card is always returned (its sentence shortened if the card alone is over budget), so an agent
    paging with ``next_offset`` always advances.
    """
    budget = check_budget(budget)
    empty = Page(items=[], offset=offset, next_offset=None, cut_by_budget=False, version=version)
    used = len(compact_json(to_dict(empty))) + 10  # the envelope, and room for a larger next_offset
    items: list[PaperCard] = []
    for card in cards[:k]:
        size = len(compact_json(to_dict(card))) + 1
        if used + size > budget:
            if items:
                break
            card = _shrink(card, budget - used)
            size = len(compact_json(to_dict(card))) + 1
        items.append(card)
        used += size
    cut = len(items) < min(k, len(cards))
    has_more = cut or more
    return Page(
        items=items,
        offset=offset,
        next_offset=offset + len(items) if has_more and offset + len(items) < MAX_K else None,
        cut_by_budget=cut,
        version=version,
    )


def _shrink(card: PaperCard, room: int) -> PaperCard:
    """A card made to fit ``room`` characters: the passage, then the sentence, the authors, the title."""
    trimmed = PaperCard(**asdict(card))
    for step in ("passage", "sentence", "authors", "title"):
        over = len(compact_json(to_dict(trimmed))) + 1 - room
        if over <= 0:
            break
        if step == "passage" and trimmed.passage:
            keep = len(trimmed.passage["text"]) - over - 1
            trimmed.passage = {**trimmed.passage, "text": _clip(trimmed.passage["text"], keep)} if keep > 20 else None
        elif step == "sentence" and trimmed.best_sentence:
            keep = len(trimmed.best_sentence) - over - 1
            trimmed.best_sentence = _clip(trimmed.best_sentence, keep) if keep > 20 else None
        elif step == "authors" and trimmed.authors:
            trimmed.authors = None
        elif step == "title":
            trimmed.title = _clip(trimmed.title, max(len(trimmed.title) - over - 1, 20))
    return trimmed


def search_page(
    index: Index,
    query: str,
    *,
    k: int = DEFAULT_K,
    offset: int = 0,
    mode: str = "hybrid",
    where: Sequence[str] = (),
    diverse: bool = False,
    budget: int = DEFAULT_BUDGET,
    version: str = "",
    exact: bool = False,
) -> Page:
    """Ranks offset..offset+k of a search, as cards bounded by the budget."""
    check_page(k, offset)
    if isinstance(query, str):
        check_length(query, MAX_QUERY_CHARS, "the query", " (use related for a paper)")
    request = ops.Search(query, k, mode, tuple(_clauses(where)), diverse, exact=exact, offset=offset)  # type: ignore[arg-type]
    return search_cards(Application.over(index, bookmarks=False).search(request), request, budget, version)


def search_cards(found: Found, r: ops.Search, budget: int = DEFAULT_BUDGET, version: str = "") -> Page:
    """A search's page as cards; each names the person the query named ("by <name>")."""
    cards = [PaperCard.of(h, score=h.score, sentence=h.highlights[0] if h.highlights else None) for h in found.hits]
    for card, hit in zip(cards, found.hits, strict=True):
        card.why = f"by {hit.by}" if hit.by is not None else None
        if hit.passage is not None:
            text = _clip(paperinfo.plain_text(str(hit.passage["text"])), MAX_SENTENCE_CHARS)
            card.passage = {"page": hit.passage["page"], "text": text}
    page = paginate(
        cards, offset=r.offset or 0, k=r.k, more=found.more, budget=budget, version=version or found.version
    )
    page.order = found.order
    if found.spelling is not None and found.spelling.changed:
        page.searched_for = found.spelling.text
    return page


def recommend_cards(done: Recommended, r: ops.Recommend, budget: int = DEFAULT_BUDGET, version: str = "") -> Page:
    cards = []
    for rec in done.recommendations:
        card = PaperCard.of(rec.hit, score=rec.hit.score)
        card.why = f"near liked paper {paperinfo.plain_text(rec.because.label)}"
        cards.append(card)
    return paginate(cards, offset=r.offset or 0, k=r.k, more=done.more, budget=budget, version=version or done.version)


def new_page(
    index: Index,
    *,
    since: str | None = None,
    k: int = DEFAULT_K,
    offset: int = 0,
    where: Sequence[str] = (),
    budget: int = DEFAULT_BUDGET,
    version: str = "",
) -> Page:
    """Papers that arrived since a version or date (default: the latest build that added any), ranked for the
    user's tags and saved queries; each card says which of them it is for."""
    request = ops.New(since, k, tuple(_clauses(where)), offset=offset)
    return new_cards(Application.over(index, bookmarks=False).new(request), request, budget, version)


def new_cards(done: Arrived, r: ops.New, budget: int = DEFAULT_BUDGET, version: str = "") -> Page:
    cards = []
    for paper in done.papers:
        card = PaperCard.of(paper.hit, sentence=paper.best_sentence or None)
        card.why = ", ".join(paper.reasons) or None
        cards.append(card)
    return paginate(cards, offset=r.offset or 0, k=r.k, more=done.more, budget=budget, version=version or done.version)


def related_page(
    index: Index,
    doc_id: str,
    *,
    k: int = DEFAULT_K,
    offset: int = 0,
    where: Sequence[str] = (),
    budget: int = DEFAULT_BUDGET,
    version: str = "",
) -> Page:
    """Ranks offset..offset+k of the papers nearest to one in the index (Index.related), never the paper itself.

    Each card's best sentence is its hit's highlight: the sentence nearest the paper asked about (Index.related).
    """
    request = ops.Related(doc_id, k, tuple(_clauses(where)), offset=offset)
    with agent_ids(doc_id):
        found = Application.over(index, bookmarks=False).related(request)
    return related_cards(found, request, budget, version)


def related_cards(found: Found, r: ops.Related, budget: int = DEFAULT_BUDGET, version: str = "") -> Page:
    cards = [PaperCard.of(h, score=h.score, sentence=h.highlights[0] if h.highlights else None) for h in found.hits]
    return paginate(
        cards, offset=r.offset or 0, k=r.k, more=found.more, budget=budget, version=version or found.version
    )


def paper(index: Index, doc_id: str, *, budget: int = DEFAULT_BUDGET, version: str = "") -> Paper:
    """One paper in full; the abstract is clipped (text_truncated) only when the whole record would pass the budget."""
    budget = check_budget(budget)
    with agent_ids(doc_id):
        got = Application.over(index, bookmarks=False).get_paper(ops.GetPaper(doc_id))
    return paper_of(got, budget=budget, version=version)


def paper_of(got: Got, *, budget: int = DEFAULT_BUDGET, version: str = "") -> Paper:
    """A document as the full paper an agent reads, within the budget."""
    budget = check_budget(budget)
    doc = got.document
    card = PaperCard.of(doc)
    text = paperinfo.plain_text(doc.text)  # as a person reads it; the stored text is unchanged
    full = Paper(
        id=doc.id,
        title=card.title,
        text=text,
        text_truncated=False,
        authors=authors_of(doc.metadata),
        year=card.year,
        link=card.link,
        metadata=doc.metadata,
        sources=[s.label() for s in doc.sources],
        external_ids=doc.external_ids,
        version=version or got.version,
    )
    over = len(compact_json(to_dict(full))) - budget
    if over > 0:
        full.text = _clip(text, max(len(text) - over - 1, 0))
        full.text_truncated = True
    return full


def summary(info: dict[str, Any], *, budget: int = DEFAULT_BUDGET) -> IndexSummary:
    """The index facts an agent needs (from ``Index.info().to_dict()``), sources listed up to 20."""
    paths = [str(s.get("path", "")) for s in info.get("sources", [])]
    return IndexSummary(
        version=str(info.get("version", "")),
        documents=int(info.get("documents", 0)),
        model=str(info.get("model", "")),
        mode_default="hybrid",
        modes=list(MODES),
        max_k=MAX_K,
        built_at=str(info.get("built_at", "")),
        reading=str(info.get("reading") or ""),
        windows=int(info.get("windows") or 0),
        fusion=str(info.get("fusion") or ""),
        sources=paths[:20],
        sources_total=len(paths),
        budget_chars=budget,
    )
