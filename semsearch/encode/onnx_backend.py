"""ONNX Runtime encoder: export a sentence-transformers model once, then encode without torch.

Export (needs torch + sentence-transformers) writes a folder:

    encoder.json        plain JSON spec (source model, fingerprint, pooling, files + sha256, versions)
    tokenizer.json      the model's fast tokenizer (Hugging Face ``tokenizers`` format)
    model.fp32.onnx     the transformer, float32 (inputs: input_ids, attention_mask[, token_type_ids])
    model.int8.onnx     the same, weights dynamically quantized to int8 (per-channel, 7-bit range)

Loading and encoding (``OnnxEmbedder``) imports only onnxruntime, tokenizers and numpy.

One text, one vector: every text is encoded on its own (one ORT run, unpadded), so its vector is a function
of its text alone, bit for bit on one machine, whatever it is encoded with, in which order, on how many
threads, locally or on Ray (other CPU families round fp32 differently in the last bits). Batches could not
promise that: int8 dynamic quantization scales each MatMul's activations per run (a short text alone and in a
batch of abstracts get other vectors), and padding changes reduction lengths. Unpadded single texts are also
faster on abstracts than padded batches were (scripts/bench_one_vector.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import ExportUnsupportedError, IndexCorruptError, IndexReadError, ModelLoadError
from semsearch.core.fileio import atomic_path, file_sha256, write_bytes_atomic
from semsearch.core.options import DEFAULT_PRECISION, ONNX_REGIME, PRECISIONS
from semsearch.encode.embedder import fingerprint_folder, normalize_rows
from semsearch.encode.models import resolve_model
from semsearch.encode.sentence_runs import SentenceText
from semsearch.encode.torch_backend import SentenceTransformerEmbedder

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

SPEC_FILE = "encoder.json"
TOKENIZER_FILE = "tokenizer.json"
SPEC_FORMAT = 1
OPSET = 17
PARALLEL_MODES = ("ops", "texts")
DEFAULT_PARALLEL = "ops"
POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len_tokens")
# Texts tokenized together (the tokenizer runs its own threads over a list); bounds memory for big corpora.
TOKENIZE_CHUNK = 4096
_ALLOWED_MODULES = ("Transformer", "Pooling", "Normalize")
# Below this min cosine to torch on the probe texts an int8 export is re-quantized per-tensor, then refused.
INT8_MIN_COSINE = 0.9
_GELU_OPS = frozenset({"Erf", "Gelu", "FastGelu", "BiasGelu", "Tanh"})


def model_filename(precision: str) -> str:
    """The ONNX file name for a precision, e.g. ``model.int8.onnx``."""
    return f"model.{precision}.onnx"


def default_threads() -> int:
    """Cores this process may run on (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class EncoderSpec:
    """What ``encoder.json`` records about an exported encoder."""

    source_model: str
    source_fingerprint: str
    dimension: int
    max_seq_length: int
    pooling: str
    normalize_module: bool
    do_lower_case: bool
    inputs: tuple[str, ...]
    pad_token_id: int
    files: dict[str, dict[str, Any]]  # file name -> {"sha256": hex, "size": bytes}
    precisions: dict[str, str]  # precision -> file name
    versions: dict[str, str]
    int8_fp32_nodes: tuple[str, ...] = ()
    export_check: dict[str, float] = field(default_factory=dict)  # precision -> min cosine vs torch on probes
    opset: int = OPSET
    format: int = SPEC_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "source_model": self.source_model,
            "source_fingerprint": self.source_fingerprint,
            "dimension": self.dimension,
            "max_seq_length": self.max_seq_length,
            "pooling": self.pooling,
            "normalize_module": self.normalize_module,
            "do_lower_case": self.do_lower_case,
            "inputs": list(self.inputs),
            "pad_token_id": self.pad_token_id,
            "opset": self.opset,
            "precisions": dict(self.precisions),
            "files": {name: dict(entry) for name, entry in self.files.items()},
            "int8_fp32_nodes": list(self.int8_fp32_nodes),
            "export_check": dict(self.export_check),
            "versions": dict(self.versions),
        }

    def get(self, key: str, default: Any = None) -> Any:
        """Dict-style access to a field of ``to_dict()`` (for callers that treat the spec as JSON)."""
        return self.to_dict().get(key, default)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EncoderSpec:
        pooling = str(data["pooling"])
        if pooling not in POOLING_MODES:
            raise ValueError(f"unknown pooling {pooling!r}")
        files = {str(k): {"sha256": str(v["sha256"]), "size": int(v["size"])} for k, v in data["files"].items()}
        precisions = {str(k): str(v) for k, v in data["precisions"].items()}
        for precision, name in precisions.items():
            if name not in files:
                raise ValueError(f"precision {precision!r} names unlisted file {name!r}")
        return cls(
            source_model=str(data["source_model"]),
            source_fingerprint=str(data["source_fingerprint"]),
            dimension=int(data["dimension"]),
            max_seq_length=int(data["max_seq_length"]),
            pooling=pooling,
            normalize_module=bool(data["normalize_module"]),
            do_lower_case=bool(data["do_lower_case"]),
            inputs=tuple(str(x) for x in data["inputs"]),
            pad_token_id=int(data.get("pad_token_id", 0)),
            files=files,
            precisions=precisions,
            versions={str(k): str(v) for k, v in data.get("versions", {}).items()},
            int8_fp32_nodes=tuple(str(x) for x in data.get("int8_fp32_nodes", [])),
            export_check={str(k): float(v) for k, v in data.get("export_check", {}).items()},
            opset=int(data.get("opset", OPSET)),
            format=int(data.get("format", SPEC_FORMAT)),
        )


