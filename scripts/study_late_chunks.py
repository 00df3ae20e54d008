"""Study: sentence windows pooled from the runs that read the whole abstract ("late chunking"), SciFact, issue 24.

``--reading windows-all`` encodes every 2-sentence window as a text of its own: +0.035 dense nDCG@10 on SciFact
train, but 2.04x the encoding. Here each abstract is read in runs of the encoder's 256 tokens instead: the first
run is exactly today's truncated text (so its mean is today's whole-text vector, same bytes), the next runs start
at the first sentence the previous one did not hold to its end, with the title in front. A window's vector is the
mean of its sentences' token outputs in the run that holds each whole (optionally with the title's tokens), so
windows cost no extra run. Candidates (each re-scores the whole vector's top 200 as search does):

    whole             today's vectors
    late{K}[t]        windows of K sentences (1, 2, 3) pooled from the runs; "t": title tokens pooled in too
    {cand}:mixA       A * whole + (1 - A) * max(whole, best window), A in 0.3 0.5
    enc2              every 2-sentence window encoded alone (--reading windows-all), from study_windows's cache
    runs{N}           --runs N: the product's sentence reading with runs of N tokens (encode/onnx_sentences.py):
                      the document's vector is its sentences' unit mean; runs128 is --reading sentences
    runs{N}:mixA      A * document + (1 - A) * max(document, best sentence), re-scoring the document's top 200
    runs{N}+whole:mixA   the same sentences beside the truncated text's vector (the first candidates' whole)

    python scripts/study_late_chunks.py --encoder /tmp/quality/encoder --split train
    python scripts/study_late_chunks.py --encoder /tmp/quality/encoder --split test --hybrid /tmp/quality/sf
    python scripts/study_late_chunks.py --encoder /tmp/quality/encoder --split train --runs 96,128,192,512

Prints one JSON line: per candidate nDCG@10, the paired difference to ``whole`` and its standard error, and the
encoding cost (runs, tokens, seconds) against the whole-text runs alone. Token outputs are kept only per
document; window vectors go to --cache so a second split costs only the queries.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch.core.sentences import split_sentences  # noqa: E402
from semsearch.encode.onnx_backend import OnnxEmbedder  # noqa: E402
from semsearch.encode.sentence_runs import plan_runs, sentence_tokens  # noqa: E402
from semsearch.encode.windows import every_window  # noqa: E402
from semsearch.eval.beir import read_qrels, read_queries  # noqa: E402
from semsearch.eval.metrics import ndcg_at_k  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
from study_windows import hybrid, key, lexical_lists, ndcg, paired, topped  # noqa: E402

SCIFACT = REPO.parent / "shared" / "data" / "scifact"
SIZES = (1, 2, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--encoder", required=True)
    ap.add_argument("--split", default="train")
    ap.add_argument("--cache", default="/tmp/late-chunks.npz")
    ap.add_argument("--enc-cache", default="/tmp/windows-cache.npz", help="study_windows.py's vectors (enc2)")
    ap.add_argument("--hybrid", type=Path, help="an index of the SciFact corpus: fuse candidates with its BM25")
    ap.add_argument("--no-check", action="store_true", help="do not re-encode the whole texts (time, bytes)")
    ap.add_argument("--limit", type=int, default=0, help="first N documents only (a quick check)")
    ap.add_argument("--runs", default="", help="run lengths to read sentences in (comma-separated, e.g. 128,512)")
    ap.add_argument("--runs-cache", default="/tmp/late-runs", help="their vectors: PREFIX-N-DIMENSION.npz")
    ap.add_argument("--base", default="whole", help="the candidate every other is paired against (e.g. runs128:mix0.3)")
    args = ap.parse_args()
    emb = OnnxEmbedder.load(Path(args.encoder), "int8", parallel="texts")
    tok = emb._tokenizer
    room = emb.spec.max_seq_length - 2
    docs = [json.loads(line) for line in (SCIFACT / "corpus.jsonl").open()]
    if args.limit:
        docs = docs[: args.limit]
    ids = [d["_id"] for d in docs]
    full = [f"{d['title']} {d['text']}".strip() for d in docs]
    cache = Path(args.cache)
    names = [f"late{k}{t}" for k in SIZES for t in ("", "t")]
    if cache.is_file() and not args.limit:
        with np.load(cache) as z:
            stored = {k: z[k] for k in z.files}
        cost = json.loads(str(stored.pop("cost")))
    else:
        stored, cost = encode_all(emb, tok, room, docs, full, names, not args.no_check)
        if not args.limit:
            np.savez(cache, cost=json.dumps(cost), **stored)
    print(json.dumps({"cost": cost}), file=sys.stderr)

    queries = read_queries(SCIFACT / "queries.jsonl")
    qrels = read_qrels(SCIFACT / "qrels" / f"{args.split}.tsv")
    qids = [q for q in qrels if q in queries]
    qv = emb.encode([queries[q] for q in qids])
    whole = qv @ stored["whole"].T
    scores: dict[str, np.ndarray] = {"whole": whole}
    bests = {name: best_per_doc(whole, qv @ stored[name].T, stored[name + "_owner"]) for name in names}
    bests["late1+2"] = np.maximum(bests["late1"], bests["late2"])
    for name, best in bests.items():
        for a in (0.1, 0.2, 0.3, 0.5):
            scores[f"{name}:mix{a}"] = topped(whole, a * whole + (1 - a) * np.maximum(whole, best), 200)
        scores[f"{name}:mix0.2@1000"] = topped(whole, 0.2 * whole + 0.8 * np.maximum(whole, best), 1000)
    enc = Path(args.enc_cache)
    if enc.is_file() and not args.limit:
        with np.load(enc) as z:
            have = set(z.files)
            every = [every_window(d["title"], d["text"]) or [f] for d, f in zip(docs, full, strict=True)]
            flat = [t for w in every for t in w]
            keys = [key(t) for t in flat]
            if all(k in have for k in keys) and z[keys[0]].shape[-1] == qv.shape[1]:  # the same model's
                vecs = np.stack([z[k] for k in keys])
                owner = np.array([i for i, w in enumerate(every) for _ in w])
                best = best_per_doc(whole, qv @ vecs.T, owner)
                scores["enc2:mix0.3"] = topped(whole, 0.3 * whole + 0.7 * np.maximum(whole, best), 200)
    for n in [int(x) for x in args.runs.split(",") if x]:
        at = None if args.limit else Path(f"{args.runs_cache}-{n}-{emb.dimension}.npz")
        document, sentences, owner = read_in_runs(emb, docs, full, n, at)
        doc = qv @ document.T
        best = best_per_doc(doc, qv @ sentences.T, owner)
        scores[f"runs{n}"] = doc
        for a in (0.0, 0.3):
            scores[f"runs{n}:mix{a}"] = topped(doc, a * doc + (1 - a) * np.maximum(doc, best), 200)
        best = best_per_doc(whole, qv @ sentences.T, owner)
        scores[f"runs{n}+whole:mix0.3"] = topped(whole, 0.3 * whole + 0.7 * np.maximum(whole, best), 200)
    per = {name: ndcg(s, ids, qids, qrels) for name, s in scores.items()}
    if args.hybrid is not None:
        lexical = lexical_lists(args.hybrid, [queries[q] for q in qids])
        per["lexical"] = np.array([ndcg_at_k(list(lex)[:10], qrels[q]) for lex, q in zip(lexical, qids, strict=True)])
        best_name = max((n for n in per if n not in ("whole", "lexical")), key=lambda n: per[n].mean())
        for name in ("whole", best_name, "late1:mix0.3", "enc2:mix0.3", "runs128:mix0.3"):
            if name in scores:
                per[f"hybrid_{name}"] = hybrid(scores[name], ids, lexical, qids, qrels)
    out: dict[str, object] = {"split": args.split, "queries": len(qids), "cost": cost}
    out["base"] = args.base
    hybrid_base = f"hybrid_{args.base}" if f"hybrid_{args.base}" in per else "hybrid_whole"
    out.update(paired(per, lambda name: hybrid_base if name.startswith("hybrid_") else args.base))
    print(json.dumps(out))


def encode_all(
    emb: OnnxEmbedder,
    tok: object,
    room: int,
    docs: list[dict],
    full: list[str],
    names: list[str],
    check_whole: bool = True,
):
    """Whole-text vectors and every late-window candidate, with the runs' cost against the whole-text runs."""
    from tokenizers import Tokenizer

    untruncated = Tokenizer.from_str(tok.to_str())  # type: ignore[attr-defined]
    untruncated.no_truncation()
    untruncated.no_padding()
    lower = emb.spec.do_lower_case
    cls_id, sep_id = untruncated.encode("").ids  # the [CLS] X [SEP] template of BERT and MPNet tokenizers
    session, inputs = emb._session, emb._inputs

    def run(token_ids: list[int]) -> np.ndarray:
        arr = np.asarray([[cls_id, *token_ids, sep_id]], dtype=np.int64)
        feed = {"input_ids": arr, "attention_mask": np.ones_like(arr), "token_type_ids": np.zeros_like(arr)}
        (hidden,) = session.run(["token_embeddings"], {k: feed[k] for k in inputs})
        return np.asarray(hidden[0], dtype=np.float32)

    def unit(v: np.ndarray) -> np.ndarray:
        return (v / max(float(np.linalg.norm(v)), 1e-12)).astype(np.float32)

    def one(i: int) -> tuple[np.ndarray, dict[str, list[np.ndarray]], int, int]:
        d = docs[i]
        text = full[i]
        enc = untruncated.encode(text.lower() if lower else text, add_special_tokens=False)
        tids, offs = enc.ids, enc.offsets
        prefix = len(text) - len(d["text"]) if d["title"] and text.endswith(d["text"]) else 0
        spans = [(a + prefix, b + prefix) for a, b in split_sentences(d["text"])] or [(prefix, len(text))]
        title_n = sum(1 for o in offs if o[1] <= max(prefix - 1, 0)) if prefix else 0
        plan = plan_runs(len(tids), sentence_tokens(offs, spans), title_n, room)
        hidden_first = None
        sent_vec_sum: dict[int, np.ndarray] = {}
        sent_len: dict[int, int] = {}
        title_sum = np.zeros(emb.dimension, dtype=np.float64)
        tokens = 0
        for r, (positions, held) in enumerate((run.positions, run.held) for run in plan):
            h = run([tids[p] for p in positions])
            tokens += len(positions) + 2
            if r == 0:
                hidden_first = h
                if title_n:
                    title_sum = h[1 : 1 + title_n].sum(axis=0).astype(np.float64)
            for s, (a, b) in held.items():
                if s not in sent_vec_sum:
                    sent_vec_sum[s] = h[1 + a : 1 + b].sum(axis=0).astype(np.float64)
                    sent_len[s] = b - a
        assert hidden_first is not None
        whole = unit(hidden_first.mean(axis=0))
        out: dict[str, list[np.ndarray]] = {}
        order = sorted(sent_vec_sum)
        for k in SIZES:
            for t in ("", "t"):
                vecs = []
                if len(spans) > k:
                    for g in range(0, len(order), k):
                        group = order[g : g + k]
                        total = sum(sent_vec_sum[s] for s in group)
                        count = sum(sent_len[s] for s in group)
                        if t and title_n:
                            total = total + title_sum
                            count += title_n
                        vecs.append(unit(total / max(count, 1)))
                out[f"late{k}{t}"] = vecs or [whole]
        return whole, out, len(plan), tokens

    start = time.perf_counter()
    with ThreadPoolExecutor(emb.threads) as pool:
        results = list(pool.map(one, range(len(docs))))
    late_s = time.perf_counter() - start
    wholes = np.stack([r[0] for r in results])
    start = time.perf_counter()
    check = emb.encode(full) if check_whole else wholes
    whole_s = time.perf_counter() - start
    same = float((wholes * check).sum(axis=1).min())
    stored: dict[str, np.ndarray] = {"whole": check}
    for name in names:
        stored[name] = np.stack([v for r in results for v in r[1][name]])
        stored[name + "_owner"] = np.array([i for i, r in enumerate(results) for _ in r[1][name]])
    whole_tokens = sum(
        len(e.ids) for e in emb._tokenizer.encode_batch([t.lower() if emb.spec.do_lower_case else t for t in full])
    )
    cost = {
        "documents": len(docs),
        "runs": sum(r[2] for r in results),
        "tokens": sum(r[3] for r in results),
        "whole_tokens": whole_tokens,
        "late_s": round(late_s, 1),
        "whole_s": round(whole_s, 1),
        "time_ratio": round(late_s / whole_s, 3) if check_whole else None,
        "min_cosine_first_run_vs_whole": round(same, 6),
    }
    return stored, cost


