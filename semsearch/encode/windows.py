"""Reading a whole abstract with a short-window encoder: sentence windows past the encoder's cut, pooled.

all-MiniLM-L6-v2 reads 256 tokens; most abstracts are longer, so the dense side never saw how they end. With
``--reading pooled`` a document's vector is the normalized mean of the whole-text vector (what the encoder reads
of it) and one vector per window of ``WINDOW_SENTENCES`` sentences, title first, that reaches past the cut. Each
window is one text encoded alone (one text, one vector), cached by its text like any other; a document the
encoder reads whole keeps its one vector.

Pooling into one vector blurs what the windows add; scoring a document by its whole-text vector and its best
window keeps it, with these tail windows (``--reading windows``) or every window from the start
(``every_window``, ``--reading windows-all``; docs/explanation/quality.md compares them). Those readings store
the window vectors per segment (store/windows_part.py) and keep the documents' whole-text vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from semsearch.core.sentences import split_sentences

WINDOW_SENTENCES = 2

ReadChars = Callable[[str], int]


def reader_of(embedder: object) -> ReadChars | None:
    """The embedder's ``read_chars`` (how many leading characters of a text it reads), or None when it reads all."""
    fn = getattr(embedder, "read_chars", None)
    return fn if callable(fn) else None


def tail_windows(title: str, text: str, prefix: int, cut: int, size: int = WINDOW_SENTENCES) -> list[str]:
    """The windows of ``size`` sentences of ``text`` (each with the title) that cover what lies past ``cut``.

    ``cut`` counts characters of the embedding text, whose first ``prefix`` characters precede ``text`` (the
    title and a space). Windows start at the first sentence the encoder did not read to its end and do not
    overlap; the last may hold fewer sentences.
    """
    spans = split_sentences(text)
    first = next((i for i, (_, end) in enumerate(spans) if prefix + end > cut), None)
    if first is None:
        return []
    out = []
    for i in range(first, len(spans), size):
        start, end = spans[i][0], spans[min(i + size, len(spans)) - 1][1]
        body = text[start:end]
        out.append(f"{title} {body}" if title else body)
    return out


def every_window(title: str, text: str, size: int = WINDOW_SENTENCES) -> list[str]:
    """Every non-overlapping window of ``size`` sentences of ``text`` from its start, each with the title.

    None for a text of ``size`` sentences or fewer (its whole-text vector is that window already).
    """
    spans = split_sentences(text)
    if len(spans) <= size:
        return []
    out = []
    for i in range(0, len(spans), size):
        body = text[spans[i][0] : spans[min(i + size, len(spans)) - 1][1]]
        out.append(f"{title} {body}" if title else body)
    return out


def pool(whole: np.ndarray, windows: np.ndarray) -> np.ndarray:
    """The unit mean of the whole-text vector and the window vectors (the whole vector alone when none)."""
    if len(windows) == 0:
        return np.asarray(whole, dtype=np.float32)
    mean = (np.asarray(whole, dtype=np.float64) + np.asarray(windows, dtype=np.float64).sum(axis=0)) / (
        1 + len(windows)
    )
    norm = float(np.linalg.norm(mean))
    return np.asarray(mean / norm if norm > 0 else mean, dtype=np.float32)


def document_windows(
    items: Sequence[tuple[str, str, str]],
    read_chars: ReadChars | None,
    size: int = WINDOW_SENTENCES,
    *,
    every: bool = False,
) -> list[list[str]]:
    """Per (embedding text, title, text): the tail windows the encoder needs beyond the embedding text.

    With ``every`` (``--reading windows-all``): every window from the start, whatever the encoder reads.
    """
    if every:
        out_all = []
        for full, title, text in items:
            prefix = len(full) - len(text) if full.endswith(text) else 0
            out_all.append(every_window(title if prefix else "", text, size))
        return out_all
    if read_chars is None:
        return [[] for _ in items]
    out = []
    for full, title, text in items:
        cut = read_chars(full)
        prefix = len(full) - len(text) if full.endswith(text) else 0
        out.append(tail_windows(title if prefix else "", text, prefix, cut, size) if cut < len(full.rstrip()) else [])
    return out
