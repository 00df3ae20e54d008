"""Exporting a sentence-transformers model to ONNX once: the fp32 graph, its int8 quantisation, checked against torch.

The folder it writes, and the runtime that loads it, are ``onnx_backend.py``'s; only builds import this module
(it needs torch, sentence-transformers and onnx).
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import ExportUnsupportedError, ModelLoadError
from semsearch.core.fileio import atomic_path, file_sha256, write_bytes_atomic
from semsearch.core.options import PRECISIONS
from semsearch.encode.onnx_backend import (
    OPSET,
    POOLING_MODES,
    SPEC_FILE,
    TOKENIZER_FILE,
    EncoderSpec,
    OnnxEmbedder,
    first_line,
    keep_precision,
    model_filename,
    write_spec,
)
from semsearch.encode.torch_backend import SentenceTransformerEmbedder

_ALLOWED_MODULES = ("Transformer", "Pooling", "Normalize")
# Below this min cosine to torch on the probe texts an int8 export is re-quantized per-tensor, then refused.
INT8_MIN_COSINE = 0.9
_GELU_OPS = frozenset({"Erf", "Gelu", "FastGelu", "BiasGelu", "Tanh"})


def _file_entry(path: Path) -> dict[str, Any]:
    """A file's record in ``encoder.json``: its sha256 and size."""
    return {"sha256": file_sha256(path), "size": path.stat().st_size}


def _pooling_mode(module: Any) -> str:
    """The pooling mode of a sentence-transformers Pooling module, across ST versions."""
    config = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
    mode = config.get("pooling_mode", getattr(module, "pooling_mode", None))
    if isinstance(mode, str):
        mode = {"mean_tokens": "mean", "cls_token": "cls", "max_tokens": "max"}.get(mode, mode)
        return mode
    # Older sentence-transformers: one boolean per mode.
    flags = {
        "mean": config.get("pooling_mode_mean_tokens", False),
        "cls": config.get("pooling_mode_cls_token", False),
        "max": config.get("pooling_mode_max_tokens", False),
        "mean_sqrt_len_tokens": config.get("pooling_mode_mean_sqrt_len_tokens", False),
    }
    chosen = [name for name, on in flags.items() if on]
    return chosen[0] if len(chosen) == 1 else "+".join(chosen) or "none"


def gelu_fed_matmuls(model_path: Path, *, depth: int = 5) -> list[str]:
    """Names of MatMul nodes whose activation input comes (within a few ops) from a GELU."""
    import onnx

    graph = onnx.load(str(model_path), load_external_data=False).graph
    producer = {out: node for node in graph.node for out in node.output}
    found: list[str] = []
    for node in graph.node:
        if node.op_type != "MatMul" or not node.input:
            continue
        frontier, seen = [node.input[0]], set()
        for _ in range(depth):
            parents = [producer[name] for name in frontier if name in producer and name not in seen]
            seen.update(frontier)
            if any(p.op_type in _GELU_OPS for p in parents):
                found.append(node.name)
                break
            # Stop at other MatMuls: what lies behind them is another layer's activation.
            frontier = [i for p in parents if p.op_type != "MatMul" for i in p.input]
    return found


