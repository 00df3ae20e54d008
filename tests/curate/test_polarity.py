"""Tags with a polarity: positive tags are interests, negative ones counter-examples, for every consumer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from click.testing import CliRunner, Result

from semsearch import Index, build_index
from semsearch.curate.recommend import recommend
from semsearch.curate.tags import TAGS_FILE, TagStore
from semsearch.curate.whats_new import Interest, Profile, interest_scores, profile_of
from semsearch.faces.cli import cli
from semsearch.store.layout import doc_num
from semsearch.write.build import BuildOptions
from tests.helpers import SEEDS, FakeEmbedder


@pytest.fixture
def index(seeded_index_copy: Path) -> Path:
    return seeded_index_copy


def run(index: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, [*args, "--index", str(index)], obj={"embedder": FakeEmbedder()})


def ids(index: Path, n: int) -> list[str]:
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        return sorted(d.id for d in idx.store.iter_documents())[:n]


def test_defaults_create_negative_and_old_files(index: Path) -> None:
    a, b, c = ids(index, 3)
    # A file written before polarities (no "polarity" key) reads with the defaults.
    old = {
        "format": "semsearch-tags",
        "format_version": 1,
        "tags": {
            "liked": [{"id": a, "label": "a"}],
            "not-for-me": [{"id": b, "label": "b"}],
            "reading": [{"id": c, "label": "c"}],
        },
    }
    (index / TAGS_FILE).write_text(json.dumps(old), encoding="utf-8")
    store = TagStore(index)
    assert store.polarities() == {"liked": "positive", "not-for-me": "negative", "reading": "positive"}
    assert store.positive_names() == ["liked", "reading"] and store.negative_names() == ["not-for-me"]
    # tag create --negative: stored in the same file, kept while the tag has no papers yet.
    result = run(index, "tag", "create", "boring", "--negative")
    assert result.exit_code == 0 and "boring: negative" in result.output
    data = json.loads((index / TAGS_FILE).read_text(encoding="utf-8"))
    assert data["format_version"] == 1 and data["polarity"] == {"boring": "negative"} and data["tags"]["boring"] == []
    listed = json.loads(run(index, "tag", "list", "--json").output)
    assert listed["boring"] == {"papers": 0, "dangling": 0, "polarity": "negative"}
    assert run(index, "tag", "add", "boring", a).exit_code == 0
    assert TagStore(index).polarity("boring") == "negative"
    assert "boring (negative: not for me): 1 paper\n" in run(index, "tag", "list").output
    assert "(unchanged)" in run(index, "tag", "create", "boring", "--negative").output
    assert run(index, "tag", "create", "reading", "--negative").exit_code == 0
    assert TagStore(index).negative_names() == ["boring", "not-for-me", "reading"]
    assert run(index, "tag", "create", "not-for-me", "--positive").exit_code == 0
    assert TagStore(index).polarity("not-for-me") == "positive"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["tag", "create", "bad name", "--negative"], "invalid tag name"),
        (["recommend", "--like", "not-for-me"], "is a negative tag"),
    ],
)
def test_bad_input_is_one_line(index: Path, args: list[str], fragment: str) -> None:
    a = ids(index, 1)[0]
    assert run(index, "tag", "add", "not-for-me", a).exit_code == 0
    before = (index / TAGS_FILE).read_bytes()
    result = run(index, *args)
    assert result.exit_code == 2 and fragment in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert (index / TAGS_FILE).read_bytes() == before


def test_tag_create_without_an_index_is_one_line(tmp_path: Path) -> None:
    result = run(tmp_path / "nothing", "tag", "create", "boring", "--negative")
    assert result.exit_code == 2 and "Traceback" not in result.output


def test_recommend_counts_negative_tags_against(index: Path) -> None:
    liked, disliked = ids(index, 2)
    assert run(index, "tag", "add", "liked", liked).exit_code == 0
    plain = json.loads(run(index, "recommend", "--like", "liked", "-k", "50", "--json").output)
    assert run(index, "tag", "create", "boring", "--negative").exit_code == 0
    assert run(index, "tag", "add", "boring", disliked).exit_code == 0
    auto = json.loads(run(index, "recommend", "--like", "liked", "-k", "50", "--json").output)
    explicit = json.loads(run(index, "recommend", "--like", "liked", "--not", disliked, "-k", "50", "--json").output)
    assert [(r["id"], r["score"]) for r in auto] == [(r["id"], r["score"]) for r in explicit]
    assert [r["score"] for r in auto] != [r["score"] for r in plain]  # the dislike changed the scores
    assert disliked not in {r["id"] for r in auto}


def test_watches_count_negative_tags_against(index: Path) -> None:
    disliked = ids(index, 1)[0]
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        query = " ".join(idx.get(disliked).text.split()[:12])
        watch = [Interest("watch", "w", query=query)]
        before = interest_scores(idx, Profile(watch))
        after = interest_scores(idx, Profile(watch, negatives=[idx.get(disliked)]))
        row = int(idx.vectors.rows_of([doc_num(disliked)])[0])
    assert after[0, row] < before[0, row] - 0.5
    assert np.all(after <= before + 1e-9)  # a dislike only ever lowers a watch's scores


def test_reader_has_positive_tags_as_interests_only(index: Path) -> None:
    a, b = ids(index, 2)
    run(index, "tag", "add", "liked", a)
    run(index, "tag", "add", "not-for-me", b)
    run(index, "watch", "add", "fed", "federated privacy")
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        profile = profile_of(idx)
    assert [i.key for i in profile.interests] == ["tag:liked", "watch:fed"]
    assert [d.id for d in profile.negatives] == [b] and profile.negative_tags == ["not-for-me"]


def test_for_you_and_api_new_use_negative_tags(index: Path) -> None:
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    liked, disliked = ids(index, 2)
    run(index, "tag", "add", "liked", liked)
    run(index, "tag", "create", "boring", "--negative")
    run(index, "tag", "add", "boring", disliked)
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        lib = [r.hit.id for r in recommend(idx, ["liked"], 10, not_like=[disliked])]
    with TestClient(create_app(index, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        # The page's "For you" asks like=liked (and not=not-for-me when that tag exists).
        got = client.get("/api/recommend", params={"like": "liked", "k": 10}).json()
        assert got["not"] == ["boring"] and [h["id"] for h in got["hits"]] == lib
        refused = client.get("/api/recommend", params={"like": "boring"})
        assert refused.status_code == 422 and "negative tag" in refused.json()["error"]
        tags = client.get("/api/tags").json()["tags"]
        assert tags["boring"]["polarity"] == "negative" and tags["liked"]["polarity"] == "positive"
        new = client.get("/api/new", params={"since": "0", "k": 100}).json()["hits"]
        assert new and all("tag:boring" not in h["for"] and "tag:boring" not in h["fit_by"] for h in new)


def test_mcp_tools_use_negative_tags(index: Path) -> None:
    pytest.importorskip("mcp", reason="the 'mcp' extra is not installed")
    from mcp import Client

    from semsearch.faces.mcp_tools import create_server
    from semsearch.query.live import LiveIndex

    liked, disliked = ids(index, 2)
    run(index, "tag", "add", "liked", liked)
    run(index, "tag", "add", "not-for-me", disliked)
    run(index, "watch", "add", "fed", "federated privacy")

    async def go() -> None:
        live = LiveIndex(index, embedder=FakeEmbedder())
        try:
            async with Client(create_server(live, budget=8000)) as client:
                bad = await client.call_tool("recommend", {"like": ["not-for-me"]})
                assert bad.is_error and "negative tag" in bad.content[0].text
                good: Any = (await client.call_tool("recommend", {"like": ["liked"], "k": 5})).structured_content
                assert disliked not in {c["id"] for c in good["items"]}
                new: Any = (await client.call_tool("whats_new", {"since": "0", "k": 20})).structured_content
                assert new["items"] and all("not-for-me" not in (c.get("why") or "") for c in new["items"])
        finally:
            live.close()

    anyio.run(go)


def test_new_when_every_paper_is_liked(tmp_path: Path) -> None:
    """A tag holding the whole index gives no fit (nothing to tell apart) instead of an error."""
    src = tmp_path / "one.txt"
    src.write_text("One\n\nA single abstract about federated learning with differential privacy guarantees.\n")
    index = tmp_path / "idx"
    build_index([str(src)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    only = ids(index, 1)[0]
    assert run(index, "tag", "add", "liked", only).exit_code == 0
    result = run(index, "new", "--json")
    assert result.exit_code == 0, result.output
    assert [r["id"] for r in json.loads(result.output)] == [only]


ARRIVALS = (
    "Arrivals\n\n"
    "Diffusion-based generative models for image generation struggle with style consistency; we propose a diffusion "
    "guidance for image generation that keeps style across diffusion steps and image generation tasks.\n\n"
    "Differential privacy for federated learning: clients train a shared model with differential privacy guarantees "
    "on gradient updates, and we bound privacy leakage in federated training.\n\n"
    "A study of graph neural networks for molecule property prediction with message passing and oversmoothing.\n"
)


def test_new_and_digest_with_negative_tags_only(tmp_path: Path) -> None:
    """No interest at all, one dislike: what resembles the disliked paper still goes last (in new and digest)."""
    import shutil

    sources = Path(shutil.copytree(SEEDS, tmp_path / "seeds"))
    index = tmp_path / "idx"
    build_index([str(sources)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        disliked = idx.search("diffusion image generation style", 1, mode="lexical")[0].id
    assert run(index, "digest", "--format", "json").exit_code == 0  # the bookmark: everything so far reported
    (sources / "arrivals.txt").write_text(ARRIVALS, encoding="utf-8")
    assert run(index, "index").exit_code == 0
    assert run(index, "tag", "add", "not-for-me", disliked).exit_code == 0
    new = json.loads(run(index, "new", "--json").output)
    assert len(new) == 3 and new[-1]["label"].startswith("Diffusion-based") and new[-1]["fit"] < 0
    assert all(r["fit"] == 0 for r in new[:2])  # nothing like the dislike: no penalty, newest first, then id
    digest = json.loads(run(index, "digest", "--format", "json").output)
    assert digest["sections"] == [] and digest["also_new_count"] == 3
    assert digest["also_new"][-1]["title"].startswith("Diffusion-based")
