"""Plain-words fusion study (issue #36, "hybrid never trails its better half"): rules that might keep dense's finds.

Plain-words queries (everyday words, none of the paper's jargon) find their paper in dense's top 10 more often than
in hybrid's: the misses are papers dense ranks 9th-10th that any fusion with BM25 pushes down. This study takes the
product's own lists once per query (``gather``: the dense list with its sentence re-scoring, BM25's top 1000 of the
query as spelling corrects it, the query's ``QuerySignal``; written as .npz and .json under ``--cache``, no
pickle) and scores fusion rules on them offline (``score``):

- ``default``: the product's adaptive fusion with its query signal;
- ``keep-dense@M``: rank-safe fusion, the fused top 10 holds dense's top M wherever fusion put them (the rest of
  the ten in fused order, then the remainder);
- ``keep-margin``: the same, only for dense's top results whose score stands out of dense's list;
- ``rrf-w``: reciprocal-rank fusion with a weight for dense chosen by the signal;
- ``plain-alpha``: a plain-query detector (long query, BM25's best match holds little of its idf mass, no rare
  stem) that sets alpha to a high value.

Sets: the typed dev set's styles (``--typed INDEX``) and BEIR collections (``--beir NAME=DATA:INDEX:SPLIT[,SPLIT]``).
Scores: MRR@10 and recall@10 for the typed styles, nDCG@10 elsewhere; paired differences against the default with
their standard error. Prints one JSON line; progress on stderr.

    python scripts/study_plain_fusion.py gather --cache /tmp/plain/cache --typed /tmp/typed-dev-index \\
        --beir scifact=../shared/data/scifact:/tmp/fusion/scifact-idx:train,test
    python scripts/study_plain_fusion.py score --cache /tmp/plain/cache
    python scripts/study_plain_fusion.py shares --index AN_INDEX_OF_ALL_157K_ABSTRACTS
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.eval.beir import read_qrels, read_queries  # noqa: E402
from semsearch.eval.metrics import mrr_at_k, ndcg_at_k, paired_difference  # noqa: E402
from semsearch.query.fusion import FusionPolicy, QuerySignal, convex_arrays  # noqa: E402
from semsearch.query.search import Index  # noqa: E402
from semsearch.store.layout import doc_num  # noqa: E402

DEPTH = 1000
K = 10
# The product's fusion before the dense-alone rule: every rule below is measured against it (``default``).
BEFORE = FusionPolicy("adaptive", alone_share=0.0)


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


@dataclass
class Query:
    """One judged query: its text, judgments, signal and the two lists (FAISS ids, scores) best first."""

    qid: str
    text: str
    judged: dict[str, int]
    signal: QuerySignal
    dense: tuple[np.ndarray, np.ndarray]
    lexical: tuple[np.ndarray, np.ndarray]
    depth: int


@dataclass
class Set:
    name: str
    metric: str
    queries: list[Query]
    names: dict[int, list[str]]


def _gather(index: Index, name: str, metric: str, texts: dict[str, str], judged: dict[str, dict[str, int]]) -> Set:
    depth = min(DEPTH, len(index))
    queries: list[Query] = []
    for qid, text in texts.items():
        vector = index.encode_query(text)
        dense = index._dense_list(vector, depth, None, frozenset(), len(index), windows=True)
        words = index.spell(text).text
        lexical = index._lexical_top(words, depth, None, frozenset())
        signal = QuerySignal.measure(index.lexical, words, lexical[0], typed=text)
        queries.append(Query(qid, text, judged[qid], signal, dense, lexical, depth))
    seen = {int(n) for q in queries for n in np.concatenate([q.dense[0][:100], q.lexical[0][:100]]).tolist()}
    names = {doc_num(d.id): (d.external_ids or [d.id]) for d in index.store.iter_documents()}
    return Set(name, metric, queries, {n: names[n] for n in seen if n in names})


def _save(s: Set, cache: Path) -> None:
    arrays: dict[str, np.ndarray] = {}
    meta: list[dict[str, Any]] = []
    for i, q in enumerate(s.queries):
        arrays[f"d{i}"], arrays[f"ds{i}"] = q.dense[0], np.asarray(q.dense[1], dtype=np.float32)
        arrays[f"l{i}"], arrays[f"ls{i}"] = q.lexical[0], np.asarray(q.lexical[1], dtype=np.float32)
        sig = q.signal
        meta.append(
            {
                "qid": q.qid,
                "text": q.text,
                "judged": q.judged,
                "depth": q.depth,
                "signal": [
                    list(sig.dfs),
                    sig.n_docs,
                    list(sig.held),
                    sig.unseen,
                    sig.tokens,
                    sig.corrected,
                    sig.shaped,
                ],
            }
        )
    np.savez(cache / f"{s.name}.npz", allow_pickle=False, **arrays)
    doc = {"name": s.name, "metric": s.metric, "queries": meta, "names": {str(k): v for k, v in s.names.items()}}
    (cache / f"{s.name}.json").write_text(json.dumps(doc), encoding="utf-8")


def _load(cache: Path, name: str) -> Set:
    doc = json.loads((cache / f"{name}.json").read_text(encoding="utf-8"))
    arrays = np.load(cache / f"{name}.npz")
    queries = []
    for i, m in enumerate(doc["queries"]):
        dfs, n_docs, held, unseen, tokens, corrected, shaped = m["signal"]
        signal = QuerySignal(tuple(dfs), n_docs, tuple(held), unseen, tokens, corrected, shaped)
        dense = (arrays[f"d{i}"], arrays[f"ds{i}"])
        lexical = (arrays[f"l{i}"], arrays[f"ls{i}"])
        queries.append(Query(m["qid"], m["text"], m["judged"], signal, dense, lexical, m["depth"]))
    return Set(doc["name"], doc["metric"], queries, {int(k): v for k, v in doc["names"].items()})


def gather(args: argparse.Namespace) -> None:
    cache: Path = args.cache
    cache.mkdir(parents=True, exist_ok=True)
    for spec in args.beir:
        name, _, rest = spec.partition("=")
        data, index_dir, splits = rest.split(":")
        queries = read_queries(Path(data) / "queries.jsonl")
        with Index.open(Path(index_dir)) as index:
            for split in splits.split(","):
                qrels = read_qrels(Path(data) / "qrels" / f"{split}.tsv")
                texts = {q: queries[q] for q in qrels if q in queries and any(g > 0 for g in qrels[q].values())}
                started = time.perf_counter()
                _save(_gather(index, f"{name}-{split}", "ndcg@10", texts, qrels), cache)
                log(f"{name}-{split}: {len(texts)} queries in {time.perf_counter() - started:.0f} s")
    if args.typed is not None:
        rows = [json.loads(line) for line in args.dev.read_text(encoding="utf-8").splitlines() if line.strip()]
        with Index.open(args.typed) as index:
            for style in ("plain", "jargon", "typo", "acronym", "author"):
                chosen = [r for r in rows if r["style"] == style]
                texts = {r["id"]: r["query"] for r in chosen}
                judged = {r["id"]: {t: 1 for t in r["targets"]} for r in chosen}
                _save(_gather(index, f"typed-{style}", "mrr@10", texts, judged), cache)
                log(f"typed-{style}: {len(texts)} queries")


Ranker = Callable[[Query], np.ndarray]  # a query -> FAISS ids best first (at least the top K)


def fuse_default(q: Query, policy: FusionPolicy | None = None) -> tuple[np.ndarray, float]:
    """The product's fused ranking (top 100) and the alpha it chose."""
    policy = policy or BEFORE
    choice = policy.choose(q.dense[1], q.lexical[1], q.depth, q.signal)
    ids, _ = convex_arrays(*q.dense, *q.lexical, alpha=choice.alpha, limit=100, lexical_depth=choice.lexical_depth)
    return ids, choice.alpha


