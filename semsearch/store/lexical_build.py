"""Building the BM25 index: term frequencies, corpus-wide statistics, eager weights, and reuse on a refresh.

Lucene BM25 (the default) is computed here with numpy instead of bm25s, the same float64 steps bm25s takes, so
the weights are the same bits. Beside the weights the lexical folder keeps what recomputing them needs::

    tf.npy        int32 term frequency of each posting (aligned with data.npy / indices.npy)
    lengths.npy   int32 analysed length of each document, in row order
    keys.npy      uint64 hash of each document's indexed text, in row order

A refresh takes the live version's postings of every document whose id and indexed text are unchanged,
analyses only the others, and weighs every posting again from the statistics of the whole new corpus
(document frequencies, average length). The result does not depend on how the corpus arrived: the same
documents give the same weights whether built at once or in arrivals. Other BM25 variants go through bm25s
and are always built in full.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError
from semsearch.core.records import Document
from semsearch.store.analyzer import ANALYZER_NAME, Analyzer, lexical_text, term_ids
from semsearch.store.lexical import (
    DEFAULT_PARAMS,
    KEYS_FILE,
    LENGTHS_FILE,
    TF_FILE,
    BM25Params,
    LexicalIndex,
    _read_array,
    bm25_settings,
    lucene_average_length,
    lucene_idf,
    lucene_norms,
    lucene_tf_weights,
)
from semsearch.store.words import write_words


@dataclass
class Postings:
    """(term, row, term frequency) triples sorted by term, then row: a CSC matrix before weighting."""

    terms: np.ndarray  # int64 term id of each posting
    rows: np.ndarray  # int64 row of each posting
    tf: np.ndarray  # int32

    @classmethod
    def empty(cls) -> Postings:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32))

    @classmethod
    def of(cls, corpus: Sequence[Sequence[int]], rows: np.ndarray) -> Postings:
        """The postings of analysed texts (term ids per text), text i being row ``rows[i]``."""
        lengths = np.fromiter((len(doc) for doc in corpus), dtype=np.int64, count=len(corpus))
        if not lengths.sum():
            return cls.empty()
        terms = np.fromiter((t for doc in corpus for t in doc), dtype=np.int64, count=int(lengths.sum()))
        doc_rows = np.repeat(np.asarray(rows, dtype=np.int64), lengths)
        span = int(doc_rows.max()) + 1
        keys, counts = np.unique(terms * span + doc_rows, return_counts=True)
        return cls(keys // span, keys % span, counts.astype(np.int32))

    def sorted(self, n_rows: int) -> Postings:
        order = np.argsort(self.terms * max(n_rows, 1) + self.rows, kind="stable")
        return Postings(self.terms[order], self.rows[order], self.tf[order])


def text_keys(texts: Sequence[str]) -> np.ndarray:
    """A 64-bit hash of each indexed text: a refresh reuses a document's postings only when it is unchanged."""
    return np.fromiter(
        (int.from_bytes(hashlib.blake2b(t.encode("utf-8"), digest_size=8).digest(), "little") for t in texts),
        dtype=np.uint64,
        count=len(texts),
    )


def lucene_weights(postings: Postings, lengths: np.ndarray, df: np.ndarray, params: BM25Params) -> np.ndarray:
    """Lucene BM25 weight of every posting from each term's document frequency ``df``: bm25s's float32 bits."""
    n_docs = len(lengths)
    idf = lucene_idf(df, n_docs)
    average = lucene_average_length(int(np.asarray(lengths, dtype=np.int64).sum()), n_docs)
    norms = lucene_norms(np.asarray(lengths)[postings.rows], average, params)
    return lucene_tf_weights(idf[postings.terms], postings.tf, norms)


@dataclass
class _Previous:
    """What the live version's lexical folder lends a refresh."""

    vocab: list[str]
    kept: Postings  # its postings of unchanged documents, rows already those of the new version
    reanalyse: np.ndarray  # new rows whose text must be analysed


