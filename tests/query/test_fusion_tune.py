"""eval --tune: weighing hybrid fusions on judged queries, recording the winner, and what reads it afterwards."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import SemsearchError
from semsearch.core.options import fusion_entry, tuned_entry
from semsearch.faces.agent_results import summary
from semsearch.query.weighting import FusionPolicy
from semsearch.store.layout import MANIFEST, current_version
from semsearch.write.fusion_record import record_fusion
from tests.helpers import FakeEmbedder, beir, jsonl, run, snapshot

TOPICS = 12


class MarkEmbedder(FakeEmbedder):
    """The fake's bag of words plus a mark BM25 never sees: a text with n '§' signs leans along axis n."""

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        out = super().encode(texts, batch_size=batch_size, progress=progress)
        for row, text in enumerate(texts):
            out[row, text.count("§") % self.dimension] += 1.5
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def mismatch(tmp_path: Path, misled: int = TOPICS) -> Path:
    """A collection where BM25 is confidently wrong: each query's words are in a decoy, never in its paper.

    The dense side finds every paper (the mark), BM25 only decoys: dense nDCG@10 1, lexical 0. Only the first
    ``misled`` topics are so; in the others the paper holds the query's words and its decoy does not.
    """
    folder = tmp_path / "mismatch"
    (folder / "qrels").mkdir(parents=True)
    corpus, queries, judged = [], [], ["query-id\tcorpus-id\tscore"]
    for i in range(1, TOPICS + 1):
        words = f"ask{i}x ask{i}y ask{i}z"
        paper, decoy = (f"rel{i}p rel{i}q", words) if i <= misled else (words, f"rel{i}p rel{i}q")
        corpus.append({"_id": f"p{i}", "title": "", "text": "§" * i + f" {paper} rel{i}r rel{i}s"})
        corpus.append({"_id": f"x{i}", "title": "", "text": "§" * (i + 30) + f" {decoy} dec{i}a dec{i}b"})
        queries.append({"_id": f"q{i}", "text": "§" * i + " " + words})
        judged.append(f"q{i}\tp{i}\t1")
    jsonl(folder / "corpus.jsonl", corpus)
    jsonl(folder / "queries.jsonl", queries)
    (folder / "qrels" / "train.tsv").write_text("\n".join(judged) + "\n", encoding="utf-8")
    return folder


def _manifest(index: Path) -> dict:
    return json.loads((current_version(index) / MANIFEST).read_text(encoding="utf-8"))


def _tune(folder: Path, index: Path, embedder: FakeEmbedder, *extra: str) -> dict:
    result = run(["eval", str(folder), "--split", "train", "--index", str(index), "--json", "--tune", *extra], embedder)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_tune_records_the_weight_that_clearly_wins_and_search_then_uses_it(tmp_path: Path) -> None:
    embedder, folder, index = MarkEmbedder(), mismatch(tmp_path), tmp_path / "idx"
    out = _tune(folder, index, embedder)
    assert out["dense"]["ndcg@10"] == pytest.approx(1.0) and out["lexical"]["ndcg@10"] == pytest.approx(0.0)
    tune = out["tune"]
    assert tune["recorded"] == "adaptive" and tune["split"] == "train" and tune["queries"] == TOPICS
    by_name = {row["name"]: row for row in tune["candidates"]}
    # Adaptive trusts BM25's decisive (wrong) list as much as the dense one; dense-heavy weights find every paper.
    assert by_name["adaptive"]["ndcg@10"] < 0.9 and by_name["alpha 1"]["ndcg@10"] == pytest.approx(1.0)
    assert by_name["alpha 0"]["ndcg@10"] < by_name["adaptive"]["ndcg@10"]  # BM25 alone: decoys first
    chosen = by_name[tune["chosen"]]
    assert chosen["ndcg@10"] == pytest.approx(1.0) and chosen["difference"] > 2 * chosen["stderr"]
    assert tune["version"] == current_version(index).name  # a new version records it
    entry = _manifest(index)["fusion"]
    assert entry["method"] == "tuned" and entry["alpha"] == float(tune["chosen"].split()[1])
    assert entry["tuned_on"]["split"] == "train" and entry["tuned_on"]["queries"] == TOPICS
    # What tune measured offline is what eval and query now get from the index.
    again = json.loads(run(["eval", str(folder), "--split", "train", "--index", str(index), "--json"], embedder).stdout)
    assert again["hybrid"]["ndcg@10"] == pytest.approx(chosen["ndcg@10"])
    assert again["hybrid"]["fusion"]["method"] == "tuned"
    hits = json.loads(run(["query", "§§§ ask3x ask3y ask3z", "--index", str(index), "--json"], embedder).stdout)
    assert hits[0]["external_ids"] == ["p3"] and hits[1]["external_ids"] == ["x3"]  # the paper, then its decoy
    assert hits[0]["fusion"]["method"] == "tuned" and f"tuned on {TOPICS} judged queries" in hits[0]["fusion"]["reason"]
    # semsearch info and the agents' summary say where the weight came from.
    info = run(["info", "--index", str(index)], embedder)
    assert f"fusion: alpha {entry['alpha']:g} to dense, tuned on {TOPICS} judged queries (train split)" in " ".join(
        info.stdout.split()
    )
    with Index.open(index, embedder=embedder) as opened:
        assert summary(opened.info().to_dict()).fusion == opened.info().fusion == opened.fusion.describe()
    # --fusion still asks for the others on this index.
    fixed = run(["query", "§§§ ask3x ask3y ask3z", "--index", str(index), "--json", "--fusion", "fixed"], embedder)
    assert json.loads(fixed.stdout)[0]["fusion"]["method"] == "fixed"


