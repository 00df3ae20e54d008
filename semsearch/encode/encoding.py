"""Encoding a build's documents through the embedding cache: what is missing, in which chunks, then the matrix.

Both engines follow the same plan (``semsearch index`` locally, ``--engine ray`` on a cluster), so they encode
exactly the same chunks. The ONNX encoder does not need that (it encodes each text alone, so a vector depends
on its text only); sentence-transformers batches with padding, and the shared chunks keep its two engines alike.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from semsearch.core.errors import SemsearchError
from semsearch.core.records import Document
from semsearch.encode.cache import EmbeddingCache, embedding_key
from semsearch.encode.embedder import Embedder
from semsearch.encode.sentence_runs import SentenceText, sentence_text
from semsearch.encode.windows import ReadChars, document_windows, pool
from semsearch.store.layout import doc_num
from semsearch.store.passages_part import PassageSet
from semsearch.store.windows_part import WindowSet

# Texts handed to the encoder per progress step; each chunk is cached at once, so an
# interrupted build resumes from the last finished chunk.
ENCODE_CHUNK = 256
Progress = Callable[..., None]


@dataclass
class CachePlan:
    """The texts to encode and their cache keys, the vectors the cache already has, and the rows still to encode.

    Rows ``0..n-1`` are the documents' embedding texts; with a ``read_chars`` (windows.py) the texts after them
    are the windows past the encoder's cut, ``windows[i]`` naming document i's, and its vector pools them. With
    ``sentences`` (``--reading sentences``) the rows after them are each document's sentences, whose vectors
    come from the runs that read the document (sentence_runs.py), so a document is encoded whole or not at all;
    the document's own vector, the mean of its sentences', then has a key of that reading's.
    """

    texts: list[str]
    keys: list[str]
    known: dict[str, np.ndarray]
    missing: list[int]  # row numbers, first occurrence of each missing key, in document order
    windows: list[list[int]] = field(default_factory=list)  # per document, the rows of its tail windows
    sentences: list[SentenceText] = field(default_factory=list)  # per document, with --reading sentences

    @classmethod
    def make(
        cls,
        documents: Sequence[Document],
        cache: EmbeddingCache,
        read_chars: ReadChars | None = None,
        *,
        every: bool = False,
        sentences: bool = False,
    ) -> CachePlan:
        items = [d.embedding_parts() for d in documents]
        texts = [full for full, _, _ in items]
        windows: list[list[int]] = []
        read = [sentence_text(*item) for item in items] if sentences else []
        if sentences:
            # A document read in sentences has the vector its sentences pool (sentence_runs.py), not its text's.
            keys = [st.document_key() if st.spans else embedding_key(st.text) for st in read]
            for row, st in enumerate(read):
                windows.append(list(range(len(keys), len(keys) + len(st.spans))))
                keys.extend(st.keys())
                texts.extend([texts[row]] * len(st.spans))  # read with their document, never alone
        else:
            keys = [embedding_key(t) for t in texts]
            for tails in document_windows(items, read_chars, every=every):
                windows.append(list(range(len(texts), len(texts) + len(tails))))
                texts.extend(tails)
                keys.extend(embedding_key(t) for t in tails)
        known = cache.get_many(keys)
        missing = sorted({k: i for i, k in enumerate(keys) if k not in known}.values())
        return cls(texts, keys, known, missing, windows, read)

    def missing_documents(self) -> list[int]:
        """The documents (rows) a sentence reading must run: whose vector or one sentence's vector is missing."""
        lacking = set(self.missing)
        return [row for row, rows in enumerate(self.windows) if row in lacking or lacking.intersection(rows)]

    def document_chunks(self, size: int | None = None) -> Iterator[list[int]]:
        """``missing_documents`` in encoder-sized chunks (``ENCODE_CHUNK`` documents unless told)."""
        size = size or ENCODE_CHUNK
        todo = self.missing_documents()
        for start in range(0, len(todo), size):
            yield todo[start : start + size]

    def chunks(self, size: int | None = None) -> Iterator[list[int]]:
        """The missing rows in encoder-sized chunks (``ENCODE_CHUNK`` unless told)."""
        size = size or ENCODE_CHUNK
        for start in range(0, len(self.missing), size):
            yield self.missing[start : start + size]

    def absent(self) -> int:
        """How many distinct texts still have no vector."""
        return sum(1 for k in dict.fromkeys(self.keys) if k not in self.known)

    def touched(self) -> int:
        """How many documents lack a vector for their text or one of their windows (what encoding serves)."""
        lacking = set(self.missing)
        spans = self.windows or [[] for _ in self.keys]
        return sum(1 for row, rows in enumerate(spans) if row in lacking or lacking.intersection(rows))

    def documents(self) -> int:
        """How many documents the plan makes vectors for."""
        return len(self.windows) if self.windows else len(self.keys)

    def matrix(self, dimension: int) -> np.ndarray:
        """The (documents, dimension) float32 matrix, row i for document i (pooled with its windows)."""
        out = np.zeros((self.documents(), dimension), dtype=np.float32)
        for row in range(len(out)):
            whole = self.known[self.keys[row]]
            rows = self.windows[row] if self.windows and not self.sentences else []
            out[row] = pool(whole, np.stack([self.known[self.keys[j]] for j in rows])) if rows else whole
        return out


