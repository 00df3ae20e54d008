"""benchmarks/bench_arxiv.py (issue #41): every figure of the table in one JSON line, at a tiny size, hashed vectors."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks import bench_arxiv as bench
from tests.helpers import requires_shared

VOCABULARY = (
    "graph neural network learning model data training robust sparse attention kernel bayesian inference "
    "optimal transport diffusion policy reward agent language vision contrastive representation gradient "
    "convex bound sample complexity federated privacy causal estimation uncertainty ensemble transformer"
)
WORDS = VOCABULARY.split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(8, 18))]
    return " ".join(words).capitalize() + "."


def corpus(path: Path, n: int, seed: int = 3) -> Path:
    """A corpus.jsonl.gz of n records shaped like the ML Anthology's."""
    rng = random.Random(seed)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for i in range(n):
            record = {
                "_id": f"paper-{i}",
                "title": " ".join(rng.choice(WORDS) for _ in range(6)).title(),
                "text": " ".join(sentence(rng) for _ in range(rng.randint(3, 9))),
                "metadata": {"venue": rng.choice(["NeurIPS", "ICML"]), "year": rng.randint(2000, 2025)},
            }
            fh.write(json.dumps(record) + "\n")
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    bench.main([*args, "--encoder", "hashed", "--map", "pca"])
    return dict(json.loads(capsys.readouterr().out.strip().splitlines()[-1]))


def check_line(line: dict[str, Any], docs: int, queries: int) -> None:
    """Every figure of the issue's table is there and sane (``queries``: the held-out titles asked for)."""
    assert line["benchmark"] == "arxiv" and line["docs"] == docs
    assert line["real_docs"] + line["standin_docs"] == docs and 0 < line["held_out_titles"] <= queries
    queries = line["held_out_titles"]
    build = line["build"]
    assert 0 < build["s_excluding_encoding"] <= build["s"] and build["documents"] <= docs - bench.ARRIVALS
    assert build["steps"]["_encode"] >= 0 and any(name.endswith(".write_base") for name in build["steps"])
    assert line["unchanged_refresh"]["wrote_version"] is False and line["unchanged_refresh"]["s"] >= 0
    assert line["add_500"]["encoded"] == bench.ARRIVALS and line["add_500"]["s_excluding_encoding"] > 0
    disk = line["disk"]
    assert disk["live_files"] and disk["cache_files"] and disk["text_bytes"] > 0
    assert disk["live_version_bytes"] == sum(disk["live_files"].values())
    assert disk["cache_bytes"] == sum(disk["cache_files"].values())
    assert disk["per_abstract_bytes"] > disk["per_abstract_beyond_text_bytes"] > 0
    query = line["query"]
    assert 0 < query["index_open_s"] < 60 and query["queries_per_mode"] == queries
    for mode in ("hybrid", "dense"):
        assert 0 < query[f"{mode}_p50_ms"] <= query[f"{mode}_p99_ms"]
    assert 0.0 <= query["recall_at_10"] <= 1.0 and query["ann"]["kind"]
    assert 0 < query["rss_after_open_mb"] <= query["rss_peak_mb"] and query["rss_after_all_queries_mb"] > 0
    assert query["profile_tottime_ms_per_query"]
    assert set(line["targets"]) >= {"disk_per_abstract_le_3kb", "hybrid_p50_le_20ms", "open_le_1s", "rss_le_2gb"}
    assert all(isinstance(met, bool) for met in line["targets"].values())
    assert line["machine"]["cpus"] >= 1