def keep_top(fused: np.ndarray, kept: np.ndarray, k: int = K) -> np.ndarray:
    """``fused`` with every id of ``kept`` inside its top ``k`` (each in fused order; those missing take the last
    places of the ten that fused filled with ids not in ``kept``)."""
    kept_set = set(kept.tolist())
    if not kept_set:
        return fused
    head = fused[:k].tolist()
    missing = [d for d in kept.tolist() if d not in head]
    if not missing:
        return fused
    # Drop the lowest-placed ids of the head that are not protected, to make room.
    drop: set[int] = set()
    for d in reversed(head):
        if len(drop) == len(missing):
            break
        if d not in kept_set:
            drop.add(d)
    new_head = [d for d in head if d not in drop] + missing
    rest = [d for d in fused.tolist() if d not in set(new_head)]
    return np.asarray(new_head + rest, dtype=np.int64)


def ranker_keep_dense(m: int, signal_gate: float | None = None) -> Ranker:
    """Fused top 10 always holds dense's top m (optionally only when BM25's best match holds < gate of idf)."""

    def rank(q: Query) -> np.ndarray:
        fused, _ = fuse_default(q)
        if signal_gate is not None:
            share = q.signal.best_share()
            if share is None or share >= signal_gate:
                return fused
        return keep_top(fused, q.dense[0][:m])

    return rank