def whole_and_windows(
    documents: Sequence[Document],
    cache: EmbeddingCache,
    read_chars: ReadChars | None,
    dimension: int,
    *,
    every: bool = False,
    sentences: bool = False,
) -> tuple[np.ndarray, WindowSet]:
    """After encoding: each document's vector and its windows' (or sentences') vectors, read from the cache.

    What ``--reading windows`` (``windows-all``, ``sentences``) stores (store/windows_part.py); read back from the
    cache so that both engines, which fill the same cache, give the same files.
    """
    plan = CachePlan.make(documents, cache, read_chars, every=every, sentences=sentences)
    if plan.missing:
        raise SemsearchError(f"{len(plan.missing)} texts have no vector after encoding")
    whole = np.zeros((len(documents), dimension), dtype=np.float32)
    for row in range(len(documents)):
        whole[row] = plan.known[plan.keys[row]]
    spans = plan.windows or [[] for _ in documents]
    rows = [j for span in spans for j in span]
    owners = np.array([doc_num(documents[i].id) for i, span in enumerate(spans) for _ in span], dtype=np.int64)
    vectors = np.zeros((len(rows), dimension), dtype=np.float16)
    for out, j in enumerate(rows):
        vectors[out] = plan.known[plan.keys[j]]
    return whole, WindowSet(owners, vectors)


def check_shape(vectors: np.ndarray, rows: int, dimension: int, texts: Sequence[str] = ()) -> None:
    """Raise when an encoder returned something else than one finite vector per text (``texts``: to name one)."""
    if vectors.shape != (rows, dimension):
        raise SemsearchError(f"encoder returned shape {vectors.shape}, expected ({rows}, {dimension})")
    finite = np.isfinite(vectors).all(axis=1)
    if not finite.all():
        # A NaN row would be cached, published and then match nothing ("no results", exit 0) or kill k-means.
        row = int(np.flatnonzero(~finite)[0])
        text = f": {texts[row][:60]!r}" if row < len(texts) else ""
        raise SemsearchError(f"encoder returned a non-finite vector (NaN or inf) for text {row + 1} of {rows}{text}")


def encode_with_cache(
    embedder: Embedder,
    documents: Sequence[Document],
    cache: EmbeddingCache,
    *,
    batch_size: int,
    progress: bool,
    read_chars: ReadChars | None = None,
    every: bool = False,
    sentences: bool = False,
) -> tuple[np.ndarray, int]:
    """Vectors for the documents in order, encoding only texts the cache lacks; returns (vectors, encoded).

    With ``read_chars`` each document's vector pools its tail windows (windows.py), with ``every`` also encoding
    every window from the start (``--reading windows-all``); with ``sentences`` a document's runs also give
    its sentences' vectors (``--reading sentences``); ``encoded`` counts documents.
    """
    plan = CachePlan.make(documents, cache, read_chars, every=every, sentences=sentences)
    touched = plan.touched()
    if plan.sentences and plan.missing:
        _encode_sentences(embedder, plan, cache, progress)
    elif plan.missing:
        bar = progress_bar(len(plan.missing), progress)
        for chunk in plan.chunks():
            texts = [plan.texts[i] for i in chunk]
            vectors = embedder.encode(texts, batch_size=batch_size)
            check_shape(vectors, len(chunk), embedder.dimension, texts)
            pairs = cache.put_many([(plan.keys[i], vectors[j]) for j, i in enumerate(chunk)])
            plan.known.update(pairs)
            bar(len(chunk))
        bar(0, close=True)
    return plan.matrix(embedder.dimension), touched