def test_a_tiny_run_prints_every_figure_of_the_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1,100 papers from a corpus of 700 made here (the rest stand-ins): no ../shared data, hashed vectors."""
    made = corpus(tmp_path / "corpus.jsonl.gz", 700)
    work = tmp_path / "w"
    line = run(capsys, "--docs", "1100", "--queries", "10", "--corpus", str(made), "--workdir", str(work), "--keep")
    check_line(line, 1100, 10)
    # The corpus ends first: its records less the held-out titles are real, the rest stand-ins.
    assert line["real_docs"] == 700 - line["held_out_titles"] and line["standin_docs"] == 1100 - line["real_docs"]
    assert Path(line["workdir"], "index", "CURRENT").is_file()
    assert line["vector_check"] == {"vectors": "hashed bag of words (no model)"} and line["encoder"] == "hashed"


def test_stand_in_records_keep_real_sentences_titles_and_metadata() -> None:
    rng = random.Random(5)
    real = [
        {
            "_id": f"r{i}",
            "title": f"Title {i} about graphs",
            "text": " ".join(sentence(rng) for _ in range(4)),
            "metadata": {"venue": "NeurIPS", "year": 2020 + i % 3, "doi": "10.1/x"},
        }
        for i in range(30)
    ]
    pool = {s.strip() for r in real for s in r["text"].split(".") if s.strip()}
    made = bench.standin_records(real, 50)
    assert len({r["_id"] for r in made}) == 50 and all(r["_id"].startswith("standin-") for r in made)
    for record in made:
        assert {s.strip() for s in record["text"].split(".") if s.strip()} <= pool
        assert record["metadata"]["venue"] == "NeurIPS" and "doi" not in record["metadata"]
        assert record["title"]


def test_the_stand_in_encoder_draws_sentences_around_a_document_and_keeps_sampled_real_vectors() -> None:
    from semsearch.encode.sentence_runs import sentence_text

    rng = np.random.default_rng(0)
    docs = bench._unit(rng.standard_normal((800, bench.DIMENSION)).astype(np.float32) + 1.0)
    sentences = bench._unit(np.repeat(docs, 3, axis=0) + 0.3 * rng.standard_normal((2400, bench.DIMENSION)))
    known = sentence_text("T A first one. A second one. A third one.", "T", "A first one. A second one. A third one.")
    keys = np.array([bench.text_key(known.text)] + [f"k{i}" for i in range(799)])
    sample = {"docs": docs, "sentences": sentences, "owner": np.repeat(np.arange(800), 3), "keys": keys}
    enc = bench.StandIns("standin", sample, None)
    other = sentence_text("T Some one. Then two. Then three. Four.", "T", "Some one. Then two. Then three. Four.")
    (real_doc, real_sents), (doc, sents) = enc.encode_sentences([known, other])
    assert np.array_equal(real_doc, docs[0]) and np.array_equal(real_sents, sentences[:3]) and enc.real_used == 1
    assert sents.shape == (4, bench.DIMENSION) and np.allclose(np.linalg.norm(sents, axis=1), 1.0, atol=1e-5)
    assert np.allclose(doc, bench._unit(sents.mean(axis=0)), atol=1e-6)
    assert enc.seconds > 0 and enc.encode_sentences([other])[0][0].tobytes() == doc.tobytes()  # one text, one vector


def test_without_the_corpus_it_skips_with_a_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench.main(["--corpus", str(tmp_path / "absent.jsonl.gz"), "--workdir", str(tmp_path / "w")])
    assert stopped.value.code == 0
    assert "absent.jsonl.gz is absent" in json.loads(capsys.readouterr().out)["skipped"]
    assert not (tmp_path / "w").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--docs", "900"], "--docs must be above 1000"), (["--sample", "10"], "--sample at least 768")],
)
def test_bad_sizes_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    made = corpus(tmp_path / "corpus.jsonl.gz", 5)
    with pytest.raises(SystemExit) as stopped:
        bench.main([*args, "--corpus", str(made)])
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_root_must_hold_a_semsearch_package(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no semsearch package there"):
        bench.main(["--root", str(tmp_path), "--docs", "2000"])


@pytest.mark.slow
def test_the_real_corpus_at_2000_papers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The real ML Anthology corpus read in place (never copied), at --docs 2000."""
    real = requires_shared("data", "mlanthology", "corpus.jsonl.gz")
    line = run(capsys, "--docs", "2000", "--queries", "30", "--corpus", str(real), "--workdir", str(tmp_path / "w"))
    check_line(line, 2000, 30)
    assert line["real_docs"] == 2000 and line["held_out_titles"] == 30
    assert not list((tmp_path / "w").glob("run-*")), "the run's index is removed without --keep"
