"""BM25 over a version of several segments, scored exactly as one index built over its live documents.

Each segment's ``lexical/`` folder holds weights computed from that segment's own statistics, which are wrong
for the union. A query instead weighs its terms' postings again, from each segment's term frequencies
(``tf.npy``) and document lengths (``lengths.npy``), with the corpus-wide statistics of the live documents:
their count and average length (once, at load) and each query term's document frequency (summed over the
segments' live postings, when the term is first asked for). The arithmetic is lexical.py's Lucene functions,
the builder's own, so the scores are the float32 bits a single index built in one go gives.

Rows are the segments' rows one after another; a hidden row keeps its place with document id -1, so
``rows_of`` never finds it, and it never scores.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from semsearch.core.errors import IndexCorruptError
from semsearch.core.idrows import RowIndex
from semsearch.store.analyzer import Analyzer
from semsearch.store.lexical import (
    LENGTHS_FILE,
    LEXICAL_DIR,
    TF_FILE,
    BM25Index,
    BM25Params,
    LexicalIndex,
    _read_array,
    lucene_average_length,
    lucene_idf,
    lucene_norms,
    lucene_tf_weights,
)
from semsearch.store.segments import Segment

REBUILD = "rebuild with: semsearch index --full"


def load_segments(segments: Sequence[Segment]) -> BM25Index:
    """The BM25 index of a version's segments (base first): an ordinary LexicalIndex when there is one."""
    if not segments:
        raise ValueError("a version has at least its base segment")
    if len(segments) == 1 and not len(segments[0].hidden):
        return LexicalIndex.load(lexical_folder(segments[0]))  # precomputed weights are right for one segment
    return SegmentedLexicalIndex.load(segments)


def lexical_folder(segment: Segment) -> Path:
    """A segment's ``lexical/`` folder, which must exist."""
    folder = segment.folder / LEXICAL_DIR
    if not folder.is_dir():
        raise IndexCorruptError(f"{folder} is missing; {REBUILD}")
    return folder


@dataclass
class _Part:
    """One segment's lexical folder, placed in the version's row space."""

    index: LexicalIndex
    tf: np.ndarray  # int32 term frequency of each posting (memory-mapped, aligned with index.indices)
    norms: np.ndarray  # float64 Lucene length normalisation of each row, from the version's average length
    live: np.ndarray | None  # bool per row; None when every row is live
    offset: int  # the part's first row in the version's row space
    global_terms: np.ndarray  # int64 version term id of each of the part's term ids


