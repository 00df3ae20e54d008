"""What a full-text index's passages (``--full-text``: store/passages_part.py) add to a search.

The dense side sees a paper's passages: its candidates are the papers nearest by their title and abstract and
the papers of the passages nearest the query, each scored by the better of its abstract's cosine and its best
passage's (``rescore``), so a query made of words from a paper's body finds the paper. Each hit then carries
its passage nearest the query, with its page (``attach``), and ``--passages`` lists passages rather than papers
(``passage_hits``), each as its paper's hit with that passage.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semsearch.core.records import Hit
from semsearch.store.analyzer import Analyzer
from semsearch.store.documents import DocumentStore
from semsearch.store.layout import doc_num
from semsearch.store.passages_part import Found, PassageIndex

RESCORE_DEPTH = 200  # the abstract top whose best passages are looked up (as windows re-score theirs)


def rescore(
    passages: PassageIndex,
    nums: np.ndarray,
    scores: np.ndarray,
    vector: np.ndarray,
    depth: int,
    allowed: np.ndarray | None,
    exclude: frozenset[int],
) -> tuple[np.ndarray, np.ndarray]:
    """The dense candidates with the papers of the nearest passages added, each scored max(abstract, best passage).

    A paper found by a passage only keeps that passage's cosine: its abstract, outside the top, scores lower.
    """
    q = np.asarray(vector, dtype=np.float32).reshape(-1)
    score_of = {int(n): float(s) for n, s in zip(nums.tolist(), scores.tolist(), strict=True)}
    top = [int(n) for n in nums[:RESCORE_DEPTH]]
    for num, found in zip(top, passages.best(top, q), strict=True):
        if found is not None and found.score > score_of[num]:
            score_of[num] = found.score
    for found in passages.top(q, depth, allowed, sorted(exclude)):
        if found.score > score_of.get(found.num, -np.inf):
            score_of[found.num] = found.score
    ranked = sorted(score_of.items(), key=lambda item: (-item[1], item[0]))[: max(depth, len(nums))]
    return (
        np.array([n for n, _ in ranked], dtype=np.int64),
        np.array([s for _, s in ranked], dtype=np.float32),
    )


def attach(hits: Sequence[Hit], passages: PassageIndex, vector: np.ndarray | None, text: str) -> None:
    """Give each hit its passage nearest the query: by cosine, or by the query's words where it has no vector."""
    if not hits:
        return
    nums = [doc_num(h.id) for h in hits]
    if vector is not None:
        for hit, found in zip(hits, passages.best(nums, vector), strict=True):
            hit.passage = found.to_dict() if found is not None else None
        return
    analyzer = Analyzer()
    terms = set(analyzer(text))
    held = passages.get(nums)
    for hit, num in zip(hits, nums, strict=True):
        rows = np.flatnonzero(held.ids == num)
        if not len(rows) or not terms:
            continue
        counts = [len(terms.intersection(analyzer(held.texts[int(r)]))) for r in rows]
        best = int(rows[int(np.argmax(counts))])
        if max(counts) > 0:
            hit.passage = Found(num, int(held.pages[best]), held.texts[best], float(max(counts))).to_dict()


def passage_hits(
    passages: PassageIndex,
    store: DocumentStore,
    vector: np.ndarray,
    k: int,
    *,
    allowed: np.ndarray | None = None,
    min_score: float | None = None,
) -> list[Hit]:
    """The ``k`` passages nearest the query, best first: each its paper's hit, scored by the passage's cosine."""
    found = passages.top(vector, k, allowed)
    if min_score is not None:
        found = [f for f in found if f.score >= min_score]
    docs = store.get_many(sorted({f.num for f in found}))
    hits = []
    for rank, item in enumerate((f for f in found if f.num in docs), start=1):
        hit = Hit.of(rank, item.score, docs[item.num], "passages")
        hit.scores = {"dense": round(item.score, 6)}
        hit.passage = item.to_dict()
        hits.append(hit)
    return hits
