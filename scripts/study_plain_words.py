"""Plain-words study (issue #36 items 4 and 5): fusion that reads the query, and the dense side for everyday words.

For each query of each set the script takes the product's own lists from a built index (the int8 encoder, the
index's reading with its window re-scoring, BM25's top 1000) and the query's signal (``QuerySignal``: each query
stem's document frequency), then scores offline:

- dense-side candidates (item 5): the product's dense list (whole vector, top 200 re-scored by
  0.3 x whole + 0.7 x max(whole, best sentence)); ``max`` (the same re-scoring without the 0.3 mix: the best
  sentence alone, for queries that describe one aspect of a paper); ``prfK_B`` (pseudo-relevance feedback in
  vector space: the query moved toward the mean of its dense top K documents, q + B x mean, re-normalized,
  then searched as the product searches); each alone and fused as the product fuses;
- fusion rules (item 4): adaptive as before (``adaptive-old``: no query signal), adaptive with the query signal
  (``signals``, the defaults in core/options.py: dense leads when BM25's best match holds little of the query's idf
  mass; BM25 leads for one acronym-shaped or rare word, and when spelling corrected a share of the typed words)
  over a grid of its parameters, alpha 0.5, and the single modes.

Sets: BEIR collections (``--beir NAME=DATA:INDEX:SPLIT[,SPLIT]``: SciFact, or ``make_collections.py``'s) and
the typed dev set's styles (``--typed INDEX``: the slice index of ``scripts/bench_typed.py``; one set per style).
The score is nDCG@10 for BEIR sets and MRR@10 for the typed styles (recall@10 beside it). Differences are paired
(mean and standard error over the set's queries). The grid is judged by leave-one-set-out: for each
set (its train and test splits together), the parameters with the best mean margin over the better single mode on
the *other* sets are chosen and scored on it. BM25 searches the query as a search does (``Index.spell``: typos
corrected). Prints one JSON line; progress on stderr.

    python scripts/study_plain_words.py --typed /tmp/typed-dev-index \\
        --beir scifact=../shared/data/scifact:/tmp/fusion/scifact-idx:train,test
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "scripts"))

from semsearch.eval.beir import read_qrels, read_queries  # noqa: E402
from semsearch.eval.metrics import mrr_at_k, ndcg_at_k, paired_difference  # noqa: E402
from semsearch.query.fusion import FusionPolicy, QuerySignal, convex_arrays  # noqa: E402
from semsearch.query.search import Index  # noqa: E402
from semsearch.store.layout import doc_num  # noqa: E402
from semsearch.store.windows_part import RESCORE_DEPTH  # noqa: E402

DEPTH = 1000
PRF = ((3, 0.5), (5, 0.5), (3, 1.0))  # (documents, weight) of the vector-space feedback candidates
GRID_RARE = (0.005,)  # the one-rare-word rule's limit
GRID_COMMON = (0.4, 0.5, 0.6, 0.7)  # BM25's best match holding less of the idf mass: dense leads
GRID_LEAD = (0.75, 0.85, 0.95)  # dense's least weight then
GRID_ONE = (0.3,)  # neutral wherever measured (the slices are small; see the notes)
# (dense's most weight, least share of the typed words corrected) when spelling corrected words for BM25
GRID_TYPO = ((1.0, 0.0), (0.3, 0.0), (0.3, 0.25))
List = tuple[np.ndarray, np.ndarray]


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


@dataclass
class Query:
    """One judged query's lists, signal and judgments."""

    qid: str
    judged: dict[str, int]
    signal: QuerySignal
    lexical: List
    dense: dict[str, List] = field(default_factory=dict)  # dense-side candidate -> its list
    depth: int = DEPTH


@dataclass
class Set:
    name: str
    metric: str  # "ndcg@10" or "mrr@10"
    queries: list[Query]
    names: dict[int, list[str]]


def mixed(index: Index, vector: np.ndarray, depth: int, whole_weight: float) -> List:
    """The dense list the product ranks, its top RESCORE_DEPTH re-scored by whole_weight x whole + rest x max."""
    nums, scores = index._dense_top(vector, min(len(index), max(depth, RESCORE_DEPTH)), None, frozenset())
    if index.windows is None:
        return nums[:depth], scores[:depth]
    top, whole = nums[:RESCORE_DEPTH], np.asarray(scores[:RESCORE_DEPTH], dtype=np.float32)
    best = index.windows.best(top, vector[0])
    mix = whole_weight * whole + (1 - whole_weight) * np.maximum(whole, best)
    order = np.lexsort((top, -mix))
    out_nums = np.concatenate([top[order], nums[RESCORE_DEPTH:]])
    out_scores = np.concatenate([mix[order], np.asarray(scores[RESCORE_DEPTH:], dtype=np.float32)])
    return out_nums[:depth], out_scores[:depth]


