"""How `related` orders a paper's neighbours: its vector's cosine, held to the paper's own subject words.

A paper's vector is the mean of its sentences, so a paper whose abstract leans on a neighbour field (machine
unlearning defined through differential privacy) has the neighbour field's papers nearest. The paper's
``distinctive_terms`` (its words weighed by tf·idf) say what it is about: among its ``SUBJECT_POOL`` nearest
papers by cosine, the order is ``(1 - SUBJECT_SHARE)·z(cosine) + SUBJECT_SHARE·z(BM25 of those words)``, each
z-scored over the pool; the papers past the pool follow by cosine. A hit's score stays its cosine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from semsearch.core.records import Document
from semsearch.query.evidence import distinctive_terms
from semsearch.store.analyzer import lexical_text
from semsearch.store.lexical import BM25Index

RELATED_ORDERS = ("cosine", "subject")
RELATED_ORDER = "subject"
# ``related`` re-orders the SUBJECT_POOL nearest papers by cosine, SUBJECT_SHARE of the weight (in z-scores) on
# the paper's own subject words: neighbours about the same subject rise over those that merely read alike. Only
# that pool is re-ordered, so a paper that shares a subject word and little else never enters the list.
SUBJECT_SHARE = 0.5
SUBJECT_POOL = 100


def _z(values: np.ndarray) -> np.ndarray:
    sd = float(values.std())
    return (values - values.mean()) / sd if sd > 0 else np.zeros_like(values)


def subject_order(
    lexical: BM25Index, doc: Document, ranked: Sequence[tuple[int, float]], order: str = RELATED_ORDER
) -> list[tuple[int, float]]:
    """``ranked`` (FAISS id, cosine) nearest first, its first ``SUBJECT_POOL`` reordered by the paper's subject
    words (``order`` "subject"), or as it is ("cosine"). Ties keep the cosine order."""
    if order not in RELATED_ORDERS:
        raise ValueError(f"unknown related order {order!r} (choose from {', '.join(RELATED_ORDERS)})")
    pool = list(ranked[:SUBJECT_POOL])
    if order == "cosine" or len(pool) < 2:
        return list(ranked)
    terms = distinctive_terms(lexical, lexical_text(doc.title, doc.text))
    if not terms:
        return list(ranked)
    cosine = np.asarray([s for _, s in pool], dtype=np.float64)
    words = np.asarray(lexical.score_ids(terms, [n for n, _ in pool]), dtype=np.float64)
    fused = (1.0 - SUBJECT_SHARE) * _z(cosine) + SUBJECT_SHARE * _z(words)
    order_of = sorted(range(len(pool)), key=lambda i: (-fused[i], i))
    return [pool[i] for i in order_of] + list(ranked[SUBJECT_POOL:])
