"""How a ranking becomes hits: the score floor and MMR, the documents, and what explains each hit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semsearch.core.errors import IndexCorruptError
from semsearch.core.latex import latex_to_text
from semsearch.core.records import Hit
from semsearch.query.highlight import best_sentences, matched_terms
from semsearch.query.retrieve import DIVERSITY_FLOOR, Ranking, Shape, pool_size
from semsearch.store.analyzer import Analyzer
from semsearch.store.ann import VECTORS
from semsearch.store.documents import DocumentStore
from semsearch.store.layout import doc_id_from_num, doc_num
from semsearch.store.vectors import VectorStore
from semsearch.store.windows_part import WindowIndex


@dataclass(frozen=True)
class HitMaker:
    """What a version turns ranked document numbers into hits with: its documents, vectors and window vectors."""

    store: DocumentStore
    vectors: VectorStore
    windows: WindowIndex | None  # the sentence (or window) vectors, where the index keeps them
    reading: str | None  # how vectors read long abstracts (the manifest's ``model.reading``)
    version: Path  # named when a ranked number has no document

    def finish(self, ranking: Ranking, shape: Shape) -> list[Hit]:
        """Apply --min-score and MMR, fetch the documents, and explain each hit."""
        ranked, vector, k = ranking.ranked, ranking.vector, shape.k
        if shape.min_score is not None:
            ranked = [(n, s) for n, s in ranked if s >= shape.min_score]
        relevance_rank: dict[int, int] = {}
        if shape.diverse and vector is not None and len(ranked) > 1:
            from semsearch.query.diversity import diversify  # --diverse only: a plain search never loads MMR

            pool = ranked[: pool_size(k)]
            nums = [n for n, _ in pool]
            order = diversify(vector, self.vectors.get(nums), pool, k, shape.diversity, DIVERSITY_FLOOR)
            relevance_rank = {n: r for r, (n, _) in enumerate(pool, start=1)}
            score_of = dict(pool)
            ranked = [(n, score_of[n]) for n in order]
        ranked = ranked[:k]
        docs = self.store.get_many([n for n, _ in ranked])
        analyzer = Analyzer() if shape.explain else None
        terms = analyzer(ranking.text) if analyzer is not None else []
        sentence_vecs = self.sentence_vectors([n for n, _ in ranked], ranking.vector) if analyzer is not None else {}
        hits = []
        for rank, (num, score) in enumerate(ranked, start=1):
            doc = docs.get(num)
            if doc is None:
                raise IndexCorruptError(
                    f"{self.version / VECTORS} has id {doc_id_from_num(num)} that the document store lacks"
                )
            hit = Hit.of(rank, score, doc, ranking.mode)
            hit.relevance_rank = relevance_rank.get(num)
            hit.scores = self.breakdown(num, ranking)
            hit.fusion = ranking.fusion.to_dict() if ranking.fusion is not None else None
            if analyzer is not None:
                hit.highlights = best_sentences(
                    doc.embedding_parts()[2], terms, ranking.vector, sentence_vecs.get(num), n=1, analyzer=analyzer
                )
                hit.matched_terms = matched_terms(doc.embedding_text(), ranking.text, analyzer=analyzer)
            hits.append(hit)
        return hits

    def sentence_vectors(self, nums: list[int], vector: np.ndarray | None) -> dict[int, np.ndarray]:
        """Per hit, its sentences' vectors (``--reading sentences``), so its highlight is the sentence that matched.

        Empty for other readings and for a search with no query vector (lexical).
        """
        if self.windows is None or self.reading != "sentences" or vector is None:
            return {}
        found = self.windows.get(nums)
        if not len(found.ids):
            return {}
        order = np.argsort(found.ids, kind="stable")  # each document's rows together, in their order
        ids, vectors = found.ids[order], np.asarray(found.vectors[order], dtype=np.float32)
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(ids)]
        return {int(ids[a]): vectors[a:b] for a, b in zip(starts, ends, strict=True)}

    def breakdown(self, num: int, ranking: Ranking) -> dict[str, float]:
        """The hit's dense and BM25 scores (what the fused score was made of).

        The dense score is the cosine, re-scored by the best sentence or window in an index that stores them.
        """
        out: dict[str, float] = {}
        if ranking.vector is not None:
            cosine = ranking.dense.get(num)
            if cosine is None:
                cosine = float(self.vectors.get_one(num) @ ranking.vector[0])
            out["dense"] = round(cosine, 6)
        if ranking.mode != "dense":
            out["lexical"] = round(ranking.lexical.get(num, 0.0), 6)
        return out

    def highlight_near(self, hits: list[Hit], vector: np.ndarray, text: str) -> list[Hit]:
        """Give each related hit its sentence nearest the paper (or text) it was found from.

        By the sentence vectors where the index keeps them (``--reading sentences``): the cosine alone decides,
        since a source abstract shares some word with nearly every sentence; by the words the two share where it
        keeps none (the sentence covering most of them). A related hit's "why" is that sentence, not a word list:
        matched_terms stays empty.
        """
        if not hits:
            return hits
        analyzer = Analyzer()
        nums = [doc_num(h.id) for h in hits]
        sentence_vecs = self.sentence_vectors(nums, vector)
        terms: list[str] | None = None
        for hit, num in zip(hits, nums, strict=True):
            vecs = sentence_vecs.get(num)
            if vecs is not None:
                hit.highlights = best_sentences(latex_to_text(hit.text), [], vector, vecs, n=1, analyzer=analyzer)
            else:
                terms = analyzer(text) if terms is None else terms
                hit.highlights = best_sentences(latex_to_text(hit.text), terms, n=1, analyzer=analyzer)
        return hits
