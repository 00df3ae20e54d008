"""What arrived: `added` carried across builds, `new`, saved queries (`watch`) and digests with bookmarks."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from semsearch import Index, build_index
from semsearch.dedup.duplicates import is_near_duplicate
from semsearch.ingest.sources import read_sources
from semsearch.write.build import BuildOptions
from tests.helpers import FakeEmbedder, run

NEW = [
    "Quantum annealing schedules for combinatorial optimisation are learned with a graph policy that "
    "transfers across problem sizes and beats simulated annealing on maximum cut benchmarks.",
    "We audit differential privacy claims of federated recommendation systems and show that client "
    "sampling amplification is overstated when users participate in correlated rounds.",
    "A soil moisture forecasting model fuses satellite radar with ground sensors using a spatiotemporal "
    "transformer and reduces irrigation water use in a two season field trial.",
]


def reformat(text: str) -> str:
    """The same abstract re-wrapped with LaTeX markup on two words (longer, so it would be the merge's pick)."""
    words = text.split()
    words[1] = f"$\\texttt{{{words[1]}}}$"
    words[3] = f"*{words[3]}*"
    return "\n".join(" ".join(words[i : i + 9]) for i in range(0, len(words), 9))


@pytest.fixture
def arrived(tmp_path: Path, seeds_copy: Path, fake: FakeEmbedder) -> tuple[Path, Path, list[str]]:
    """An index of the seeds, then a second build with an arrival file: 3 new abstracts, 2 reformatted copies.

    Returns the index, the sources and the two known abstracts that arrived again reformatted.
    """
    index = tmp_path / "idx"
    build_index([str(seeds_copy)], index, BuildOptions(progress=False), embedder=fake)
    known = [r.text for r in read_sources([str(seeds_copy)]).records[:2]]
    paragraphs = [reformat(t) for t in known] + NEW
    (seeds_copy / "arrival.txt").write_text("Arrivals\n\n" + "\n\n".join(paragraphs) + "\n", encoding="utf-8")
    assert all(is_near_duplicate(reformat(t), t) for t in known)
    build_index(None, index, BuildOptions(progress=False), embedder=fake)
    return index, seeds_copy, known


def new_ids(index: Path) -> set[str]:
    from semsearch.dedup.duplicates import doc_id_for, text_hash

    return {doc_id_for(text_hash(t)) for t in NEW}


def test_first_build_stamps_every_document(tmp_path: Path, seeds_copy: Path, fake: FakeEmbedder) -> None:
    build_index([str(seeds_copy)], tmp_path / "idx", BuildOptions(progress=False), embedder=fake)
    with Index.open(tmp_path / "idx") as idx:
        docs = list(idx.store.iter_documents())
        assert {d.added.seq for d in docs if d.added} == {1}
        assert all(d.added is not None for d in docs)
        day = docs[0].added.at[:10]  # type: ignore[union-attr]
        assert len(idx.allowed_rows([f"added>={day}"])) == len(docs)  # type: ignore[arg-type]
        assert len(idx.allowed_rows(["added>=2999-01-01"])) == 0  # type: ignore[arg-type]


def test_new_lists_exactly_the_new_abstracts(arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder) -> None:
    from semsearch.dedup.duplicates import doc_id_for, text_hash

    index, _, known = arrived
    result = run(["new", "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert {r["id"] for r in rows} == new_ids(index)
    assert all(r["added"]["version"] == 2 for r in rows)
    with Index.open(index) as idx:
        # The reformatted copies merged into known documents, which kept their ids (identity.py: a longer copy
        # never replaces the text an id came from) and their first arrival.
        old = [d for d in idx.store.iter_documents() if d.id not in new_ids(index)]
        gone = {doc_id_for(text_hash(t)) for t in known} - {d.id for d in old}
        assert gone == set()
        assert len(old) == 91 and {d.added.seq for d in old if d.added} == {1}
        assert len(idx.allowed_rows(["added_version>1"])) == 3  # type: ignore[arg-type]
    by_version = run(["new", "--since", "1", "--index", str(index), "--json"], fake)
    assert {r["id"] for r in json.loads(by_version.output)} == new_ids(index)
    everything = run(["new", "--since", "2000-01-01", "-k", "500", "--index", str(index), "--json"], fake)
    assert len(json.loads(everything.output)) == 94


def test_arrivals_survive_refresh_full_and_remove(arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder) -> None:
    index, _, _ = arrived

    def stamps() -> dict[str, int]:
        with Index.open(index) as idx:
            return {d.id: d.added.seq for d in idx.store.iter_documents() if d.added}

    before = stamps()
    build_index(None, index, BuildOptions(progress=False), embedder=fake)
    build_index(None, index, BuildOptions(progress=False, full=True), embedder=fake)
    assert stamps() == before
    gone = sorted(new_ids(index))[0]
    assert run(["remove", gone, "--index", str(index)], fake).exit_code == 0
    after = stamps()
    assert gone not in after and after == {k: v for k, v in before.items() if k != gone}


def test_new_defaults_to_the_latest_arrivals_and_digest_sections_stay_on_subject(
    arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder
) -> None:
    index, _, _ = arrived
    build_index(None, index, BuildOptions(progress=False), embedder=fake)  # unchanged: adds nothing
    rows = json.loads(run(["new", "--index", str(index), "--json"], fake).output)
    assert {r["id"] for r in rows} == new_ids(index)
    run(["watch", "add", "soil", "soil moisture forecasting satellite radar irrigation", "--index", str(index)], fake)
    made = json.loads(run(["digest", "--since", "1", "--format", "json", "--index", str(index)], fake).output)
    assert [[p["text"] for p in s["papers"]] for s in made["sections"]] == [[NEW[2]]]
    assert made["also_new_count"] == 2 and {p["id"] for p in made["also_new"]} == new_ids(index) - {
        made["sections"][0]["papers"][0]["id"]
    }
    loose = run(["digest", "--since", "1", "--format", "json", "--min-fit", "-100", "--index", str(index)], fake)
    assert len(json.loads(loose.output)["sections"][0]["papers"]) == 3
    assert json.loads(loose.output)["also_new_count"] == 0


def test_new_is_ranked_for_tags_and_saved_queries(arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder) -> None:
    index, _, _ = arrived
    assert run(["watch", "add", "soil", "soil moisture irrigation", "--index", str(index)], fake).exit_code == 0
    rows = json.loads(run(["new", "--index", str(index), "--json"], fake).output)
    assert rows[0]["text"] == NEW[2]
    assert rows[0]["for"][0] == "watch:soil"
    listed = run(["watch", "list", "--index", str(index), "--json"], fake)
    assert json.loads(listed.output)[0]["query"] == "soil moisture irrigation"
    assert run(["watch", "remove", "soil", "--index", str(index)], fake).exit_code == 0
    assert json.loads(run(["watch", "list", "--index", str(index), "--json"], fake).output) == []


def test_digest_since_last_twice_lists_nothing_the_second_time(
    arrived: tuple[Path, Path, list[str]], tmp_path: Path, fake: FakeEmbedder
) -> None:
    index, seeds, _ = arrived
    run(["watch", "add", "privacy", "differential privacy federated", "--index", str(index)], fake)
    run(["tag", "add", "liked", sorted(new_ids(index))[0], "--index", str(index)], fake)
    # A first digest: everything so far (there was no bookmark).
    first = run(["digest", "--name", "daily", "--format", "json", "--index", str(index)], fake)
    assert first.exit_code == 0, first.output
    assert json.loads(first.output)["arrived"] == 94
    assert json.loads(first.output)["sections"]
    again = json.loads(run(["digest", "--name", "daily", "--format", "json", "--index", str(index)], fake).output)
    assert again["arrived"] == 0 and again["sections"] == []
    # Another digest name keeps its own bookmark.
    other = json.loads(run(["digest", "--name", "weekly", "--format", "json", "--index", str(index)], fake).output)
    assert other["arrived"] == 94
    # Papers arrive; the next daily digest lists them, and only them.
    (seeds / "more.txt").write_text(
        "More\n\nDifferential privacy for federated analytics with secure shuffling and user level "
        "guarantees across many rounds of participation.\n",
        encoding="utf-8",
    )
    build_index(None, index, BuildOptions(progress=False), embedder=fake)
    third = json.loads(run(["digest", "--name", "daily", "--format", "json", "--index", str(index)], fake).output)
    assert third["arrived"] == 1
    listed = {p["id"] for s in third["sections"] for p in s["papers"]}
    assert len(listed) == 1
    assert (
        json.loads(run(["digest", "--name", "daily", "--format", "json", "--index", str(index)], fake).output)[
            "sections"
        ]
        == []
    )


@pytest.mark.parametrize("fmt", ["md", "html", "atom"])
def test_digest_formats(arrived: tuple[Path, Path, list[str]], tmp_path: Path, fake: FakeEmbedder, fmt: str) -> None:
    index, _, _ = arrived
    run(["watch", "add", "soil", "soil moisture irrigation", "--index", str(index)], fake)
    out = tmp_path / f"digest.{fmt}"
    args = ["digest", "--since", "1", "--format", fmt, "--out", str(out)]
    result = run([*args, "--index", str(index)], fake)
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    assert "soil moisture forecasting" in text.lower()
    if fmt == "atom":
        feed = ET.fromstring(text)
        atom = "{http://www.w3.org/2005/Atom}"
        entries = feed.findall(f"{atom}entry")
        assert len(entries) == 3
        # RFC 4287: the feed names an author (its entries may have none), every entry has a link or content.
        assert feed.findtext(f"{atom}author/{atom}name") == "semsearch"
        assert all(e.find(f"{atom}link") is not None or e.findtext(f"{atom}content") for e in entries)
    elif fmt == "md":
        assert "## Saved query: soil" in text
    else:
        assert text.startswith("<!doctype html>") and ">Saved query: soil</h2>" in text


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["new", "--since", "someday"], "--since 'someday'"),
        (["new", "--since", "2026-13-45"], "give a version"),
        (["watch", "remove", "nothing"], "no saved query 'nothing'"),
        (["watch", "add", "bad name", "query"], "invalid saved query name"),
        (["watch", "add", "empty", "  "], "the saved query is empty"),
        (["digest", "--name", "no/slash"], "invalid digest name"),
        (["digest", "--format", "pdf"], "Invalid value for '--format'"),
        (["digest", "-k", "0"], "k must be 1..100"),
        (["digest", "--also-max", "-1"], "'also new' cap must be 0..10000"),
        (["digest", "--min-fit", "nan"], "--min-fit must be a finite number, got 'nan'"),
        (["digest", "--min-fit", "inf", "--format", "json"], "--min-fit must be a finite number, got 'inf'"),
    ],
)
def test_bad_input_is_one_line(
    arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder, args: list[str], fragment: str
) -> None:
    index, _, _ = arrived

    def state() -> dict[str, bytes]:  # everything but lock files
        return {p.name: p.read_bytes() for p in index.iterdir() if p.is_file() and not p.name.endswith(".lock")}

    before = state()
    result = run([*args, "--index", str(index)], fake)
    assert result.exit_code == 2, result.output
    assert fragment in result.output and "Traceback" not in result.output
    assert state() == before


