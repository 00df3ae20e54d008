"""What arrived, ranked for the user: one *fit* per paper from the user's interests, with its reasons.

The user's interests are the positive tags (each an interest of its own) and the saved queries; the
negative tags (``not-for-me`` by default, ``tag create NAME --negative``) are never an interest, only
counter-examples for all of them. Each interest scores every document of the index on one scale, a z-score
over the whole index (0 = an average paper; at ``options.MIN_FIT`` = 2 a paper fits):

- a positive tag: the recommendation score (``recommend.DEFAULT_METHOD``) with the tag's papers as positives
  and every negative tag's papers as negatives;
- a saved query: 0.5·z(cosine to the query) + 0.5·z(BM25 weighed by coverage), minus ``NEGATIVE_SHARE`` times
  how far above average the paper's cosine to its nearest disliked paper is. Coverage is the share of the query's
  idf mass the paper holds (``query.evidence``): below ``COVERAGE_FULL`` its BM25 shrinks as the cube, so a paper
  that shares one or two of the query's words ("routing" of "mixture of experts routing and load balancing")
  does not fit the watch by them (``WATCH_SCORING``). The query is read as ``semsearch query`` reads it
  (``watch_reading``): it ranks by its words (BM25 with typos corrected), and a paper its fields (``year:``,
  ``author:``...), phrases or -words do not admit scores below every paper it does, so it gets no fit from it.

A paper's fit is the best of its interests' scores (``FIT_METHOD``), and its reasons are the interests it
reaches ``MIN_FIT`` for, best first.
``semsearch new``, the digests, the page and the MCP server all rank what arrived by it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import QueryError
from semsearch.core.options import MIN_FIT
from semsearch.core.records import Arrival, Document, Hit
from semsearch.curate.arrivals import RRF_K, read_watches

if TYPE_CHECKING:
    from semsearch.query.search import Index

FIT_METHODS = ("max", "sum", "rrf")
# A paper's fit is its best interest's score: a paper one interest ranks high fits, however the others rank it.
# Summing lets many lukewarm interests outvote one strong one; fusing ranks buries a paper that only one interest
# ranks high (docs/guides/digest.md compares them).
FIT_METHOD = "max"
NEGATIVE_SHARE = 0.5
# How a saved query scores a paper: "covered" weighs BM25 by how much of the query's idf mass the paper holds
# (query.evidence), so a paper sharing one or two of its words no longer fits while the papers on its topic still
# do; "fixed" is the earlier 0.5·z(cosine) + 0.5·z(BM25); "adaptive" weighs the two as hybrid search's
# FusionPolicy does; "dense" reads the cosine alone. docs/guides/digest.md gives how they compare.
WATCH_SCORINGS = ("covered", "fixed", "adaptive", "dense")
WATCH_SCORING = "covered"


@dataclass
class Interest:
    """One thing the user follows: a positive tag (its live papers) or a saved query."""

    kind: str  # "tag" or "watch"
    name: str
    query: str = ""
    papers: list[Document] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.name}"


@dataclass
class Profile:
    """The user's interests and counter-examples (the live papers of the negative tags)."""

    interests: list[Interest]
    negatives: list[Document] = field(default_factory=list)
    negative_tags: list[str] = field(default_factory=list)


@dataclass
class NewPaper:
    """A paper that arrived, its fit, and why (the interests it fits, best first)."""

    hit: Hit
    added: Arrival | None
    reasons: list[str] = field(default_factory=list)  # "tag:liked", "watch:privacy", best first
    best_sentence: str = ""
    fit: float = 0.0
    fit_by: dict[str, float] = field(default_factory=dict)  # every interest's score for this paper
    because: str = ""  # the liked paper it is nearest to, for a tag

    @property
    def interest(self) -> str | None:
        """The interest it fits best (None when it fits none)."""
        return self.reasons[0] if self.reasons else None

    def to_dict(self) -> dict[str, Any]:
        out = self.hit.to_dict()
        out["added"] = self.added.to_dict() if self.added else None
        out["fit"] = round(self.fit, 6)
        out["for"] = self.reasons
        out["fit_by"] = {k: round(v, 4) for k, v in self.fit_by.items()}
        if self.because:
            out["because"] = self.because
        out["best_sentence"] = self.best_sentence
        return out


