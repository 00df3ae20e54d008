"""Recommendations: ids, external ids, texts, negatives, filters, --since; library, CLI and API agree."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from semsearch import Index, build_index
from semsearch.curate.recommend import METHODS, recommend
from semsearch.curate.tags import TAGS_FILE, TagStore
from semsearch.write.build import BuildOptions
from tests.helpers import FakeEmbedder, run

TOPICS = {
    "priv": "federated learning differential privacy clients gradient leakage secure aggregation noise budget",
    "vis": "image segmentation convolutional network pixels medical scans boundary tumour encoder decoder",
    "rl": "reinforcement learning agent policy reward exploration robot navigation environment episodes",
}
FILLER = ["we study", "our method improves", "experiments show", "a new approach to", "we propose"]


def paper(topic: str, i: int) -> str:
    words = TOPICS[topic].split()
    # crc32, not hash(): str hashes change with every process (PYTHONHASHSEED), and the corpus must not.
    rng = np.random.default_rng(zlib.crc32(f"{topic}-{i}".encode()))
    picked = " ".join(rng.choice(words, size=9, replace=True))
    return f"{FILLER[i % len(FILLER)]} {picked} {words[i % len(words)]} variant {i}."


def write_corpus(path: Path, topics: dict[str, range], year: int = 2024) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for topic, numbers in topics.items():
            for i in numbers:
                row = {"_id": f"{topic}-{i}", "text": paper(topic, i), "metadata": {"year": year + i % 2}}
                fh.write(json.dumps(row) + "\n")
    return path


@pytest.fixture
def index(tmp_path: Path, fake: FakeEmbedder) -> Path:
    src = write_corpus(tmp_path / "src" / "a.jsonl", {t: range(8) for t in TOPICS})
    build_index([str(src)], tmp_path / "idx", BuildOptions(progress=False), embedder=fake)
    return tmp_path / "idx"


def topic_of(hit_ids: list[str], idx: Index) -> list[str]:
    return [idx.get(h).external_ids[0].split("-")[0] for h in hit_ids]


@pytest.mark.parametrize("method", METHODS)
def test_every_method_finds_the_liked_topic_by_external_id(index: Path, fake: FakeEmbedder, method: str) -> None:
    with Index.open(index, embedder=fake) as idx:
        recs = recommend(idx, ["priv-0", "priv-1", "priv-2"], 4, method=method)
        liked = {idx.get(f"priv-{i}").id for i in range(3)}
        ids = [r.hit.id for r in recs]
        assert not liked & set(ids)  # the liked papers themselves are never recommended
        assert topic_of(ids, idx).count("priv") >= 3, (method, topic_of(ids, idx))
        for r in recs:
            assert r.because.id in liked
            # The explanation is the liked paper nearest to the hit, with its cosine.
            cos = {p: float(idx.vectors.get_one(int(p, 16)) @ idx.vectors.get_one(int(r.hit.id, 16))) for p in liked}
            assert r.because.cosine == pytest.approx(max(cos.values()), abs=1e-5)
            assert cos[r.because.id] == pytest.approx(max(cos.values()), abs=1e-5)


def test_document_ids_prefixes_and_tags_work_as_likes(index: Path, fake: FakeEmbedder) -> None:
    with Index.open(index, embedder=fake) as idx:
        full = idx.get("rl-0").id
        TagStore(index).add("robots", [idx.get("rl-1"), idx.get("rl-2")])
        by_tag = recommend(idx, ["robots"], 3)
        by_ids = recommend(idx, [full, idx.get("rl-3").id[:10]], 3)
    assert all(r.hit.external_ids[0].startswith("rl-") for r in by_tag)
    assert all(r.hit.external_ids[0].startswith("rl-") for r in by_ids)
    assert {r.because.id for r in by_tag} <= {TagStore(index).entries("robots")[i].id for i in (0, 1)}


def test_tagged_papers_are_left_out_unless_asked(index: Path, fake: FakeEmbedder) -> None:
    with Index.open(index, embedder=fake) as idx:
        TagStore(index).add("seen", [idx.get(f"priv-{i}") for i in range(3, 6)])
        seen = TagStore(index).tagged_ids()
        plain = recommend(idx, ["priv-0"], 8)
        every = recommend(idx, ["priv-0"], 8, include_tagged=True)
        liked = idx.get("priv-0").id
    assert not seen & {r.hit.id for r in plain}
    assert seen <= {r.hit.id for r in every}
    assert liked not in {r.hit.id for r in every}


def test_like_text_and_a_copy_of_it_is_not_recommended(index: Path, fake: FakeEmbedder) -> None:
    with Index.open(index, embedder=fake) as idx:
        outside = recommend(idx, like_texts=[TOPICS["vis"]], k=4)
        assert all(r.hit.external_ids[0].startswith("vis-") for r in outside)
        assert outside[0].because.id is None
        own = paper("vis", 3)
        copy = recommend(idx, like_texts=[own], k=8, include_tagged=True)
        assert idx.get("vis-3").id not in {r.hit.id for r in copy}


def test_negatives_push_their_topic_down(index: Path, fake: FakeEmbedder) -> None:
    with Index.open(index, embedder=fake) as idx:
        liked = ["priv-0", "vis-0"]
        plain = recommend(idx, liked, 6)
        steered = recommend(idx, liked, 6, not_like=["vis-1", "vis-2"])
        vis_plain = topic_of([r.hit.id for r in plain], idx).count("vis")
        vis_steered = topic_of([r.hit.id for r in steered], idx).count("vis")
        assert {idx.get("vis-1").id, idx.get("vis-2").id}.isdisjoint(r.hit.id for r in steered)
    assert vis_plain >= 2
    assert vis_steered < vis_plain


def test_like_and_not_take_several_ids_as_the_docs_write_them(index: Path, fake: FakeEmbedder) -> None:
    """`--like A B --not C D` (the docs' form) means what `--like A --like B --not C --not D` does."""
    with Index.open(index, embedder=fake) as idx:
        TagStore(index).add("robots", [idx.get("rl-1")])
        want = [r.hit.id for r in recommend(idx, ["priv-0", "robots", "vis-0"], 6, not_like=["vis-1", "vis-2"])]
    base = ["recommend", "--index", str(index), "-k", "6", "--json"]
    forms = [
        ["--like", "priv-0", "robots", "vis-0", "--not", "vis-1", "vis-2"],
        ["--like", "priv-0", "--like", "robots", "--like", "vis-0", "--not", "vis-1", "--not", "vis-2"],
        ["--like=priv-0", "robots", "--not", "vis-1", "--like", "vis-0", "--not=vis-2"],
        ["--not", "vis-1", "vis-2", "-k", "6", "--like", "priv-0", "robots", "vis-0"],
    ]
    for form in forms:
        result = run([*base, *form], fake)
        assert result.exit_code == 0, (form, result.output)
        assert [row["id"] for row in json.loads(result.stdout)] == want, form
    # A bare word after another option's value is still no id: click refuses it as before.
    stray = run([*base, "--like", "priv-0", "-k", "6", "vis-0"], fake)
    assert stray.exit_code == 2 and "unexpected extra argument (vis-0)" in stray.output


def test_where_and_since_restrict_candidates(index: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    with Index.open(index, embedder=fake) as idx:
        recs = recommend(idx, ["priv-0"], 5, where=["year>=2025"])
        assert recs and all(r.hit.metadata["year"] == 2025 for r in recs)
        first = idx.version.name
    # New papers arrive in a second file; --since the first version lists only them.
    arrival = write_corpus(tmp_path / "src" / "b.jsonl", {"priv": range(8, 11), "rl": range(8, 10)})
    build_index([str(tmp_path / "src" / "a.jsonl"), str(arrival)], index, BuildOptions(progress=False), embedder=fake)
    with Index.open(index, embedder=fake) as idx:
        recs = recommend(idx, ["priv-0"], 10, since=first)
        assert sorted(r.hit.external_ids[0] for r in recs) == ["priv-10", "priv-8", "priv-9", "rl-8", "rl-9"]
        assert topic_of([r.hit.id for r in recs[:3]], idx) == ["priv"] * 3
        seq = int(first.split("-")[1])
        assert [r.hit.id for r in recommend(idx, ["priv-0"], 10, since=str(seq))] == [r.hit.id for r in recs]


def test_library_cli_and_api_agree(index: Path, fake: FakeEmbedder) -> None:
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    with Index.open(index, embedder=fake) as idx:
        lib = [r.hit.id for r in recommend(idx, ["rl-0", "rl-1"], 5, not_like=["priv-0"])]
    result = run(
        [
            "recommend",
            "--like",
            "rl-0",
            "--like",
            "rl-1",
            "--not",
            "priv-0",
            "-k",
            "5",
            "--json",
            "--index",
            str(index),
        ],
        fake,
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["id"] for r in rows] == lib
    assert all(r["because"]["id"] for r in rows)
    with TestClient(create_app(index, embedder=fake), base_url="http://localhost") as client:
        resp = client.get("/api/recommend", params=[("like", "rl-0"), ("like", "rl-1"), ("not", "priv-0"), ("k", "5")])
        assert resp.status_code == 200, resp.text
        assert [h["id"] for h in resp.json()["hits"]] == lib


def test_cli_table_and_bibtex(index: Path, fake: FakeEmbedder) -> None:
    table = run(["recommend", "--like", "rl-0", "-k", "2", "--index", str(index)], fake)
    assert table.exit_code == 0 and table.output.count("because: near") == 2
    bib = run(["recommend", "--like", "rl-0", "-k", "2", "--format", "bibtex", "--index", str(index)], fake)
    assert bib.exit_code == 0 and bib.output.count("@misc{") == 2


def test_an_unknown_like_names_the_tags_there_are(index: Path, fake: FakeEmbedder) -> None:
    assert run(["tag", "add", "robots", "rl-0", "--index", str(index)], fake).exit_code == 0
    result = run(["recommend", "--like", "nosuchtag", "--index", str(index)], fake)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert "'nosuchtag' is neither a tag (tags: robots) nor a paper" in result.output


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ([], "at least one liked paper"),
        (["--like", "nope-0"], "'nope-0' is neither a tag (tags: none yet) nor a paper"),
        (["--like", "rl-0", "--method", "magic"], "unknown method"),
        (["--like", "rl-0", "-k", "0"], "k must be a positive integer"),
        (["--like", "rl-0", "--since", "yesterday"], "--since 'yesterday'"),
        (["--like", "rl-0", "--where", "year"], "malformed --where"),
        (["--like-text", "/no/such/file.txt"], "cannot read"),
    ],
)
def test_bad_input_is_one_line(index: Path, fake: FakeEmbedder, args: list[str], fragment: str) -> None:
    result = run(["recommend", *args, "--index", str(index)], fake)
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output


