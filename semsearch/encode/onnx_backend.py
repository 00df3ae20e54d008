"""ONNX Runtime encoder: an exported model loaded and run without torch, each text alone.

An export (``onnx_export.py``, which needs torch and sentence-transformers) is a folder:

    encoder.json        plain JSON spec (source model, fingerprint, pooling, files + sha256, versions)
    tokenizer.json      the model's fast tokenizer (Hugging Face ``tokenizers`` format)
    model.fp32.onnx     the transformer, float32 (inputs: input_ids, attention_mask[, token_type_ids])
    model.int8.onnx     the same, weights dynamically quantized to int8 (per-channel, 7-bit range)

This module owns that folder's spec (``EncoderSpec``, ``read_spec``) and the runtime (``OnnxEmbedder``), which
imports only onnxruntime, tokenizers and numpy: a query never loads the export code.

One text, one vector: every text is encoded on its own (one ORT run, unpadded), so its vector is a function
of its text alone, bit for bit on one machine, whatever it is encoded with, in which order, on how many
threads, locally or on Ray (other CPU families round fp32 differently in the last bits). Batches could not
promise that: int8 dynamic quantization scales each MatMul's activations per run (a short text alone and in a
batch of abstracts get other vectors), and padding changes reduction lengths. An unpadded run also spends no
work on padding.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import IndexCorruptError, IndexReadError, ModelLoadError
from semsearch.core.fileio import file_sha256, write_bytes_atomic
from semsearch.core.options import DEFAULT_PRECISION, ONNX_REGIME
from semsearch.encode.embedder import normalize_rows

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers

    from semsearch.encode.sentence_runs import SentenceText

SPEC_FILE = "encoder.json"
TOKENIZER_FILE = "tokenizer.json"
SPEC_FORMAT = 1
OPSET = 17
PARALLEL_MODES = ("ops", "texts")
DEFAULT_PARALLEL = "ops"
POOLING_MODES = ("mean", "cls", "max", "mean_sqrt_len_tokens")
# Texts tokenized together (the tokenizer runs its own threads over a list); bounds memory for big corpora.
TOKENIZE_CHUNK = 4096


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


def first_line(exc: BaseException) -> str:
    """An exception's first line of text (its class name when it has none)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
        the same bytes (tests/encode/test_one_vector.py checks it).
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
        # to a load; a mismatch raises before the session is ever used.
        model_entry = spec.files[model_name]
        model_bytes = _listed_bytes(folder, model_name, model_entry)
        tokenizer_bytes = _checked_bytes(folder, TOKENIZER_FILE, spec.files[TOKENIZER_FILE])

        try:
            tokenizer = Tokenizer.from_str(tokenizer_bytes.decode("utf-8"))
        except Exception as exc:  # tokenizers raises a bare Exception on bad JSON
            raise IndexCorruptError(f"tokenizer {folder / TOKENIZER_FILE} is corrupt: {first_line(exc)}") from exc
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=spec.max_seq_length)

        n_threads = max(1, threads or default_threads())
        options = ort.SessionOptions()
        # Off by default: the arena keeps its peak (reached on bulk encoding) resident for good.
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
                raise IndexCorruptError(f"ONNX model {folder / model_name} is corrupt: {first_line(exc)}") from exc
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
        """Hash every file the spec lists and compare with its recorded sha256 (slow: reads the whole export)."""
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