class SegmentedLexicalIndex(BM25Index):
    """Lucene BM25 over several segments' lexical folders, with the statistics of their live documents."""

    def __init__(self, parts: list[_Part], vocab: list[str], term_ids: dict[str, int], params: BM25Params) -> None:
        self._parts = parts
        self.vocab = vocab
        self.term_ids = term_ids
        self.params = params
        self.nonoccurrence = None  # Lucene BM25 has no floor
        self.analyzer = Analyzer()
        ids = [part.index.ids if part.live is None else np.where(part.live, part.index.ids, -1) for part in parts]
        self.ids = np.concatenate(ids).astype(np.int64, copy=False)
        self._hidden_rows = np.flatnonzero(self.ids == -1)
        self._n_live = len(self.ids) - len(self._hidden_rows)
        self._idf: dict[int, tuple[int, np.float32]] = {}  # term id -> (live document frequency, idf)
        self._csc: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._rows = RowIndex(self.ids)
        twice = self._rows.repeated()
        twice = twice[twice != -1]
        if len(twice):
            raise IndexCorruptError(f"document {int(twice[0])} is live in two segments' BM25 indexes; {REBUILD}")

    @classmethod
    def load(cls, segments: Sequence[Segment]) -> SegmentedLexicalIndex:
        """Open each segment's lexical folder (it must hold tf.npy and lengths.npy, which Lucene builds write)."""
        loaded: list[tuple[LexicalIndex, np.ndarray, np.ndarray, np.ndarray | None]] = []
        for segment in segments:
            folder = lexical_folder(segment)
            index = LexicalIndex.load(folder)
            if loaded and index.params != loaded[0][0].params:
                raise IndexCorruptError(f"{folder} holds other BM25 settings than the version's base; {REBUILD}")
            if index.params.method != "lucene":
                raise IndexCorruptError(f"{folder} holds {index.params.method} BM25, not Lucene's; {REBUILD}")
            if len(index) != segment.rows:
                raise IndexCorruptError(f"{folder} holds {len(index)} documents, expected {segment.rows}; {REBUILD}")
            for name in (TF_FILE, LENGTHS_FILE):
                if not (folder / name).is_file():
                    raise IndexCorruptError(f"{folder / name} is missing (a segment's BM25 needs it); {REBUILD}")
            tf = _read_array(folder / TF_FILE, np.int32, (int(index.indices.shape[0]),), mmap=True)
            lengths = _read_array(folder / LENGTHS_FILE, np.int32, (len(index),))
            live = segment.live(index.ids) if len(segment.hidden) else None
            loaded.append((index, tf, lengths, live))
        params = loaded[0][0].params
        n_live, total = 0, 0
        for _, _, lengths, live in loaded:
            kept = lengths if live is None else lengths[live]
            n_live += len(kept)
            total += int(kept.sum(dtype=np.int64))
        average = lucene_average_length(total, n_live)
        # The version's vocabulary: the base's term ids, then each later segment's new terms in its order.
        vocab = list(loaded[0][0].vocab)
        term_ids = dict(loaded[0][0].term_ids)
        parts: list[_Part] = []
        offset = 0
        for i, (index, tf, lengths, live) in enumerate(loaded):
            if i == 0:
                global_terms = np.arange(len(index.vocab), dtype=np.int64)
            else:
                for term in index.vocab:
                    if term not in term_ids:
                        term_ids[term] = len(vocab)
                        vocab.append(term)
                global_terms = np.fromiter(map(term_ids.__getitem__, index.vocab), np.int64, len(index.vocab))
            parts.append(_Part(index, tf, lucene_norms(lengths, average, params), live, offset, global_terms))
            offset += len(index)
        return cls(parts, vocab, term_ids, params)

    # -- querying -------------------------------------------------------------------------------------------------

    def query_weights(self, query: str | Mapping[str, float]) -> dict[int, float]:
        """Term id -> weight for a query text (weight = count in the query) or an explicit term -> weight map."""
        weights = Counter(self.terms(query)) if isinstance(query, str) else query
        out: dict[int, float] = {}
        for term, w in weights.items():
            tid = self.term_ids.get(term)
            # A term that only hidden documents hold is not in the live corpus's vocabulary, as in one index.
            if tid is not None and w > 0 and self._term_stats(tid)[0]:
                out[tid] = out.get(tid, 0.0) + float(w)
        return out

    def document_frequency(self, term: str) -> int:
        """How many live documents hold a stemmed term (0 for a term the vocabulary lacks)."""
        tid = self.term_ids.get(term)
        return 0 if tid is None else self._term_stats(tid)[0]

    def _term_stats(self, tid: int) -> tuple[int, np.float32]:
        """(live document frequency, float32 idf) of a term over every segment, worked out once per term."""
        stats = self._idf.get(tid)
        if stats is None:
            term = self.vocab[tid]
            df = 0
            for part in self._parts:
                local = part.index.term_ids.get(term)
                if local is None:
                    continue
                start, end = int(part.index.indptr[local]), int(part.index.indptr[local + 1])
                if part.live is None:
                    df += end - start
                else:
                    df += int(np.count_nonzero(part.live[part.index._postings(local, start, end)]))
            stats = (df, lucene_idf(np.array([df], dtype=np.int64), self._n_live)[0])
            self._idf[tid] = stats
        return stats

    def _accumulate(self, weights: Mapping[int, float], *, with_matched: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Sum the query terms' postings, weighed with the version's statistics, into one score per row."""
        n = len(self)
        scores = np.zeros(n, dtype=np.float32)
        matched = np.zeros(n, dtype=bool) if with_matched else None
        for tid, w in weights.items():
            term = self.vocab[tid]
            idf = self._term_stats(tid)[1]
            for part in self._parts:
                local = part.index.term_ids.get(term)
                if local is None:
                    continue
                start, end = int(part.index.indptr[local]), int(part.index.indptr[local + 1])
                rows = part.index._postings(local, start, end)
                weight = lucene_tf_weights(idf, part.tf[start:end], part.norms[rows])
                # Terms are added in the same order, with the same float32 products, as LexicalIndex does.
                scores[part.offset : part.offset + len(part.index)][rows] += np.float32(w) * weight
                if matched is not None:
                    matched[part.offset : part.offset + len(part.index)][rows] = True
        # Hidden rows were weighed with the rest (cheaper than filtering every posting list); they never count.
        scores[self._hidden_rows] = 0.0
        if matched is not None:
            matched[self._hidden_rows] = False
        return scores, matched

    def rows_of(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Row of each live document id (-1 for unknown or hidden ids)."""
        nums = np.asarray(ids, dtype=np.int64)
        assert self._rows is not None
        return np.where(nums == -1, -1, self._rows.rows_of(nums))

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights, rows, offsets) of every live posting, weighed with the version's statistics (built once)."""
        if self._csc is None:
            n_terms = len(self.vocab)
            kept, counts = [], []
            for part in self._parts:
                index = part.index
                rows = np.asarray(index.indices, dtype=np.int64)
                if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= len(index)):
                    raise IndexCorruptError(f"BM25 postings point past a segment's {len(index)} documents; {REBUILD}")
                local = np.repeat(np.arange(len(index.vocab), dtype=np.int64), np.diff(index.indptr))
                tf = np.asarray(part.tf)
                if part.live is not None:
                    live = part.live[rows]
                    local, rows, tf = local[live], rows[live], tf[live]
                per_term = np.bincount(local, minlength=len(index.vocab))
                # A posting's place among its term's postings in this part (they lie together, in row order).
                rank = np.arange(len(local), dtype=np.int64) - (np.cumsum(per_term) - per_term)[local]
                count = np.zeros(n_terms, dtype=np.int64)
                count[part.global_terms] = per_term
                kept.append((part.global_terms[local], rows, tf, rank))
                counts.append(count)
            df = np.sum(counts, axis=0) if counts else np.zeros(n_terms, dtype=np.int64)
            idf = lucene_idf(df, self._n_live)
            indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
            data = np.empty(int(indptr[-1]), dtype=np.float32)
            indices = np.empty(int(indptr[-1]), dtype=np.int32)
            before = np.zeros(n_terms, dtype=np.int64)  # postings of each term in the parts already placed
            # Parts follow in row order, so placing each part's postings after the earlier parts' keeps every
            # term's postings in row order, as one index holds them, without sorting 10^7 postings.
            for part, (terms, rows, tf, rank), count in zip(self._parts, kept, counts, strict=True):
                place = indptr[terms] + before[terms] + rank
                data[place] = lucene_tf_weights(idf[terms], tf, part.norms[rows])
                indices[place] = rows + part.offset
                before += count
            self._csc = (data, indices, indptr)
        return self._csc
