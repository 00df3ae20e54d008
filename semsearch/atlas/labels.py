"""The map's words: each point's label (its title) and each cluster's most distinctive terms."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from semsearch.core.paperinfo import plain_text
from semsearch.core.records import Document

# Cluster terms are counted on at most this many documents: distinctive terms are stable on a sample, and
# tokenizing every abstract of a large corpus in Python would hold the build up for no better label.
TERM_SAMPLE_MAX = 20_000
TERMS_PER_CLUSTER = 3
LABEL_CHARS = 90
# Label words: runs of word characters joined by hyphens, so a label reads "fine-tuning" rather than "fine".
LABEL_TOKEN = re.compile(r"\w+(?:-\w+)*")
# Words that can be frequent in one cluster by chance but never name a topic. The lexical index's stop list is
# short on purpose (queries keep "not"); a label has no such need, and small clusters make chance frequent.
_LABEL_STOP_TEXT = """
    about above across address addresses after again against aim aims all almost along also although among
    amongst another any approach approaches based because been before being below best better between both can
    cannot could demonstrate demonstrated demonstrates despite do does doing done due during each effective
    efficient either enable enables entire even ever every existing experiments extensive few first from further
    furthermore given had has have having here how however improve improved improves including introduce
    introduces its itself just key large less like many may method methods might more most much must new novel
    now often only other others our over overcome paper particular per perform performance present previous
    prior problem problems propose proposed provide provides rather recent remain remains result results same
    several should show showed shown shows significant significantly since so some state-of-the-art still study
    than them themselves therefore those though three through thus together toward towards two under until up
    upon use used uses using various very via was we well were what when where whether which while who whose why
    within without work works would yet you your
"""
# Weak adverbs and adjectives: they qualify a claim ("hardly", "largely", "simple") and never say what it is about.
_LABEL_WEAK_TEXT = """
    able actually additionally already always apparent arguably broadly certain certainly clear clearly close
    closely common commonly considerably critical crucial currently different directly easily especially
    essential essentially extremely fairly fully general generally good great greatly hardly high highly
    important importantly increasingly indeed instead interesting largely likely little low mainly major merely
    moreover mostly namely naturally nearly necessary never notably numerous obvious often particularly possible
    potentially practical primarily quite rarely readily real really relatively respectively roughly similar
    similarly simple simply slightly solely somewhat specific specifically strong strongly substantial
    substantially successfully sufficient surprisingly true truly typical typically ubiquitous unable usual
    usually vast whole widely
"""
LABEL_STOPWORDS = frozenset(_LABEL_STOP_TEXT.split()) | frozenset(_LABEL_WEAK_TEXT.split())


def point_label(doc: Document) -> str:
    """The title, else the abstract's opening words, readable (``plain_text``), in at most LABEL_CHARS characters."""
    label = " ".join(plain_text(doc.title or doc.text).split())
    return label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1].rsplit(" ", 1)[0] + "…"


def cluster_terms(
    documents: Sequence[Document], assignment: np.ndarray, k: int, *, seed: int = 0, top: int = TERMS_PER_CLUSTER
) -> list[list[str]]:
    """The most distinctive words of each cluster by class-based TF-IDF, shown in their commonest surface form.

    A term's weight in cluster c is (share of c's documents containing it) * log(1 + (N/k) / documents
    containing it anywhere): BERTopic's c-TF-IDF on document counts, so one abstract repeating a word
    cannot carry a label. Words are stemmed with the lexical index's Analyzer; its stop words, and
    LABEL_STOPWORDS, are dropped.
    """
    from semsearch.store.analyzer import STOPWORDS, Analyzer

    n = len(documents)
    if k == 0:
        return []
    rows = np.arange(n)
    if n > TERM_SAMPLE_MAX:
        rows = np.sort(np.random.default_rng(seed).choice(n, TERM_SAMPLE_MAX, replace=False))
    analyzer = Analyzer()
    stem_of: dict[str, str] = {}
    surface: Counter[tuple[str, str]] = Counter()
    per_cluster: list[Counter[str]] = [Counter() for _ in range(k)]
    cluster_docs = np.zeros(k, dtype=np.int64)
    for row in rows:
        doc = documents[int(row)]
        text = doc.embedding_text()  # LaTeX decoded: "$\\omega \\cdot$" gives no words "omega", "cdot"
        words = {
            w
            for w in LABEL_TOKEN.findall(text.lower())
            if len(w) > 1 and w not in STOPWORDS and w not in LABEL_STOPWORDS and not w.isdigit()
        }
        new = [w for w in words if w not in stem_of]
        if new:
            stem_of.update(analyzer.stem_map(new))
        stems = {stem_of[w] for w in words}
        surface.update((stem_of[w], w) for w in words)
        c = int(assignment[row])
        per_cluster[c].update(stems)
        cluster_docs[c] += 1
    overall: Counter[str] = Counter()
    for counts in per_cluster:
        overall.update(counts)
    shown: dict[str, tuple[int, str]] = {}
    for (stem, word), count in surface.items():
        # The commonest surface form; ties go to the shorter, then alphabetical, so the choice is stable.
        best = shown.get(stem)
        if best is None or (count, -len(word), word) > (best[0], -len(best[1]), best[1]):
            shown[stem] = (count, word)
    average = len(rows) / k
    out = []
    for c, counts in enumerate(per_cluster):
        size = max(int(cluster_docs[c]), 1)
        # A word from a single abstract says little about a cluster of many; needed only when there are several.
        floor = 2 if size >= 4 else 1
        scored = sorted(
            ((df / size) * math.log(1 + average / overall[t]), t)
            for t, df in counts.items()
            if df >= floor and len(t) > 1
        )
        out.append([shown[t][1] for _, t in sorted(scored, key=lambda s: (-s[0], s[1]))[:top]])
    return out
