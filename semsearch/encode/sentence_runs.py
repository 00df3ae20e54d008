"""Reading a whole abstract in short encoder runs, one vector per sentence pooled from them (``--reading sentences``).

The encoder reads 256 tokens (all-MiniLM-L6-v2); most abstracts are longer. Here an abstract is read in runs of
``RUN_TOKENS`` (128, the length all-MiniLM-L6-v2 and all-mpnet-base-v2 were trained on): the first run is the
text's first 128 tokens; each later run puts the title's tokens first and starts at the first sentence the runs
before did not hold to its end. A sentence's vector is the unit mean of its tokens' outputs in the run that holds
it whole, so every sentence is read in context and costs no run of its own ("late chunking"); the document's
vector is the unit mean of its sentences' vectors, so it reads the whole abstract too.

Runs of 128 tokens read a sentence with enough of its context and cost a fraction of encoding every window alone
(``windows-all``); longer runs blur the sentences, shorter ones pay more runs for nothing. How each reading
scores is in docs/explanation/quality.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from semsearch.core.sentences import split_sentences
from semsearch.core.textnorm import normalize_text

# Bumped whenever the runs or the pooling change, so cached vectors of another scheme are never reused, and an
# index recorded under another scheme is re-encoded by its next build (write/plan.py). "sentences-2" read runs of
# the encoder's whole window, the first being the truncated text, and kept the truncated text's vector.
SCHEME = "sentences-3"
RUN_TOKENS = 128  # tokens of a run, [CLS] and [SEP] included (at most the encoder's window)
PREVIOUS_SCHEME = "sentences-2"  # what an index that records no scheme was built with

Span = tuple[int, int]


@dataclass(frozen=True)
class SentenceText:
    """A text as the encoder gets it, the character spans of its sentences, and where its title ends."""

    text: str
    spans: tuple[Span, ...]  # () when the text is one sentence: its whole-text vector is that sentence
    title_end: int = 0  # characters of ``text`` before the abstract (the title and a space), repeated in later runs

    def keys(self) -> list[str]:
        """The cache key of each sentence's vector (the spans and the text name it; see ``SCHEME``)."""
        return [f"{self._head}:{i}" for i in range(len(self.spans))]

    def document_key(self) -> str:
        """The cache key of the document's vector (its sentences' unit mean), for a text of two sentences or more."""
        return f"{self._head}:document"

    @cached_property
    def _head(self) -> str:
        digest = hashlib.sha256(f"{SCHEME}\0{self.title_end}\0{self.spans}\0".encode())
        digest.update(normalize_text(self.text).encode("utf-8"))
        return digest.hexdigest()


def sentence_text(full: str, title: str, text: str) -> SentenceText:
    """The sentences of a document's embedding text ``full`` (its title, a space, then ``text``)."""
    prefix = len(full) - len(text) if title and full.endswith(text) else 0
    spans = tuple((a + prefix, b + prefix) for a, b in split_sentences(text if prefix else full))
    return SentenceText(full, spans if len(spans) > 1 else (), prefix)


def sentence_tokens(offsets: Sequence[Span], spans: Sequence[Span]) -> list[Span]:
    """The [first, end) token range of each character span, from the tokens' character offsets (in order)."""
    n, j, out = len(offsets), 0, []
    for start, end in spans:
        while j < n and offsets[j][1] <= start:
            j += 1
        first = j
        while j < n and offsets[j][0] < end:
            j += 1
        out.append((first, j))
    return out


@dataclass(frozen=True)
class Run:
    """One encoder run: which content tokens it reads, and where each sentence it holds whole lies in it."""

    positions: tuple[int, ...]  # content token numbers, in order (the title's first in a later run)
    held: dict[int, Span]  # sentence number -> [start, end) within ``positions``


def plan_runs(n: int, sentences: Sequence[Span], title_tokens: int, room: int) -> list[Run]:
    """Runs of at most ``room`` content tokens that hold every sentence of a text of ``n`` tokens.

    The first run is the text's first ``room`` tokens. A later run starts at the first
    sentence not yet held, after the title's first ``title_tokens`` (at most half a run). A sentence longer than
    a run could hold is held cut, in the run it starts in.
    """
    title_cap = min(title_tokens, room // 2)
    runs: list[Run] = []
    start, first_open = 0, 0
    while True:
        title = tuple(range(min(title_cap, start))) if runs else ()
        end = min(n, start + room - len(title))
        held: dict[int, Span] = {}
        for s in range(first_open, len(sentences)):
            a, b = sentences[s]
            if b > a and a >= start and b <= end:
                held[s] = (len(title) + a - start, len(title) + b - start)
        rest = [s for s in range(first_open, len(sentences)) if s not in held and sentences[s][1] > sentences[s][0]]
        if rest:
            a, b = sentences[rest[0]]
            if start <= a < end and b - a > room - min(title_cap, a):  # no run would hold it whole: its head here
                held[rest[0]] = (len(title) + a - start, len(title) + end - start)
                rest = rest[1:]
        runs.append(Run(title + tuple(range(start, end)), held))
        if not rest:
            return runs
        first_open = rest[0]
        start = sentences[first_open][0]
