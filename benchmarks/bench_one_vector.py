"""One text, one vector: bulk throughput and bit-exactness of encoding each text alone vs the former batches.

The "batched" configurations re-create the encoder as it was before issue #15 (length-sorted batches of 32,
padded to a multiple of 32) on the same ORT session, so every configuration runs in the same process on the
same chunks of abstracts, interleaved: load from other processes hits them alike. Ratios are against batched
int8, the former default. Bit-exactness compares each abstract's vector from its batch with the one it gets
alone. Query latency: encoding one query, padded to 32 tokens as before or unpadded as now (int8, interleaved).
Prints one JSON line; progress on stderr.

    python -m benchmarks.bench_one_vector [--limit 500] [--chunk 50]
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from benchmarks.harness import NEURIPS, arguments, emit

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from semsearch.encode.catalogue import DEFAULT_MODEL
from semsearch.encode.embedder import normalize_rows
from semsearch.encode.onnx_backend import OnnxEmbedder, pool_tokens
from semsearch.encode.onnx_export import export_onnx

DEFAULT_DATA = NEURIPS
Encode = Callable[[Sequence[str]], np.ndarray]


def batched(e: OnnxEmbedder, texts: Sequence[str], batch_size: int = 32, pad: int = 32) -> np.ndarray:
    """The encoder before issue #15: length-sorted batches, padded to a multiple of ``pad`` tokens."""
    encodings = e._tokenizer.encode_batch([t.lower() if e.spec.do_lower_case else t for t in texts])
    lengths = np.array([len(x.ids) for x in encodings])
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros((len(texts), e.dimension), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        longest = int(lengths[idx].max())
        width = max(longest, min(-(-longest // pad) * pad, e.spec.max_seq_length))
        ids = np.full((len(idx), width), e.spec.pad_token_id, dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for r, i in enumerate(idx):
            k = len(encodings[i].ids)
            ids[r, :k], mask[r, :k], types[r, :k] = encodings[i].ids, 1, encodings[i].type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        (hidden,) = e._session.run(["token_embeddings"], {n: feed[n] for n in e._inputs})
        out[idx] = pool_tokens(np.asarray(hidden, dtype=np.float32), mask, e.spec.pooling)
    return normalize_rows(out)


def query_latency(e: OnnxEmbedder, queries: Sequence[str]) -> dict[str, dict[str, float]]:
    """p50/p99 milliseconds to encode one query: padded to 32 tokens (before) vs unpadded (now), interleaved."""
    ways: dict[str, Encode] = {"padded (before)": lambda q: batched(e, q), "unpadded (now)": e.encode}
    took: dict[str, list[float]] = {name: [] for name in ways}
    for query in queries:
        for name, fn in ways.items():
            began = time.perf_counter()
            fn([query])
            took[name].append(1000 * (time.perf_counter() - began))
    return {
        n: {"p50": round(float(np.percentile(t, 50)), 2), "p99": round(float(np.percentile(t, 99)), 2)}
        for n, t in took.items()
    }


def load_abstracts(path: Path, limit: int) -> list[str]:
    """Title and abstract of the first ``limit`` records, joined as the index embeds them."""
    texts: list[str] = []
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        for line in fh:
            record = json.loads(line)
            texts.append(f"{record['title']} {record['text']}" if record.get("title") else record["text"])
            if len(texts) == limit:
                break
    return texts


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--limit", type=int, default=500)
    parser.add_argument("--chunk", type=int, default=50, help="abstracts per interleaving turn")
    args = parser.parse_args()
    if not args.data.is_file():
        sys.exit(f"{args.data} is missing: this benchmark needs ../shared/data/mlanthology")
    texts = load_abstracts(args.data, args.limit)
    with tempfile.TemporaryDirectory(prefix="semsearch-onevec-") as tmp:
        folder = Path(tmp) / "encoder"
        print("[bench] exporting", DEFAULT_MODEL, file=sys.stderr, flush=True)
        export_onnx(DEFAULT_MODEL, folder)
        ops = {p: OnnxEmbedder.load(folder, p) for p in ("int8", "fp32")}
        at_once = {p: OnnxEmbedder.load(folder, p, parallel="texts") for p in ("int8", "fp32")}
        configs: dict[str, Encode] = {}
        for p in ("int8", "fp32"):
            configs[f"{p} batches of 32 (before)"] = lambda part, e=ops[p]: batched(e, part)
            configs[f"{p} alone, ops threads"] = lambda part, e=ops[p]: e.encode(part)
            configs[f"{p} alone, texts in parallel"] = lambda part, e=at_once[p]: e.encode(part)
        for fn in configs.values():
            fn(texts[:4])  # warm-up
        spent = dict.fromkeys(configs, 0.0)
        outputs: dict[str, list[np.ndarray]] = {name: [] for name in configs}
        load = os.getloadavg()[0]
        for start in range(0, len(texts), args.chunk):
            part = texts[start : start + args.chunk]
            for name, fn in configs.items():
                began = time.perf_counter()
                outputs[name].append(fn(part))
                spent[name] += time.perf_counter() - began
            print(f"[bench] {start + len(part)}/{len(texts)}", file=sys.stderr, flush=True)
        base = spent["int8 batches of 32 (before)"]
        result: dict[str, object] = {
            "texts": len(texts),
            "threads": ops["int8"].threads,
            "load_average": [round(load, 2), round(os.getloadavg()[0], 2)],
            "abstracts_per_s": {n: round(len(texts) / s, 2) for n, s in spent.items()},
            "ratio_vs_int8_batched": {n: round(base / s, 3) for n, s in spent.items()},
        }
        exact = {}
        for p in ("int8", "fp32"):
            alone = np.vstack(outputs[f"{p} alone, ops threads"])
            for other in (f"{p} batches of 32 (before)", f"{p} alone, texts in parallel"):
                got = np.vstack(outputs[other])
                exact[other] = {
                    "rows_bitwise_equal_to_alone": int(np.all(got == alone, axis=1).sum()),
                    "min_cosine_to_alone": round(float(np.min(np.sum(got * alone, axis=1))), 6),
                }
        result["bit_exactness"] = exact
        result["query_encode_ms"] = query_latency(ops["int8"], [t.split(".")[0][:80] for t in texts[:200]])
        emit(result, out=args.out)


if __name__ == "__main__":
    main()
