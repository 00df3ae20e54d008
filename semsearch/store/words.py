"""The words a lexical folder's documents use, as typed, with how many documents use each: typo correction's dictionary.

BM25 keeps stems ("convolut"), which a misspelling may no longer share ("convolutoinal" stems to "convolutoin"),
and which cannot be shown back to a user. So each ``lexical/`` folder also keeps ``words.json``: every
lowercased non-stop word of its documents (the analyzer's tokens before stemming) and its document frequency.
A version of several segments sums its segments' counts; rows a later refresh hid still count there, which a
dictionary of spellings can afford (it only ranks candidate corrections).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from semsearch.core.errors import IndexCorruptError
from semsearch.store.analyzer import STOPWORDS, TOKEN_PATTERN

WORDS_FILE = "words.json"
WORDS_FORMAT = "semsearch-words"


def count_words(texts: Iterable[str]) -> Counter[str]:
    """Each lowercased non-stop word (2+ word characters, no digit) -> how many of the texts hold it."""
    counts: Counter[str] = Counter()
    for text in texts:
        counts.update({w for w in TOKEN_PATTERN.findall(text.lower()) if w.isalpha()} - STOPWORDS)
    return counts


def write_words(folder: Path, texts: Sequence[str]) -> int:
    """Write ``words.json`` for the texts a lexical folder indexes; returns how many distinct words it holds."""
    counts = count_words(texts)
    # Sorted, so the same documents give the same bytes however they arrived.
    body = {"format": WORDS_FORMAT, "documents": len(texts), "words": dict(sorted(counts.items()))}
    (Path(folder) / WORDS_FILE).write_text(json.dumps(body, ensure_ascii=False, separators=(",", ":")), "utf-8")
    return len(counts)


def read_words(folders: Sequence[Path]) -> Counter[str] | None:
    """The summed word counts of lexical folders; None when any lacks ``words.json`` (built before it existed)."""
    total: Counter[str] = Counter()
    for folder in folders:
        path = Path(folder) / WORDS_FILE
        if not path.is_file():
            return None
        try:
            body = json.loads(path.read_text(encoding="utf-8"))
            words = body["words"] if body.get("format") == WORDS_FORMAT else None
            if not isinstance(words, dict):
                raise ValueError("no word counts")
            total.update({str(w): int(c) for w, c in words.items()})
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            why = f"{path} is not a valid word list ({exc}); rebuild with: semsearch index --full"
            raise IndexCorruptError(why) from None
    return total
