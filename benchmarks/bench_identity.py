"""Benchmark ids that never move: refreshes that bring copies of known abstracts, and one that drops originals.

Indexes NeurIPS 2025 (../shared/data/mlanthology/neurips2025.jsonl.gz, 5,823 abstracts) from scratch, then
refreshes it with one more file of 40 abstracts: 10 known ones made longer (a sentence appended), 10
re-wrapped with markup, 10 with two words edited, and 10 new ones from other venues. It counts the ids of
the 30 copied papers that moved and the texts encoded, and what the same records would have given without
the previous version's identity (the old rule: the longest text of a group is its representative). Then it
drops the 10 originals whose longer copies remain: those documents take new ids, and the old ones must
resolve as aliases. Encoding uses a stand-in (hashed words, 64-d) so the figures are about the pipeline,
not the model. Prints one JSON line; progress goes to stderr.

    python -m benchmarks.bench_identity [--workdir DIR]
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import MLANTHOLOGY, HashedWords, arguments, emit, log
from semsearch import BuildOptions, Index, build_index
from semsearch.dedup.duplicates import deduplicate, doc_id_for, text_hash
from semsearch.dedup.identity import load_previous_identity
from semsearch.ingest.sources import read_sources

DATA = MLANTHOLOGY


def rewrap(text: str) -> str:
    words = text.split()
    for i in (3, 11, 19):
        if i < len(words):
            words[i] = f"*{words[i]}*"
    return "\n".join(" ".join(words[i : i + 12]) for i in range(0, len(words), 12))


def edit(text: str) -> str:
    words = text.split()
    for i in (len(words) // 3, 2 * len(words) // 3):
        words[i] = "substantially" if words[i] != "substantially" else "markedly"
    return " ".join(words)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--workdir", type=Path, help="keep the index here (default: a temporary folder)")
    args = parser.parse_args()
    if not (DATA / "neurips2025.jsonl.gz").is_file():
        sys.exit(f"{DATA / 'neurips2025.jsonl.gz'} is not available")
    os.environ.setdefault("SEMSEARCH_MAP", "pca")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="bench-identity-"))
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    with gzip.open(DATA / "neurips2025.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    others: list[dict] = []
    with gzip.open(DATA / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            if str(rec.get("metadata", {}).get("year")) != "2025" and len(rec["text"].split()) > 60:
                others.append({"id": f"new-{len(others)}", "title": rec.get("title"), "abstract": rec["text"]})
            if len(others) == 10:
                break
    main_file = src / "neurips2025.jsonl"
    main_file.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    picked = rows[::50][:30]
    longer, wrapped, edited = picked[:10], picked[10:20], picked[20:30]
    copies = (
        [r["text"] + " Code and models are publicly released." for r in longer]
        + [rewrap(r["text"]) for r in wrapped]
        + [edit(r["text"]) for r in edited]
    )
    index_dir = work / "index"
    opts = BuildOptions(progress=False, full=False)

    encoder = HashedWords(dimension=64)
    log(f"building {len(rows)} abstracts ...")
    started = time.perf_counter()
    first = build_index([str(src)], index_dir, opts, embedder=encoder)
    build_s = time.perf_counter() - started
    holders = _holders(index_dir)
    before = {r["_id"]: holders[text_hash(r["text"])] for r in picked}
    cached = {d.embedding_text() for d in deduplicate(read_sources([str(src)]).records).documents}

    # The copies come as a second catalogue would bring them: same titles, other text.
    late = [
        {"id": f"copy-{i}", "title": r.get("title"), "abstract": c}
        for i, (r, c) in enumerate(zip(picked, copies, strict=True))
    ]
    (src / "late.jsonl").write_text("\n".join(json.dumps(r) for r in late + others) + "\n", encoding="utf-8")
    records = read_sources([str(src)]).records
    started = time.perf_counter()
    plain = deduplicate(records)
    dedup_plain_s = time.perf_counter() - started
    started = time.perf_counter()
    identity = load_previous_identity(index_dir)
    deduplicate(records, previous=identity)
    dedup_stable_s = time.perf_counter() - started
    old_rule_moved = sum(1 for r in picked if doc_id_for(text_hash(r["text"])) not in {d.id for d in plain.documents})
    old_rule_encoded = sum(1 for d in plain.documents if d.embedding_text() not in cached)

    log("refreshing with 30 copies and 10 new abstracts ...")
    encoder.encoded = 0
    started = time.perf_counter()
    refresh = build_index([str(src)], index_dir, opts, embedder=encoder)
    refresh_s = time.perf_counter() - started
    holders = _holders(index_dir)
    after = {r["_id"]: holders[text_hash(r["text"])] for r in picked}
    moved = sum(before[k] != after[k] for k in before)

    log("dropping the 10 originals of the longer copies ...")
    gone = {r["_id"] for r in longer}
    main_file.write_text("\n".join(json.dumps(r) for r in rows if r["_id"] not in gone) + "\n", encoding="utf-8")
    encoder.encoded = 0
    dropped = build_index([str(src)], index_dir, opts, embedder=encoder)
    with Index.open(index_dir, embedder=encoder) as idx:
        resolved = sum(
            idx.get(before[r["_id"]]).id == doc_id_for(text_hash(c)) for r, c in zip(longer, copies[:10], strict=True)
        )
        aliases = idx.info().aliases

    emit(
        {
            "documents": first.documents,
            "encoder": "stand-in hashed words (64-d)",
            "build_s": round(build_s, 1),
            "refresh": {
                "copies": 30,
                "new": len(others),
                "encoded": refresh.encoded,
                "ids_moved": moved,
                "seconds": round(refresh_s, 1),
                "old_rule_ids_moved": old_rule_moved,
                "old_rule_encoded": old_rule_encoded,
                "dedup_s_without_identity": round(dedup_plain_s, 2),
                "dedup_s_with_identity": round(dedup_stable_s, 2),
            },
            "originals_dropped": {
                "dropped": len(gone),
                "encoded": dropped.encoded,
                "aliases": aliases,
                "old_ids_resolving_to_the_copy": resolved,
            },
        },
        out=args.out,
    )


def _holders(index_dir: Path) -> dict[str, str]:
    """Text hash -> the id of the document holding that text (as its own or as a merged copy)."""
    out: dict[str, str] = {}
    with Index.open(index_dir, embedder=HashedWords(dimension=64)) as idx:
        for doc in idx.store.iter_documents():
            for h in (doc.text_hash, *doc.texts):
                out[h] = doc.id
    return out


if __name__ == "__main__":
    main()