def quantize_int8(src: Path, dst: Path, *, keep_fp32: Sequence[str] = (), per_channel: bool = True) -> None:
    """Dynamically quantize an fp32 ONNX model to int8 weights (per-channel), leaving ``keep_fp32`` nodes."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)  # quantize_dynamic logs a generic "consider pre-processing" warning
    try:
        with atomic_path(dst) as tmp:
            quantize_dynamic(
                str(src),
                str(tmp),
                weight_type=QuantType.QInt8,
                # Per-tensor weights lose too much of most models' accuracy; one scale per channel keeps it.
                per_channel=per_channel,
                # 7-bit weights: x86 CPUs without VNNI multiply u8 x s8 pairs into int16, which saturates with
                # full-range weights and gives those machines other (wrong) vectors; with 7 bits every kernel
                # computes the exact product, so one export scores alike on every CPU.
                reduce_range=True,
                nodes_to_exclude=list(keep_fp32),
            )
    finally:
        logging.disable(previous)


def _probe_cosines(folder: Path, spec: EncoderSpec, reference: np.ndarray, texts: Sequence[str]) -> dict[str, float]:
    result = {}
    for precision in spec.precisions:
        embedder = OnnxEmbedder.load(folder, precision, _spec=spec)
        vectors = embedder.encode(texts, batch_size=len(texts))
        result[precision] = round(float(np.min(np.sum(vectors * reference, axis=1))), 6)
    return result


_PROBE_TEXTS = (
    "Semantic search over research-paper abstracts.",
    "We propose a transformer-based method for graph representation learning and evaluate it on "
    "node classification benchmarks, improving accuracy while reducing memory use.",
    "A short query",
)


@dataclass(frozen=True)
class _Exportable:
    """What an export needs from a loaded sentence-transformers model, checked to be exportable."""

    embedder: SentenceTransformerEmbedder
    transformer: Any  # the Transformer module (its HF model and tokenizer)
    backend_tokenizer: Any  # the fast tokenizer, written out as tokenizer.json
    kinds: list[str]  # module class names, e.g. ["Transformer", "Pooling", "Normalize"]
    pooling: str
    inputs: tuple[str, ...]
    max_seq: int


def _exportable(model: str) -> _Exportable:
    """Load a model; ExportUnsupportedError unless it is Transformer+Pooling(+Normalize) with a fast tokenizer."""
    embedder = SentenceTransformerEmbedder(model)
    st: Any = embedder.model
    kinds = [type(module).__name__ for module in st]
    extra = [k for k in kinds if k not in _ALLOWED_MODULES]
    if extra or not kinds or kinds[0] != "Transformer" or "Pooling" not in kinds:
        raise ExportUnsupportedError(
            f"model {model!r} has modules {kinds}; ONNX export supports Transformer+Pooling(+Normalize) only"
            f" ({', '.join(extra) or 'layout'} unsupported) - use the torch backend"
        )
    transformer: Any = st[0]
    pooling = _pooling_mode(st[kinds.index("Pooling")])
    if pooling not in POOLING_MODES:
        raise ExportUnsupportedError(
            f"model {model!r} uses pooling {pooling!r}, not exportable - use the torch backend"
        )
    hf_tokenizer = transformer.tokenizer
    backend_tokenizer = getattr(hf_tokenizer, "backend_tokenizer", None)
    if backend_tokenizer is None:
        raise ExportUnsupportedError(f"model {model!r} has no fast tokenizer to export - use the torch backend")
    max_seq = st.max_seq_length
    if not max_seq or max_seq > 100_000:  # unset: HF uses a huge sentinel for "no limit"
        max_seq = getattr(transformer.auto_model.config, "max_position_embeddings", 512)
    inputs = tuple(
        name for name in ("input_ids", "attention_mask", "token_type_ids") if name in hf_tokenizer.model_input_names
    )
    if inputs[:2] != ("input_ids", "attention_mask"):
        raise ExportUnsupportedError(f"model {model!r} takes inputs {inputs}, not exportable - use the torch backend")
    return _Exportable(embedder, transformer, backend_tokenizer, kinds, pooling, inputs, int(max_seq))


def _write_models(source: _Exportable, out_dir: Path, wanted: tuple[str, ...]) -> list[str]:
    """Write the ONNX file of each wanted precision; returns the MatMul nodes int8 keeps in fp32."""
    model = source.embedder.name
    fp32_path = out_dir / model_filename("fp32")
    try:
        _export_transformer(source.transformer.auto_model, source.inputs, fp32_path)
    except ModelLoadError:
        raise
    except Exception as exc:  # torch.onnx raises many types
        raise ExportUnsupportedError(
            f"cannot export model {model!r} to ONNX: {first_line(exc)} - use the torch backend"
        ) from exc
    keep_fp32: list[str] = []
    if "int8" in wanted:
        # MatMuls fed by GELU see skewed, outlier-heavy activations: int8 there costs most of the accuracy lost,
        # and keeping those few in fp32 costs little speed.
        keep_fp32 = gelu_fed_matmuls(fp32_path)
        try:
            quantize_int8(fp32_path, out_dir / model_filename("int8"), keep_fp32=keep_fp32)
        except Exception as exc:
            raise ExportUnsupportedError(f"cannot quantize model {model!r} to int8: {first_line(exc)}") from exc
    return keep_fp32


def _write_tokenizer(source: _Exportable, out_dir: Path) -> None:
    tok = type(source.backend_tokenizer).from_str(source.backend_tokenizer.to_str())
    # Truncation and padding are decided at encode time from the spec, not baked into the file.
    tok.no_truncation()
    tok.no_padding()
    write_bytes_atomic(out_dir / TOKENIZER_FILE, tok.to_str().encode("utf-8"))


def export_onnx(model: str, out_dir: Path, *, precisions: Sequence[str] = PRECISIONS) -> EncoderSpec:
    """Export a sentence-transformers model to ONNX files + tokenizer + ``encoder.json`` in ``out_dir``."""
    wanted = tuple(dict.fromkeys(precisions))
    unknown = [p for p in wanted if p not in PRECISIONS]
    if unknown or not wanted:
        raise ModelLoadError(f"unknown ONNX precision(s) {unknown or list(wanted)}; choose from {list(PRECISIONS)}")
    source = _exportable(model)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # A half re-export must not look complete: the spec goes first and comes back last.
    (out_dir / SPEC_FILE).unlink(missing_ok=True)
    keep_fp32 = _write_models(source, out_dir, wanted)
    _write_tokenizer(source, out_dir)
    fp32_path = out_dir / model_filename("fp32")

    embedder, transformer = source.embedder, source.transformer
    made = ("fp32", *(p for p in wanted if p != "fp32"))  # fp32 is always made: int8 comes from it
    files = {name: _file_entry(out_dir / name) for name in [model_filename(p) for p in made] + [TOKENIZER_FILE]}
    spec = EncoderSpec(
        source_model=embedder.name,
        source_fingerprint=embedder.fingerprint,
        dimension=embedder.dimension,
        max_seq_length=source.max_seq,
        pooling=source.pooling,
        normalize_module="Normalize" in source.kinds,
        do_lower_case=bool(getattr(transformer, "do_lower_case", False)),
        inputs=source.inputs,
        pad_token_id=int(transformer.tokenizer.pad_token_id or 0),
        files=files,
        precisions={p: model_filename(p) for p in made},
        versions=_versions(),
        int8_fp32_nodes=tuple(keep_fp32) if "int8" in wanted else (),
    )
    reference = embedder.encode(list(_PROBE_TEXTS))
    check = _probe_cosines(out_dir, spec, reference, _PROBE_TEXTS)
    if "fp32" in check and check["fp32"] < 0.999:
        raise ExportUnsupportedError(
            f"ONNX export of {model!r} disagrees with torch (min cosine {check['fp32']}) - use the torch backend"
        )
    if check.get("int8", 1.0) < INT8_MIN_COSINE:
        check["int8"] = _quantize_per_tensor(fp32_path, out_dir, spec, reference, keep_fp32, check["int8"])
        int8_name = model_filename("int8")
        spec = replace(spec, files={**spec.files, int8_name: _file_entry(out_dir / int8_name)})
    if check.get("int8", 1.0) < INT8_MIN_COSINE:
        raise ExportUnsupportedError(
            f"int8 export of {model!r} disagrees with torch (min cosine {check['int8']}) - use --precision fp32"
        )
    spec = replace(spec, export_check=check)
    if "fp32" not in wanted:
        # fp32 was made to quantize from and to check the export against torch; the index does not query with it.
        spec = keep_precision(spec, "int8")
        fp32_path.unlink()
    write_spec(out_dir, spec)
    return spec


def _quantize_per_tensor(
    fp32_path: Path, out_dir: Path, spec: EncoderSpec, reference: np.ndarray, keep_fp32: Sequence[str], had: float
) -> float:
    """Quantize again with one scale per weight tensor; keep whichever int8 file agrees better with torch.

    Per-channel weights break some models outright (all-mpnet-base-v2), where one scale per tensor keeps them.
    """
    target = out_dir / model_filename("int8")
    kept = target.with_name(target.name + ".per-channel")
    os.replace(target, kept)
    try:
        quantize_int8(fp32_path, target, keep_fp32=keep_fp32, per_channel=False)
        probe = replace(spec, files={**spec.files, target.name: _file_entry(target)}, precisions={"int8": target.name})
        got = _probe_cosines(out_dir, probe, reference, _PROBE_TEXTS)["int8"]
        if got >= had:
            return got
        os.replace(kept, target)
        return had
    finally:
        kept.unlink(missing_ok=True)


def _export_transformer(hf_model: Any, inputs: tuple[str, ...], path: Path) -> None:
    """Trace a Hugging Face encoder to ONNX (last_hidden_state), dynamic batch and sequence axes."""
    import torch

    original = getattr(getattr(hf_model, "config", None), "_attn_implementation", None)
    if hasattr(hf_model, "set_attn_implementation"):
        # The eager attention graph is smaller than SDPA's and ORT fuses it (FusedMatMul, Softmax) cleanly.
        with contextlib.suppress(Exception):  # older/odd models: keep what they have
            hf_model.set_attn_implementation("eager")

    class _LastHidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(inputs, args, strict=True))).last_hidden_state

    wrapper = _LastHidden(hf_model).eval()
    ids = torch.full((2, 16), 1000, dtype=torch.long)
    mask = torch.ones((2, 16), dtype=torch.long)
    mask[1, 9:] = 0  # a padded row, so masking is traced from real data
    dummy = {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}
    axes = {name: {0: "batch", 1: "sequence"} for name in (*inputs, "token_embeddings")}
    with atomic_path(path) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about Python-side shape checks
        torch.onnx.export(
            wrapper,
            tuple(dummy[name] for name in inputs),
            str(tmp),
            input_names=list(inputs),
            output_names=["token_embeddings"],
            dynamic_axes=axes,
            opset_version=OPSET,
            do_constant_folding=True,
            dynamo=False,  # the dynamo exporter needs onnxscript (not a dependency); TorchScript suffices
        )
    if original and hasattr(hf_model, "set_attn_implementation"):
        with contextlib.suppress(Exception):  # leave the caller's model as it was
            hf_model.set_attn_implementation(original)


def _versions() -> dict[str, str]:
    import onnx
    import onnxruntime
    import sentence_transformers
    import tokenizers
    import torch
    import transformers

    return {
        "onnx": onnx.__version__,
        "onnxruntime": onnxruntime.__version__,
        "tokenizers": tokenizers.__version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sentence_transformers": sentence_transformers.__version__,
    }