@dataclass
class Section:
    """One part of a digest: the arrivals that fit one interest best."""

    kind: str  # "tag" or "watch"
    name: str
    papers: list[NewPaper]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "papers": [p.to_dict() for p in self.papers]}


# ---------------------------------------------------------------- the profile and the scores


def profile_of(index: Index) -> Profile:
    """The user's profile kept beside the index: positive tags and saved queries as interests, negative tags against."""
    from semsearch.curate.recommend import resolve_liked
    from semsearch.curate.tags import TagStore

    store = TagStore(index.path)
    interests = []
    for tag in store.positive_names():
        papers = resolve_liked(index, [tag])
        if papers:  # a tag whose papers all left the index likes nothing
            interests.append(Interest("tag", tag, papers=papers))
    interests += [Interest("watch", w.name, query=w.query) for w in read_watches(index.path)]
    negative_tags = store.negative_names()
    return Profile(interests, resolve_liked(index, negative_tags) if negative_tags else [], negative_tags)


def interest_scores(
    index: Index, profile: Profile, scoring: str = WATCH_SCORING, rows: np.ndarray | None = None
) -> np.ndarray:
    """One row per interest, one column per vector row of the index: the interest's z-score for the paper.

    ``rows`` (vector rows: the papers being ranked) limits a watch's phrase and -word check to them."""
    from semsearch.curate.recommend import DEFAULT_METHOD, _sparse_inputs, method_scores, zscore
    from semsearch.store.layout import doc_num

    vectors = index.vectors
    X = np.asarray(vectors.matrix, dtype=np.float32)
    nums = vectors.ids
    out = np.zeros((len(profile.interests), len(nums)), dtype=np.float64)
    if not profile.interests:
        return out
    neg_rows = vectors.rows_of([doc_num(d.id) for d in profile.negatives]).tolist()
    penalty = negative_penalty(index, profile)
    sparse_x = None
    lex_rows = None
    for i, interest in enumerate(profile.interests):
        if interest.kind == "tag":
            if sparse_x is None and DEFAULT_METHOD in ("svm-bm25", "fused"):
                sparse_x, _ = _sparse_inputs(index, nums, [])
            pos_rows = vectors.rows_of([doc_num(d.id) for d in interest.papers]).tolist()
            try:
                out[i] = zscore(method_scores(DEFAULT_METHOD, X, pos_rows, neg_rows, sparse_features=sparse_x))
            except QueryError:  # every paper of the index is in the tag: nothing to tell apart, no fit
                out[i] = 0.0
        else:
            if lex_rows is None:
                lex_rows = index.lexical.rows_of(nums)
            out[i] = watch_scores(index, interest.query, X, lex_rows, scoring, rows=rows) - penalty
    return out


