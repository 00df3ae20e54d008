"""Benchmark encoders: sentence-transformers (torch) vs the ONNX export (fp32/int8), one JSON line on stdout.

Throughput runs every configuration on the same chunks of abstracts in turn (interleaved), so that load from
other processes on a shared machine hits them alike; ratios are vs sentence-transformers in the same run.

FLOP model (BERT-style encoder, L layers, hidden d, n tokens in a text, unpadded):
    dense  = 2 * 12 * d^2 * n * L       (QKV 3d^2 + output d^2 + FFN 8d^2 multiply-adds per token)
    attn   = 4 * n^2 * d * L            (QK^T and AV, n^2 d multiply-adds each)
Only useful (unpadded) tokens count, so padding waste shows up as lower GFLOP/s.
Peak fp32 = cores x GHz x FLOPs/cycle, FLOPs/cycle = FMA units (2 assumed for AVX-512 server cores)
x SIMD fp32 lanes (16 AVX-512, 8 AVX2) x 2 (multiply + add); GHz from /proc/cpuinfo (nominal, not turbo).

    python -m benchmarks.bench_encode                       # throughput + parity, first 2000 abstracts
    python -m benchmarks.bench_encode --query-latency       # also per-query latency and cold start
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import NEURIPS, REPO, SEEDS, arguments, emit, log

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from semsearch.encode.catalogue import DEFAULT_MODEL
from semsearch.encode.encoder_store import source_fingerprint
from semsearch.encode.onnx_backend import OnnxEmbedder, model_filename, read_spec
from semsearch.encode.onnx_export import export_onnx, gelu_fed_matmuls, quantize_int8

DEFAULT_DATA = NEURIPS
Encode = Callable[[Sequence[str]], np.ndarray]


def load_records(path: Path, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` records of a JSONL(.gz) file."""
    out: list[dict[str, Any]] = []
    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                out.append(json.loads(line))
                if len(out) >= limit:
                    break
    return out


def load_abstracts(path: Path, limit: int) -> list[str]:
    """``title + " " + text`` for the first ``limit`` records."""
    return [f"{r.get('title') or ''} {r.get('text') or ''}".strip() for r in load_records(path, limit)]


