"""Smaller index folders: a version keeps only the ONNX file of the precision it queries with."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semsearch.core.fileio import file_sha256
from semsearch.encode.encoder_choice import copy_export
from semsearch.encode.onnx_backend import (
    SPEC_FILE,
    TOKENIZER_FILE,
    EncoderSpec,
    keep_precision,
    model_filename,
    read_spec,
)
from tests.helpers import SEEDS, semsearch


def fake_export(folder: Path) -> EncoderSpec:
    """An export folder with both precisions (as versions written before this change hold)."""
    folder.mkdir(parents=True)
    files = {}
    for name, size in ((model_filename("fp32"), 400), (model_filename("int8"), 100), (TOKENIZER_FILE, 10)):
        (folder / name).write_bytes(bytes([len(name)]) * size)
        files[name] = {"sha256": file_sha256(folder / name), "size": size}
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
        files=files,
        precisions={"fp32": model_filename("fp32"), "int8": model_filename("int8")},
        versions={"onnx": "1"},
        int8_fp32_nodes=("node1",),
        export_check={"fp32": 0.9999, "int8": 0.995},
    )
    (folder / SPEC_FILE).write_text(json.dumps(spec.to_dict()), encoding="utf-8")
    return spec


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_copy_export_keeps_one_precision(tmp_path: Path, precision: str) -> None:
    spec = fake_export(tmp_path / "old")
    assert copy_export(tmp_path / "old", tmp_path / "new", precision)
    names = sorted(p.name for p in (tmp_path / "new").iterdir())
    assert names == sorted([SPEC_FILE, TOKENIZER_FILE, model_filename(precision)])
    kept = read_spec(tmp_path / "new")
    assert kept == keep_precision(spec, precision)
    assert kept.precisions == {precision: model_filename(precision)}
    assert set(kept.files) == {TOKENIZER_FILE, model_filename(precision)}
    assert kept.export_check == {precision: spec.export_check[precision]}
    assert kept.int8_fp32_nodes == (("node1",) if precision == "int8" else ())
    # A copy with its own inode (a reflink where the filesystem allows): a write into one version's export
    # (rsync --inplace) never changes another's.
    assert (tmp_path / "new" / TOKENIZER_FILE).stat().st_ino != (tmp_path / "old" / TOKENIZER_FILE).stat().st_ino
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == sorted(
        [SPEC_FILE, TOKENIZER_FILE, model_filename("fp32"), model_filename("int8")]
    )


def test_a_damaged_export_is_never_copied_forward(tmp_path: Path) -> None:
    """Same-size damage in a previous version's export: the copy is refused, named, and nothing is left behind.

    Before, the files were hard-linked unchecked, so a writer carried the damage into every later version.
    """
    from semsearch.core.errors import IndexCorruptError
    from semsearch.encode.encoder_choice import copy_encoder

    fake_export(tmp_path / "old")
    damaged = tmp_path / "old" / model_filename("int8")
    damaged.write_bytes(b"\xff" * damaged.stat().st_size)  # same size: only the checksum tells
    assert copy_export(tmp_path / "old", tmp_path / "new", "int8") is False
    assert not (tmp_path / "new").exists()
    with pytest.raises(IndexCorruptError, match=f"{damaged} does not match the sha256 its encoder.json records"):
        copy_encoder(tmp_path / "old", tmp_path / "whole")
    assert not (tmp_path / "whole").exists()
    # The other precision's files are intact: that copy still succeeds.
    assert copy_export(tmp_path / "old", tmp_path / "fp32", "fp32")


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.slow
def test_seed_index_holds_one_encoder_and_exports_another_on_request(tmp_path: Path) -> None:
    index = tmp_path / "seeds-index"
    built = semsearch("index", str(SEEDS), "--index", str(index), "-q", "--json")
    assert built.returncode == 0, built.stderr
    first = index / json.loads(built.stdout)["version"]
    encoder = sorted(p.name for p in (first / "encoder").iterdir())
    assert encoder == [SPEC_FILE, model_filename("int8"), TOKENIZER_FILE]
    # 91 abstracts: about 0.7 MB of vectors, documents and BM25, plus the int8 encoder (33 MB); fp32 was 90 MB more.
    assert folder_bytes(first) < 40 * 2**20

    switched = semsearch("index", "--index", str(index), "--precision", "fp32", "-q", "--json")
    assert switched.returncode == 0, switched.stderr
    second = index / json.loads(switched.stdout)["version"]
    assert sorted(p.name for p in (second / "encoder").iterdir()) == [SPEC_FILE, model_filename("fp32"), TOKENIZER_FILE]
    assert read_spec(second / "encoder").precisions == {"fp32": model_filename("fp32")}
    checked = semsearch("verify", "--index", str(index))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    found = semsearch("query", "federated privacy", "--index", str(index), "-k", "1", "--json")
    assert found.returncode == 0, found.stderr
    assert "privacy" in json.loads(found.stdout)[0]["text"].lower()