def ranker_keep_margin(z: float, m: int = K) -> Ranker:
    """Fused top 10 holds those of dense's top m whose z-score within dense's list is at least z."""

    def rank(q: Query) -> np.ndarray:
        fused, _ = fuse_default(q)
        s = np.asarray(q.dense[1], dtype=np.float64)
        zs = (s - s.mean()) / (s.std() or 1.0)
        kept = q.dense[0][:m][zs[:m] >= z]
        return keep_top(fused, kept)

    return rank


def ranker_alpha(fn: Callable[[Query, float], float]) -> Ranker:
    """Convex fusion with alpha = fn(query, the product's alpha)."""

    def rank(q: Query) -> np.ndarray:
        choice = BEFORE.choose(q.dense[1], q.lexical[1], q.depth, q.signal)
        alpha = fn(q, choice.alpha)
        ids, _ = convex_arrays(*q.dense, *q.lexical, alpha=alpha, limit=100, lexical_depth=q.depth)
        return ids

    return rank


def ranker_rrf(fn: Callable[[Query, float], float], k: int = 60) -> Ranker:
    """Weighted RRF over the two lists' top 1000, dense's weight w = fn(query, product alpha), BM25's 1 - w."""

    def rank(q: Query) -> np.ndarray:
        choice = BEFORE.choose(q.dense[1], q.lexical[1], q.depth, q.signal)
        w = fn(q, choice.alpha)
        scores: dict[int, float] = {}
        for ids, weight in ((q.dense[0], w), (q.lexical[0], 1.0 - w)):
            for r, d in enumerate(ids.tolist(), 1):
                scores[d] = scores.get(d, 0.0) + weight / (k + r)
        return np.asarray(sorted(scores, key=lambda d: (-scores[d], d))[:100], dtype=np.int64)

    return rank


def _dense_leads(q: Query) -> float | None:
    """BM25's best-match share when the product's signal gives dense the lead, else None."""
    lead = BEFORE.leader(q.signal)
    return q.signal.best_share() if lead is not None and lead[0] > 0.5 else None


def weak_match(a: float, tok: int, gate: float) -> Callable[[Query, float], float]:
    """alpha at least ``a`` when dense leads, the query has ``tok``+ words and BM25's best match holds < gate."""

    def fn(q: Query, alpha: float) -> float:
        share = _dense_leads(q)
        return max(alpha, a) if share is not None and q.signal.tokens >= tok and share < gate else alpha

    return fn


def ramp(gate: float) -> Callable[[Query, float], float]:
    """When dense leads, its least weight rises from the product's at the common share to 1 at ``gate``."""
    policy = BEFORE

    def fn(q: Query, alpha: float) -> float:
        share = _dense_leads(q)
        if share is None:
            return alpha
        t = min(max((policy.common_share - share) / (policy.common_share - gate), 0.0), 1.0)
        return max(alpha, policy.dense_alpha + t * (1.0 - policy.dense_alpha))

    return fn


