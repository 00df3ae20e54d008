"""The benchmarks' one harness: a JSON line with the machine's load, a same-run baseline, a clean skip."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks import harness


def test_emit_prints_one_json_line_with_the_load_and_appends_it_to_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs" / "figures.jsonl"
    harness.emit({"p50_ms": 1.5}, out=out)
    harness.emit({"p50_ms": 2.5}, out=out)
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 2
    first = json.loads(printed[0])
    assert first["p50_ms"] == 1.5 and first["machine"]["cpus"] >= 1 and "load_1m" in first["machine"]
    assert [json.loads(line)["p50_ms"] for line in out.read_text().splitlines()] == [1.5, 2.5]


def test_log_goes_to_stderr_with_the_time(capsys: pytest.CaptureFixture[str]) -> None:
    harness.log("building", 3, "files")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.rstrip().endswith("] building 3 files")


def test_same_run_interleaves_a_and_b_and_reports_medians_and_the_ratio() -> None:
    order: list[str] = []
    figures = harness.same_run(lambda: order.append("a"), lambda: order.append("b"), repeats=3, names=("old", "new"))
    assert order == ["a", "b"] * 3
    assert figures["repeats"] == 3 and len(figures["ratio_per_pair"]) == 3
    assert {"old_median_s", "new_median_s", "old_min_s", "new_min_s", "ratio_median"} <= set(figures)


def test_missing_shared_data_is_a_clean_skip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        harness.need(tmp_path / "absent.jsonl.gz", "the ML Anthology corpus")
    assert stopped.value.code == 0
    line = json.loads(capsys.readouterr().out)
    assert "absent.jsonl.gz is absent (the ML Anthology corpus)" in line["skipped"]


def test_arguments_share_docs_and_out() -> None:
    args = harness.arguments("A benchmark.", docs=500).parse_args(["--docs", "20", "--out", "x.jsonl"])
    assert args.docs == 20 and args.out == Path("x.jsonl")


def test_read_and_write_jsonl_round_trip(tmp_path: Path) -> None:
    rows = [{"title": "A", "text": "é"}, {"title": "B", "text": "b"}]
    path = harness.write_jsonl(tmp_path / "rows.jsonl", rows)
    assert harness.read_jsonl(path) == rows and harness.read_jsonl(path, limit=1) == rows[:1]
    assert harness.percentile_ms([0.001, 0.002, 0.003], 50) == 2.0


def test_the_stand_in_is_the_package_encoder_the_recorded_figures_used() -> None:
    """The 384-d stand-in that the arrivals, scale and many-files figures were measured with: same name, unit rows."""
    encoder = harness.HashedWords()
    vectors = encoder.encode(["graph neural networks", "graph neural networks", ""])
    assert encoder.name == "stand-in-hashed-words-384" and vectors.shape == (3, 384)
    assert np.array_equal(vectors[0], vectors[1]) and abs(float(np.linalg.norm(vectors[0])) - 1.0) < 1e-6
    assert not vectors[2].any() and encoder.encoded == 3



def test_the_stand_in_vectors_are_those_of_the_former_scripts_standin() -> None:
    """The dimensions and signs ``scripts/standin.py`` (df0eec0) gave, so stand-in figures stay reproducible."""
    vector = harness.HashedWords().encode(["Graph neural networks pass messages between nodes."])[0]
    columns = np.flatnonzero(vector)
    assert columns.tolist() == [7, 62, 143, 225, 251, 311, 356]
    assert np.sign(vector[columns]).tolist() == [-1, -1, -1, -1, -1, 1, -1]
    assert np.allclose(np.abs(vector[columns]), 7**-0.5)
