"""Choose an index's hybrid weighting on a collection's judged queries (``semsearch eval --tune``).

Adaptive fusion reads each query's two lists and cannot tell a confidently wrong side from a right one (on a
collection whose relevant abstracts lack the query's words, BM25's list looks as decisive as on a good query:
docs/explanation/quality.md). Judged queries can: each candidate weighting (what the index records, adaptive, a
fixed alpha from 0 to 1) ranks every judged query from the same two candidate lists search fuses, and the best
is recorded only when it beats the recorded one by more than ``TUNE_MARGIN`` paired standard errors, so that
noise seldom moves a weight (the best of a dozen weightings is picked first, so the margin is not a test's
significance level). Tune on one split and report another (``--split train --tune``, then ``--split test``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from semsearch.core.errors import InputError
from semsearch.core.options import TUNE_ALPHAS, TUNE_MARGIN, TUNE_MIN_QUERIES, fusion_entry, tuned_entry
from semsearch.eval.metrics import Qrels, paired_difference, per_query
from semsearch.query.search import Index
from semsearch.query.weighting import FusionPolicy
from semsearch.write.fusion_record import record_fusion

TUNE_K = 10  # nDCG@10 picks the weight


@dataclass(frozen=True)
class Weighting:
    """One candidate weighting: its name, the policy search would run, and the manifest entry that records it."""

    name: str
    policy: FusionPolicy
    entry: dict[str, Any]


@dataclass
class TuneReport:
    """What eval --tune measured and decided."""

    split: str
    queries: int
    recorded: str  # the weighting the index recorded before
    chosen: str  # the weighting it records now (== recorded when kept)
    reason: str
    candidates: list[dict[str, Any]] = field(default_factory=list)  # name, ndcg@10, difference, stderr
    version: str = ""  # the version that records the new weighting ("" when nothing was written)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def weightings(recorded: FusionPolicy, recorded_entry: dict[str, Any]) -> list[Weighting]:
    """The recorded weighting first, then adaptive and every alpha of ``TUNE_ALPHAS`` (none twice)."""
    out = [Weighting(name_of(recorded), recorded, dict(recorded_entry))]
    adaptive = fusion_entry("adaptive")
    out.append(Weighting("adaptive", FusionPolicy.from_entry(adaptive), adaptive))
    for alpha in TUNE_ALPHAS:
        entry = tuned_entry(alpha, {})
        out.append(Weighting(f"alpha {alpha:g}", FusionPolicy("tuned", alpha), entry))
    unique: dict[str, Weighting] = {}
    for w in out:
        unique.setdefault(w.name, w)
    return list(unique.values())


def name_of(policy: FusionPolicy) -> str:
    """A weighting's short name: "adaptive", "alpha 0.8" (tuned) or "fixed alpha 0.5"."""
    if policy.method == "adaptive":
        return "adaptive"
    if policy.method == "tuned":
        return f"alpha {policy.alpha:g}"
    return f"fixed alpha {policy.alpha:g}"


def relevant_queries(judged: dict[str, str], qrels: Qrels) -> int:
    """How many of the judged queries (those with a text) have a relevant document: what a weighting can move."""
    return sum(1 for q in judged if any(g > 0 for g in qrels.get(q, {}).values()))


def check_tunable(judged: dict[str, str], qrels: Qrels) -> None:
    """Refuse to weigh fusions on too few judged queries with a relevant document (raises InputError)."""
    count = relevant_queries(judged, qrels)
    if count < TUNE_MIN_QUERIES:
        raise InputError(
            f"--tune needs at least {TUNE_MIN_QUERIES} judged queries with a relevant document, got {count}"
        )


def tune_fusion(index: Index, judged: dict[str, str], qrels: Qrels, *, split: str) -> tuple[TuneReport, Weighting]:
    """Score every weighting on the judged queries; the report and the weighting to record.

    ``judged`` maps query ids to their texts, ``qrels`` holds their judgments; the means are eval's (every
    query with a relevant document, a query without a text scoring 0). Nothing is written here:
    ``write.fusion_record.record_fusion`` records the choice.
    """
    check_tunable(judged, qrels)
    recorded_entry = dict(index.manifest.fusion)
    options = weightings(index.fusion, recorded_entry)
    runs: dict[str, dict[str, list[str]]] = {w.name: {} for w in options}
    for qid, text in judged.items():
        candidates = index.hybrid_candidates(text)
        tops = {w.name: [n for n, _ in candidates.fuse(w.policy, TUNE_K)[0]] for w in options}
        docs = index.store.get_many(sorted({n for nums in tops.values() for n in nums}))
        for name, nums in tops.items():
            ranked: list[str] = []
            for num in nums:
                doc = docs.get(num)
                if doc is not None:
                    ranked.extend(doc.external_ids or [doc.id])  # a merged document stands for every entry
            runs[name][qid] = ranked
    scores = {name: {q: m["ndcg@10"] for q, m in per_query(run, qrels).items()} for name, run in runs.items()}
    base = options[0].name
    diffs = [paired_difference(scores[base], scores[w.name]) for w in options]
    rows = [
        {
            "name": w.name,
            "ndcg@10": round(d["mean_b"], 4),
            "difference": round(d["difference"], 4),
            "stderr": round(d["stderr"], 4),
        }
        for w, d in zip(options, diffs, strict=True)
    ]
    # Decided on the unrounded figures; ties go to the earlier weighting (the recorded one first, then lower alpha).
    best = max(range(len(options)), key=lambda i: (diffs[i]["mean_b"], -i))
    top, n = rows[best], len(scores[base])
    gain, stderr = diffs[best]["difference"], diffs[best]["stderr"]
    if best == 0 or gain <= 0:
        chosen, reason = options[0], f"the recorded weighting scores best (nDCG@10 {rows[0]['ndcg@10']:.4f})"
    elif gain <= TUNE_MARGIN * stderr:
        chosen = options[0]
        reason = (
            f"kept: the best, {top['name']} (nDCG@10 {top['ndcg@10']:.4f}), beats the recorded weighting by "
            f"{gain:+.4f} ± {stderr:.4f}, less than {TUNE_MARGIN:g} standard errors"
        )
    else:
        chosen = options[best]
        reason = (
            f"{top['name']} beats the recorded {base} by {gain:+.4f} ± {stderr:.4f} "
            f"(nDCG@10 {top['ndcg@10']:.4f} against {rows[0]['ndcg@10']:.4f}) on {n} judged queries"
        )
        if chosen.policy.method == "tuned":
            evidence = {"split": split, "queries": n, "ndcg@10": top["ndcg@10"], "over": base}
            evidence |= {"difference": top["difference"], "stderr": top["stderr"], "version": index.version.name}
            chosen = Weighting(chosen.name, chosen.policy, tuned_entry(chosen.policy.alpha, evidence))
    report = TuneReport(split, n, base, chosen.name, reason, rows)
    return report, chosen


def tuned_version(index_dir: Path, weighting: Weighting, expected: str, *, wait: bool = False) -> str:
    """Record ``weighting`` in the index measured at version ``expected``; the new version's name."""
    return record_fusion(index_dir, weighting.entry, expected=expected, wait=wait).name