def test_api_tag_writes_need_allow_tags_and_same_origin(index: Path, fake: FakeEmbedder) -> None:
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    body = {"add": ["rl-0"]}
    with TestClient(create_app(index, embedder=fake), base_url="http://localhost") as client:
        assert client.post("/api/tags/liked", json=body).status_code == 403
        # Read-only whatever the body: the refusal comes before the body is validated.
        assert client.post("/api/tags/liked", json={"bogus": 1}).status_code == 403
        listed = client.get("/api/tags").json()
        assert listed == {"writable": False, "read_only_reason": listed["read_only_reason"], "tags": {}}
        assert "--allow-tags" in listed["read_only_reason"]
    assert not (index / TAGS_FILE).exists()
    with TestClient(create_app(index, embedder=fake, allow_tags=True), base_url="http://localhost") as client:
        cross = client.post("/api/tags/liked", json=body, headers={"Origin": "http://evil.example"})
        assert cross.status_code == 403
        form = client.post("/api/tags/liked", content=json.dumps(body), headers={"Content-Type": "text/plain"})
        assert form.status_code == 415 and "Content-Type: application/json" in form.json()["error"]
        assert not (index / TAGS_FILE).exists()
        ok = client.post("/api/tags/liked", json=body, headers={"Origin": "http://localhost"})
        assert ok.status_code == 200, ok.text
        assert ok.json()["papers"] == 1
        listed = client.get("/api/tags").json()
        assert listed["writable"] is True and listed["tags"]["liked"]["papers"] == 1
        # "For you" follows the tag.
        recs = client.get("/api/recommend", params={"like": "liked", "k": 3}).json()["hits"]
        assert all(h["external_ids"][0].startswith("rl-") for h in recs)
        bad = client.post("/api/tags/liked", json={"add": ["no-such"]})
        assert bad.status_code == 404
