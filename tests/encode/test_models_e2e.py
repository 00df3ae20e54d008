"""End to end with the real all-mpnet-base-v2 on the seeds (skipped unless `semsearch models install` ran)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semsearch.encode.catalogue import find_spec, installed_path
from tests.helpers import SEEDS, semsearch

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        installed_path(find_spec("all-mpnet-base-v2")) is None,  # type: ignore[arg-type]
        reason="all-mpnet-base-v2 is not installed (semsearch models install all-mpnet-base-v2)",
    ),
]

UNLEARNING = "making a trained model forget specific training examples"


@pytest.fixture(scope="module")
def mpnet_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = tmp_path_factory.mktemp("mpnet") / "mpnet"
    result = semsearch("index", str(SEEDS), "--model", "all-mpnet-base-v2", "--index", str(index), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["documents"], summary["encoded"], summary["backend"]) == (91, 91, "onnx")
    return index


def test_index_records_the_short_name_and_dimension(mpnet_index: Path) -> None:
    result = semsearch("info", "--index", str(mpnet_index), "--json")
    assert result.returncode == 0, result.stderr
    facts = json.loads(result.stdout)
    assert (facts["model"], facts["dimension"], facts["backend"]) == ("all-mpnet-base-v2", 768, "onnx")
    # The fingerprint hashes the installed files (the folder lives under ~/.cache, which once hid them all).
    assert facts["fingerprint"] != "e3b0c44298fc1c14"  # sha256 of nothing


def test_int8_export_agrees_with_torch(mpnet_index: Path) -> None:
    """Per-channel int8 breaks mpnet (cosine ~0 to torch); the export falls back to per-tensor weights."""
    (version,) = [p for p in mpnet_index.iterdir() if p.name.startswith("v-")]
    spec = json.loads((version / "encoder" / "encoder.json").read_text())
    assert spec["export_check"]["int8"] >= 0.9, spec["export_check"]


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_unlearning_question_finds_the_unlearning_paper_first(mpnet_index: Path, mode: str) -> None:
    """The question MiniLM misses (rank 6 in hybrid): no query word is in the abstract but 'training'."""
    result = semsearch("query", UNLEARNING, "--index", str(mpnet_index), "--mode", mode, "--json", "-k", "3")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert hits[0]["text"].startswith("Machine unlearning"), [h["label"] for h in hits]


def test_query_checks_the_model_by_short_name(mpnet_index: Path) -> None:
    ok = semsearch("query", "privacy", "--index", str(mpnet_index), "--model", "all-mpnet-base-v2", "--json")
    assert ok.returncode == 0, ok.stderr
    wrong = semsearch("query", "privacy", "--index", str(mpnet_index), "--model", "all-MiniLM-L6-v2")
    assert wrong.returncode == 2
    assert "built with model 'all-mpnet-base-v2' (768-d)" in wrong.stderr