def gather(index: Index, texts: dict[str, str], judged: dict[str, dict[str, int]]) -> list[Query]:
    """Every dense-side candidate's list, BM25's list and the signal of each judged query."""
    depth = min(DEPTH, len(index))
    out: list[Query] = []
    for qid, text in texts.items():
        vector = index.encode_query(text)
        product = index._dense_list(vector, depth, None, frozenset(), len(index), windows=True)
        words = index.spell(text).text  # what BM25 searches: the query with its typos corrected, as a search does
        lexical = index._lexical_top(words, depth, None, frozenset())
        q = Query(qid, judged[qid], QuerySignal.measure(index.lexical, words, lexical[0], typed=text), lexical)
        q.depth = depth
        q.dense["dense"] = product
        q.dense["max"] = mixed(index, vector, depth, 0.0)
        for k, weight in PRF:
            fed = vector + weight * index.vectors.get(product[0][:k]).mean(axis=0, keepdims=True)
            fed = (fed / np.linalg.norm(fed)).astype(np.float32)
            q.dense[f"prf{k}_{weight:g}"] = index._dense_list(fed, depth, None, frozenset(), len(index), windows=True)
        out.append(q)
    return out


def names_of(index: Index) -> dict[int, list[str]]:
    return {doc_num(d.id): (d.external_ids or [d.id]) for d in index.store.iter_documents()}


def beir_sets(spec: str) -> list[Set]:
    """``NAME=DATA:INDEX:SPLIT[,SPLIT]`` -> one set per split."""
    name, _, rest = spec.partition("=")
    data, index_dir, splits = rest.split(":")
    queries = read_queries(Path(data) / "queries.jsonl")
    out = []
    with Index.open(Path(index_dir)) as index:
        names = names_of(index)
        for split in splits.split(","):
            qrels = read_qrels(Path(data) / "qrels" / f"{split}.tsv")
            texts = {q: queries[q] for q in qrels if q in queries and any(g > 0 for g in qrels[q].values())}
            started = time.perf_counter()
            got = gather(index, texts, qrels)
            log(f"{name}-{split}: {len(got)} queries in {time.perf_counter() - started:.0f} s")
            out.append(Set(f"{name}-{split}", "ndcg@10", got, names))
    return out


def typed_sets(index_dir: Path, dev: Path, styles: Sequence[str]) -> list[Set]:
    rows = [json.loads(line) for line in dev.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    with Index.open(index_dir) as index:
        names = names_of(index)
        for style in styles:
            chosen = [r for r in rows if r["style"] == style]
            texts = {r["id"]: r["query"] for r in chosen}
            judged = {r["id"]: {t: 1 for t in r["targets"]} for r in chosen}
            got = gather(index, texts, judged)
            log(f"typed-{style}: {len(got)} queries")
            out.append(Set(f"typed-{style}", "mrr@10", got, names))
    return out


Ranker = Callable[[Query], np.ndarray]  # a query -> FAISS ids best first


def dense_only(name: str) -> Ranker:
    return lambda q: q.dense[name][0]


def lexical_only(q: Query) -> np.ndarray:
    return q.lexical[0]


def fused(policy: FusionPolicy, dense: str = "dense", signal: bool = True) -> Ranker:
    def rank(q: Query) -> np.ndarray:
        d_ids, d_scores = q.dense[dense]
        choice = policy.choose(d_scores, q.lexical[1], q.depth, q.signal if signal else None)
        ids, _ = convex_arrays(
            d_ids, d_scores, *q.lexical, alpha=choice.alpha, limit=100, lexical_depth=choice.lexical_depth
        )
        return ids

    return rank


def scores(s: Set, ranker: Ranker) -> dict[str, dict[str, float]]:
    """Per query: nDCG@10, MRR@10 and recall@10 (share of its relevant documents in the top 10)."""
    out = {}
    for q in s.queries:
        ranked = list(dict.fromkeys(x for n in ranker(q).tolist() for x in s.names[n]))
        relevant = {d for d, g in q.judged.items() if g > 0}
        out[q.qid] = {
            "ndcg@10": ndcg_at_k(ranked, q.judged, 10),
            "mrr@10": mrr_at_k(ranked, q.judged, 10),
            "recall@10": len(relevant.intersection(ranked[:10])) / len(relevant) if relevant else 0.0,
        }
    return out


def column(per: dict[str, dict[str, float]], metric: str) -> dict[str, float]:
    return {q: m[metric] for q, m in per.items()}


def mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values) if values else 0.0


def diff(a: dict[str, float], b: dict[str, float]) -> list[float]:
    d = paired_difference(a, b)
    return [round(d["difference"], 4), round(d["stderr"], 4)]