def _previous(folder: Path, ids: np.ndarray, keys: np.ndarray, params: BM25Params) -> _Previous | None:
    """The live version's reusable postings, or None when it has none to lend (old format, other settings)."""
    if not (folder / TF_FILE).is_file():
        return None
    try:
        old = LexicalIndex.load(folder)  # checks the format and the analyzer
        tf = _read_array(folder / TF_FILE, np.int32, (int(old.data.shape[0]),), mmap=True)
        old_keys = _read_array(folder / KEYS_FILE, np.uint64, (len(old),))
    except IndexCorruptError:
        return None  # a damaged or unexpected previous index only costs a full build
    if old.params != params:
        return None
    old_row = old.rows_of(ids)
    same = old_row >= 0
    same[same] = old_keys[old_row[same]] == keys[same]
    new_row_of = np.full(len(old), -1, dtype=np.int64)
    new_row_of[old_row[same]] = np.flatnonzero(same)
    rows = new_row_of[np.asarray(old.indices, dtype=np.int64)]
    keep = rows >= 0
    terms = np.repeat(np.arange(len(old.vocab), dtype=np.int64), np.diff(old.indptr))
    kept = Postings(terms[keep], rows[keep], np.asarray(tf)[keep])
    return _Previous(list(old.vocab), kept, np.flatnonzero(~same))


def build_lexical(
    ids: Sequence[int] | np.ndarray,
    texts: Sequence[str],
    params: BM25Params = DEFAULT_PARAMS,
    *,
    previous: Path | None = None,
) -> tuple[LexicalIndex, dict[str, np.ndarray], int]:
    """The BM25 index of texts under their ids, its extra arrays (tf, lengths, keys) and how many were analysed.

    ``previous`` is the live version's lexical folder: its postings of unchanged texts are reused.
    """
    id_array = np.asarray(ids, dtype=np.int64).reshape(-1)
    if len(id_array) != len(texts):
        raise ValueError(f"{len(id_array)} ids but {len(texts)} texts")
    if params.method != "lucene":
        return LexicalIndex.build(id_array, texts, params), {}, len(texts)
    if len(np.unique(id_array)) != len(id_array):
        raise ValueError("document ids must be unique")
    n = len(id_array)
    keys = text_keys(texts)
    lent = _previous(previous, id_array, keys, params) if previous is not None else None
    vocab_ids = {t: i for i, t in enumerate(lent.vocab)} if lent is not None else {}
    rows = lent.reanalyse if lent is not None else np.arange(n, dtype=np.int64)
    corpus = term_ids([texts[int(r)] for r in rows], Analyzer(), vocab_ids)
    fresh = Postings.of(corpus, rows) if len(rows) else Postings.empty()
    if lent is not None:
        both = Postings(
            np.concatenate([lent.kept.terms, fresh.terms]),
            np.concatenate([lent.kept.rows, fresh.rows]),
            np.concatenate([lent.kept.tf, fresh.tf]),
        )
        postings = both.sorted(n)
    else:
        postings = fresh  # np.unique already sorted them by (term, row)
    # Terms no document holds any more leave the vocabulary, as a build from scratch would never have them.
    vocab = list(vocab_ids)
    df = np.bincount(postings.terms, minlength=len(vocab))
    live = df > 0
    if not live.all():
        renumber = np.cumsum(live) - 1
        postings = Postings(renumber[postings.terms], postings.rows, postings.tf)
        vocab = [t for t, alive in zip(vocab, live.tolist(), strict=True) if alive]
        df = df[live]
    lengths = np.bincount(postings.rows, weights=postings.tf, minlength=n).astype(np.int64)
    data = lucene_weights(postings, lengths, df, params)
    indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
    index = LexicalIndex(id_array, vocab, data, postings.rows.astype(np.int32), indptr, params)
    extras = {TF_FILE: postings.tf.astype(np.int32), LENGTHS_FILE: lengths.astype(np.int32), KEYS_FILE: keys}
    return index, extras, len(rows)


def write_lexical(
    folder: Path,
    ids: Sequence[int] | np.ndarray,
    documents: Sequence[Any],
    *,
    previous: Path | None = None,
    params: BM25Params | None = None,
) -> dict[str, Any]:
    """Build and save the BM25 index of documents (anything with ``title`` and ``text``) under their ids.

    ``previous`` is the live version's lexical folder, whose postings of unchanged documents are reused;
    ``params`` default to the current settings (``lexical.bm25_settings``). Returns the manifest's "lexical" entry.
    """
    # A title-only document's text is its title: index it once. A Document's decoded text is the one it embeds.
    texts = [
        d.embedding_text() if isinstance(d, Document) else lexical_text(None if d.title_only else d.title, d.text)
        for d in documents
    ]
    lexical, extras, analysed = build_lexical(ids, texts, params or bm25_settings(), previous=previous)
    lexical.save(folder)
    for name, array in extras.items():
        np.save(folder / name, array, allow_pickle=False)
    words = write_words(folder, texts)
    return {
        "bm25": asdict(lexical.params),
        "terms": len(lexical.vocab),
        "words": words,
        "analysed": analysed,
        "analyzer": ANALYZER_NAME,
    }
