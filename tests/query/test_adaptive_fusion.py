"""Adaptive hybrid fusion end to end: what a build records, what old indexes keep, and what --json explains."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import QueryError
from semsearch.core.options import fusion_entry
from semsearch.query.fusion import convex_arrays
from semsearch.store.layout import MANIFEST, current_version
from tests.helpers import PAPERS, FakeEmbedder, beir, run

QUERY = "graph neural networks oversmoothing"


def _corpus(tmp_path: Path) -> Path:
    path = tmp_path / "papers.jsonl"
    rows = [{"id": k, "title": f"Paper {k}", "abstract": t} for k, t in PAPERS.items()]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def built(tmp_path: Path, fake: FakeEmbedder) -> Path:
    index = tmp_path / "idx"
    build_index([str(_corpus(tmp_path))], index, BuildOptions(progress=False), embedder=fake)
    return index


def _set_fusion(index: Path, entry: dict | None) -> None:
    """Rewrite the live version's "fusion" entry (None: none, as in a version built before it existed)."""
    path = current_version(index) / MANIFEST
    data = json.loads(path.read_text(encoding="utf-8"))
    data.pop("fusion")
    if entry is not None:
        data["fusion"] = entry
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _forget_fusion(index: Path) -> None:
    _set_fusion(index, None)


