"""Metrics checked against hand-computed values (arithmetic in the comments), and the BEIR reader."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from semsearch.core.errors import InputError
from semsearch.eval.beir import load_beir
from semsearch.eval.metrics import (
    dcg,
    evaluate,
    mrr_at_k,
    ndcg_at_k,
    paired_difference,
    per_query,
    rank_scores,
    recall_at_k,
)
from tests.helpers import REPO, SHARED

LOG2_3 = math.log2(3)  # 1.58496..., the discount at rank 2
LOG2_4 = 2.0  # rank 3
LOG2_5 = math.log2(5)  # 2.32193..., rank 4


def test_dcg_discounts_by_log2_of_rank_plus_one() -> None:
    # 3/log2(2) + 2/log2(3) + 0 + 1/log2(5) = 3 + 1.26186 + 0.43068 = 4.69254
    assert dcg([3, 2, 0, 1]) == pytest.approx(3 + 2 / LOG2_3 + 1 / LOG2_5)
    assert dcg([]) == 0.0


def test_ndcg_binary() -> None:
    judged = {"a": 1, "b": 1}
    # Run: x a y b. DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068 = 1.06161
    # Ideal: a b.    IDCG = 1 + 1/log2(3) = 1.63093;  nDCG = 1.06161 / 1.63093 = 0.65093
    expected = (1 / LOG2_3 + 1 / LOG2_5) / (1 + 1 / LOG2_3)
    assert ndcg_at_k(["x", "a", "y", "b"], judged, 10) == pytest.approx(expected)
    assert expected == pytest.approx(0.65093, abs=1e-5)
    assert ndcg_at_k(["a", "b"], judged, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "y"], judged, 10) == 0.0


def test_ndcg_uses_linear_graded_gains() -> None:
    judged = {"a": 2, "b": 1, "c": 0}
    # Run: b a c. Gains are the grades (trec_eval), not 2^rel - 1:
    # DCG = 1/1 + 2/log2(3) + 0 = 1 + 1.26186 = 2.26186
    # Ideal: a b (c has grade 0, not relevant): IDCG = 2 + 1/log2(3) = 2.63093
    # nDCG = 2.26186 / 2.63093 = 0.85972   (with 2^rel - 1 gains it would be 0.82914)
    got = ndcg_at_k(["b", "a", "c"], judged, 10)
    assert got == pytest.approx((1 + 2 / LOG2_3) / (2 + 1 / LOG2_3))
    assert got == pytest.approx(0.85972, abs=1e-5)


def test_ndcg_cutoff_applies_to_run_and_ideal() -> None:
    judged = {"a": 1, "b": 1, "c": 1}
    # @2, run: a x b. DCG@2 = 1 (only a is in the top 2); IDCG@2 = 1 + 1/log2(3) = 1.63093 -> 0.61315
    assert ndcg_at_k(["a", "x", "b"], judged, 2) == pytest.approx(1 / (1 + 1 / LOG2_3))


def test_ndcg_ties_in_the_ideal_ranking() -> None:
    # Two grade-2 documents: either order is ideal, so a run with both on top scores 1 whichever comes first.
    judged = {"a": 2, "b": 2, "c": 1}
    assert ndcg_at_k(["b", "a", "c"], judged, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["a", "b", "c"], judged, 10) == pytest.approx(1.0)
    # c first: DCG = 1 + 2/log2(3) + 2/2 = 3.26186; IDCG = 2 + 2/log2(3) + 1/2 = 3.76186 -> 0.86709
    assert ndcg_at_k(["c", "a", "b"], judged, 10) == pytest.approx((2 + 2 / LOG2_3) / (2.5 + 2 / LOG2_3))


def test_a_repeated_document_counts_once() -> None:
    # Run a a b -> a b: perfect, not DCG 1 + 1/log2(3) + 1/2 over IDCG.
    assert ndcg_at_k(["a", "a", "b"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)
    assert recall_at_k(["a", "a"], {"a": 1, "b": 1}, 2) == pytest.approx(0.5)


def test_recall() -> None:
    judged = {"a": 1, "b": 2, "c": 1, "d": 0}
    # Relevant: a b c (d is judged non-relevant). Top 3 of "a x b d c": a, b -> 2/3
    assert recall_at_k(["a", "x", "b", "d", "c"], judged, 3) == pytest.approx(2 / 3)
    assert recall_at_k(["a", "x", "b", "d", "c"], judged, 5) == pytest.approx(1.0)
    assert recall_at_k([], judged, 5) == 0.0


def test_mrr() -> None:
    judged = {"b": 1, "c": 2}
    assert mrr_at_k(["x", "b", "c"], judged, 10) == pytest.approx(1 / 2)  # first relevant at rank 2
    assert mrr_at_k(["x", "y", "c"], judged, 2) == 0.0  # first relevant at rank 3, past the cutoff
    assert mrr_at_k(["c"], judged, 1) == 1.0


def test_rank_scores_breaks_ties_like_trec_eval() -> None:
    # Score descending; equal scores in reverse document-id order (trec_eval sorts docno descending).
    assert rank_scores({"d1": 0.5, "d3": 0.9, "d2": 0.5, "d0": 0.1}) == ["d3", "d2", "d1", "d0"]


def test_evaluate_averages_over_queries_with_relevant_documents() -> None:
    qrels = {
        "q1": {"a": 1},  # run: x a -> nDCG 1/log2(3) = 0.63093, R@100 = 1, MRR = 0.5
        "q2": {"b": 2, "c": 1},  # run: b c -> nDCG 1, R@100 1, MRR 1
        "q3": {"z": 0},  # no relevant document: left out of every mean
        "q4": {"e": 1},  # absent from the run: counts as 0
    }
    run = {"q1": ["x", "a"], "q2": ["b", "c"], "q3": ["z"], "q5": ["a"]}
    got = evaluate(run, qrels)
    # Means over q1, q2, q4:
    # nDCG@10 = (0.63093 + 1 + 0) / 3 = 0.54364; R@100 = (1 + 1 + 0) / 3; MRR@10 = (0.5 + 1 + 0) / 3 = 0.5
    assert got["ndcg@10"] == pytest.approx((1 / LOG2_3 + 1) / 3)
    assert got["recall@100"] == pytest.approx(2 / 3)
    assert got["mrr@10"] == pytest.approx(0.5)
    assert evaluate({}, {}) == {"ndcg@10": 0.0, "recall@100": 0.0, "mrr@10": 0.0}


def _beir(tmp_path: Path) -> Path:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "queries.jsonl").write_text(
        '{"_id": "1", "text": "first query", "metadata": {}}\n'
        '{"_id": "2", "text": "second query"}\n'
        '{"_id": "3", "text": "not judged in test"}\n'
    )
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n1\t10\t1\n1\t11\t2\n2\t12\t0\n")
    return tmp_path


def test_load_beir(tmp_path: Path) -> None:
    queries, qrels = load_beir(_beir(tmp_path), "test")
    assert queries == {"1": "first query", "2": "second query"}
    assert qrels == {"1": {"10": 1, "11": 2}, "2": {"12": 0}}


def test_load_beir_errors(tmp_path: Path) -> None:
    folder = _beir(tmp_path)
    with pytest.raises(InputError, match="train.tsv"):
        load_beir(folder, "train")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n9\t10\t1\n")
    with pytest.raises(InputError, match="absent from"):
        load_beir(folder, "test")
    (folder / "qrels" / "test.tsv").write_text("1\t10\thigh\n")
    with pytest.raises(InputError, match="line 1"):
        load_beir(folder, "test")


SCIFACT = SHARED / "data" / "scifact"


@pytest.mark.skipif(not (SCIFACT / "qrels" / "test.tsv").is_file(), reason="SciFact not in shared/data")
def test_load_real_scifact() -> None:
    queries, qrels = load_beir(SCIFACT, "test")
    assert len(queries) == len(qrels) == 300
    queries, qrels = load_beir(SCIFACT, "train")
    assert len(queries) == len(qrels) == 809


def test_per_query_scores_and_their_means() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1, "c": 1}, "q3": {"x": 0}}  # q3 has nothing relevant: left out
    run = {"q1": ["a"], "q2": ["x", "b"]}
    scores = per_query(run, qrels)
    assert set(scores) == {"q1", "q2"}
    assert scores["q1"] == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}
    # q2: b at rank 2 of two relevant. nDCG = (1/log2(3)) / (1 + 1/log2(3)) = 0.38685; recall 1/2; MRR 1/2
    assert scores["q2"]["ndcg@10"] == pytest.approx((1 / LOG2_3) / (1 + 1 / LOG2_3))
    assert (scores["q2"]["recall@100"], scores["q2"]["mrr@10"]) == (0.5, 0.5)
    means = evaluate(run, qrels)
    for name in ("ndcg@10", "recall@100", "mrr@10"):
        assert means[name] == pytest.approx((scores["q1"][name] + scores["q2"][name]) / 2)


def test_paired_difference_and_its_standard_error() -> None:
    a = {"q1": 0.5, "q2": 0.25, "q3": 1.0, "q4": 0.0}
    b = {"q1": 0.75, "q2": 0.25, "q3": 0.5, "q4": 1.0}
    # Differences b - a: 0.25, 0, -0.5, 1.0; mean 0.1875.
    # Squared deviations: 0.00390625, 0.03515625, 0.47265625, 0.66015625 = 1.171875; / 3 = 0.390625
    # sd = 0.625, standard error = 0.625 / sqrt(4) = 0.3125
    got = paired_difference(a, b)
    assert got["difference"] == pytest.approx(0.1875)
    assert got["stderr"] == pytest.approx(0.3125)
    assert (got["mean_a"], got["mean_b"], got["queries"]) == (0.4375, 0.625, 4)
    with pytest.raises(ValueError, match="different queries"):
        paired_difference(a, {**b, "q5": 1.0})
    with pytest.raises(ValueError, match="no queries"):
        paired_difference({}, {})


def _eval_output(path: Path, per: dict[str, dict[str, float]], mode: str = "hybrid") -> Path:
    means = {m: sum(s[m] for s in per.values()) / len(per) for m in ("ndcg@10", "recall@100", "mrr@10")}
    path.write_text(
        "semsearch: building ...\n" + json.dumps({mode: {**means, "per_query": per}, "queries": len(per)}) + "\n"
    )
    return path


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_quality", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def test_bench_quality_compares_two_eval_outputs(tmp_path: Path) -> None:
    def per(values: list[float]) -> dict[str, dict[str, float]]:
        return {f"q{i}": {"ndcg@10": v, "recall@100": 1.0, "mrr@10": v} for i, v in enumerate(values, 1)}

    a = _eval_output(tmp_path / "a.json", per([0.5, 0.25, 1.0, 0.0]))
    b = _eval_output(tmp_path / "b.json", per([0.75, 0.25, 0.5, 1.0]))
    out = _bench("--compare", str(a), str(b))
    assert out.returncode == 0, out.stderr
    [line] = out.stdout.splitlines()
    result = json.loads(line)
    assert result["metric"] == "ndcg@10"
    [pair] = result["comparisons"]
    assert (pair["a"], pair["b"]) == (f"{a}:hybrid", f"{b}:hybrid")
    assert (pair["difference"], pair["stderr"], pair["queries"]) == (0.1875, 0.3125, 4)
    recall = json.loads(_bench("--compare", f"{a}:hybrid", str(b), "--metric", "recall@100").stdout)
    assert recall["comparisons"][0]["difference"] == 0.0
    # Different queries cannot be paired; a missing mode is named.
    other = _eval_output(tmp_path / "c.json", per([0.5, 0.25, 1.0]))
    refused = _bench("--compare", str(a), str(other))
    assert refused.returncode != 0 and "different queries" in refused.stderr
    missing = _bench("--compare", f"{a}:dense", str(b))
    assert missing.returncode != 0 and "no mode 'dense'" in missing.stderr