def keep_precision(spec: EncoderSpec, precision: str) -> EncoderSpec:
    """The spec of an export that holds only ``precision``'s ONNX file (plus the tokenizer and the rest)."""
    dropped = {name for p, name in spec.precisions.items() if p != precision}
    return replace(
        spec,
        files={name: entry for name, entry in spec.files.items() if name not in dropped},
        precisions={p: name for p, name in spec.precisions.items() if p == precision},
        int8_fp32_nodes=spec.int8_fp32_nodes if precision == "int8" else (),
        export_check={p: c for p, c in spec.export_check.items() if p == precision},
    )


def write_spec(folder: Path, spec: EncoderSpec) -> None:
    """Write ``encoder.json`` atomically (it is what makes an export complete)."""
    write_bytes_atomic(folder / SPEC_FILE, (json.dumps(spec.to_dict(), indent=2) + "\n").encode("utf-8"))


def read_spec(folder: Path) -> EncoderSpec:
    """Read and validate ``encoder.json`` in an export folder."""
    path = Path(folder) / SPEC_FILE
    if not path.is_file():
        raise IndexCorruptError(f"ONNX encoder spec {path} is missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        spec = EncoderSpec.from_dict(data)
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise IndexCorruptError(f"ONNX encoder spec {path} is corrupt: {exc}") from exc
    if spec.format > SPEC_FORMAT:
        raise IndexCorruptError(f"ONNX encoder spec {path} has unknown format {spec.format}")
    if TOKENIZER_FILE not in spec.files:
        raise IndexCorruptError(f"ONNX encoder spec {path} lists no {TOKENIZER_FILE}")
    return spec


def source_fingerprint(model: str) -> str | None:
    """The fingerprint an export of ``model`` would record, when the model is a local folder (else None)."""
    try:
        location = Path(resolve_model(model))
    except ModelLoadError:
        return None
    return fingerprint_folder(location) if location.is_dir() else None


def _file_entry(path: Path) -> dict[str, Any]:
    return {"sha256": file_sha256(path), "size": path.stat().st_size}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---------------------------------------------------------------------------------------------------------
# Export (torch side)
# ---------------------------------------------------------------------------------------------------------


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
                # Per-tensor weights lose too much here (cosine ~0.88 on abstracts); per-channel keeps ~0.99.
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
            f"cannot export model {model!r} to ONNX: {_first_line(exc)} - use the torch backend"
        ) from exc
    keep_fp32: list[str] = []
    if "int8" in wanted:
        # MatMuls fed by GELU see skewed, outlier-heavy activations; int8 there costs most of the accuracy
        # (95 seed abstracts: min cosine to torch 0.990 -> 0.996 when they stay fp32, for 0-15% speed).
        keep_fp32 = gelu_fed_matmuls(fp32_path)
        try:
            quantize_int8(fp32_path, out_dir / model_filename("int8"), keep_fp32=keep_fp32)
        except Exception as exc:
            raise ExportUnsupportedError(f"cannot quantize model {model!r} to int8: {_first_line(exc)}") from exc
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

    Per-channel weights break some models outright (all-mpnet-base-v2: cosine ~0 to torch, 0.98+ per-tensor).
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