def test_a_reformatted_copy_that_moved_to_another_file_is_not_new(
    tmp_path: Path, seeds_copy: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    first = sorted(seeds_copy.glob("*.txt"))[0]
    build_index([str(first)], index, BuildOptions(progress=False), embedder=fake)
    records = read_sources([str(first)]).records
    moved = tmp_path / "moved.txt"
    moved.write_text("Moved\n\n" + "\n\n".join([reformat(r.text) for r in records] + [NEW[0]]) + "\n", encoding="utf-8")
    build_index([str(moved)], index, BuildOptions(progress=False), embedder=fake)  # the old file is gone
    rows = json.loads(run(["new", "--index", str(index), "--json"], fake).output)
    assert [r["text"] for r in rows] == [NEW[0]]


def test_library_api_and_cli_agree_on_new(arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder) -> None:
    from fastapi.testclient import TestClient

    from semsearch.curate.arrivals import new_since
    from semsearch.curate.whats_new import ranked_new
    from semsearch.faces.serve import create_app

    index, _, _ = arrived
    run(["watch", "add", "soil", "soil moisture irrigation", "--index", str(index)], fake)
    with Index.open(index, embedder=fake) as idx:
        lib = [p.hit.id for p in ranked_new(idx, new_since(idx, "1"), k=10)]
    cli_rows = json.loads(run(["new", "--since", "1", "--index", str(index), "--json"], fake).output)
    with TestClient(create_app(index, embedder=fake), base_url="http://localhost") as client:
        api = client.get("/api/new", params={"since": "1", "k": 10}).json()["hits"]
        assert client.get("/api/new", params={"since": "last"}).status_code == 422
    assert lib == [r["id"] for r in cli_rows] == [h["id"] for h in api]
    assert set(lib) == new_ids(index)


def test_new_since_last_follows_its_own_bookmark(arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder) -> None:
    index, _, _ = arrived
    first = json.loads(run(["new", "--since", "last", "-k", "500", "--index", str(index), "--json"], fake).output)
    assert len(first) == 94  # no bookmark yet: everything
    again = run(["new", "--since", "last", "--index", str(index), "--json"], fake)
    assert json.loads(again.output) == []
    assert "nothing new" in run(["new", "--since", "last", "--index", str(index)], fake).output


def test_a_digest_named_new_and_new_since_last_keep_separate_bookmarks(
    arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder
) -> None:
    index, _, _ = arrived
    digest = run(["digest", "--index", str(index), "--name", "new", "--format", "json"], fake)
    assert digest.exit_code == 0, digest.output
    marks = json.loads((index / "bookmarks.json").read_text(encoding="utf-8"))
    assert set(marks) == {"new", "@new"} and marks["@new"] is None
    # The digest moved its own bookmark; `new --since last` has none yet, so it still lists everything.
    first = json.loads(run(["new", "--since", "last", "-k", "500", "--index", str(index), "--json"], fake).output)
    assert len(first) == 94
    again = run(["digest", "--index", str(index), "--name", "new", "--since", "last", "--format", "json"], fake)
    assert json.loads(again.output)["arrived"] == 0  # the digest's place did not move back


def test_new_since_last_reads_a_bookmark_written_before_they_were_separate(
    arrived: tuple[Path, Path, list[str]], fake: FakeEmbedder
) -> None:
    index, _, _ = arrived
    run(["new", "--since", "last", "--index", str(index), "--json"], fake)
    marks = json.loads((index / "bookmarks.json").read_text(encoding="utf-8"))
    (index / "bookmarks.json").write_text(json.dumps({"new": marks["@new"]}), encoding="utf-8")
    assert json.loads(run(["new", "--since", "last", "--index", str(index), "--json"], fake).output) == []