def load_seeds(folder: Path) -> list[str]:
    """Paragraphs of the seed files (first line is a header)."""
    paragraphs: list[str] = []
    for path in sorted(folder.glob("*.txt")):
        body = path.read_text(encoding="utf-8").partition("\n")[2]
        paragraphs += [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    return paragraphs


def cpu_info() -> dict[str, Any]:
    """Cores, nominal GHz, SIMD flags and the derived fp32/int8 peaks."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    found = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    flags = set(found.group(1).split()) if found else set()
    mhz = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)]
    model = re.search(r"^model name\s*:\s*(.*)$", text, re.M)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    ghz = (max(mhz) / 1000) if mhz else None
    avx512 = "avx512f" in flags
    lanes = 16 if avx512 else 8 if "avx2" in flags else 4
    flops_cycle = 2 * lanes * 2 if ("fma" in flags or avx512) else lanes * 2
    vnni = "avx512_vnni" in flags or "avx_vnni" in flags
    peak = cores * ghz * flops_cycle if ghz else None
    return {
        "model": model.group(1).strip() if model else platform.processor(),
        "cores": cores,
        "ghz_nominal": ghz,
        "avx2": "avx2" in flags,
        "avx512f": avx512,
        "avx512_vnni": "avx512_vnni" in flags,
        "avx_vnni": "avx_vnni" in flags,
        "avx512_bf16": "avx512_bf16" in flags,
        "amx": any(f.startswith("amx") for f in flags),
        "fp32_flops_per_cycle_per_core": flops_cycle,
        "peak_fp32_gflops": round(peak, 1) if peak else None,
        # VNNI: vpdpbusd does 4 int8 multiply-adds per 32-bit lane, i.e. 4x the fp32 FMA rate.
        "peak_int8_gops": round(peak * 4, 1) if peak and vnni else None,
        "peak_basis": "cores x nominal GHz x (2 FMA units x SIMD lanes x 2); turbo would raise it",
    }


def blas_info() -> dict[str, Any]:
    """Which core type OpenBLAS (numpy's, faiss's) detected, and OPENBLAS_CORETYPE."""
    info: dict[str, Any] = {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE")}
    try:
        import threadpoolctl

        with contextlib.suppress(ImportError):
            import faiss  # noqa: F401  (loads its own BLAS, if any)
        info["blas"] = [
            {k: pool.get(k) for k in ("internal_api", "architecture", "num_threads", "prefix", "filepath")}
            for pool in threadpoolctl.threadpool_info()
        ]
    except ImportError:
        info["blas"] = "threadpoolctl not installed"
    return info


def flops(lengths: np.ndarray, layers: int, hidden: int) -> float:
    """Useful FLOPs to encode texts of the given token lengths (formula in the module docstring)."""
    n = lengths.astype(np.float64)
    return float(np.sum(2 * 12 * hidden * hidden * n * layers + 4 * n * n * hidden * layers))


class CpuMeter:
    """Wall time, this process's CPU time and the machine's busy time, to estimate load from others."""

    def __init__(self) -> None:
        self.wall, self.cpu, self.busy = time.perf_counter(), time.process_time(), self._busy()

    @staticmethod
    def _busy() -> float | None:
        try:
            fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        except (OSError, ValueError):
            return None
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")

    def others_share(self) -> float | None:
        """Fraction of all cores used by other processes since construction."""
        busy = self._busy()
        if busy is None or self.busy is None:
            return None
        wall = time.perf_counter() - self.wall
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        return round(max(0.0, (busy - self.busy) - (time.process_time() - self.cpu)) / (wall * cores), 3)


def interleaved(
    configs: dict[str, Encode], texts: list[str], chunk: int, label: str
) -> tuple[dict[str, dict[str, float]], dict[str, np.ndarray]]:
    """Run every config on each chunk in turn (rotating who goes first); wall and CPU seconds per config."""
    wall = dict.fromkeys(configs, 0.0)
    cpu = dict.fromkeys(configs, 0.0)
    outputs = {name: [] for name in configs}  # type: dict[str, list[np.ndarray]]
    names = list(configs)
    chunks = [texts[i : i + chunk] for i in range(0, len(texts), chunk)]
    for c, part in enumerate(chunks):
        turn = names[c % len(names) :] + names[: c % len(names)]
        for name in turn:
            t0, c0 = time.perf_counter(), time.process_time()
            outputs[name].append(configs[name](part))
            wall[name] += time.perf_counter() - t0
            cpu[name] += time.process_time() - c0
        done = (c + 1) * chunk
        rates = ", ".join(f"{n}={min(done, len(texts)) / wall[n]:.1f}/s" for n in names)
        log(f"{label}: {min(done, len(texts))}/{len(texts)} texts: {rates}")
    stats = {n: {"wall_s": wall[n], "cpu_s": cpu[n]} for n in names}
    return stats, {n: np.concatenate(outputs[n]) for n in names}


def cosines(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Min and mean row cosine of two unit-row arrays."""
    c = np.sum(a * b, axis=1)
    return {"min": round(float(c.min()), 5), "mean": round(float(c.mean()), 5)}


def prepare_export(model: str, export_dir: Path | None, tmp: Path) -> tuple[Path, float | None]:
    """An export folder with fp32 + int8 (+ int8all: every MatMul int8); reuses a matching one."""
    folder = export_dir or tmp / "export"
    seconds = None
    try:
        spec = read_spec(folder)
        fresh = spec.source_model != model or spec.source_fingerprint != source_fingerprint(model)
    except Exception:
        fresh = True
    if fresh:
        log(f"exporting {model} to {folder}")
        t0 = time.perf_counter()
        export_onnx(model, folder)
        seconds = round(time.perf_counter() - t0, 2)
    all_int8 = folder / model_filename("int8all")
    if not all_int8.exists():
        quantize_int8(folder / model_filename("fp32"), all_int8, keep_fp32=())
    return folder, seconds


def load_onnx(folder: Path, precision: str, **kwargs: Any) -> OnnxEmbedder:
    """OnnxEmbedder for a precision, including the bench-only ``int8all`` file."""
    spec = read_spec(folder)
    if precision == "int8all":
        name = model_filename("int8all")
        data = (folder / name).read_bytes()  # the load checks every listed file's size and sha256
        spec = replace(
            spec,
            precisions={**spec.precisions, precision: name},
            files={**spec.files, name: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}},
        )
    return OnnxEmbedder.load(folder, precision, _spec=spec, **kwargs)


