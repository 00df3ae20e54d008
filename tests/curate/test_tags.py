"""Tags beside the index: add / remove / list / import, across refresh, --full, remove and a returning text."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest

from semsearch import Index, build_index
from semsearch.core.errors import TagError
from semsearch.curate.tags import TAGS_FILE, TagStore, members
from semsearch.write.build import BuildOptions
from tests.helpers import PAPERS, FakeEmbedder, run


def write_jsonl(path: Path, papers: dict[str, str], extra: dict[str, dict[str, str]] | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for key, text in papers.items():
        row = {"_id": f"key-{key}", "title": f"On {key}", "text": text, "metadata": {"year": 2024}}
        row["metadata"].update((extra or {}).get(key, {}))
        rows.append(json.dumps(row))
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "src" / "papers.jsonl", PAPERS, {"graph": {"doi": "10.1234/graph.5"}})


@pytest.fixture
def index(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> Path:
    build_index([str(corpus)], tmp_path / "idx", BuildOptions(progress=False), embedder=fake)
    return tmp_path / "idx"


def doc_id(index: Path, key: str) -> str:
    with Index.open(index) as idx:
        return idx.get(f"key-{key}").id


def tag_json(index: Path, name: str, fake: FakeEmbedder) -> list[dict[str, object]]:
    result = run(["tag", "list", name, "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def test_add_by_id_prefix_external_id_and_doi(index: Path, fake: FakeEmbedder) -> None:
    fed, rl = doc_id(index, "fed"), doc_id(index, "rl")
    result = run(
        ["tag", "add", "liked", fed, rl[:8], "key-llm", "https://doi.org/10.1234/GRAPH.5", "--index", str(index)], fake
    )
    assert result.exit_code == 0, result.output
    assert "tagged 4 papers" in result.output
    entries = tag_json(index, "liked", fake)
    assert [e["id"] for e in entries] == [fed, rl, doc_id(index, "llm"), doc_id(index, "graph")]
    assert all(not e["dangling"] for e in entries)
    # Adding again changes nothing; the file lives beside the index, not in a version.
    again = run(["tag", "add", "liked", fed, "--index", str(index)], fake)
    assert "tagged 0 papers (1 was already)" in again.output
    assert (index / TAGS_FILE).is_file()
    assert not list(index.glob(f"v-*/{TAGS_FILE}"))


def test_remove_and_list_all(index: Path, fake: FakeEmbedder) -> None:
    fed, rl = doc_id(index, "fed"), doc_id(index, "rl")
    run(["tag", "add", "liked", fed, rl, "--index", str(index)], fake)
    run(["tag", "add", "boring", "key-vision", "--index", str(index)], fake)
    result = run(["tag", "remove", "liked", "key-fed", "--index", str(index)], fake)
    assert result.exit_code == 0 and "untagged 1" in result.output
    overview = json.loads(run(["tag", "list", "--index", str(index), "--json"], fake).output)
    assert overview == {
        "boring": {"papers": 1, "dangling": 0, "polarity": "positive"},
        "liked": {"papers": 1, "dangling": 0, "polarity": "positive"},
    }
    # The last paper out removes the tag.
    run(["tag", "remove", "boring", "key-vision", "--index", str(index)], fake)
    assert TagStore(index).names() == ["liked"]


def test_tags_survive_refresh_full_and_remove_then_come_back(
    index: Path, corpus: Path, tmp_path: Path, fake: FakeEmbedder
) -> None:
    fed, graph = doc_id(index, "fed"), doc_id(index, "graph")
    run(["tag", "add", "liked", fed, graph, "--index", str(index)], fake)
    before = digest(index / TAGS_FILE)
    opts = BuildOptions(progress=False)
    build_index(None, index, opts, embedder=fake)  # refresh
    build_index(None, index, BuildOptions(progress=False, full=True), embedder=fake)  # --full
    assert digest(index / TAGS_FILE) == before
    assert [e["dangling"] for e in tag_json(index, "liked", fake)] == [False, False]

    # `semsearch remove` takes the paper out: the tag keeps it, dangling, and says so.
    assert run(["remove", graph, "--index", str(index)], fake).exit_code == 0
    entries = tag_json(index, "liked", fake)
    assert [(e["id"], e["dangling"]) for e in entries] == [(fed, False), (graph, True)]
    text = run(["tag", "list", "--index", str(index)], fake).output
    assert "liked: 2 papers, 1 dangling" in text
    # The next build from the sources brings the text back: same text, same id, live again.
    build_index(None, index, opts, embedder=fake)
    assert [e["dangling"] for e in tag_json(index, "liked", fake)] == [False, False]

    # The text leaves the source file, then returns.
    without = {k: v for k, v in PAPERS.items() if k != "fed"}
    write_jsonl(corpus, without, {"graph": {"doi": "10.1234/graph.5"}})
    build_index(None, index, opts, embedder=fake)
    assert [e["dangling"] for e in tag_json(index, "liked", fake)] == [True, False]
    write_jsonl(corpus, PAPERS, {"graph": {"doi": "10.1234/graph.5"}})
    build_index(None, index, opts, embedder=fake)
    entries = tag_json(index, "liked", fake)
    assert [(e["id"], e["dangling"]) for e in entries] == [(fed, False), (graph, False)]


def test_an_edited_abstract_with_the_same_external_id_is_followed(
    index: Path, corpus: Path, fake: FakeEmbedder
) -> None:
    fed = doc_id(index, "fed")
    run(["tag", "add", "liked", fed, "--index", str(index)], fake)
    edited = dict(PAPERS, fed=PAPERS["fed"] + " We release code and a new benchmark of federated privacy attacks.")
    write_jsonl(corpus, edited)
    build_index(None, index, BuildOptions(progress=False), embedder=fake)
    new_id = doc_id(index, "fed")
    assert new_id != fed
    entries = tag_json(index, "liked", fake)
    assert [(e["live_id"], e["dangling"]) for e in entries] == [(new_id, False)]
    assert TagStore(index).entries("liked")[0].id == new_id  # re-pointed in the file


def test_import_file_of_ids_keys_and_dois(index: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    listing = tmp_path / "mine.txt"
    listing.write_text(
        f"# my papers\nkey-fed\n{doc_id(index, 'rl')}\n\ndoi:10.1234/graph.5  # the graph one\n", encoding="utf-8"
    )
    result = run(["tag", "import", "reading", str(listing), "--index", str(index)], fake)
    assert result.exit_code == 0, result.output
    assert [e["id"] for e in tag_json(index, "reading", fake)] == [
        doc_id(index, "fed"),
        doc_id(index, "rl"),
        doc_id(index, "graph"),
    ]


def test_import_with_unknown_lines_fails_whole_unless_skipped(index: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    listing = tmp_path / "mine.txt"
    listing.write_text("key-fed\nnot-a-paper\n", encoding="utf-8")
    result = run(["tag", "import", "reading", str(listing), "--index", str(index)], fake)
    assert result.exit_code == 2
    assert "not-a-paper" in result.output and "Traceback" not in result.output
    assert not (index / TAGS_FILE).exists()
    result = run(["tag", "import", "reading", str(listing), "--skip-unknown", "--index", str(index)], fake)
    assert result.exit_code == 0
    assert len(tag_json(index, "reading", fake)) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["tag", "add", "bad name", "key-fed"], "invalid tag name"),
        (["tag", "add", "liked", "no-such-paper"], "no document 'no-such-paper'"),
        (["tag", "remove", "liked", "key-fed"], "no tag 'liked'"),
        (["tag", "list", "nothing"], "no tag 'nothing'"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    index: Path, fake: FakeEmbedder, args: list[str], fragment: str
) -> None:
    before = digest(index / TAGS_FILE)
    result = run([*args, "--index", str(index)], fake)
    assert result.exit_code == 2, result.output
    assert fragment in result.output
    assert digest(index / TAGS_FILE) == before


def test_remove_of_an_untagged_paper_changes_nothing(index: Path, fake: FakeEmbedder) -> None:
    run(["tag", "add", "liked", "key-fed", "--index", str(index)], fake)
    before = digest(index / TAGS_FILE)
    result = run(["tag", "remove", "liked", "key-fed", "key-rl", "--index", str(index)], fake)
    assert result.exit_code == 2 and "'key-rl' is not tagged 'liked'" in result.output
    assert digest(index / TAGS_FILE) == before


def test_malformed_tags_file_is_a_clear_error(index: Path, fake: FakeEmbedder) -> None:
    (index / TAGS_FILE).write_text("{not json", encoding="utf-8")
    result = run(["tag", "list", "--index", str(index)], fake)
    assert result.exit_code == 2 and "malformed" in result.output
    with pytest.raises(TagError):
        TagStore(index).add("liked", [])


def test_concurrent_writers_lose_nothing(index: Path) -> None:
    with Index.open(index) as idx:
        docs = list(idx.store.iter_documents())
    store = TagStore(index)

    def tag_one(i: int) -> None:
        TagStore(index).add(f"t{i % 3}", [docs[i % len(docs)]])

    threads = [threading.Thread(target=tag_one, args=(i,)) for i in range(15)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tags = store.read()
    assert sorted(tags) == ["t0", "t1", "t2"]
    assert sum(len(v) for v in tags.values()) == 15
    with Index.open(index) as idx:
        assert all(not m.dangling for m in members(idx, store, "t0"))


def test_import_of_an_empty_file_fails(index: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    listing = tmp_path / "empty.txt"
    listing.write_text("# nothing here\n\n", encoding="utf-8")
    result = run(["tag", "import", "reading", str(listing), "--index", str(index)], fake)
    assert result.exit_code == 2 and "names no papers" in result.output
    assert not (index / TAGS_FILE).exists()


def test_a_tag_whose_papers_all_left_recommends_nothing_and_says_why(
    index: Path, corpus: Path, fake: FakeEmbedder
) -> None:
    run(["tag", "add", "gone", "key-fed", "--index", str(index)], fake)
    write_jsonl(corpus, {k: v for k, v in PAPERS.items() if k != "fed"})
    build_index(None, index, BuildOptions(progress=False), embedder=fake)
    result = run(["recommend", "--like", "gone", "--index", str(index)], fake)
    assert result.exit_code == 2 and "a tag whose papers all left the index likes nothing" in result.output


def test_edit_adds_and_removes_in_one_write_or_not_at_all(index: Path, fake: FakeEmbedder) -> None:
    from semsearch.core.errors import QueryError, UnknownDocumentError

    store = TagStore(index)
    with Index.open(index) as idx:
        fed, rl, llm = (idx.get(f"key-{k}") for k in ("fed", "rl", "llm"))
    assert store.edit("liked", [fed, rl], []) == (2, 0, 2)
    before = digest(index / TAGS_FILE)
    # An unknown key to untag: nothing of the write lands (the add of llm included); a 404 in the API.
    with pytest.raises(UnknownDocumentError, match="'nope' is not tagged 'liked'"):
        store.edit("liked", [llm], ["nope"])
    with pytest.raises(QueryError, match="both added to and removed from"):
        store.edit("liked", [rl], ["key-rl"])
    with pytest.raises(UnknownDocumentError, match="not tagged 'other'"):
        store.edit("other", [llm], [fed.id])
    assert digest(index / TAGS_FILE) == before
    assert store.edit("liked", [llm, llm], ["key-fed"]) == (1, 1, 2)
    assert [e.id for e in store.entries("liked")] == [rl.id, llm.id]


@pytest.mark.parametrize(
    "command",
    [
        ["tag", "add", "liked", "ID"],
        ["watch", "add", "fed", "federated learning"],
        ["digest", "--format", "json"],
        ["new", "--since", "last"],
    ],
)
def test_state_is_never_written_into_a_version_folder(index: Path, fake: FakeEmbedder, command: list[str]) -> None:
    version = index / (index / "CURRENT").read_text(encoding="utf-8").strip()
    before = sorted(p.name for p in version.iterdir())
    args = [doc_id(index, "fed") if a == "ID" else a for a in command]
    result = run([*args, "--index", str(version)], fake)
    assert result.exit_code == 2, result.output
    assert f"one version of the index {index.resolve()}" in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in version.iterdir()) == before