def read_in_runs(
    emb: OnnxEmbedder, docs: list[dict], full: list[str], run_tokens: int, cache: Path | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Document vectors, sentence vectors and their owners, as --reading sentences makes them with runs of N tokens."""
    if cache is not None and cache.is_file():
        with np.load(cache) as z:
            return z["document"], z["sentences"], z["owner"]
    from semsearch.encode.onnx_sentences import encode_sentences, untruncated
    from semsearch.encode.sentence_runs import sentence_text

    items = [sentence_text(f, d["title"], d["text"]) for d, f in zip(docs, full, strict=True)]
    start = time.perf_counter()
    got = encode_sentences(emb, emb._tokenizer, untruncated(emb._tokenizer), items, run_tokens=run_tokens)
    print(json.dumps({"runs": run_tokens, "seconds": round(time.perf_counter() - start, 1)}), file=sys.stderr)
    document = np.stack([d for d, _ in got])
    # A document of one sentence has no sentence vector: it is scored by its own.
    sentences = np.concatenate([s if len(s) else d[None, :] for d, s in got])
    owner = np.array([i for i, (_, s) in enumerate(got) for _ in range(max(len(s), 1))])
    if cache is not None:
        np.savez(cache, document=document, sentences=sentences, owner=owner)
    return document, sentences, owner


def best_per_doc(base: np.ndarray, window_scores: np.ndarray, owner: np.ndarray) -> np.ndarray:
    out = np.full_like(base, -np.inf)
    np.maximum.at(out.T, owner, window_scores.T)
    return np.where(np.isfinite(out), out, base)


if __name__ == "__main__":
    main()
