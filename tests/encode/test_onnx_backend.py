"""The ONNX Runtime encoder: export, parity with sentence-transformers, torch-free loading, corrupt files."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from semsearch.core.errors import IndexCorruptError, ModelLoadError
from semsearch.encode.onnx_backend import (
    SPEC_FILE,
    TOKENIZER_FILE,
    EncoderSpec,
    OnnxEmbedder,
    model_filename,
    pool_tokens,
    read_spec,
)
from semsearch.encode.torch_backend import SentenceTransformerEmbedder
from tests.helpers import REPO, SEEDS


def seed_abstracts(limit: int) -> list[str]:
    """The first ``limit`` paragraphs of the seed files (first line of each file is a header)."""
    out: list[str] = []
    for path in sorted(SEEDS.glob("*.txt")):
        body = path.read_text(encoding="utf-8").partition("\n")[2]
        out += [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    return out[:limit]


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder("all-MiniLM-L6-v2")


@pytest.fixture
def broken_copy(export_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the export to damage."""
    dst = tmp_path / "encoder"
    shutil.copytree(export_dir, dst)
    return dst


# --- fast tests (no model) ----------------------------------------------------------------------------


def test_pool_modes_respect_mask() -> None:
    hidden = np.array([[[1.0, 0.0], [3.0, 2.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]])
    assert np.allclose(pool_tokens(hidden, mask, "mean"), [[2.0, 1.0]])
    assert np.allclose(pool_tokens(hidden, mask, "max"), [[3.0, 2.0]])
    assert np.allclose(pool_tokens(hidden, mask, "cls"), [[1.0, 0.0]])
    assert np.allclose(pool_tokens(hidden, mask, "mean_sqrt_len_tokens"), [[4.0 / np.sqrt(2), 2.0 / np.sqrt(2)]])


def test_missing_spec_is_corrupt(tmp_path: Path) -> None:
    with pytest.raises(IndexCorruptError, match=SPEC_FILE):
        read_spec(tmp_path)


@pytest.mark.parametrize(
    "content",
    [b"{not json", b"[]", b'{"format": 1}', b'{"pooling": "weird"}', b"\xff\xfe{}"],
)
def test_bad_spec_is_corrupt(tmp_path: Path, content: bytes) -> None:
    (tmp_path / SPEC_FILE).write_bytes(content)
    with pytest.raises(IndexCorruptError, match=SPEC_FILE):
        read_spec(tmp_path)


def test_spec_round_trip() -> None:
    spec = EncoderSpec(
        source_model="m",
        source_fingerprint="abc",
        dimension=4,
        max_seq_length=16,
        pooling="mean",
        normalize_module=True,
        do_lower_case=False,
        inputs=("input_ids", "attention_mask"),
        pad_token_id=0,
        files={"model.fp32.onnx": {"sha256": "00", "size": 1}, TOKENIZER_FILE: {"sha256": "11", "size": 2}},
        precisions={"fp32": "model.fp32.onnx"},
        versions={"onnx": "1"},
    )
    assert EncoderSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert spec.get("source_model") == "m"


# --- real model -----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_export_layout(export_dir: Path) -> None:
    names = sorted(p.name for p in export_dir.iterdir())
    assert names == [SPEC_FILE, model_filename("fp32"), model_filename("int8"), TOKENIZER_FILE]
    spec = read_spec(export_dir)
    assert spec.source_model == "all-MiniLM-L6-v2"
    assert (spec.dimension, spec.max_seq_length, spec.pooling) == (384, 256, "mean")
    assert spec.normalize_module
    assert set(spec.files) == {model_filename("fp32"), model_filename("int8"), TOKENIZER_FILE}
    assert spec.export_check["fp32"] >= 0.999
    raw = json.loads((export_dir / SPEC_FILE).read_text(encoding="utf-8"))
    assert raw["versions"]["onnxruntime"] and raw["versions"]["onnx"]


@pytest.mark.slow
def test_int8_weights_keep_to_seven_bits(export_dir: Path) -> None:
    """x86 without VNNI sums u8 x s8 pairs into int16: full-range weights saturate there and give other vectors."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(export_dir / model_filename("int8")))
    arrays = [numpy_helper.to_array(t) for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8]
    weights = [a for a in arrays if a.ndim == 2]  # zero points are vectors of 0
    assert len(weights) >= 30  # every quantized MatMul of the six layers
    # ONNX Runtime's reduced signed range is [-64, 64]: a pair of products stays inside int16.
    assert all(int(w.min()) >= -64 and int(w.max()) <= 64 for w in weights)
    assert min(int(w.min()) for w in weights) == -64  # the range is used, not collapsed


@pytest.mark.slow
@pytest.mark.parametrize(("precision", "floor"), [("fp32", 0.999), ("int8", 0.99)])
def test_parity_with_sentence_transformers(
    export_dir: Path, torch_embedder: SentenceTransformerEmbedder, precision: str, floor: float
) -> None:
    texts = seed_abstracts(10) + ["federated learning with differential privacy"]
    onnx = OnnxEmbedder.load(export_dir, precision)
    got = onnx.encode(texts)
    want = torch_embedder.encode(texts)
    assert got.shape == want.shape == (len(texts), 384)
    assert got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(np.min(np.sum(got * want, axis=1))) >= floor
    # Same model files -> same fingerprint, so an index records one model whichever backend encoded it.
    assert (onnx.name, onnx.dimension, onnx.fingerprint) == (
        torch_embedder.name,
        torch_embedder.dimension,
        torch_embedder.fingerprint,
    )
    assert (onnx.backend, onnx.precision) == ("onnx", precision)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("parallel", ["ops", "texts"])
def test_rows_come_back_in_input_order(export_dir: Path, precision: str, parallel: str) -> None:
    # Lengths vary a lot; each text is encoded alone, so any order gives each text the very same bytes.
    texts = seed_abstracts(6) + ["short query", "graph neural networks", "a"]
    onnx = OnnxEmbedder.load(export_dir, precision, parallel=parallel, threads=2)
    forward = onnx.encode(texts, batch_size=3)
    backward = onnx.encode(texts[::-1], batch_size=3)[::-1]
    singles = np.vstack([onnx.encode([t]) for t in texts])
    assert np.array_equal(forward, backward) and np.array_equal(forward, singles)
    assert np.argmax(forward @ singles.T, axis=1).tolist() == list(range(len(texts)))


@pytest.mark.slow
def test_empty_list(export_dir: Path) -> None:
    out = OnnxEmbedder.load(export_dir, "int8").encode([])
    assert out.shape == (0, 384) and out.dtype == np.float32


@pytest.mark.slow
def test_long_text_is_truncated(export_dir: Path) -> None:
    onnx = OnnxEmbedder.load(export_dir, "fp32")
    long = " ".join(seed_abstracts(8))
    assert onnx.encode([long]).shape == (1, 384)


@pytest.mark.slow
def test_query_path_does_not_import_torch(export_dir: Path) -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from semsearch.encode.onnx_backend import OnnxEmbedder\n"
        f"e = OnnxEmbedder.load(Path({str(export_dir)!r}))\n"
        "v = e.encode(['federated learning privacy'])\n"
        "assert v.shape == (1, 384), v.shape\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


@pytest.mark.slow
@pytest.mark.parametrize("name", [model_filename("int8"), TOKENIZER_FILE])
def test_missing_file_is_corrupt(broken_copy: Path, name: str) -> None:
    (broken_copy / name).unlink()
    with pytest.raises(IndexCorruptError, match=re.escape(name)) as info:
        OnnxEmbedder.load(broken_copy, "int8")
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_truncated_onnx_is_corrupt(broken_copy: Path) -> None:
    path = broken_copy / model_filename("int8")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    with pytest.raises(IndexCorruptError, match=re.escape(path.name)):
        OnnxEmbedder.load(broken_copy, "int8")


@pytest.mark.slow
def test_garbage_onnx_of_right_size_is_corrupt(broken_copy: Path) -> None:
    # Same size, so the cheap check passes and ONNX Runtime itself must reject the bytes.
    path = broken_copy / model_filename("fp32")
    path.write_bytes(b"\x00garbage" * (path.stat().st_size // 8) + b"\x00" * (path.stat().st_size % 8))
    with pytest.raises(IndexCorruptError, match=re.escape(path.name)):
        OnnxEmbedder.load(broken_copy, "fp32")


@pytest.mark.slow
def test_corrupt_tokenizer_of_right_size_is_corrupt(broken_copy: Path) -> None:
    path = broken_copy / TOKENIZER_FILE
    path.write_bytes(b"{" * path.stat().st_size)
    with pytest.raises(IndexCorruptError, match=re.escape(TOKENIZER_FILE)):
        OnnxEmbedder.load(broken_copy, "int8")


@pytest.mark.slow
def test_corrupt_spec_is_corrupt(broken_copy: Path) -> None:
    (broken_copy / SPEC_FILE).write_text('{"source_model": "x", "files": ', encoding="utf-8")
    with pytest.raises(IndexCorruptError, match=SPEC_FILE):
        OnnxEmbedder.load(broken_copy, "int8")


@pytest.mark.slow
def test_verify_detects_flipped_byte(broken_copy: Path) -> None:
    onnx = OnnxEmbedder.load(broken_copy, "fp32")
    onnx.verify()
    path = broken_copy / model_filename("int8")
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(IndexCorruptError, match=re.escape(path.name)):
        onnx.verify()


@pytest.mark.slow
def test_unexported_precision_is_a_load_error(export_dir: Path) -> None:
    with pytest.raises(ModelLoadError, match="int4"):
        OnnxEmbedder.load(export_dir, "int4")


@pytest.mark.slow
def test_export_rejects_unknown_precision(tmp_path: Path) -> None:
    from semsearch.encode.onnx_export import export_onnx

    with pytest.raises(ModelLoadError, match="int4"):
        export_onnx("all-MiniLM-L6-v2", tmp_path, precisions=("int4",))


@pytest.mark.slow
def test_export_refuses_dense_head(tmp_path: Path, torch_embedder: SentenceTransformerEmbedder) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.models import Dense

    from semsearch.encode.onnx_export import export_onnx

    st = torch_embedder.model
    with_dense = SentenceTransformer(modules=[st[0], st[1], Dense(384, 32)], device="cpu")
    with_dense.save(str(tmp_path / "dense-model"))
    with pytest.raises(ModelLoadError, match="Dense.*torch backend") as info:
        export_onnx(str(tmp_path / "dense-model"), tmp_path / "out")
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_arena_and_parallel_options_agree(export_dir: Path) -> None:
    texts = seed_abstracts(5)
    plain = OnnxEmbedder.load(export_dir, "fp32").encode(texts, batch_size=2)
    for kwargs in ({"arena": True}, {"parallel": "texts", "threads": 2}):
        other = OnnxEmbedder.load(export_dir, "fp32", **kwargs).encode(texts, batch_size=2)
        assert np.array_equal(plain, other)