def _encode_sentences(embedder: Embedder, plan: CachePlan, cache: EmbeddingCache, progress: bool) -> None:
    """Run every document the plan lacks a vector of (its own and its sentences'), a chunk at a time."""
    read = getattr(embedder, "encode_sentences", None)
    if not callable(read):
        raise SemsearchError(f"encoder {embedder.name!r} cannot read sentences (--reading sentences needs ONNX)")
    chunks = list(plan.document_chunks())
    bar = progress_bar(sum(len(c) for c in chunks), progress)
    for chunk in chunks:
        pairs: list[tuple[str, np.ndarray]] = []
        for row, (document, sentences) in zip(chunk, read([plan.sentences[row] for row in chunk]), strict=True):
            rows = plan.windows[row]
            check_shape(np.asarray(document)[None, :], 1, embedder.dimension)
            check_shape(np.asarray(sentences), len(rows), embedder.dimension)
            pairs.append((plan.keys[row], document))
            pairs.extend((plan.keys[j], vector) for j, vector in zip(rows, sentences, strict=True))
        plan.known.update(cache.put_many(pairs))
        bar(len(chunk))
    bar(0, close=True)


def progress_bar(total: int, enabled: bool, desc: str = "encoding") -> Progress:
    """A tqdm bar on stderr that knows its total, or a no-op when disabled or stderr is not a terminal."""
    if not enabled or total < 64 or not sys.stderr.isatty():
        return lambda n, close=False: None
    from tqdm import tqdm

    bar = tqdm(total=total, unit="doc", desc=desc, file=sys.stderr, dynamic_ncols=True)

    def update(n: int, close: bool = False) -> None:
        bar.update(n)
        if close:
            bar.close()

    return update


def passage_texts(document: Document) -> list[str]:
    """What the encoder reads of each of a document's passages: the passage alone, as a query's words meet it."""
    return [p.text for p in document.passages]


def encode_passages(
    embedder: Embedder,
    documents: Sequence[Document],
    cache: EmbeddingCache,
    *,
    batch_size: int,
    progress: bool,
) -> tuple[PassageSet, int]:
    """The passages of the documents (``--full-text``) with their vectors, encoding only texts the cache lacks.

    Returns the passages (rows in document order, each document's in reading order) and how many were encoded.
    """
    owners: list[int] = []
    pages: list[int] = []
    texts: list[str] = []  # as encoded
    shown: list[str] = []  # as stored
    for doc in documents:
        num = doc_num(doc.id)
        for passage, text in zip(doc.passages, passage_texts(doc), strict=True):
            owners.append(num)
            pages.append(passage.page)
            texts.append(text)
            shown.append(passage.text)
    keys = [embedding_key(t) for t in texts]
    known = cache.get_many(keys)
    missing = sorted({k: i for i, k in enumerate(keys) if k not in known}.values())
    bar = progress_bar(len(missing), progress, desc="passages")
    for start in range(0, len(missing), ENCODE_CHUNK):
        chunk = missing[start : start + ENCODE_CHUNK]
        batch = [texts[i] for i in chunk]
        vectors = embedder.encode(batch, batch_size=batch_size)
        check_shape(vectors, len(chunk), embedder.dimension, batch)
        # As the cache serves them, so a rebuild from the cache gives the same passages' vectors.
        known.update(cache.put_many([(keys[i], vectors[j]) for j, i in enumerate(chunk)]))
        bar(len(chunk))
    bar(0, close=True)
    matrix = np.zeros((len(texts), embedder.dimension), dtype=np.float16)
    for row, key in enumerate(keys):
        matrix[row] = known[key]
    ids = np.array(owners, dtype=np.int64)
    return PassageSet(ids, np.array(pages, dtype=np.int32), shown, matrix), len(missing)
