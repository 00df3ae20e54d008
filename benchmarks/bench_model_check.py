"""Benchmark what checking the ONNX export's sha256 at load costs a query process (issue #37, integrity).

Loads an export folder (an index version's ``encoder/`` or a shared store entry) each way, best of --repeats:
``checked`` is ``OnnxEmbedder.load`` as queries run it (every byte hashed against ``encoder.json``); the baseline,
``unchecked``, is the same load with the hashes left out (sizes checked only, as before), measured in the same
run (interleaved). The model's hash runs beside ORT's session set-up, so ``added_ms`` is below ``sha256_ms``.
Prints one JSON line: the model file's size, milliseconds for sha256 alone and for each load, and the added share.

    python -m benchmarks.bench_model_check --encoder ~/.cache/semsearch/models/encoders/all-MiniLM-L6-v2-...
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import arguments, emit
from semsearch.encode import onnx_backend
from semsearch.encode.onnx_backend import OnnxEmbedder, read_spec


def _unchecked(folder: Path, name: str, entry: dict[str, Any]) -> bytes:
    """The baseline's tokenizer read: a size check and the bytes, no hash."""
    return onnx_backend._listed_bytes(folder, name, entry)


def _no_check(path: Path, digest: str, entry: dict[str, Any]) -> None:
    """The baseline's model check: none."""


def best_ms(fn: Any, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return round(best * 1000, 1)


def main() -> None:
    ap = arguments(__doc__)
    ap.add_argument("--encoder", type=Path, required=True, help="an export folder (holds encoder.json)")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    spec = read_spec(args.encoder)
    model = args.encoder / spec.precisions[args.precision]
    data = model.read_bytes()
    out: dict[str, object] = {"model": str(model), "mb": round(len(data) / 1e6, 1)}
    out["sha256_ms"] = best_ms(lambda: hashlib.sha256(data).hexdigest(), args.repeats)
    checked, check = onnx_backend._checked_bytes, onnx_backend._check_digest
    loads = {"unchecked": float("inf"), "checked": float("inf")}
    for _ in range(args.repeats):  # interleaved, so that a busy machine slows both alike
        for name, reader, checker in (("unchecked", _unchecked, _no_check), ("checked", checked, check)):
            onnx_backend._checked_bytes, onnx_backend._check_digest = reader, checker  # type: ignore[assignment]
            try:
                ms = best_ms(lambda: OnnxEmbedder.load(args.encoder, args.precision), 1)
            finally:
                onnx_backend._checked_bytes, onnx_backend._check_digest = checked, check
            loads[name] = min(loads[name], ms)
    out |= {f"load_{k}_ms": v for k, v in loads.items()}
    out["added_ms"] = round(loads["checked"] - loads["unchecked"], 1)
    emit(out, out=args.out)


if __name__ == "__main__":
    main()
