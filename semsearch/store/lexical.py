"""Lexical (BM25) index over the documents' title and abstract, stored as plain numpy arrays and JSON.

Layout of the ``lexical/`` folder inside an index version::

    params.json     format, BM25 variant and parameters, analyzer, counts (checked on load)
    vocab.json      the stemmed terms, in term-id order
    ids.npy         int64 document ids, in row order
    data.npy        float32 precomputed BM25 weight of each (term, document) posting
    indices.npy     int32 row of each posting (CSC layout: postings grouped by term)
    indptr.npy      int64 start of each term's postings in data/indices (length vocab + 1)

bm25s computes the weights at build time (its "eager" scoring); a query then only sums the postings of its
terms, which needs numpy alone, so searching never imports bm25s. Nothing is pickled.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError
from semsearch.core.idrows import RowIndex
from semsearch.store.analyzer import ANALYZER_NAME, Analyzer, term_ids

LEXICAL_DIR = "lexical"
FORMAT_NAME = "semsearch-lexical"
FORMAT_VERSION = 1
PARAMS_FILE = "params.json"
VOCAB_FILE = "vocab.json"
ARRAY_FILES = ("ids.npy", "data.npy", "indices.npy", "indptr.npy")
# Written beside the weights by the Lucene builder (lexical_build.py): what recomputing the weights needs.
TF_FILE = "tf.npy"  # int32 term frequency of each posting, aligned with data.npy / indices.npy
LENGTHS_FILE = "lengths.npy"  # int32 analysed length of each document, in row order
KEYS_FILE = "keys.npy"  # uint64 hash of each document's indexed text, in row order

@dataclass(frozen=True)
class BM25Params:
    """The BM25 variant (a bm25s ``method``) and its parameters."""

    method: str = "lucene"
    k1: float = 1.5
    b: float = 0.75
    delta: float = 0.5  # only used by bm25l and bm25+


# Lucene BM25 with the usual k1 1.5, b 0.75: the other variants and nearby settings rank within noise of it
# (docs/explanation/quality.md), and Lucene's adds no BM25L-style floor to every document for every term.
DEFAULT_PARAMS = BM25Params()


def bm25_settings() -> BM25Params:
    """The BM25 variant and parameters a build writes with now (a refresh of a version written with others
    rewrites its BM25 part: ``LexicalPart.stale``)."""
    return DEFAULT_PARAMS


_METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")


# Lucene BM25's arithmetic, in the float64 steps bm25s takes, so that weights are bm25s's float32 bits. The
# builder weighs every posting with it, and a version of several segments weighs a query's postings with it
# from the statistics of all its live documents: one copy, so the two cannot drift apart by a bit.


def lucene_idf_of(df: int, n_docs: int) -> float:
    """Lucene's idf of one term held by ``df`` of ``n_docs`` documents, in a Python float (0 for a term none holds)."""
    return math.log(1 + (n_docs - df + 0.5) / (df + 0.5)) if df else 0.0


def lucene_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """float32 Lucene idf of terms with document frequencies ``df`` in a corpus of ``n_docs`` documents."""
    if not len(df):
        return np.zeros(0, dtype=np.float32)
    # per distinct document frequency, in Python floats as bm25s does (numpy's log may differ in the last bit)
    distinct, which = np.unique(np.asarray(df), return_inverse=True)
    per_df = [lucene_idf_of(d, n_docs) for d in distinct.tolist()]
    return np.asarray(per_df, dtype=np.float32)[which.reshape(-1)]


def lucene_average_length(total: int, n_docs: int) -> np.float64:
    """The average document length as ``lengths.mean()`` gives it (an int64 sum is exact in float64)."""
    return np.float64(total) / n_docs if n_docs else np.float64(1.0)


def lucene_norms(lengths: np.ndarray, average: np.float64, params: BM25Params) -> np.ndarray:
    """float64 length normalisation ``k1 * (1 - b + b * length / average)`` of each document."""
    return params.k1 * ((1 - params.b) + (params.b * np.asarray(lengths).astype(np.float64)) / average)