def run_throughput(args: argparse.Namespace, folder: Path, st: Any, result: dict[str, Any]) -> None:
    """Throughput of each encoder configuration on the same abstracts, interleaved; fills ``result``."""
    data = Path(args.data)
    texts = load_abstracts(data, args.limit)
    log(f"{len(texts)} abstracts from {data}")
    tok = load_onnx(folder, "fp32")._tokenizer
    lengths = np.array([len(e.ids) for e in tok.encode_batch(texts)])
    config = st[0].auto_model.config
    layers, hidden = int(config.num_hidden_layers), int(config.hidden_size)
    total_flops = flops(lengths, layers, hidden)
    result["data"] = {
        "file": str(data),
        "texts": len(texts),
        "tokens_mean": round(float(lengths.mean()), 1),
        "share_at_max_len": round(float(np.mean(lengths >= lengths.max())), 3),
        "gflop_per_text": round(total_flops / len(texts) / 1e9, 3),
        "flop_formula": "2*12*d^2*n*L + 4*n^2*d*L per text (n tokens, d hidden, L layers)",
    }

    def st_encode(part: Sequence[str], bs: int = 32) -> np.ndarray:
        return np.asarray(st.encode(list(part), batch_size=bs, normalize_embeddings=True), dtype=np.float32)

    embedders = {p: load_onnx(folder, p, threads=args.threads) for p in ("fp32", "int8", "int8all")}
    texts_int8 = load_onnx(folder, "int8", threads=args.threads, parallel="texts")
    arena_int8 = load_onnx(folder, "int8", threads=args.threads, arena=True)

    def onnx_encode(e: OnnxEmbedder) -> Encode:
        # ONNX encodes each text alone (one text, one vector): there is no batch size to choose.
        return lambda part: e.encode(part)

    configs: dict[str, Encode] = {"st": st_encode}
    for p in ("fp32", "int8"):
        configs[p] = onnx_encode(embedders[p])
    configs["int8/parallel-texts"] = onnx_encode(texts_int8)
    configs["int8/arena"] = onnx_encode(arena_int8)
    configs["int8all"] = onnx_encode(embedders["int8all"])
    for f in configs.values():
        f(texts[:8])
    meter = CpuMeter()
    stats, outputs = interleaved(configs, texts, args.chunk, "full")
    base = stats["st"]["wall_s"]
    rows = {}
    for name, s in stats.items():
        rows[name] = {
            "abstracts_per_s": round(len(texts) / s["wall_s"], 2),
            "ratio_vs_st": round(base / s["wall_s"], 3),
            "abstracts_per_cpu_s": round(len(texts) / s["cpu_s"], 2),
            "gflops": round(total_flops / s["wall_s"] / 1e9, 1),
            "cos_vs_st": cosines(outputs[name], outputs["st"]),
        }
    result["throughput"] = {
        "batch_size": {"st": 32, "onnx": 1},
        "threads": embedders["fp32"].threads,
        "chunk": args.chunk,
        "configs": rows,
        "others_cpu_share": meter.others_share(),
    }


def run_parity(folder: Path, st: Any, result: dict[str, Any]) -> None:
    """Cosine of ONNX vs sentence-transformers embeddings on the seed abstracts."""
    seeds = load_seeds(SEEDS)
    if not seeds:
        result["parity"] = None
        return
    ref = np.asarray(st.encode(seeds, batch_size=32, normalize_embeddings=True), dtype=np.float32)
    parity: dict[str, Any] = {"texts": len(seeds)}
    for p in ("fp32", "int8", "int8all"):
        parity[p] = cosines(load_onnx(folder, p).encode(seeds, batch_size=32), ref)
    result["parity"] = parity
    log(f"parity: {parity}")


