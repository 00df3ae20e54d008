"""What arrived, ranked for the user: per tag and saved query the best new papers, and one fused list.

``arrivals.py`` records when each document arrived and what ``--since`` means; this module ranks what arrived
with the user's tags (``recommend.py``) and saved queries (``Index.search``), for ``semsearch new``, the
digests, the page and the MCP server.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import QueryError
from semsearch.core.records import Arrival, Hit
from semsearch.reader.arrivals import MIN_COSINE, RRF_K, read_watches

if TYPE_CHECKING:
    from semsearch.query.search import Index


@dataclass
class NewPaper:
    """A paper that arrived, with why it is listed (the tag or saved query that ranks it best)."""

    hit: Hit
    added: Arrival | None
    reasons: list[str] = field(default_factory=list)  # "tag:liked", "watch:privacy", best first
    best_sentence: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = self.hit.to_dict()
        out["added"] = self.added.to_dict() if self.added else None
        out["for"] = self.reasons
        out["best_sentence"] = self.best_sentence
        return out


@dataclass
class Section:
    """One part of a digest: a tag's or a saved query's best new papers."""

    kind: str  # "tag", "watch" or "all"
    name: str
    papers: list[NewPaper]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "papers": [p.to_dict() for p in self.papers]}


def sections(
    index: Index, clauses: Sequence[str], *, k: int = 5, where: Sequence[str] = (), min_cosine: float | None = None
) -> list[Section]:
    """Per tag and per saved query, the best of the documents the clauses select (arrived since).

    ``min_cosine`` drops papers whose cosine to the query (or to the nearest liked paper) is below it, so a
    section lists only papers on its subject even when few arrived.
    """
    from semsearch.reader.recommend import recommend
    from semsearch.reader.tags import TagStore

    allowed_where = list(where) + list(clauses)
    allowed = index.allowed_rows(allowed_where)
    if allowed is not None and not len(allowed):
        return []
    out: list[Section] = []
    store = TagStore(index.path)
    for tag in store.names():
        try:
            recs = recommend(index, [tag], k=k, where=allowed_where)
        except QueryError:  # a tag whose papers all left the index recommends nothing
            continue
        if min_cosine is not None:
            recs = [r for r in recs if r.because.cosine >= min_cosine]
        out.append(Section("tag", tag, [_paper(r.hit, f"tag:{tag}", r.because.label) for r in recs]))
    for watch in read_watches(index.path):
        hits = index.search(watch.query, k, where=allowed_where)
        if min_cosine is not None:
            hits = [h for h in hits if h.scores.get("dense", 1.0) >= min_cosine]
        out.append(Section("watch", watch.name, [_paper(h, f"watch:{watch.name}") for h in hits]))
    from semsearch.store.layout import doc_num

    arrivals = index.store.get_many([doc_num(p.hit.id) for s in out for p in s.papers])
    for section in out:
        for paper in section.papers:
            paper.added = arrivals[doc_num(paper.hit.id)].added
    return out


def _paper(hit: Hit, reason: str, like_title: str = "") -> NewPaper:
    """A listed paper with its best sentence: for a query the highlighted one, for a tag the sentence that
    best covers the title of the liked paper it is nearest to."""
    from semsearch.query.highlight import best_sentences
    from semsearch.store.lexical import Analyzer

    if hit.highlights:
        sentence = hit.highlights[0]
    else:
        found = best_sentences(hit.text, Analyzer()(like_title), n=1)
        sentence = found[0] if found else ""
    return NewPaper(hit, None, [reason] if reason else [], sentence)


def ranked_new(index: Index, clauses: Sequence[str], *, k: int = 20, where: Sequence[str] = ()) -> list[NewPaper]:
    """The arrived documents, ranked by reciprocal-rank fusion over the tags' and saved queries' rankings.

    With no tags and no saved queries, newest first. Each paper names the tags / queries it is for (those whose
    liked paper or query it is within ``MIN_COSINE`` of), best first.
    """

    allowed = index.allowed_rows(list(where) + list(clauses))
    if allowed is None:  # no clause at all (`--since last` before any bookmark): everything arrived
        allowed = np.asarray(index.vectors.ids, dtype=np.int64)
    total = len(allowed)
    if not total:
        return []
    fused: dict[str, float] = {}
    reasons: dict[str, list[tuple[float, str]]] = {}
    hits: dict[str, Hit] = {}
    from semsearch.core.options import MAX_K

    for section in sections(index, clauses, k=min(total, MAX_K), where=where):
        for rank, paper in enumerate(section.papers, start=1):
            doc_id = paper.hit.id
            share = 1.0 / (RRF_K + rank)
            fused[doc_id] = fused.get(doc_id, 0.0) + share
            if paper.hit.scores.get("dense", 0.0) >= MIN_COSINE:
                reasons.setdefault(doc_id, []).append((share, f"{section.kind}:{section.name}"))
            hits.setdefault(doc_id, paper.hit)
    docs = index.store.get_many([int(n) for n in allowed])
    by_id = {d.id: d for d in docs.values()}
    newest = {
        d.id: n for n, d in enumerate(sorted(by_id.values(), key=lambda d: (-(d.added.seq if d.added else 0), d.id)))
    }
    order = sorted(by_id, key=lambda i: (-fused.get(i, 0.0), newest[i]))[:k]
    out = []
    for rank, doc_id in enumerate(order, start=1):
        doc = by_id[doc_id]
        hit = Hit.of(rank, round(fused.get(doc_id, 0.0), 6), doc, "new")
        why = [r for _, r in sorted(reasons.get(doc_id, []), key=lambda x: -x[0])]
        out.append(_paper(hit, ""))
        out[-1].added = doc.added
        out[-1].reasons = why
    return out