def features(q: Query) -> dict[str, float]:
    """What a plain-query detector could read: words typed, BM25's best-match share, the rarest stem's df share."""
    sig = q.signal
    share = sig.best_share()
    return {
        "tokens": sig.tokens,
        "share": -1.0 if share is None else share,
        "min_df": (min(sig.dfs) / sig.n_docs) if sig.dfs else 1.0,
        "stems": len(sig.dfs),
    }


def metrics(s: Set, ranker: Ranker) -> dict[str, dict[str, float]]:
    out = {}
    for q in s.queries:
        ranked = list(dict.fromkeys(x for n in ranker(q)[:100].tolist() for x in s.names.get(n, [str(n)])))
        relevant = {d for d, g in q.judged.items() if g > 0}
        out[q.qid] = {
            "ndcg@10": ndcg_at_k(ranked, q.judged, K),
            "mrr@10": mrr_at_k(ranked, q.judged, K),
            "recall@10": len(relevant.intersection(ranked[:K])) / len(relevant) if relevant else 0.0,
        }
    return out


def col(per: dict[str, dict[str, float]], metric: str) -> dict[str, float]:
    return {q: v[metric] for q, v in per.items()}


def mean(values: dict[str, float]) -> float:
    return sum(values.values()) / len(values) if values else 0.0


def rankers() -> dict[str, Ranker]:
    out: dict[str, Ranker] = {
        "default": lambda q: fuse_default(q)[0],
        "now": lambda q: fuse_default(q, FusionPolicy("adaptive"))[0],
        "dense": lambda q: q.dense[0],
        "lexical": lambda q: q.lexical[0],
    }
    for m in (1, 2, 3, 5, 7, 10):
        out[f"keep-dense@{m}"] = ranker_keep_dense(m)
    for m in (3, 5, 10):
        for gate in (0.5, 0.6, 0.7):
            out[f"keep-dense@{m} share<{gate}"] = ranker_keep_dense(m, gate)
    for z in (2.0, 2.5, 3.0, 3.5, 4.0):
        out[f"keep-margin z>={z}"] = ranker_keep_margin(z)
    for a in (0.85, 0.95, 1.0):
        for tok in (8, 10, 12):
            for gate in (0.5, 0.6):

                def fn(q: Query, alpha: float, a: float = a, tok: int = tok, gate: float = gate) -> float:
                    share = q.signal.best_share()
                    plain = q.signal.tokens >= tok and share is not None and share < gate
                    return max(alpha, a) if plain else alpha

                out[f"plain-alpha {a} tokens>={tok} share<{gate}"] = ranker_alpha(fn)
    for a in (0.9, 0.95, 1.0):
        for tok in (0, 10):
            for gate in (0.3, 0.35, 0.4, 0.45):
                out[f"weak-match alpha {a} tokens>={tok} share<{gate}"] = ranker_alpha(weak_match(a, tok, gate))
    for gate in (0.3, 0.4):
        out[f"weak-match ramp to 1 at share {gate}"] = ranker_alpha(ramp(gate))
    for kk in (10, 60):
        out[f"rrf{kk} w=0.5"] = ranker_rrf(lambda q, a: 0.5, kk)
        out[f"rrf{kk} w=alpha"] = ranker_rrf(lambda q, a: a, kk)
    return out


def score(args: argparse.Namespace) -> None:
    cache: Path = args.cache
    names = sorted(p.stem for p in cache.glob("*.json"))
    sets = [_load(cache, n) for n in names]
    report: dict[str, Any] = {"study": "plain_fusion", "sets": {}}
    chosen = rankers()
    if args.only:
        chosen = {k: v for k, v in chosen.items() if k in ("default", "now", "dense", "lexical") or args.only in k}
    for s in sets:
        per = {name: metrics(s, r) for name, r in chosen.items()}
        base = per["default"]
        row: dict[str, Any] = {"n": len(s.queries)}
        for name, p in per.items():
            m = col(p, s.metric)
            entry: dict[str, Any] = {s.metric: round(mean(m), 4), "recall@10": round(mean(col(p, "recall@10")), 4)}
            if name != "default":
                d = paired_difference(col(base, s.metric), m)
                entry["diff"] = [round(d["difference"], 4), round(d["stderr"], 4)]
            row[name] = entry
        feats = [features(q) for q in s.queries]
        row["features"] = {
            k: [round(float(np.percentile([f[k] for f in feats], p)), 3) for p in (0, 10, 50, 90, 100)]
            for k in feats[0]
        }
        report["sets"][s.name] = row
        log(f"{s.name} scored")
    report["select"] = select(sets)
    print(json.dumps(report))


