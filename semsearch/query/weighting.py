"""How hybrid search weighs its two sides: a fixed alpha, a tuned one, or one chosen per query (adaptive fusion).

An adaptive choice reads the query's signal (``QuerySignal``): what its words are worth in the index, which lets
one side lead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from semsearch.core.options import (
    ADAPTIVE_ALONE_SHARE,
    ADAPTIVE_COMMON_SHARE,
    ADAPTIVE_DENSE_ALPHA,
    ADAPTIVE_LEXICAL_SCALE,
    ADAPTIVE_ONE_TERM_ALPHA,
    ADAPTIVE_PEAK_TOP,
    ADAPTIVE_POWER,
    ADAPTIVE_RARE_DF,
    ADAPTIVE_TYPO_ALPHA,
    ADAPTIVE_TYPO_SHARE,
    FUSIONS,
)
from semsearch.query.fusion import DEFAULT_ALPHA, DEFAULT_NORM, check_weight, normalized_array
from semsearch.store.lexical import LexicalIndex, lucene_idf_of

# Adaptive fusion: a query's weight on the dense side follows how far each list's head stands out of
# its list: pd and pl, the z-score of each list's best (PEAK_TOP best) candidate, BM25's divided by LEXICAL_SCALE
# because BM25's scores are heavier-tailed (its head stands out further on queries where both sides are as good);
# alpha = pd^p / (pd^p + pl^p). The parameters live in core.options, beside the entry a build records; the
# collections they were chosen on are in docs/explanation/quality.md.
PEAK_TOP, PEAK_POWER, LEXICAL_SCALE = ADAPTIVE_PEAK_TOP, ADAPTIVE_POWER, ADAPTIVE_LEXICAL_SCALE


@dataclass(frozen=True)
class FusionChoice:
    """The weight hybrid gave the dense side for one query (1 - alpha to BM25), and why."""

    alpha: float
    method: str  # "fixed", "adaptive" or "tuned"
    reason: str
    lexical_depth: int = 0  # adaptive: BM25's list normalized as this many candidates (see convex_arrays)

    def to_dict(self) -> dict[str, Any]:
        return {"alpha": round(self.alpha, 4), "method": self.method, "reason": self.reason}


@dataclass(frozen=True)
class FusionPolicy:
    """How an index fuses (the manifest's "fusion"): a fixed alpha, adaptive per query, or a tuned alpha.

    "tuned" is the weight ``semsearch eval --tune`` chose on a collection's judged queries (eval/tune.py): one
    alpha for every query, with BM25's list normalized over the whole depth as adaptive does.
    """

    method: str = "fixed"
    alpha: float = DEFAULT_ALPHA
    peak_top: int = PEAK_TOP
    power: float = PEAK_POWER
    lexical_scale: float = LEXICAL_SCALE
    note: str = ""  # why this policy (what the manifest said, or the option that asked for it)
    # Query signals (0 / 1 turn each off, as an adaptive entry recorded before them reads):
    rare_df: float = ADAPTIVE_RARE_DF  # a stem in at most this share of the documents is rare
    common_share: float = ADAPTIVE_COMMON_SHARE  # BM25's best match holds less of the query's idf mass: dense leads
    dense_alpha: float = ADAPTIVE_DENSE_ALPHA  # then dense gets at least this weight
    one_term_alpha: float = ADAPTIVE_ONE_TERM_ALPHA  # the most weight dense gets when the query is one rare word
    typo_alpha: float = ADAPTIVE_TYPO_ALPHA  # the most weight dense gets when spelling corrected words for BM25
    typo_share: float = ADAPTIVE_TYPO_SHARE  # ... at least this share of the typed words
    alone_share: float = ADAPTIVE_ALONE_SHARE  # BM25's best match holds less of the query's idf mass: dense alone

    @classmethod
    def from_entry(cls, entry: Mapping[str, Any] | None) -> FusionPolicy:
        """The policy a manifest's "fusion" entry records; none (an index built before it): fixed alpha 0.5.

        An entry this release cannot read (a newer writer's method, a malformed value) also falls back to
        alpha 0.5, and says so in ``note``: fusion weights never make an index unreadable.
        """
        if not entry:
            return cls(note="no fusion recorded (index built before adaptive fusion)")
        method = entry.get("method")
        try:
            if method == "fixed":
                alpha = float(entry.get("alpha", DEFAULT_ALPHA))
                check_weight(alpha, DEFAULT_NORM)
                return cls(alpha=alpha, note="fixed in the manifest")
            if method == "tuned":
                alpha = float(entry["alpha"])
                check_weight(alpha, DEFAULT_NORM)
                return cls("tuned", alpha, note=_tuned_note(entry))
            if method == "adaptive":
                top, power = int(entry.get("peak_top", PEAK_TOP)), float(entry.get("power", PEAK_POWER))
                scale = float(entry.get("lexical_scale", LEXICAL_SCALE))
                # An entry written before the query signals lacks their keys: it fuses as it did (signals off).
                rare, common = float(entry.get("rare_df", 0.0)), float(entry.get("common_share", 0.0))
                lead, one = float(entry.get("dense_alpha", 0.5)), float(entry.get("one_term_alpha", 1.0))
                typo, typos = float(entry.get("typo_alpha", 1.0)), float(entry.get("typo_share", 0.0))
                alone = float(entry.get("alone_share", 0.0))
                if (
                    top >= 1
                    and 0.0 <= power <= 16.0
                    and 0.0 < scale < float("inf")
                    and 0.0 <= rare <= 1.0
                    and 0.0 <= common <= 1.0
                    and 0.0 <= lead <= 1.0
                    and 0.0 <= one <= 1.0
                    and 0.0 <= typo <= 1.0
                    and 0.0 <= typos <= 1.0
                    and 0.0 <= alone <= 1.0
                ):
                    note = "adaptive in the manifest"
                    return cls(
                        "adaptive", DEFAULT_ALPHA, top, power, scale, note, rare, common, lead, one, typo, typos, alone
                    )
        except (TypeError, ValueError, KeyError):
            pass
        return cls(note=f"unreadable fusion entry {dict(entry)!r} in the manifest")

    def describe(self) -> str:
        """The policy in a few words, for ``semsearch info``."""
        if self.method == "adaptive":
            return "adaptive (hybrid's weight chosen per query from how far each list's head stands out)"
        if self.method == "tuned":
            return f"alpha {self.alpha:g} to dense, {self.note} (semsearch eval --tune)"
        return f"alpha {self.alpha:g} to dense ({self.note})" if self.note else f"alpha {self.alpha:g} to dense"

    def with_method(self, method: str | None) -> FusionPolicy:
        """This policy, or the one a --fusion option asks for instead (None: as recorded)."""
        if method is None or method == self.method:
            return self
        if method not in FUSIONS:
            raise ValueError(f"unknown fusion {method!r}; choose from {', '.join(FUSIONS)}")
        if method == "fixed":
            return FusionPolicy(note="--fusion fixed")
        return FusionPolicy("adaptive", note="--fusion adaptive")

    def choose(
        self, dense_scores: np.ndarray, lexical_scores: np.ndarray, depth: int = 0, signal: QuerySignal | None = None
    ) -> FusionChoice:
        """The weight for one query from its two candidate lists' scores (best first) of ``depth`` asked for.

        BM25 returns only the documents that match a query word; the rest of the ``depth`` scored 0, so the
        lexical head is set against them too (a rare identifier matched by 3 documents stands out).
        ``signal`` (what the query's words are worth in the index) then lets one side lead: dense when BM25's
        best match holds little of the query's idf mass (its matches rest on common words), BM25 when the query
        is one rare word (an acronym, identifier or name).
        """
        if self.method == "tuned":
            return FusionChoice(self.alpha, "tuned", f"alpha {self.alpha:g}: {self.note}", depth)
        if self.method != "adaptive":
            return FusionChoice(self.alpha, "fixed", f"alpha {self.alpha:g}: {self.note}")
        pd = peak(dense_scores, self.peak_top)
        pl = peak(lexical_scores, self.peak_top, pad_to=depth) / self.lexical_scale
        if pd <= 0.0 and pl <= 0.0:
            alpha, why = DEFAULT_ALPHA, "neither list's head stands out"
        else:
            wd, wl = max(pd, 0.0) ** self.power, max(pl, 0.0) ** self.power
            alpha = wd / (wd + wl)
            why = f"head z-score dense {pd:.2f}, lexical {pl:.2f} (BM25's / {self.lexical_scale:g})"
        lead = self.leader(signal) if pl > 0.0 else None
        if lead is not None:
            bound, said = lead
            if (bound > DEFAULT_ALPHA and alpha < bound) or (bound < DEFAULT_ALPHA and alpha > bound):
                alpha, why = bound, f"{said}; {why}"
        return FusionChoice(alpha, "adaptive", f"alpha {alpha:.2f} to dense: {why}", depth)

    def leader(self, signal: QuerySignal | None) -> tuple[float, str] | None:
        """The weight one side's lead gives (dense's least, or BM25's: dense's most) and why; None: no lead.

        BM25's top stands out as far when it repeats a few common words of a longer question ("whether", "AI") as
        when it holds the query's rare words; what its best match holds of the query's idf mass tells them apart.
        When even its best match holds little of it, BM25's list says nothing about what the query asks for, and
        any weight on it pushes down papers that dense alone finds (a question in everyday words): dense ranks alone.
        """
        if signal is None:
            return None
        if self.typo_alpha < 1.0 and signal.corrected and signal.corrected >= self.typo_share * signal.tokens:
            said = f"lexical leads: {signal.corrected} of {signal.tokens} typed words misspelt, corrected for BM25"
            return self.typo_alpha, said + " (dense reads them as typed)"
        if self.one_term_alpha < 1.0 and signal.one_rare_word(self.rare_df):
            kind = "word shaped like an acronym or identifier" if signal.shaped else "rare word"
            said = f"lexical leads: the query is one {kind} (in {min(signal.dfs)} of {signal.n_docs} documents)"
            return self.one_term_alpha, said
        share = signal.best_share()
        if share is not None and share < self.alone_share:
            said = f"dense alone, lexical ignored: even its best match holds only {share:.2f} of the query's idf mass"
            return 1.0, said
        if self.common_share > 0.0 and share is not None and share < self.common_share and self.dense_alpha > 0.5:
            said = f"dense leads, lexical damped: its matches rest on common words (its best match holds {share:.2f}"
            return self.dense_alpha, said + " of the query's idf mass)"
        return None


def _tuned_note(entry: Mapping[str, Any]) -> str:
    """Where a tuned weight came from, in words, from its manifest entry."""
    on = entry.get("tuned_on")
    if not isinstance(on, Mapping):
        return "tuned"
    return f"tuned on {on.get('queries', '?')} judged queries ({on.get('split', '?')} split)"


def peak(scores: np.ndarray, top: int = PEAK_TOP, *, pad_to: int = 0) -> float:
    """How far a list's head stands out: the mean z-score of its ``top`` best within the list (0: flat or empty).

    ``pad_to``: count the list as that long, the missing entries scoring 0 (BM25's unmatched documents).
    """
    values = np.asarray(scores, dtype=np.float64)
    if 0 < values.size < pad_to:
        values = np.concatenate([values, np.zeros(pad_to - values.size)])
    if values.size < 2:
        return 0.0  # one candidate (or none) says nothing about a distribution
    z = normalized_array(values, "zscore")
    return float(np.sort(z)[::-1][:top].mean())


# ---------------------------------------------------------------------------------------- query signal


class Vocabulary(Protocol):
    """What a query signal reads from a BM25 index: its analyzer, each stem's document frequency, its scores."""

    def __len__(self) -> int: ...

    def terms(self, query: str) -> list[str]: ...

    def document_frequency(self, term: str) -> int: ...

    def score_ids(self, query: Mapping[str, float], ids: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class QuerySignal:
    """What BM25's evidence for one query rests on, read from the index.

    ``dfs``: the document frequency of each distinct query stem some document holds; ``held``: of those, the
    ones BM25's best match holds; ``unseen``: stems no document holds (a typo, or a word the collection never
    uses); ``tokens``: how many words were typed; ``corrected``: how many typed words no document holds BM25
    searched corrected (spelling's corrections); ``shaped``: the query is one word shaped like an acronym or
    identifier (a capital after its first letter, or letters with digits: "ViT", "DPO", "Metric3D").
    """

    dfs: tuple[int, ...]
    n_docs: int
    held: tuple[bool, ...] = ()
    unseen: int = 0
    tokens: int = 0
    corrected: int = 0
    shaped: bool = False

    @classmethod
    def measure(cls, lexical: Vocabulary, text: str, best: np.ndarray, typed: str | None = None) -> QuerySignal:
        """The signal of ``text`` as BM25 searched it (``typed``: as typed, when spelling changed words of it);
        ``best``: BM25's best match (its id in an array, empty when nothing matched)."""
        terms = list(dict.fromkeys(lexical.terms(text)))
        known = [(t, d) for t in terms if (d := lexical.document_frequency(t)) > 0]
        held = _held(lexical, [t for t, _ in known], np.asarray(best, dtype=np.int64)[:1])
        words = text.split()
        as_typed = words if typed is None else typed.split()
        # A corrected word counts only if no document holds it as typed: spelling also "corrects" real words that a
        # few documents hold (a small collection's rare words), and those the dense side reads as well as BM25.
        searched = set(words)  # a correction may keep the typed word beside its suggestion: compare as sets
        changed = [w for w in dict.fromkeys(as_typed) if w not in searched]
        corrected = sum(1 for w in changed if not any(lexical.document_frequency(t) for t in lexical.terms(w)))
        dfs = tuple(d for _, d in known)
        shaped = len(as_typed) == 1 and _identifier_shaped(as_typed[0])
        return cls(dfs, len(lexical), held, len(terms) - len(known), len(as_typed), corrected, shaped)

    def best_share(self) -> float | None:
        """Share of the query's idf mass that BM25's best match holds (None: no query stem is in any document)."""
        if not self.dfs or len(self.held) != len(self.dfs):
            return None
        idf = [lucene_idf_of(d, self.n_docs) for d in self.dfs]
        total = sum(idf)
        return sum(v for v, h in zip(idf, self.held, strict=True) if h) / total if total > 0 else 0.0

    def one_rare_word(self, rare_df: float) -> bool:
        """Whether the query is one typed word, an acronym, identifier or name (by its shape, or rare here): what
        BM25 finds exactly and an encoder reads as a few subword pieces."""
        limit = max(2.0, rare_df * self.n_docs)
        return self.tokens == 1 and self.unseen == 0 and bool(self.dfs) and (self.shaped or min(self.dfs) <= limit)


def _held(lexical: Vocabulary, terms: list[str], best: np.ndarray) -> tuple[bool, ...]:
    """Which of ``terms`` the document ``best`` (an id in an array; empty: none) holds.

    One index scans each term's posting rows (a few thousand ints, even for a common word); a version of several
    segments asks BM25 for each term's score of the document, which sums every posting.
    """
    if not best.size:
        return tuple(False for _ in terms)
    if isinstance(lexical, LexicalIndex):
        row = int(lexical.rows_of(best)[0])
        if row < 0:
            return tuple(False for _ in terms)
        offsets, rows = lexical.indptr, lexical.indices
        tids = [lexical.term_ids[t] for t in terms]
        return tuple(bool((rows[offsets[i] : offsets[i + 1]] == row).any()) for i in tids)
    return tuple(bool(lexical.score_ids({t: 1.0}, best)[0] > 0) for t in terms)


def _identifier_shaped(word: str) -> bool:
    """A capital after the first letter ("ViT", "DPO", "LoRA") or letters with digits ("Metric3D", "GPT-4")."""
    letters = [c for c in word if c.isalpha()]
    return any(c.isupper() for c in word[1:]) or (bool(letters) and any(c.isdigit() for c in word))