def run_latency(args: argparse.Namespace, folder: Path, st: Any, result: dict[str, Any]) -> None:
    """Per-query encode latency (interleaved) and cold start in fresh processes."""
    # Paper titles stand in for queries: short, topical, unlike the abstracts' length.
    records = load_records(Path(args.data), args.queries + args.limit)[-args.queries :]
    texts = [str(r.get("title") or "") for r in records]
    encoders: dict[str, Encode] = {
        "onnx-int8": load_onnx(folder, "int8", threads=args.threads).encode,
        "onnx-fp32": load_onnx(folder, "fp32", threads=args.threads).encode,
        "torch": lambda q: st.encode(list(q), normalize_embeddings=True),
    }
    times: dict[str, list[float]] = {n: [] for n in encoders}
    # One backend at a time, not interleaved: torch's OpenMP and ORT's worker threads spin for a while
    # after each call and would steal the cores from the other backend's next (millisecond) query.
    for name, f in encoders.items():
        for q in texts[:10]:
            f([q])
        for q in texts:
            t0 = time.perf_counter()
            f([q])
            times[name].append((time.perf_counter() - t0) * 1000)
        time.sleep(0.5)
    latency = {
        n: {"p50_ms": round(float(np.percentile(v, 50)), 2), "p99_ms": round(float(np.percentile(v, 99)), 2)}
        for n, v in times.items()
    }
    cold = {
        "onnx-int8": cold_start(
            "from semsearch.encode.onnx_backend import OnnxEmbedder\n"
            f"e = OnnxEmbedder.load(Path({str(folder)!r}), 'int8')\n"
        ),
        "torch": cold_start(
            "from semsearch.encode.torch_backend import SentenceTransformerEmbedder\n"
            f"e = SentenceTransformerEmbedder({args.model!r})\n"
        ),
    }
    result["query"] = {"queries": len(texts), "kind": "paper titles", "latency": latency, "cold": cold}
    log(f"query: {result['query']}")


_COLD = """import time, sys
t0 = time.perf_counter()
from pathlib import Path
{body}v = e.encode(["graph neural networks for molecule property prediction"])
t1 = time.perf_counter()
heavy = [m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules]
# VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec.
hwm = [int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:")] or [0]
print(t1 - t0, hwm[0], ",".join(heavy))
"""


def cold_start(body: str, repeats: int = 3) -> dict[str, Any]:
    """Median of fresh-process (import + load + one query) time; in-process and as the parent saw it."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    inner, outer, rss, heavy = [], [], [], ""
    for _ in range(repeats):
        t0 = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-c", _COLD.format(body=body)],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            check=True,
        )
        outer.append(time.perf_counter() - t0)
        fields = proc.stdout.split()
        inner.append(float(fields[0]))
        rss.append(int(fields[1]) / 1024)
        heavy = fields[2] if len(fields) > 2 else ""
    return {
        "import_load_encode_s": round(float(np.median(inner)), 3),
        "process_wall_s": round(float(np.median(outer)), 3),
        "max_rss_mb": round(float(np.median(rss)), 1),
        "heavy_modules": heavy,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = arguments(__doc__)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="JSONL(.gz) with title/text (%(default)s)")
    parser.add_argument("--limit", type=int, default=2000, help="abstracts to encode (%(default)s)")
    parser.add_argument("--model", default=DEFAULT_MODEL)
    parser.add_argument("--export-dir", type=Path, help="reuse/keep the ONNX export here (default: temp)")
    parser.add_argument("--chunk", type=int, default=256, help="abstracts per interleaving turn")
    parser.add_argument("--threads", type=int, help="ONNX threads (default: all cores)")
    parser.add_argument("--query-latency", action="store_true", help="also per-query latency and cold start")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-throughput", action="store_true", help="skip the bulk throughput part")
    args = parser.parse_args(argv)

    if not Path(args.data).is_file():
        print(
            f"bench_encode: data file {args.data} not found; pass --data PATH "
            "(a JSONL(.gz) of {{title, text}} records, e.g. ../shared/data/mlanthology/neurips2025.jsonl.gz)",
            file=sys.stderr,
        )
        return 2

    import torch
    from sentence_transformers import SentenceTransformer

    from semsearch.encode.catalogue import resolve_model

    result: dict[str, Any] = {
        "bench": "encode",
        "model": args.model,
        "cpu": cpu_info(),
        "blas": blas_info(),
        "torch_threads": torch.get_num_threads(),
        "versions": {"python": platform.python_version(), "torch": torch.__version__},
    }
    with tempfile.TemporaryDirectory(prefix="bench-encode-") as tmp:
        folder, export_s = prepare_export(args.model, args.export_dir, Path(tmp))
        result["export_s"] = export_s
        result["versions"].update(read_spec(folder).versions)
        st = SentenceTransformer(resolve_model(args.model), device="cpu")
        run_parity(folder, st, result)
        if not args.no_throughput:
            run_throughput(args, folder, st, result)
        if args.query_latency:
            run_latency(args, folder, st, result)
        result["int8_fp32_nodes"] = len(gelu_fed_matmuls(folder / model_filename("fp32")))
    emit(result, separators=(",", ":"), out=args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
