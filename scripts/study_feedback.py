"""Study: does feeding the dense side's best documents back into BM25 help hybrid search? (issue 24)

Hybrid search fuses a dense list and a BM25 list. When a query's key word is in no document ("forget" for papers
that say "unlearning"), BM25 ranks on the query's other, often common, words and pulls the fusion away from the
dense side's answer. Dense pseudo-relevance feedback asks BM25 a second, longer question: the query's words plus
the ``terms`` most telling words of the dense top ``docs`` (each word scored by the document's cosine x its share
of the document x its idf: RM3's relevance model with the encoder as the judge), together weighing ``weight`` x
the query's own words. The fused ranking then uses that BM25 list in place of the first.

For each judged query of a split the script takes the product's own candidate lists (``Index.hybrid_candidates``:
the int8 encoder, the index's reading and BM25 as a search sees them), fuses them as the index records (adaptive
or tuned), and scores nDCG@10 for hybrid and for each feedback setting, paired against hybrid (mean difference
and its standard error). ``--only-unseen`` feeds back only for queries with a word no document holds. Tune on
train, report test once. The index must be one built whole (a single BM25 part, as ``semsearch eval`` builds).

    python scripts/study_feedback.py --data ../shared/data/scifact --index /tmp/sf --split train [--only-unseen]
    python scripts/study_feedback.py --seeds /tmp/seed   # where the seed question about forgetting ranks
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.eval.beir import read_qrels, read_queries  # noqa: E402
from semsearch.eval.metrics import ndcg_at_k, paired_difference  # noqa: E402
from semsearch.query.search import Candidates, Index  # noqa: E402
from semsearch.store.lexical import LexicalIndex, lexical_text, lucene_idf  # noqa: E402

SETTINGS = [(3, 10, 0.3), (3, 10, 0.5), (3, 20, 0.5), (5, 10, 0.5), (3, 10, 1.0), (5, 20, 0.3), (10, 20, 0.5)]
FORGETTING = "making a trained model forget specific training examples"
Setting = tuple[int, int, float]  # feedback documents, words, weight


def log(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def idfs(lexical: LexicalIndex, terms: list[str]) -> np.ndarray:
    """Lucene idf of each stemmed term (0.0 for a term no document holds)."""
    tids = np.array([lexical.term_ids.get(t, -1) for t in terms], dtype=np.int64)
    df = np.zeros(len(terms), dtype=np.int64)
    known = tids >= 0
    df[known] = lexical.indptr[tids[known] + 1] - lexical.indptr[tids[known]]
    return lucene_idf(df, len(lexical))


def unseen(lexical: LexicalIndex, text: str) -> list[str]:
    terms = list(dict.fromkeys(lexical.terms(text)))
    return [t for t, v in zip(terms, idfs(lexical, terms).tolist(), strict=True) if v == 0.0]


def fed_back(index: Index, text: str, cands: Candidates, setting: Setting) -> Candidates:
    """``cands`` with BM25's list answering the query plus the dense head's telling words."""
    docs, terms, weight = setting
    lexical = index.lexical
    assert isinstance(lexical, LexicalIndex), "build the index whole (one BM25 part)"
    query = Counter(lexical.terms(text))
    asked = {t: float(n) for t, n in query.items()}
    nums, cosines = cands.dense
    found = index.store.get_many(nums[:docs].tolist())
    read = []
    for num, cosine in zip(nums[:docs].tolist(), cosines[:docs].tolist(), strict=True):
        doc = found.get(num)
        if doc is not None and cosine > 0:
            tokens = lexical.terms(lexical_text(None if doc.title_only else doc.title, doc.text))
            if tokens:
                read.append((cosine, Counter(tokens), len(tokens)))
    vocab = list(dict.fromkeys(t for _, counts, _ in read for t in counts))
    idf = dict(zip(vocab, idfs(lexical, vocab).tolist(), strict=True))
    telling: Counter[str] = Counter()
    for cosine, counts, length in read:
        for term, count in counts.items():
            telling[term] += cosine * count / length * idf[term]
    best = [(t, v) for t, v in telling.most_common(terms) if v > 0]
    total = sum(v for _, v in best)
    for term, value in best:
        asked[term] = asked.get(term, 0.0) + weight * sum(query.values()) * value / total
    rows, scores = lexical.top(asked, cands.depth)
    return Candidates(cands.dense, (lexical.ids[rows], scores), cands.depth)


def ranked_ids(index: Index, cands: Candidates, k: int) -> list[str]:
    hits, _ = cands.fuse(index.fusion, k)
    found = index.store.get_many([n for n, _ in hits])
    return [(found[n].external_ids or [found[n].id])[0] for n, _ in hits]


def seeds(index_dir: Path, settings: list[Setting]) -> None:
    """Where the forgetting question puts the unlearning paper, without feedback and with each setting."""
    with Index.open(index_dir) as index:
        target = next(h.id for h in index.search(FORGETTING, 100, mode="dense") if "unlearning" in h.text)
        cands = index.hybrid_candidates(FORGETTING)
        rows = {"hybrid": cands, **{_name(s): fed_back(index, FORGETTING, cands, s) for s in settings}}
        out = {}
        for name, c in rows.items():
            hits, _ = c.fuse(index.fusion, len(index))
            found = index.store.get_many([n for n, _ in hits])
            out[name] = [found[n].id for n, _ in hits].index(target) + 1  # internal ids, as ``target`` is
        print(json.dumps({"question": FORGETTING, "unseen": unseen(index.lexical, FORGETTING), "rank": out}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, help="a BEIR-format folder (corpus, queries, qrels)")
    ap.add_argument("--index", type=Path, help="an index of its corpus (semsearch eval --index)")
    ap.add_argument("--split", default="train")
    ap.add_argument("--settings", help="docs:terms:weight,... (default: a grid of seven)")
    ap.add_argument("--only-unseen", action="store_true", help="feed back only for queries with an unseen word")
    ap.add_argument("--seeds", type=Path, help="an index of seeds/: rank of the unlearning paper instead")
    args = ap.parse_args()
    settings = SETTINGS
    if args.settings:
        settings = [(int(d), int(t), float(w)) for d, t, w in (s.split(":") for s in args.settings.split(","))]
    if args.seeds:
        seeds(args.seeds, settings)
        return
    if args.data is None or args.index is None:
        ap.error("--data and --index (or --seeds)")
    queries = read_queries(args.data / "queries.jsonl")
    qrels = read_qrels(args.data / "qrels" / f"{args.split}.tsv")
    judged = {q: queries[q] for q in qrels if q in queries and any(v > 0 for v in qrels[q].values())}
    runs: dict[str, dict[str, float]] = {"hybrid": {}, **{_name(s): {} for s in settings}}
    seconds = dict.fromkeys(runs, 0.0)
    with_unseen = 0
    with Index.open(args.index) as index:
        for i, (qid, text) in enumerate(judged.items()):
            cands = index.hybrid_candidates(text)
            runs["hybrid"][qid] = ndcg_at_k(ranked_ids(index, cands, 10), qrels[qid])
            missing = bool(unseen(index.lexical, text))
            with_unseen += missing
            for s in settings:
                if args.only_unseen and not missing:
                    runs[_name(s)][qid] = runs["hybrid"][qid]
                    continue
                start = time.perf_counter()
                fed = fed_back(index, text, cands, s)
                seconds[_name(s)] += time.perf_counter() - start
                runs[_name(s)][qid] = ndcg_at_k(ranked_ids(index, fed, 10), qrels[qid])
            if (i + 1) % 100 == 0:
                log(f"  {i + 1}/{len(judged)}")
    out: dict[str, object] = {"split": args.split, "queries": len(judged), "with_unseen_word": with_unseen}
    out["only_unseen"] = args.only_unseen
    for name, scores in runs.items():
        row: dict[str, float] = {"ndcg@10": round(sum(scores.values()) / max(len(scores), 1), 4)}
        if name != "hybrid":
            diff = paired_difference(runs["hybrid"], scores)
            row |= {"vs_hybrid": round(diff["difference"], 4), "se": round(diff["stderr"], 4)}
            row["ms_per_fed_query"] = round(
                1000 * seconds[name] / max(with_unseen if args.only_unseen else len(scores), 1), 2
            )
        out[name] = row
    print(json.dumps(out))


def _name(setting: Setting) -> str:
    return "feedback{}x{}w{:g}".format(*setting)


if __name__ == "__main__":
    main()