def watch_scores(
    index: Index,
    query: str,
    X: np.ndarray,
    lex_rows: np.ndarray,
    scoring: str = WATCH_SCORING,
    *,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """A saved query's z-score for every vector row (``lex_rows``: each row's row in the lexical index).

    The query is read as search reads it (``watch_reading``): it ranks by its words (BM25 with typos corrected),
    and a paper its fields, people, phrases or -words do not admit scores below every paper it does (no fit).
    """
    from semsearch.curate.watch_reading import admitted, read_watch

    if scoring not in WATCH_SCORINGS:
        raise ValueError(f"unknown watch scoring {scoring!r} (choose from {', '.join(WATCH_SCORINGS)})")
    reading = read_watch(index, query)
    if reading.dense_text:
        scores = _text_scores(index, reading.dense_text, reading.lexical_text, X, lex_rows, scoring)
    else:  # only author: (a person): their papers fit the watch, each as much as the floor of a fit
        scores = np.full(len(X), float(MIN_FIT))
    if not reading.filtered:
        return scores
    ok = admitted(index, reading, index.vectors.ids, only=rows)
    floor = min(float(scores.min(initial=0.0)), 0.0) - 1.0  # below every admitted paper and any fit
    return np.where(ok, scores, floor)


def _text_scores(
    index: Index, dense_text: str, lexical_text: str, X: np.ndarray, lex_rows: np.ndarray, scoring: str
) -> np.ndarray:
    """0.5·z(cosine to ``dense_text``) + 0.5·z(BM25 of ``lexical_text``), or as ``scoring`` says."""
    from semsearch.curate.recommend import zscore
    from semsearch.query.evidence import covered_bm25
    from semsearch.query.fusion import DEFAULT_DEPTH
    from semsearch.query.weighting import FusionPolicy

    dense = np.asarray(X @ index.encode_query(dense_text).reshape(-1), dtype=np.float64)
    if scoring == "dense":
        return zscore(dense)
    lex = index.lexical
    if scoring == "covered":
        per_row = covered_bm25(lex, lexical_text)
    else:
        bm25, matched = lex.scores(lexical_text)
        per_row = np.where(matched, bm25, 0.0)
    lexical = np.where(lex_rows >= 0, per_row[lex_rows], 0.0)
    alpha = 0.5
    if scoring == "adaptive":
        # The search's own weighing (FusionPolicy.choose) on the two lists hybrid search would fuse.
        depth = min(len(dense), DEFAULT_DEPTH)
        top_dense = -np.sort(-dense)[:depth]
        top_lexical = -np.sort(-lexical[lexical > 0])[:depth]
        policy = index.fusion if index.fusion.method == "adaptive" else FusionPolicy("adaptive")
        alpha = policy.choose(top_dense, top_lexical, depth).alpha
    return zscore(alpha * zscore(dense) + (1.0 - alpha) * zscore(lexical))


def negative_penalty(index: Index, profile: Profile) -> np.ndarray:
    """Per vector row: ``NEGATIVE_SHARE`` times how far above average its cosine to its nearest disliked paper
    is (0 for every row without negative tags)."""
    from semsearch.curate.recommend import zscore
    from semsearch.store.layout import doc_num

    vectors = index.vectors
    neg_rows = vectors.rows_of([doc_num(d.id) for d in profile.negatives]).tolist()
    if not neg_rows:
        return np.zeros(len(vectors.ids))
    X = np.asarray(vectors.matrix, dtype=np.float32)
    near_bad = np.asarray(X @ X[neg_rows].T).max(axis=1)
    return np.asarray(NEGATIVE_SHARE * np.clip(zscore(near_bad), 0.0, None), dtype=np.float64)


def combine(scores: np.ndarray, rows: np.ndarray, method: str = FIT_METHOD) -> np.ndarray:
    """The fit of each candidate row from the interests' scores (``scores[:, rows]``)."""
    if method not in FIT_METHODS:
        raise ValueError(f"unknown fit method {method!r} (choose from {', '.join(FIT_METHODS)})")
    part = scores[:, rows]
    if not len(part):
        return np.zeros(len(rows))
    if method == "max":
        return np.asarray(part.max(axis=0))
    if method == "sum":
        return np.asarray(part.sum(axis=0))
    ranks = np.argsort(np.argsort(-part, axis=1, kind="stable"), axis=1) + 1
    return np.asarray((1.0 / (RRF_K + ranks)).sum(axis=0))


# ---------------------------------------------------------------- what arrived, ranked


def fitted_arrivals(
    index: Index, clauses: Sequence[str], *, where: Sequence[str] = (), profile: Profile | None = None
) -> list[NewPaper]:
    """Every document the clauses select (what arrived), best fit first (then newest, then id)."""
    allowed = index.allowed_rows(list(where) + list(clauses))
    if allowed is None:  # no clause at all (`--since last` before any bookmark): everything arrived
        allowed = np.asarray(index.vectors.ids, dtype=np.int64)
    if not len(allowed):
        return []
    profile = profile if profile is not None else profile_of(index)
    rows = index.vectors.rows_of(np.asarray(allowed, dtype=np.int64))
    rows = rows[rows >= 0]
    scores = interest_scores(index, profile, rows=rows)
    nums = index.vectors.ids[rows]
    # With negative tags only there is no interest to fit, but what resembles a disliked paper still goes last.
    fit = combine(scores, rows) if profile.interests else 0.0 - negative_penalty(index, profile)[rows]
    docs = index.store.get_many([int(n) for n in nums])
    keys = [it.key for it in profile.interests]
    entries = []
    for j, num in enumerate(nums.tolist()):
        doc = docs[int(num)]
        seq = doc.added.seq if doc.added else 0
        entries.append((-float(fit[j]), -seq, doc.id, j, doc))
    entries.sort(key=lambda e: e[:3])
    out = []
    for rank, (_, _, _, j, doc) in enumerate(entries, start=1):
        by = {key: float(scores[i, rows[j]]) for i, key in enumerate(keys)}
        reasons = [key for key, s in sorted(by.items(), key=lambda kv: -kv[1]) if s >= MIN_FIT]
        hit = Hit.of(rank, round(float(fit[j]), 6), doc, "new")
        out.append(NewPaper(hit, doc.added, reasons, "", float(fit[j]), by))
    return out


def explain(paper: NewPaper, profile: Profile, index: Index) -> NewPaper:
    """Fill in the paper's best sentence (and, for a tag, the liked paper it is nearest to)."""
    from semsearch.query.highlight import best_sentences
    from semsearch.store.analyzer import Analyzer

    top = max(paper.fit_by.items(), key=lambda kv: kv[1], default=("", 0.0))[0]
    best = next((it for it in profile.interests if it.key == top), None)
    terms_of = ""
    if best is not None and best.kind == "watch":
        from semsearch.curate.watch_reading import watch_words

        terms_of = watch_words(best.query)  # its words, not "year:>=2024" or the -words
    elif best is not None and best.papers:
        from semsearch.store.layout import doc_num

        vectors = index.vectors
        rows = vectors.rows_of([doc_num(d.id) for d in best.papers] + [doc_num(paper.hit.id)])
        X = np.asarray(vectors.matrix, dtype=np.float32)
        cos = X[rows[:-1]] @ X[rows[-1]]
        near = best.papers[int(cos.argmax())]
        paper.because = f"near {near.label()} (cosine {float(cos.max()):.3f})"
        terms_of = near.title or near.label()
    found = best_sentences(paper.hit.text, Analyzer()(terms_of), n=1) if terms_of else []
    paper.best_sentence = found[0] if found else ""
    return paper


def ranked_new(index: Index, clauses: Sequence[str], *, k: int = 20, where: Sequence[str] = ()) -> list[NewPaper]:
    """The k arrivals that fit the user best, explained (when the user follows nothing: newest first, and
    those like a negative tag's papers last)."""
    profile = profile_of(index)
    return [explain(p, profile, index) for p in fitted_arrivals(index, clauses, where=where, profile=profile)[:k]]


def grouped(
    papers: Sequence[NewPaper], *, min_fit: float = MIN_FIT, per_section: int | None = None
) -> tuple[list[Section], list[NewPaper]]:
    """Sections of the papers that fit an interest (at least ``min_fit``), grouped by their best interest in
    order of their best paper, and the rest ("also new"), best fit first: every paper lands in exactly one.

    ``per_section`` caps a section; a match beyond the cap joins the rest (it still counts, never vanishes).
    """
    sections: dict[str, Section] = {}
    rest: list[NewPaper] = []
    for paper in papers:
        best = max(paper.fit_by.items(), key=lambda kv: kv[1], default=None)
        if best is None or best[1] < min_fit:
            rest.append(paper)
            continue
        kind, name = best[0].split(":", 1)
        section = sections.setdefault(best[0], Section(kind, name, []))
        if per_section is not None and len(section.papers) >= per_section:
            rest.append(paper)
        else:
            section.papers.append(paper)
    rest.sort(key=lambda p: -p.fit)  # stable: equal fits keep the arrivals' order (newest first, then id)
    return list(sections.values()), rest