def policy_of(
    rare: float, common: float, lead: float, one: float, typo: float = 1.0, typo_share: float = 0.0
) -> FusionPolicy:
    """Adaptive fusion with these signal parameters; the later dense-alone rule (study_plain_fusion.py) off."""
    return FusionPolicy(
        "adaptive",
        rare_df=rare,
        common_share=common,
        dense_alpha=lead,
        one_term_alpha=one,
        typo_alpha=typo,
        typo_share=typo_share,
        alone_share=0.0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", action="append", default=[], help="NAME=DATA:INDEX:SPLIT[,SPLIT] (repeatable)")
    parser.add_argument("--typed", type=Path, help="the typed dev set's slice index (scripts/bench_typed.py)")
    parser.add_argument("--dev", type=Path, default=REPO / "scripts" / "data" / "typed_dev.jsonl")
    parser.add_argument("--styles", default="plain,jargon,acronym,typo,author")
    args = parser.parse_args()
    started = time.perf_counter()
    sets: list[Set] = []
    for spec in args.beir:
        sets += beir_sets(spec)
    if args.typed is not None:
        sets += typed_sets(args.typed, args.dev, [s for s in args.styles.split(",") if s])
    old = policy_of(0.0, 0.0, 0.5, 1.0, 1.0, 0.0)  # adaptive as it was: no query signal
    new = FusionPolicy("adaptive")  # the defaults (core/options.py)
    rankers: dict[str, Ranker] = {
        "lexical": lexical_only,
        "alpha 0.5": fused(FusionPolicy("fixed")),
        "adaptive-old": fused(old),
        "signals": fused(new),
    }
    for dense in ("dense", "max", *(f"prf{k}_{w:g}" for k, w in PRF)):
        rankers[dense] = dense_only(dense)
        if dense != "dense":
            rankers[f"signals+{dense}"] = fused(new, dense)
    grid = {
        (r, c, f, o, *t): fused(policy_of(r, c, f, o, *t))
        for r, c, f, o, t in itertools.product(GRID_RARE, GRID_COMMON, GRID_LEAD, GRID_ONE, GRID_TYPO)
    }
    per: dict[str, dict[str, dict[str, dict[str, float]]]] = {}  # set -> ranker -> query -> metric
    for s in sets:
        per[s.name] = {name: scores(s, r) for name, r in rankers.items()}
        log(f"{s.name}: rankers scored ({time.perf_counter() - started:.0f} s)")
    gridded: dict[str, dict[tuple[float, ...], dict[str, float]]] = {}
    for s in sets:
        gridded[s.name] = {key: column(scores(s, r), s.metric) for key, r in grid.items()}
        log(f"{s.name}: grid scored ({time.perf_counter() - started:.0f} s)")

    def margin(name: str, values: dict[str, float]) -> float:
        """A rule's mean over a set minus the better single mode's (the issue's "better of dense and lexical")."""
        m = next(s.metric for s in sets if s.name == name)
        best = max(mean(column(per[name]["dense"], m)), mean(column(per[name]["lexical"], m)))
        return mean(values) - best

    report: dict[str, Any] = {"study": "plain_words", "sets": {}, "leave_one_out": {}, "grid": {}}
    for s in sets:
        m = s.metric
        p = per[s.name]
        row: dict[str, Any] = {"n": len(s.queries), "metric": m}
        for name in p:
            row[name] = round(mean(column(p[name], m)), 4)
            row[f"{name} recall@10"] = round(mean(column(p[name], "recall@10")), 4)
        base = column(p["adaptive-old"], m)
        row["signals - adaptive-old"] = diff(base, column(p["signals"], m))
        best_single = "dense" if row["dense"] >= row["lexical"] else "lexical"
        row["signals - best single"] = diff(column(p[best_single], m), column(p["signals"], m))
        row["adaptive-old - best single"] = diff(column(p[best_single], m), base)
        for dense in ("max", *(f"prf{k}_{w:g}" for k, w in PRF)):
            row[f"{dense} - dense"] = diff(column(p["dense"], m), column(p[dense], m))
            row[f"signals+{dense} - signals"] = diff(column(p["signals"], m), column(p[f"signals+{dense}"], m))
        row["mean alpha old / new"] = [
            round(float(np.mean([old.choose(q.dense["dense"][1], q.lexical[1], q.depth).alpha for q in s.queries])), 3),
            round(
                float(
                    np.mean([new.choose(q.dense["dense"][1], q.lexical[1], q.depth, q.signal).alpha for q in s.queries])
                ),
                3,
            ),
        ]
        report["sets"][s.name] = row
    # Leave one set out: parameters chosen on the others (mean margin over each set's better single mode).
    families = sorted({s.name.rsplit("-", 1)[0] if not s.name.startswith("typed-") else s.name for s in sets})
    for held in families:
        train = [s.name for s in sets if not s.name.startswith(held)]
        test = [s.name for s in sets if s.name.startswith(held)]
        if not train:
            continue
        key = max(grid, key=lambda k: float(np.mean([margin(n, gridded[n][k]) for n in train])))
        report["leave_one_out"][held] = {
            "chosen": list(key),
            **{
                n: {
                    "score": round(mean(gridded[n][key]), 4),
                    "minus adaptive-old": diff(
                        column(per[n]["adaptive-old"], next(s.metric for s in sets if s.name == n)), gridded[n][key]
                    ),
                    "margin over best single": round(margin(n, gridded[n][key]), 4),
                }
                for n in test
            },
        }
    ranked = sorted(grid, key=lambda k: -float(np.mean([margin(n, gridded[n][k]) for n in per])))
    report["grid"] = {
        " ".join(f"{v:g}" for v in k): {n: round(margin(n, gridded[n][k]), 4) for n in per} for k in ranked
    }
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