def lucene_tf_weights(idf: np.ndarray | np.float32, tf: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """float32 weight of postings from their terms' float32 idf, term frequencies and documents' norms."""
    tf64 = np.asarray(tf).astype(np.float32).astype(np.float64)
    tfc = tf64 / (norms + tf64)
    return (np.asarray(idf, dtype=np.float32).astype(np.float64) * tfc).astype(np.float32)


class BM25Index:
    """What a search asks of a BM25 index, however its rows are stored: one index, or a version's segments.

    Subclasses give ``ids`` (row -> document id), ``vocab``/``term_ids``, ``params``, ``nonoccurrence``,
    ``query_weights`` and ``_accumulate``; ranking, scoring by id and finding rows are shared.
    """

    ids: np.ndarray
    vocab: list[str]
    term_ids: dict[str, int]
    params: BM25Params
    nonoccurrence: np.ndarray | None
    analyzer: Analyzer
    _rows: RowIndex | None

    def __len__(self) -> int:
        return int(self.ids.shape[0])

    def terms(self, query: str) -> list[str]:
        """The query's stemmed, stop-word-filtered tokens (repeats kept: they weigh the term more)."""
        return self.analyzer(query)

    def query_weights(self, query: str | Mapping[str, float]) -> dict[int, float]:
        """Term id -> weight for a query text (weight = count in the query) or an explicit term -> weight map."""
        raise NotImplementedError

    def _accumulate(self, weights: Mapping[int, float], *, with_matched: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Sum the weighted postings of the query terms into one score per row (and mark the rows they touch)."""
        raise NotImplementedError

    def document_frequency(self, term: str) -> int:
        """How many documents hold a stemmed term (0 for a term the vocabulary lacks)."""
        raise NotImplementedError

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights, rows, offsets): every posting's BM25 weight as a CSC matrix, one column per term id."""
        raise NotImplementedError

    def scores(self, query: str | Mapping[str, float]) -> tuple[np.ndarray, np.ndarray]:
        """(BM25 score of every document in row order, mask of documents that contain a query term)."""
        scores, matched = self._accumulate(self.query_weights(query), with_matched=True)
        assert matched is not None
        return scores, matched

    def top(
        self, query: str | Mapping[str, float], k: int, keep: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(rows, scores) of the k best documents that contain a query term and score above 0, best first.

        Ties go to the smaller document id. ``keep`` (a bool mask over rows) restricts the documents considered.
        Only the k best are sorted: a common term matches most of the corpus, and a partition finds the k best
        of them far faster than a sort of every match.
        """
        # Every posting of the query terms is still added. MaxScore pruning, tried exactly, was slower: at hybrid's
        # depth of 1,000 the k-th score is low, so only the last term or two could be skipped, leaving most of
        # the matches to look up one by one.
        if k < 1:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        # Without a floor, a document no query term touches scores exactly 0: "> 0" alone says "matched".
        floor = self.nonoccurrence is not None
        scores, matched = self._accumulate(self.query_weights(query), with_matched=floor)
        ok = scores > 0
        if matched is not None:
            ok &= matched
        if keep is not None:
            ok &= keep
        rows = np.flatnonzero(ok)
        # Ties go to the smaller document id, not row: rows follow the order documents arrived in, and the same
        # documents must give the same top k (and hybrid's fusion the same candidates) however they arrived.
        return best_k(rows, scores[rows], k, self.ids[rows])

    def search(self, query: str | Mapping[str, float], k: int) -> list[tuple[int, float]]:
        """The k best (document id, BM25 score) pairs, best first; only documents with a positive score."""
        rows, scores = self.top(query, k)
        return list(zip(self.ids[rows].tolist(), scores.tolist(), strict=True))

    def score_ids(self, query: str | Mapping[str, float], ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """BM25 scores of the given document ids (0.0 for ids that match no query term or are unknown)."""
        scores, matched = self.scores(query)
        rows = self.rows_of(ids)
        out = np.zeros(len(rows), dtype=np.float32)
        known = rows >= 0
        out[known] = np.where(matched[rows[known]], scores[rows[known]], 0.0)
        return out

    def rows_of(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Row of each document id (-1 for unknown ids)."""
        if self._rows is None:
            self._rows = RowIndex(self.ids)
        return self._rows.rows_of(ids)


class LexicalIndex(BM25Index):
    """BM25 over stemmed words; documents are identified by int64 ids (the FAISS ids)."""

    def __init__(
        self,
        ids: np.ndarray,
        vocab: list[str],
        data: np.ndarray,
        indices: np.ndarray,
        indptr: np.ndarray,
        params: BM25Params = DEFAULT_PARAMS,
        nonoccurrence: np.ndarray | None = None,
    ) -> None:
        self.ids = ids
        self.vocab = vocab
        self.term_ids = {t: i for i, t in enumerate(vocab)}
        self.data = data
        self.indices = indices
        self.indptr = indptr
        self.params = params
        # BM25L/BM25+ give every document a floor for each query term it lacks; see bm25s.
        self.nonoccurrence = nonoccurrence
        self.analyzer = Analyzer()
        self._rows: RowIndex | None = None
        self._checked: set[int] = set()  # term ids whose posting rows were range-checked

    # -- building -------------------------------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        ids: Sequence[int] | np.ndarray,
        texts: Sequence[str],
        params: BM25Params = DEFAULT_PARAMS,
    ) -> LexicalIndex:
        """Index texts (``title + " " + abstract``) under their int64 document ids."""
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} ids but {len(texts)} texts")
        if params.method not in _METHODS:
            raise ValueError(f"unknown BM25 method {params.method!r}; choose from {', '.join(_METHODS)}")
        id_array = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(np.unique(id_array)) != len(id_array):
            raise ValueError("document ids must be unique")
        vocab_ids: dict[str, int] = {}
        corpus = term_ids(texts, Analyzer(), vocab_ids)
        vocab = list(vocab_ids)
        if not vocab:
            empty = np.zeros(0, dtype=np.float32)
            return cls(id_array, [], empty, np.zeros(0, np.int32), np.zeros(1, np.int64), params)

        import logging

        import bm25s

        # bm25s logs each build at DEBUG; some libraries configure the root logger, which would print it.
        logging.getLogger("bm25s").setLevel(logging.WARNING)

        model = bm25s.BM25(k1=params.k1, b=params.b, delta=params.delta, method=params.method)
        # Token ids plus our own vocabulary: bm25s then skips its own (slower) string handling.
        model.index((corpus, vocab_ids), create_empty_token=False, show_progress=False)
        scores = model.scores
        nonocc = getattr(model, "nonoccurrence_array", None)
        return cls(
            id_array,
            vocab,
            np.ascontiguousarray(scores["data"], dtype=np.float32),
            np.ascontiguousarray(scores["indices"], dtype=np.int32),
            np.ascontiguousarray(scores["indptr"], dtype=np.int64),
            params,
            None if nonocc is None else np.ascontiguousarray(nonocc, dtype=np.float32),
        )

    # -- persistence ----------------------------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """Write the index into ``folder`` (created if needed) as .npy arrays and JSON; no pickle."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        arrays = {"ids.npy": self.ids, "data.npy": self.data, "indices.npy": self.indices, "indptr.npy": self.indptr}
        if self.nonoccurrence is not None:
            arrays["nonoccurrence.npy"] = self.nonoccurrence
        for name, array in arrays.items():
            np.save(folder / name, array, allow_pickle=False)
        (folder / VOCAB_FILE).write_text(json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8")
        params: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": FORMAT_VERSION,
            "bm25": asdict(self.params),
            "analyzer": ANALYZER_NAME,
            "documents": len(self),
            "terms": len(self.vocab),
            "postings": int(self.data.shape[0]),
        }
        (folder / PARAMS_FILE).write_text(json.dumps(params, indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, folder: Path) -> LexicalIndex:
        """Read an index written by ``save``; raises IndexCorruptError naming the bad file."""
        folder = Path(folder)
        params_path = folder / PARAMS_FILE
        meta = _read_json(params_path)
        try:
            if meta["format"] != FORMAT_NAME or int(meta["format_version"]) != FORMAT_VERSION:
                raise ValueError(f"format {meta['format']!r} version {meta['format_version']!r}")
            if meta["analyzer"] != ANALYZER_NAME:
                raise ValueError(f"analyzer {meta['analyzer']!r}")
            params = BM25Params(**meta["bm25"])
            n_docs, n_terms, n_postings = int(meta["documents"]), int(meta["terms"]), int(meta["postings"])
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexCorruptError(f"{params_path} is not a valid lexical index description ({exc})") from None
        vocab = _read_json(folder / VOCAB_FILE)
        if not isinstance(vocab, list) or len(vocab) != n_terms or not all(isinstance(t, str) for t in vocab):
            raise IndexCorruptError(f"{folder / VOCAB_FILE} does not hold the {n_terms} terms {PARAMS_FILE} promises")
        ids = _read_array(folder / "ids.npy", np.int64, (n_docs,))
        # Postings are memory-mapped: a query reads only its terms' slices, so a large index opens without
        # reading every posting (their range is checked per query in ``scores`` instead of by a full scan).
        data = _read_array(folder / "data.npy", np.float32, (n_postings,), mmap=True)
        indices = _read_array(folder / "indices.npy", np.int32, (n_postings,), mmap=True)
        indptr = _read_array(folder / "indptr.npy", np.int64, (n_terms + 1,))
        if indptr[0] != 0 or indptr[-1] != n_postings or np.any(np.diff(indptr) < 0):
            raise IndexCorruptError(f"{folder / 'indptr.npy'} is not a valid posting-list offset array")
        nonocc = None
        if params.method in ("bm25l", "bm25+"):
            nonocc = _read_array(folder / "nonoccurrence.npy", np.float32, (n_terms,))
        return cls(ids, vocab, data, indices, indptr, params, nonocc)

    # -- querying -------------------------------------------------------------------------------------------------

    def csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(weights, rows, offsets): every posting's BM25 weight as a CSC matrix, one column per term id."""
        return self.data, self.indices, self.indptr

    def document_frequency(self, term: str) -> int:
        """How many documents hold a stemmed term (0 for a term the vocabulary lacks)."""
        tid = self.term_ids.get(term)
        return 0 if tid is None else int(self.indptr[tid + 1] - self.indptr[tid])

    def query_weights(self, query: str | Mapping[str, float]) -> dict[int, float]:
        """Term id -> weight for a query text (weight = count in the query) or an explicit term -> weight map."""
        weights = Counter(self.terms(query)) if isinstance(query, str) else query
        out: dict[int, float] = {}
        for term, w in weights.items():
            tid = self.term_ids.get(term)
            if tid is not None and w > 0:
                out[tid] = out.get(tid, 0.0) + float(w)
        return out

    def _accumulate(self, weights: Mapping[int, float], *, with_matched: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """Sum the weighted postings of the query terms into one score per row (and mark the rows they touch)."""
        n = len(self)
        scores = np.zeros(n, dtype=np.float32)
        matched = np.zeros(n, dtype=bool) if with_matched else None
        for tid, w in weights.items():
            start, end = int(self.indptr[tid]), int(self.indptr[tid + 1])
            rows = self._postings(tid, start, end)
            # Within one term's postings each row appears once, so fancy-index += is exact.
            if self.nonoccurrence is not None:
                # bm25s stores BM25L/BM25+ postings net of the floor, which every document gets.
                scores += np.float32(w) * self.nonoccurrence[tid]
            scores[rows] += np.float32(w) * self.data[start:end]
            if matched is not None:
                matched[rows] = True
        return scores, matched

    def _postings(self, tid: int, start: int, end: int) -> np.ndarray:
        """The rows of a term's postings, checked once per process to lie inside the index."""
        rows = self.indices[start:end]
        if tid not in self._checked:
            n = len(self)
            if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= n):
                raise IndexCorruptError(
                    f"the BM25 postings of term {self.vocab[tid]!r} point past the {n} documents; "
                    "rebuild with: semsearch index --full"
                )
            self._checked.add(tid)
        return rows


def best_k(rows: np.ndarray, scores: np.ndarray, k: int, ties: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k (row, score) pairs with the highest scores, best first, ties to the smaller ``ties`` value."""
    if rows.size > k:
        # Keep everything tied with the k-th score, so the tie-break below sees all of them.
        kth = np.partition(scores, rows.size - k)[rows.size - k]
        sel = scores >= kth
        rows, scores, ties = rows[sel], scores[sel], ties[sel]
    order = np.lexsort((ties, -scores))[:k]
    return rows[order], scores[order]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IndexCorruptError(f"{path} is missing; rebuild with: semsearch index --full") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexCorruptError(f"{path} cannot be read ({exc}); rebuild with: semsearch index --full") from None


def _read_array(path: Path, dtype: type[np.generic], shape: tuple[int, ...], mmap: bool = False) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except FileNotFoundError:
        raise IndexCorruptError(f"{path} is missing; rebuild with: semsearch index --full") from None
    except (OSError, ValueError, EOFError) as exc:
        raise IndexCorruptError(f"{path} cannot be read ({exc}); rebuild with: semsearch index --full") from None
    if array.dtype != np.dtype(dtype) or array.shape != shape:
        raise IndexCorruptError(
            f"{path} holds {array.dtype}{list(array.shape)}, expected {np.dtype(dtype)}{list(shape)}; "
            "rebuild with: semsearch index --full"
        )
    return array
