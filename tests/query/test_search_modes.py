"""Hybrid / dense / lexical modes, filters (k after filtering), MMR, why-it-matched, and `semsearch eval`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.records import Hit, Provenance
from semsearch.faces.render import hits_table
from tests.helpers import PAPERS, REPO, FakeEmbedder, assert_one_line_error, beir, jsonl, run


@pytest.fixture
def catalogue(tmp_path: Path) -> Path:
    """Ten papers with venue/year metadata; only the two 2021 papers mention graphs."""
    rows = [
        {"id": f"p{i}", "title": f"Paper {i}", "abstract": text, "venue": "neurips", "year": 2025}
        for i, text in enumerate(PAPERS.values())
    ]
    rows += [
        {
            "id": "old1",
            "title": "Old graphs",
            "abstract": "Spectral graph partitioning of sparse matrices for solvers.",
            "venue": "icml",
            "year": 2021,
        },
        {
            "id": "old2",
            "title": "Old kernels",
            "abstract": "Graph kernels compare molecules by counting random walks.",
            "venue": "icml",
            "year": 2021,
        },
        {
            "id": "new1",
            "title": "Privacy audit",
            "abstract": "Auditing differential privacy of federated training "
            "with membership inference attacks on client updates.",
            "venue": "iclr",
            "year": 2024,
        },
        {
            "id": "new2",
            "title": "Privacy audit again",
            "abstract": "updates client on attacks inference membership with "
            "training federated of privacy differential Auditing.",
            "venue": "iclr",
            "year": 2024,
        },
        {
            "id": "new3",
            "title": "Secure aggregation",
            "abstract": "Secure aggregation hides individual client "
            "gradients in federated learning using cryptographic masking.",
            "venue": "iclr",
            "year": 2024,
        },
    ]
    return jsonl(tmp_path / "catalogue.jsonl", rows)


@pytest.fixture
def index(tmp_path: Path, catalogue: Path, fake: FakeEmbedder) -> Index:
    build_index([str(catalogue)], tmp_path / "idx", BuildOptions(progress=False), embedder=fake)
    idx = Index.open(tmp_path / "idx", embedder=fake)
    yield idx
    idx.close()


def test_modes_and_their_scores(index: Index) -> None:
    dense = index.search("graph neural networks oversmoothing", 3, mode="dense")
    lexical = index.search("graph neural networks oversmoothing", 3, mode="lexical")
    hybrid = index.search("graph neural networks oversmoothing", 3)
    for hits, mode in ((dense, "dense"), (lexical, "lexical"), (hybrid, "hybrid")):
        assert hits[0].text == PAPERS["graph"], mode
        assert all(h.mode == mode for h in hits)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert dense[0].score == pytest.approx(dense[0].scores["dense"])
    assert -1.0 <= dense[0].score <= 1.0001
    assert lexical[0].score == pytest.approx(lexical[0].scores["lexical"]) and lexical[0].score > 1.0
    assert set(hybrid[0].scores) == {"dense", "lexical"}


@pytest.mark.parametrize(
    "query", ["graph neural networks oversmoothing", "privacy", "client updates federated training", "zzz quark"]
)
def test_hybrid_is_the_dict_fusion_of_both_candidate_lists(index: Index, query: str) -> None:
    """The numpy path (LexicalIndex.top, AnnSearcher.top, convex_arrays) ranks as the dict fusion of its lists."""
    from semsearch.query.fusion import DEFAULT_ALPHA, DEFAULT_DEPTH, DEFAULT_NORM
    from semsearch.store.layout import doc_num
    from tests.helpers import dict_convex

    vector = index.encode_query(query)
    for where, exclude in (
        ((), frozenset()),
        (("year>=2024",), frozenset()),
        ((), frozenset([doc_num(index.search(query, 1)[0].id)])),
    ):
        allowed = index.allowed_rows(where)
        ranking = index._retrieval().rank(
            query, vector, "hybrid", allowed, 5, exclude, policy=index.fusion.with_method("fixed")
        )
        expected = dict_convex(ranking.dense, ranking.lexical, DEFAULT_ALPHA, DEFAULT_NORM)[:5]
        assert ranking.ranked == expected
        # Each side is its own brute-force top list: every allowed, non-excluded candidate, sorted.
        lex = index.lexical
        scores, matched = lex.scores(query)
        rows = [r for r in range(len(lex)) if matched[r] and scores[r] > 0]
        ids = [int(lex.ids[r]) for r in sorted(rows, key=lambda r: (-scores[r], int(lex.ids[r])))]
        ids = [d for d in ids if (allowed is None or d in set(allowed.tolist())) and d not in exclude]
        assert list(ranking.lexical) == ids[:DEFAULT_DEPTH]  # the whole top list, not a prefix of it
        assert not exclude & set(ranking.dense)
        if allowed is not None:
            assert set(ranking.dense) <= set(allowed.tolist())


def test_lexical_mode_returns_only_matching_documents(index: Index) -> None:
    hits = index.search("spectral partitioning", 10, mode="lexical")
    assert [h.external_ids for h in hits] == [["old1"]]


def test_explanations(index: Index) -> None:
    hit = index.search("membership inference attacks", 1, mode="lexical")[0]
    assert hit.matched_terms == ["membership", "inference", "attacks"]
    assert hit.highlights and "membership" in hit.highlights[0].lower()
    data = hit.to_dict()
    assert data["highlights"] == hit.highlights and data["matched_terms"] == hit.matched_terms
    assert not index.search("membership inference attacks", 1, explain=False)[0].highlights


def test_table_highlights_matched_words() -> None:
    hit = Hit(
        1,
        0.9,
        "abc",
        None,
        "label",
        "We study graph networks. Nothing else.",
        [Provenance("f", "line", 1)],
        highlights=["We study graph networks."],
        matched_terms=["graph"],
    )
    out = hits_table([hit], color=True)
    assert "\x1b[1;33mgraph\x1b[0m" in out
    assert "\x1b[" not in hits_table([hit], color=False)


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_filter_returns_k_when_k_documents_match(index: Index, mode: str) -> None:
    # The 2021 papers are far down this query's ranking (they share only "graph" with it): a filter applied
    # after retrieval would return fewer than k.
    query = "federated learning with differential privacy for graph data"
    assert {h.external_ids[0] for h in index.search(query, 3, mode=mode)}.isdisjoint({"old1", "old2"})
    hits = index.search(query, 2, mode=mode, where=["year<=2021"])
    assert sorted(h.external_ids[0] for h in hits) == ["old1", "old2"]


def test_filter_operators(index: Index) -> None:
    def ids(*where: str) -> set[str]:
        return {h.external_ids[0] for h in index.search("learning", 20, mode="dense", where=where)}

    assert ids("venue=ICLR") == {"new1", "new2", "new3"}
    assert ids("venue!=neurips", "year>2021") == {"new1", "new2", "new3"}
    assert ids("title~old") == {"old1", "old2"}
    assert ids("year=2021", "title~kernels") == {"old2"}
    assert ids("file=*catalogue.jsonl") == ids("year>=0")
    assert len(ids("file=*catalogue.jsonl")) == 10
    assert ids("venue=nowhere") == set()


def test_filter_answers_are_remembered_per_index(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    import semsearch.query.where as where_module

    first = {h.id for h in index.search("learning", 20, mode="dense", where=["venue=ICLR"])}
    reads = []
    real = index._filters().evaluate  # a filter is computed (from the column index, or by a scan in older versions)
    monkeypatch.setattr(index._filters(), "evaluate", lambda *a, **k: reads.append(1) or real(*a, **k))
    assert {h.id for h in index.search("kernels", 20, mode="hybrid", where=["venue=ICLR"])} <= first
    assert reads == []  # the same filter again: not computed again
    index.search("learning", 5, where=["year>2021"])
    assert reads == [1]
    monkeypatch.setattr(where_module, "FILTER_CACHE", 1)
    index.search("learning", 5, where=["year=2021"])  # evicts the older filters
    index.search("learning", 5, where=["venue=ICLR"])
    assert reads == [1, 1, 1]


def test_min_score(index: Index) -> None:
    hits = index.search("graph neural networks", 10, mode="dense", min_score=0.3)
    assert hits and all(h.score >= 0.3 for h in hits)
    assert len(hits) < len(index.search("graph neural networks", 10, mode="dense"))


def test_diverse_demotes_near_copies(index: Index) -> None:
    # new2 is new1 with its words shuffled: the same bag of words, so the fake encoder gives the same vector.
    plain = index.search("auditing federated privacy membership", 2, mode="dense")
    assert sorted(h.external_ids[0] for h in plain) == ["new1", "new2"]
    diverse = index.search("auditing federated privacy membership", 2, mode="dense", diverse=True)
    assert diverse[0].external_ids[0] in {"new1", "new2"}
    assert diverse[1].external_ids[0] not in {"new1", "new2"}


def test_diverse_output_says_the_order_is_not_by_score(index: Index, tmp_path: Path, fake: FakeEmbedder) -> None:
    plain = index.search("auditing federated privacy membership", 4, mode="dense")
    assert all(h.relevance_rank is None and "order" not in h.to_dict() for h in plain)
    assert not hits_table(plain).startswith("re-ranked")
    diverse = index.search("auditing federated privacy membership", 4, mode="dense", diverse=True)
    rows = [h.to_dict() for h in diverse]
    assert all(r["order"] == "diverse" for r in rows)
    # relevance_rank is where each hit stood by score alone: the near-copy new2 (rank 1 or 2) was moved down.
    assert sorted(r["relevance_rank"] for r in rows) != [1, 2, 3, 4] and rows[0]["relevance_rank"] in (1, 2)
    ranks = ", ".join(str(r["relevance_rank"]) for r in rows)
    table = hits_table(diverse)
    assert (
        table.splitlines()[0] == f"re-ranked for diversity (--diverse): not in score order; ranks by relevance: {ranks}"
    )
    assert table.count("re-ranked for diversity") == 1


def test_related_with_filter(index: Index) -> None:
    doc = index.search("secure aggregation", 1, mode="lexical")[0]
    hits = index.related(doc.id, 3, where=["venue=neurips"])
    assert len(hits) == 3 and all(h.metadata["venue"] == "neurips" for h in hits)


def test_cli_query_options(tmp_path: Path, catalogue: Path, fake: FakeEmbedder) -> None:
    idx = str(tmp_path / "cli")
    assert run(["index", str(catalogue), "--index", idx, "-q"], fake).exit_code == 0
    result = run(["query", "graph", "--index", idx, "--mode", "lexical", "--where", "year<2022", "--json"], fake)
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    assert {h["external_ids"][0] for h in hits} == {"old1", "old2"}
    assert hits[0]["mode"] == "lexical" and "matched_terms" in hits[0] and "highlights" in hits[0]
    assert_one_line_error(run(["query", "graph", "--index", idx, "--where", "year"], fake), "malformed --where")
    assert_one_line_error(run(["query", "graph", "--index", idx, "--where", "=3"], fake), "malformed --where")
    result = run(["related", hits[0]["id"], "--index", idx, "--diverse", "--min-score", "-1", "--json"], fake)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 9


def test_eval_command(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    index = tmp_path / "evalidx"
    result = run(["eval", str(folder), "--split", "test", "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert set(scores) == {"dense", "lexical", "hybrid", "queries", "skipped_documents"} and scores["queries"] == 2
    assert scores["skipped_documents"] == 0
    for mode in ("dense", "lexical", "hybrid"):
        assert set(scores[mode]) >= {"ndcg@10", "recall@100", "mrr@10"}
        # Both queries name their judged paper's words: every mode ranks it first.
        assert scores[mode]["ndcg@10"] == pytest.approx(1.0)
        assert scores[mode]["mrr@10"] == pytest.approx(1.0)
    # A second run reuses the index: nothing is encoded again.
    calls = len(fake.calls)
    table = run(["eval", str(folder), "--index", str(index), "--mode", "lexical"], fake)
    assert table.exit_code == 0 and "nDCG@10" in table.output and "lexical" in table.output
    assert len(fake.calls) == calls


def test_eval_bad_input(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    assert_one_line_error(run(["eval", str(folder), "--split", "dev"], fake), "dev.tsv")
    assert_one_line_error(run(["eval"], fake), "BEIR folder")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq9\td1\t1\n")
    assert_one_line_error(run(["eval", str(folder), "--index", str(tmp_path / "i")], fake), "judgments")


def test_eval_skips_and_counts_empty_documents_and_reports_each_query(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    rows = [json.loads(line) for line in (folder / "corpus.jsonl").read_text().splitlines()]
    # Published collections hold entries with neither text nor title; a title-only one is a document.
    rows += [{"_id": "empty1", "title": "", "text": ""}, {"_id": "empty2", "title": " ", "text": "  "}]
    rows += [{"_id": "titled", "title": "Curious robots explore sparse reward mazes", "text": ""}]
    jsonl(folder / "corpus.jsonl", rows)
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\nq2\td2\t2\nq2\ttitled\t1\n")
    index = tmp_path / "evalidx"
    result = run(["eval", str(folder), "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    assert (scores["queries"], scores["skipped_documents"]) == (2, 2)
    with Index.open(index, embedder=fake) as idx:
        assert (idx.info().documents, idx.info().title_only) == (len(rows) - 2, 1)
    for mode in ("dense", "lexical", "hybrid"):
        per = scores[mode]["per_query"]
        assert set(per) == {"q1", "q2"} and set(per["q1"]) == {"ndcg@10", "recall@100", "mrr@10"}
        # The means are the means of the per-query scores.
        for metric in ("ndcg@10", "recall@100", "mrr@10"):
            assert scores[mode][metric] == pytest.approx(sum(p[metric] for p in per.values()) / 2, abs=1e-6)
    assert scores["lexical"]["per_query"]["q2"]["recall@100"] == 1.0  # the title-only paper is found
    # Reused, the index still reports what was skipped; the table says it too.
    table = run(["eval", str(folder), "--index", str(index), "--mode", "lexical"], fake)
    assert table.exit_code == 0 and "2 corpus entries skipped" in table.output, table.output
    # Two modes of one run, paired query by query.
    saved = tmp_path / "eval.json"
    saved.write_text(result.stdout)
    bench = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_quality", "--compare", f"{saved}:lexical", f"{saved}:dense"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert bench.returncode == 0, bench.stderr
    [pair] = json.loads(bench.stdout)["comparisons"]
    assert pair["queries"] == 2
    assert pair["difference"] == pytest.approx(scores["dense"]["ndcg@10"] - scores["lexical"]["ndcg@10"], abs=1e-5)