# ---------------------------------------------------------------------------------------------------------
# Inference (no torch)
# ---------------------------------------------------------------------------------------------------------


class OnnxEmbedder:
    """An encoder backed by ONNX Runtime; implements the ``Embedder`` protocol without torch."""

    backend = "onnx"
    regime = ONNX_REGIME  # one text per run: see the module docstring

    def __init__(
        self,
        spec: EncoderSpec,
        folder: Path,
        precision: str,
        session: onnxruntime.InferenceSession,
        tokenizer: tokenizers.Tokenizer,
        threads: int,
        parallel: str,
    ) -> None:
        self.spec = spec
        self.folder = folder
        self.precision = precision
        self.threads = threads
        self.parallel = parallel
        self.name = spec.source_model
        self.dimension = spec.dimension
        # The source model's fingerprint, so an index records the same model whichever backend encoded it.
        self.fingerprint = spec.source_fingerprint
        self._session = session
        self._tokenizer = tokenizer
        self._whole_tokenizer: tokenizers.Tokenizer | None = None  # made by the first encode_sentences
        self._inputs = spec.inputs

    @classmethod
    def load(
        cls,
        folder: Path,
        precision: str = DEFAULT_PRECISION,
        *,
        threads: int | None = None,
        parallel: str = DEFAULT_PARALLEL,
        arena: bool = False,
        _spec: EncoderSpec | None = None,
    ) -> OnnxEmbedder:
        """Open an export folder: check the files it loads against their recorded sha256, start an ORT session.

        ``parallel="texts"`` runs up to ``threads`` texts at once, each on one core (one session, shared
        weights); ``"ops"`` runs one text at a time, each operator split over ``threads`` cores. Both give
        the same bytes (measured on 1, 2 and 4 threads; tests/test_one_vector.py checks it).
        ``arena=True`` turns ORT's CPU memory arena on: its peak then stays resident until the embedder is dropped.
        """
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if parallel not in PARALLEL_MODES:
            raise ValueError(f"parallel must be one of {PARALLEL_MODES}, not {parallel!r}")
        folder = Path(folder)
        spec = _spec or read_spec(folder)
        if precision not in spec.precisions:
            raise ModelLoadError(
                f"precision {precision!r} was not exported to {folder}; available: {sorted(spec.precisions)}"
            )
        model_name = spec.precisions[precision]
        # The bytes loaded are the bytes checked: read once, hashed against encoder.json, handed over as they are.
        # A same-size change (rsync --inplace, dd conv=notrunc, bit rot) would otherwise answer wrong unseen.
        # The model's hash runs beside ORT's session set-up (hashlib and ORT release the GIL), so it adds little
        # to a load (scripts/bench_model_check.py); a mismatch raises before the session is ever used.
        model_entry = spec.files[model_name]
        model_bytes = _listed_bytes(folder, model_name, model_entry)
        tokenizer_bytes = _checked_bytes(folder, TOKENIZER_FILE, spec.files[TOKENIZER_FILE])

        try:
            tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise IndexCorruptError(f"tokenizer {folder / TOKENIZER_FILE} is corrupt: {_first_line(exc)}") from exc
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=spec.max_seq_length)

        n_threads = max(1, threads or default_threads())
        options = ort.SessionOptions()
        # Off by default: the arena keeps its peak (~0.5-1 GB after bulk batches) resident for good.
        options.enable_cpu_mem_arena = arena
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = 1 if parallel == "texts" else n_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.log_severity_level = 3
        with ThreadPoolExecutor(1) as hasher:
            digest = hasher.submit(lambda: hashlib.sha256(model_bytes).hexdigest())
            try:
                session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
            except Exception as exc:  # ORT raises Fail/InvalidProtobuf/... from pybind
                _check_digest(folder / model_name, digest.result(), model_entry)  # damage says it best
                raise IndexCorruptError(f"ONNX model {folder / model_name} is corrupt: {_first_line(exc)}") from exc
            _check_digest(folder / model_name, digest.result(), model_entry)
        got = tuple(i.name for i in session.get_inputs())
        if set(got) != set(spec.inputs):
            raise IndexCorruptError(f"ONNX model {folder / model_name} takes {got}, spec says {spec.inputs}")
        return cls(spec, folder, precision, session, tokenizer, n_threads, parallel)

    @property
    def export_digest(self) -> str:
        """A short sha256 of the exact ONNX file this encoder runs (checked at load): what its cached vectors key on."""
        return str(self.spec.files[self.spec.precisions[self.precision]]["sha256"])[:16]

    def verify(self) -> None:
        """Hash every file the spec lists and compare with its recorded sha256 (slow: reads ~100 MB)."""
        for name, entry in self.spec.files.items():
            path = self.folder / name
            if not path.is_file():
                raise IndexCorruptError(f"ONNX encoder file {path} is missing")
            if file_sha256(path) != entry["sha256"]:
                raise IndexCorruptError(f"ONNX encoder file {path} does not match its recorded sha256")

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        """Encode texts into an (n, dimension) float32 array of unit rows, in input order, each text alone.

        ``batch_size`` is accepted for the ``Embedder`` protocol and ignored: a text never shares a run.
        """
        n = len(texts)
        out = np.zeros((n, self.dimension), dtype=np.float32)
        if n == 0:
            return out
        items = [str(t).lower() for t in texts] if self.spec.do_lower_case else [str(t) for t in texts]
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=n, file=sys.stderr, unit="text", desc=f"encode onnx/{self.precision}")
        workers = min(self.threads, n) if self.parallel == "texts" else 1
        executor = ThreadPoolExecutor(workers) if workers > 1 else None
        try:
            for start in range(0, n, TOKENIZE_CHUNK):
                encodings = self._tokenizer.encode_batch(items[start : start + TOKENIZE_CHUNK])
                results = executor.map(self._encode_one, encodings) if executor else map(self._encode_one, encodings)
                for row, vector in enumerate(results, start):
                    out[row] = vector
                    if bar is not None:
                        bar.update(1)
        finally:
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
            if bar is not None:
                bar.close()
        return out

    def read_chars(self, text: str) -> int:
        """How many leading characters of ``text`` the encoder reads before its window ends (all: ``len(text)``)."""
        item = text.lower() if self.spec.do_lower_case else text
        encoding = self._tokenizer.encode(item)
        if not encoding.overflowing:
            return len(text)
        return max((end for _, end in encoding.offsets), default=0)

    def encode_sentences(self, items: Sequence[SentenceText]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per text, its document vector and one unit vector per sentence span.

        The sentences are pooled from runs that read the whole text (encode/sentence_runs.py), the document
        vector is their unit mean (a text of one sentence: what ``encode`` gives); each run is one ORT run, so
        the vectors depend on the text alone, as ``encode``'s do.
        """
        from semsearch.encode.onnx_sentences import encode_sentences, untruncated

        if self._whole_tokenizer is None:
            self._whole_tokenizer = untruncated(self._tokenizer)
        return encode_sentences(self, self._tokenizer, self._whole_tokenizer, items)

    def token_outputs(self, ids: Sequence[int], type_ids: Sequence[int] | None = None) -> np.ndarray:
        """The (tokens, dimension) float32 outputs of one run over these token ids, alone and unpadded."""
        arr = np.asarray([ids], dtype=np.int64)
        feed = {
            "input_ids": arr,
            "attention_mask": np.ones_like(arr),
            "token_type_ids": np.asarray([type_ids], dtype=np.int64) if type_ids is not None else np.zeros_like(arr),
        }
        # InferenceSession.run is thread-safe and releases the GIL, so "texts" mode shares one session.
        (hidden,) = self._session.run(["token_embeddings"], {name: feed[name] for name in self._inputs})
        return np.asarray(hidden, dtype=np.float32)[0]

    def pooled(self, hidden: np.ndarray) -> np.ndarray:
        """The unit vector of one run's token outputs, pooled as the model pools."""
        mask = np.ones((1, hidden.shape[0]), dtype=np.int64)
        return normalize_rows(pool_tokens(hidden[None, :, :], mask, self.spec.pooling))[0]

    def _encode_one(self, encoding: tokenizers.Encoding) -> np.ndarray:
        """The unit (dimension,) vector of one tokenized text, run alone and unpadded."""
        return self.pooled(self.token_outputs(encoding.ids, encoding.type_ids))


def pool_tokens(hidden: np.ndarray, mask: np.ndarray, mode: str) -> np.ndarray:
    """Pool (batch, seq, dim) token embeddings into (batch, dim) with the attention mask."""
    if mode == "cls":
        return hidden[:, 0, :]
    weights = mask[:, :, None].astype(np.float32)
    if mode == "max":
        return np.where(weights > 0, hidden, np.float32(-1e9)).max(axis=1)
    summed = np.einsum("bsd,bs->bd", hidden, mask.astype(np.float32))
    counts = np.clip(weights.sum(axis=1), 1e-9, None)
    if mode == "mean_sqrt_len_tokens":
        return np.asarray(summed / np.sqrt(counts), dtype=np.float32)
    return np.asarray(summed / counts, dtype=np.float32)


def _listed_bytes(folder: Path, name: str, entry: dict[str, Any]) -> bytes:
    """A listed file's bytes, after checking its size against the spec's record."""
    path = folder / name
    _check_size(path, int(entry["size"]))
    try:
        return path.read_bytes()
    except OSError as exc:  # permissions or an I/O error: nothing is damaged, so no rebuild is offered
        raise IndexReadError(f"cannot read the ONNX encoder file {path}: {exc.strerror or exc}") from exc


def _check_digest(path: Path, digest: str, entry: dict[str, Any]) -> None:
    if digest != entry["sha256"]:
        raise IndexCorruptError(
            f"ONNX encoder file {path} does not match the sha256 its {SPEC_FILE} records (changed in place or damaged)"
        )


def _checked_bytes(folder: Path, name: str, entry: dict[str, Any]) -> bytes:
    """A listed file's bytes, after checking its size and its sha256 against the spec's record."""
    data = _listed_bytes(folder, name, entry)
    _check_digest(folder / name, hashlib.sha256(data).hexdigest(), entry)
    return data


def _check_size(path: Path, size: int) -> None:
    if not path.is_file():
        raise IndexCorruptError(f"ONNX encoder file {path} is missing")
    actual = path.stat().st_size
    if actual != size:
        raise IndexCorruptError(f"ONNX encoder file {path} is truncated or altered ({actual} bytes, expected {size})")