def test_tune_keeps_the_recorded_weight_without_a_clear_win_and_writes_nothing(tmp_path: Path) -> None:
    # One misled query of twelve: dense-heavy weights gain there only, by less than two standard errors.
    embedder, folder, index = MarkEmbedder(), mismatch(tmp_path, misled=1), tmp_path / "idx"
    run(["eval", str(folder), "--split", "train", "--index", str(index), "--json"], embedder)
    before = snapshot(index)
    result = run(["eval", str(folder), "--split", "train", "--index", str(index), "--tune"], embedder)
    assert result.exit_code == 0, result.output
    assert "kept: the best, alpha 0.7" in result.stdout and "less than 2 standard errors" in result.stdout
    assert "nothing written" in result.stdout and "<- recorded" in result.stdout and "<- chosen" not in result.stdout
    assert snapshot(index) == before


def test_tune_refuses_too_few_judged_queries_before_building(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder, index = beir(tmp_path), tmp_path / "idx"
    result = run(["eval", str(folder), "--index", str(index), "--tune"], fake)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "--tune needs at least 10 judged queries with a relevant document, got 2" in result.output
    assert not index.exists() and not fake.calls


def test_tune_counts_only_queries_with_a_relevant_document(tmp_path: Path) -> None:
    embedder, folder, index = MarkEmbedder(), mismatch(tmp_path), tmp_path / "idx"
    rows = (folder / "qrels" / "train.tsv").read_text(encoding="utf-8").splitlines()
    graded = [rows[0]] + [r if i < 3 else r[: r.rindex("\t")] + "\t0" for i, r in enumerate(rows[1:])]
    (folder / "qrels" / "train.tsv").write_text("\n".join(graded) + "\n", encoding="utf-8")
    result = run(["eval", str(folder), "--split", "train", "--index", str(index), "--tune"], embedder)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "--tune needs at least 10 judged queries with a relevant document, got 3" in result.output
    assert not index.exists()


def test_what_tune_measures_is_what_eval_measures_before_and_after(tmp_path: Path) -> None:
    # Half the queries misled: no weighting scores 1, so a fusion that differed from search's would show.
    embedder, folder, index = MarkEmbedder(), mismatch(tmp_path, misled=6), tmp_path / "idx"
    out = _tune(folder, index, embedder)
    rows = {row["name"]: row["ndcg@10"] for row in out["tune"]["candidates"]}
    assert len(set(rows.values())) > 2 and 0.0 < out["hybrid"]["ndcg@10"] < 1.0
    assert rows[out["tune"]["recorded"]] == pytest.approx(out["hybrid"]["ndcg@10"], abs=1e-4)
    for fusion in ("fixed", "adaptive"):  # what --fusion asks for on a tuned index
        args = ["eval", str(folder), "--split", "train", "--index", str(index), "--json", "--mode", "hybrid"]
        asked = json.loads(run([*args, "--fusion", fusion], embedder).stdout)["hybrid"]
        assert asked["fusion"]["method"] == fusion
        assert asked["ndcg@10"] == pytest.approx(rows["alpha 0.5" if fusion == "fixed" else "adaptive"], abs=0.2)
    after = json.loads(run(["eval", str(folder), "--split", "train", "--index", str(index), "--json"], embedder).stdout)
    assert after["hybrid"]["ndcg@10"] == pytest.approx(rows[out["tune"]["chosen"]], abs=1e-4)


def test_tune_table_marks_the_choice_and_names_the_new_version(tmp_path: Path) -> None:
    embedder, folder, index = MarkEmbedder(), mismatch(tmp_path), tmp_path / "idx"
    result = run(["eval", str(folder), "--split", "train", "--index", str(index), "--tune"], embedder)
    assert result.exit_code == 0, result.output
    assert "<- chosen" in result.stdout and "<- recorded" in result.stdout
    assert f"recorded in {current_version(index).name}" in result.stdout
    assert "beats the recorded adaptive by" in result.stdout


def test_a_second_tune_keeps_its_own_weight(tmp_path: Path) -> None:
    embedder, folder, index = MarkEmbedder(), mismatch(tmp_path), tmp_path / "idx"
    first = _tune(folder, index, embedder)["tune"]
    version = current_version(index).name
    second = _tune(folder, index, embedder)["tune"]
    assert second["recorded"] == first["chosen"] == second["chosen"] and second["version"] == ""
    assert current_version(index).name == version


def _tuned(tmp_path: Path) -> tuple[MarkEmbedder, Path, Path, dict]:
    embedder, folder, index = MarkEmbedder(), mismatch(tmp_path), tmp_path / "idx"
    _tune(folder, index, embedder)
    tuned = _manifest(index)["fusion"]
    assert tuned["method"] == "tuned"
    return embedder, folder, index, tuned


def _rebuilt(index: Path, sources: list[str], embedder: FakeEmbedder, **options: object) -> dict:
    """Build again and return the new version's fusion entry (a new version must have been published)."""
    before = current_version(index).name
    build_index(sources, index, BuildOptions(progress=False, near=False, **options), embedder=embedder)
    assert current_version(index).name != before
    return _manifest(index)["fusion"]


def test_a_rewrite_keeps_a_tuned_weight_while_encoder_reading_and_sources_stay(tmp_path: Path) -> None:
    embedder, folder, index, tuned = _tuned(tmp_path)
    corpus = [str(folder / "corpus.jsonl")]
    assert _rebuilt(index, corpus, embedder, rewrite=True) == tuned
    # Another model or reading reads the collection differently: the weight no longer describes it.
    assert _rebuilt(index, corpus, MarkEmbedder(fingerprint="mark0002"), full=True) == fusion_entry()
    embedder, folder, index, tuned = _tuned(tmp_path / "again")
    assert _rebuilt(index, [str(folder / "corpus.jsonl")], embedder, reading="windows") == fusion_entry()


def test_arrivals_keep_a_tuned_weight_and_other_sources_make_it_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers import OPTS, abstracts, write

    monkeypatch.setenv("SEMSEARCH_MAP", "off")
    embedder, papers, index = MarkEmbedder(), tmp_path / "papers", tmp_path / "idx"
    papers.mkdir()
    write(papers / "a.jsonl", abstracts(1, 120))
    build_index([str(papers)], index, OPTS, embedder=embedder)
    tuned = tuned_entry(0.8, {"split": "train", "queries": 40})
    record_fusion(index, tuned, expected=current_version(index).name)
    # Papers arriving under the same source argument: a segment is appended and the weight stays.
    write(papers / "b.jsonl", abstracts(2, 10))
    summary = build_index([str(papers)], index, OPTS, embedder=embedder)
    assert summary.segments == 1 and _manifest(index)["fusion"] == tuned
    # Another source argument is another collection: the default replaces the weight, appended as it is.
    extra = write(tmp_path / "more.jsonl", abstracts(3, 5))
    summary = build_index([str(papers), str(extra)], index, OPTS, embedder=embedder)
    assert summary.segments == 2 and _manifest(index)["fusion"] == fusion_entry()
    # A removal keeps what is recorded.
    record_fusion(index, tuned, expected=current_version(index).name)
    removed = run(["remove", "--source", str(papers / "b.jsonl"), "--index", str(index)], embedder)
    assert removed.exit_code == 0, removed.output
    assert _manifest(index)["fusion"] == tuned


def test_recording_refuses_when_the_index_changed_since_it_was_measured(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder, index = beir(tmp_path), tmp_path / "idx"
    run(["eval", str(folder), "--index", str(index), "--json"], fake)
    before = snapshot(index)
    with pytest.raises(SemsearchError, match="changed while its fusion was measured"):
        record_fusion(index, tuned_entry(0.9, {}), expected="v-000000-19700101T000000")
    assert snapshot(index) == before
    published = record_fusion(index, tuned_entry(0.9, {}), expected=current_version(index).name)
    assert current_version(index) == published and _manifest(index)["fusion"]["alpha"] == 0.9
    with Index.open(index, embedder=fake) as opened:  # every data file came along: the index still answers
        assert opened.search("oversmoothing in deep graph networks", 1)[0].fusion["method"] == "tuned"
    verified = run(["verify", "--index", str(index)], fake)
    assert verified.exit_code == 0 and "is sound" in verified.output, verified.output


@pytest.mark.parametrize(
    "entry",
    [{"method": "tuned"}, {"method": "tuned", "alpha": 1.5}, {"method": "tuned", "alpha": "most"}],
)
def test_an_unreadable_tuned_entry_falls_back_to_alpha_one_half(entry: dict) -> None:
    policy = FusionPolicy.from_entry(entry)
    assert policy.method == "fixed" and policy.alpha == 0.5 and "unreadable fusion entry" in policy.note
