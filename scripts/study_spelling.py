"""How typo correction should find its word: against stems or whole words, with rapidfuzz or symspellpy.

    python scripts/study_spelling.py                 # the 157k ML Anthology abstracts
    python scripts/study_spelling.py --docs 20000    # the first 20,000

Counts words over the corpus as an index does (``store.words``: document frequencies) and BM25's stems, then
makes typos of common abstract words (one or two slips each: a swap, a deletion, an insertion or a substitution,
fixed seed) and corrects each two ways: the typed word against the frequent whole words (what
``query.spelling`` does) and the typed word's stem against the frequent stems (BM25's vocabulary, no extra file).
Prints one JSON line: each way's share of typos corrected to the right word (or stem), and what a look-up costs:
rapidfuzz's per word, symspellpy's (when installed) per word and the delete index it builds first.
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.query.spelling import KNOWN, Vocabulary, nearest  # noqa: E402
from semsearch.store.lexical import Analyzer, lexical_text  # noqa: E402
from semsearch.store.words import count_words  # noqa: E402

CORPUS = REPO.parent / "shared" / "data" / "mlanthology" / "corpus.jsonl.gz"


def slip(word: str, rng: random.Random) -> str:
    """One typing slip inside a word (never its first letter)."""
    i = rng.randrange(1, len(word) - 1)
    kind = rng.choice(["swap", "delete", "insert", "replace"])
    if kind == "swap":
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if kind == "delete":
        return word[:i] + word[i + 1 :]
    letter = rng.choice("aeioulnrst")
    return word[:i] + letter + word[i + (kind == "replace") :]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=0, help="read only this many abstracts (0: all)")
    parser.add_argument("--typos", type=int, default=400)
    args = parser.parse_args()
    if not CORPUS.is_file():
        raise SystemExit(f"{CORPUS} is missing: this study reads the ML Anthology corpus from ../shared")
    analyzer = Analyzer()
    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        rows = (json.loads(line) for line in fh)
        texts = [lexical_text(r.get("title"), r.get("text") or "") for r in itertools.islice(rows, args.docs or None)]
    words = count_words(texts)
    stems: Counter[str] = Counter()
    for text in texts:
        stems.update(set(analyzer(text)))
    frequent_words = [w for w, c in words.items() if c >= KNOWN and len(w) >= 3]

    vocabulary, stem_vocabulary = Vocabulary.of(words), Vocabulary.of(stems)
    rng = random.Random(1)
    common = [w for w, _ in words.most_common(2200)[200:] if len(w) >= 5]
    outcome: Counter[str] = Counter()
    word_s = 0.0
    tried = 0
    for word in rng.sample(common, min(args.typos, len(common))):
        typed = slip(word, rng) if rng.random() < 0.5 else slip(slip(word, rng), rng)
        if typed == word or words.get(typed, 0) >= KNOWN:
            outcome["typo is itself a frequent word"] += 1
            continue
        tried += 1
        began = time.perf_counter()
        got = nearest(typed, vocabulary)
        word_s += time.perf_counter() - began
        right = got is not None and analyzer.stem(got[0]) == analyzer.stem(word)
        outcome["words: right"] += right
        typed_stem = analyzer.stem(typed)
        if stems.get(typed_stem, 0) >= KNOWN:
            outcome["stems: right" if typed_stem == analyzer.stem(word) else "stems: typo stem is frequent"] += 1
            continue
        by_stem = nearest(typed_stem, stem_vocabulary)
        outcome["stems: right"] += by_stem is not None and by_stem[0] == analyzer.stem(word)

    out: dict[str, object] = {
        "abstracts": len(texts),
        "words": len(words),
        "frequent_words": len(frequent_words),
        "stems": len(stems),
        "typos": tried,
        "right_by_words": round(outcome["words: right"] / tried, 3),
        "right_by_stems": round(outcome["stems: right"] / tried, 3),
        "rapidfuzz_ms_per_word": round(1000 * word_s / tried, 2),
    }
    try:
        from symspellpy import SymSpell, Verbosity
    except ImportError:
        out["symspellpy"] = "not installed (pip install symspellpy)"
    else:
        began = time.perf_counter()
        speller = SymSpell(max_dictionary_edit_distance=2, prefix_length=7)
        for w in frequent_words:
            speller.create_dictionary_entry(w, words[w])
        build = time.perf_counter() - began
        began = time.perf_counter()
        for w in common[:200]:
            speller.lookup(slip(w, rng), Verbosity.CLOSEST, max_edit_distance=2)
        out["symspellpy"] = {
            "build_s": round(build, 2),
            "ms_per_word": round(1000 * (time.perf_counter() - began) / 200, 3),
        }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
