"""Reading a whole abstract in encoder runs and pooling one vector per sentence from them (``--reading sentences``).

The encoder reads 256 tokens (all-MiniLM-L6-v2); most abstracts are longer. Here an abstract is read in runs:
the first is exactly the truncated text, so its pooled output is the whole-text vector every other reading has
(same bytes, same cache entry); each later run puts the title's tokens first and starts at the first sentence the
runs before did not hold to its end. A sentence's vector is the unit mean of its tokens' outputs in the run that
holds it whole, so every sentence is read in context and costs no run of its own ("late chunking").

Measured (scripts/study_late_chunks.py, SciFact train, int8 MiniLM): re-scoring the dense top 200 by
0.3 * whole + 0.7 * max(whole, best sentence) lifts nDCG@10 by +0.028 +- 0.005, near every 2-sentence window
encoded alone (+0.035 +- 0.006, ``windows-all``) for a 1.27x first build of NeurIPS 2025 instead of 2.35x
(scripts/bench_reading.py); pooled windows of 2 or 3 sentences did less (+0.025, +0.022), pooling the title's
tokens in changed nothing.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from semsearch.core.sentences import split_sentences
from semsearch.core.textnorm import normalize_text

# Bumped whenever the runs or the pooling change, so cached sentence vectors of another scheme are never reused.
SCHEME = "sentences-2"

Span = tuple[int, int]


@dataclass(frozen=True)
class SentenceText:
    """A text as the encoder gets it, the character spans of its sentences, and where its title ends."""

    text: str
    spans: tuple[Span, ...]  # () when the text is one sentence: its whole-text vector is that sentence
    title_end: int = 0  # characters of ``text`` before the abstract (the title and a space), repeated in later runs

    def keys(self) -> list[str]:
        """The cache key of each sentence's vector (the spans and the text name it; see ``SCHEME``)."""
        digest = hashlib.sha256(f"{SCHEME}\0{self.title_end}\0{self.spans}\0".encode())
        digest.update(normalize_text(self.text).encode("utf-8"))
        head = digest.hexdigest()
        return [f"{head}:{i}" for i in range(len(self.spans))]


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

    The first run is the text's first ``room`` tokens (the truncated text). A later run starts at the first
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