GATES = tuple(round(0.25 + 0.025 * i, 3) for i in range(11))  # 0.25 .. 0.5


def select(sets: list[Set]) -> dict[str, Any]:
    """The dense-alone gate chosen on the train splits only: the largest share below which dense alone costs
    nothing, pooled over every train split's queries (nDCG@10 against ``default``); each gate's pooled figure."""
    train = [s for s in sets if s.name.endswith("-train")]
    pooled: dict[str, list[float]] = {}
    for gate in GATES:
        rule = ranker_alpha(weak_match(1.0, 0, gate))
        diffs: list[float] = []
        for s in train:
            base, new = col(metrics(s, before_ranker), s.metric), col(metrics(s, rule), s.metric)
            diffs += [new[q] - base[q] for q in base]
        d = np.asarray(diffs)
        pooled[f"{gate:g}"] = [round(float(d.mean()), 5), round(float(d.std() / np.sqrt(d.size)), 5)]
    chosen = max((g for g in GATES if pooled[f"{g:g}"][0] >= 0.0), default=None)
    return {"train_splits": [s.name for s in train], "pooled": pooled, "chosen": chosen}


def before_ranker(q: Query) -> np.ndarray:
    """The product's fused ranking before the dense-alone rule."""
    return fuse_default(q)[0]


def shares(args: argparse.Namespace) -> None:
    """BM25's best-match share of each dev query's idf mass in an index (BM25 only: any model's index serves)."""
    rows = [json.loads(line) for line in args.dev.read_text(encoding="utf-8").splitlines() if line.strip()]
    out: dict[str, list[float]] = {}
    with Index.open(args.index) as index:
        documents = len(index.lexical)
        for r in rows:
            if r["style"] == "author":
                continue
            words = index.spell(r["query"]).text
            ids, _ = index._lexical_top(words, 1, None, frozenset())
            share = QuerySignal.measure(index.lexical, words, ids, typed=r["query"]).best_share()
            out.setdefault(r["style"], []).append(round(share or 0.0, 2))
    gate = FusionPolicy("adaptive").alone_share
    report = {
        s: {"shares": sorted(v), f"below {gate:g}": sum(x < gate for x in v), "n": len(v)} for s, v in out.items()
    }
    print(json.dumps({"index": str(args.index), "documents": documents, "styles": report}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("gather", help="take each query's lists from the indexes into --cache")
    g.add_argument("--cache", type=Path, required=True)
    g.add_argument("--beir", action="append", default=[], help="NAME=DATA:INDEX:SPLIT[,SPLIT] (repeatable)")
    g.add_argument("--typed", type=Path, help="the typed dev set's slice index (scripts/bench_typed.py)")
    g.add_argument("--dev", type=Path, default=REPO / "scripts" / "data" / "typed_dev.jsonl")
    s = sub.add_parser("score", help="score the fusion rules on the cached lists")
    s.add_argument("--cache", type=Path, required=True)
    s.add_argument("--only", default="", help="score only the rules whose name holds this")
    h = sub.add_parser("shares", help="each dev query's best-match share in an index (how often the rule fires)")
    h.add_argument("--index", type=Path, required=True)
    h.add_argument("--dev", type=Path, default=REPO / "scripts" / "data" / "typed_dev.jsonl")
    args = parser.parse_args()
    if args.command == "gather":
        gather(args)
    elif args.command == "shares":
        shares(args)
    else:
        score(args)


if __name__ == "__main__":
    main()