def test_a_build_records_its_fusion_and_a_refresh_keeps_what_was_recorded(
    tmp_path: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dataclasses import replace

    from tests.helpers import OPTS, abstracts, write

    monkeypatch.setenv("SEMSEARCH_MAP", "off")
    a, b = write(tmp_path / "a.jsonl", abstracts(1, 120)), write(tmp_path / "b.jsonl", abstracts(2, 10))
    index = tmp_path / "idx"
    build_index([str(a)], index, OPTS, embedder=fake)
    manifest = json.loads((current_version(index) / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["fusion"] == fusion_entry() == fusion_entry("adaptive")  # what a new build records
    # An index built before adaptive fusion: a refresh that appends a segment keeps its (absent) weighting...
    _forget_fusion(index)
    assert build_index([str(a), str(b)], index, OPTS, embedder=fake).segments == 1
    assert "fusion" not in json.loads((current_version(index) / MANIFEST).read_text(encoding="utf-8"))
    # ... and a rewrite is a new build: it records today's.
    build_index([str(a), str(b)], index, replace(OPTS, rewrite=True), embedder=fake)
    with Index.open(index, embedder=fake) as idx:
        assert idx.manifest.fusion == fusion_entry()


def test_an_index_built_before_adaptive_fusion_fuses_with_alpha_one_half(built: Path, fake: FakeEmbedder) -> None:
    from tests.helpers import dict_convex

    _forget_fusion(built)
    with Index.open(built, embedder=fake) as index:
        assert index.fusion.method == "fixed"
        hits = index.search(QUERY, 3)
        assert hits[0].fusion is not None and hits[0].fusion["alpha"] == 0.5 and hits[0].fusion["method"] == "fixed"
        ranking = index._retrieval().rank(QUERY, index.encode_query(QUERY), "hybrid", None, 5)
        assert ranking.ranked == dict_convex(ranking.dense, ranking.lexical, 0.5, "zscore")[:5]


def test_adaptive_hybrid_ranks_as_the_convex_fusion_with_the_alpha_it_reports(built: Path, fake: FakeEmbedder) -> None:
    from tests.helpers import dict_convex

    _set_fusion(built, fusion_entry("adaptive"))  # an index that records adaptive fusion uses it unasked
    with Index.open(built, embedder=fake) as index:
        assert index.fusion.method == "adaptive"
        ranking = index._retrieval().rank(QUERY, index.encode_query(QUERY), "hybrid", None, 5)
        assert ranking.fusion is not None and ranking.fusion.method == "adaptive"
        # The small index's lexical list is shorter than the depth: normalized as the depth (convex_arrays).
        assert 0 < len(ranking.lexical) < ranking.fusion.lexical_depth == len(index)
        arrays = [np.array(list(side), dtype=np.int64) for side in (ranking.dense, ranking.lexical)]
        scores = [np.array(list(side.values())) for side in (ranking.dense, ranking.lexical)]
        ids, fused = convex_arrays(
            arrays[0], scores[0], arrays[1], scores[1], alpha=ranking.fusion.alpha, limit=5, lexical_depth=len(index)
        )
        assert ranking.ranked == list(zip(ids.tolist(), fused.tolist(), strict=True))
        assert ranking.ranked != dict_convex(ranking.dense, ranking.lexical, ranking.fusion.alpha, "zscore")[:5]
        fixed = index.search(QUERY, 3, fusion="fixed")
        assert {h.fusion["alpha"] for h in fixed if h.fusion} == {0.5}
        with pytest.raises(QueryError, match="unknown fusion 'rrf'"):
            index.search(QUERY, 3, fusion="rrf")


def test_query_json_explains_the_weight_of_a_hybrid_search(built: Path, fake: FakeEmbedder) -> None:
    result = run(["query", QUERY, "--index", str(built), "--json", "--fusion", "adaptive"], fake)
    assert result.exit_code == 0, result.output
    hits = json.loads(result.stdout)
    fusion = hits[0]["fusion"]
    assert set(fusion) == {"alpha", "method", "reason"} and fusion["method"] == "adaptive"
    assert 0.0 <= fusion["alpha"] <= 1.0 and "head z-score dense" in fusion["reason"]
    assert all(h["fusion"] == fusion for h in hits)  # one weight per query
    plain = json.loads(run(["query", QUERY, "--index", str(built), "--json"], fake).stdout)
    assert plain == hits  # a new index records adaptive fusion
    _set_fusion(built, fusion_entry("fixed"))
    recorded = json.loads(run(["query", QUERY, "--index", str(built), "--json"], fake).stdout)
    assert recorded[0]["fusion"] == {"alpha": 0.5, "method": "fixed", "reason": "alpha 0.5: fixed in the manifest"}
    _forget_fusion(built)
    old = json.loads(run(["query", QUERY, "--index", str(built), "--json"], fake).stdout)
    assert old[0]["fusion"]["alpha"] == 0.5 and "before adaptive fusion" in old[0]["fusion"]["reason"]
    fixed = json.loads(run(["query", QUERY, "--index", str(built), "--json", "--fusion", "fixed"], fake).stdout)
    assert [h["id"] for h in fixed] == [h["id"] for h in recorded] == [h["id"] for h in old]
    dense = json.loads(run(["query", QUERY, "--index", str(built), "--json", "--mode", "dense"], fake).stdout)
    assert all("fusion" not in h for h in dense)  # nothing was fused
    bad = run(["query", QUERY, "--index", str(built), "--fusion", "rrf"], fake)
    assert bad.exit_code == 2 and "Invalid value for '--fusion'" in bad.output and "Traceback" not in bad.output


def test_eval_reports_the_fusion_of_its_hybrid_runs(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    index = tmp_path / "evalidx"
    plain = json.loads(run(["eval", str(folder), "--index", str(index), "--json"], fake).stdout)
    assert plain["hybrid"]["fusion"]["method"] == "adaptive"  # what a new index records
    args = ["eval", str(folder), "--index", str(index), "--json", "--fusion", "adaptive"]
    adaptive = json.loads(run(args, fake).stdout)
    assert adaptive["hybrid"]["fusion"]["method"] == "adaptive"
    assert 0.0 <= adaptive["hybrid"]["fusion"]["mean_alpha"] <= 1.0
    fixed = json.loads(run(["eval", str(folder), "--index", str(index), "--json", "--fusion", "fixed"], fake).stdout)
    assert fixed["hybrid"]["fusion"] == {"method": "fixed", "mean_alpha": 0.5}
    assert "fusion" not in fixed["dense"] and "fusion" not in fixed["lexical"]
    bad = run(["eval", str(folder), "--index", str(index), "--fusion", "learned"], fake)
    assert bad.exit_code == 2 and "Invalid value for '--fusion'" in bad.output and "Traceback" not in bad.output
