"""Ids that never move: copies merge into the document they copy, and former ids resolve as aliases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.records import Provenance, Record
from semsearch.dedup.duplicates import deduplicate, doc_id_for, is_near_duplicate, text_hash
from semsearch.dedup.identity import read_identity
from semsearch.store.layout import current_version
from tests.helpers import PAPERS, FakeEmbedder, run

NEW = "Protein structure prediction with diffusion models generates plausible backbones for enzymes."
LONGER = PAPERS["fed"] + " Code and trained models are released."
REWRAPPED = PAPERS["vision"].replace(" for ", "\nfor ").replace(" that ", "\n  that ")
EDITED = PAPERS["rl"].replace("A reinforcement", "Our reinforcement").replace("exploration.", "exploration!")


def seed(path: Path, texts: list[str]) -> Path:
    path.write_text("Papers\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
    return path


def index_json(fake: FakeEmbedder, index: Path, *args: str) -> dict:
    result = run(["index", *args, "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def ids_by_name(index: Path) -> dict[str, str]:
    """Which document id holds each of the PAPERS texts (by its own text or a merged copy)."""
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        docs = list(idx.store.iter_documents())
    out = {}
    for name, text in PAPERS.items():
        holders = [d.id for d in docs if text_hash(text) in (d.text_hash, *d.texts)]
        assert len(holders) <= 1
        if holders:
            out[name] = holders[0]
    return out


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    seed(folder / "a.txt", list(PAPERS.values()))
    return folder


def test_the_variants_are_near_duplicates() -> None:
    # The premise of the tests below: each variant merges with its original under the index's rule.
    for variant, name in ((LONGER, "fed"), (REWRAPPED, "vision"), (EDITED, "rl")):
        assert is_near_duplicate(variant, PAPERS[name])
    assert len(LONGER) > len(PAPERS["fed"])


def test_ids_stay_when_copies_arrive_and_only_new_texts_are_encoded(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    assert index_json(fake, index, str(corpus))["encoded"] == 5
    before = ids_by_name(index)
    assert before == {name: doc_id_for(text_hash(text)) for name, text in PAPERS.items()}

    seed(corpus / "b.txt", [LONGER, REWRAPPED, EDITED, NEW])
    fake.calls.clear()
    summary = index_json(fake, index, str(corpus))
    # The three copies merge into their documents; only the new abstract is encoded.
    assert (summary["encoded"], summary["added"], summary["removed"], summary["documents"]) == (1, 1, 0, 6)
    assert fake.encoded_texts == [NEW]
    assert ids_by_name(index) == before
    with Index.open(index, embedder=fake) as idx:
        fed = idx.get(before["fed"])
        # The text the id was derived from stays the document's text (and its vector), though longer.
        assert fed.text == PAPERS["fed"]
        assert [s.file.rsplit("/", 1)[-1] for s in fed.sources] == ["a.txt", "b.txt"]
        assert fed.aliases == []
        assert idx.info().aliases == 0
    # related ID keeps working for every old id.
    for doc_id in before.values():
        assert run(["related", doc_id, "--index", str(index), "--json"], fake).exit_code == 0

    # A refresh of unchanged sources changes nothing.
    again = index_json(fake, index, str(corpus))
    assert (again["encoded"], again["added"], again["removed"]) == (0, 0, 0)
    assert ids_by_name(index) == before


def test_old_id_resolves_as_an_alias_when_its_text_leaves(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    old = doc_id_for(text_hash(PAPERS["fed"]))
    seed(corpus / "b.txt", [LONGER])
    index_json(fake, index, str(corpus))
    # The text the id was derived from leaves every source; its longer copy remains.
    seed(corpus / "a.txt", [t for name, t in PAPERS.items() if name != "fed"])
    fake.calls.clear()
    summary = index_json(fake, index, str(corpus))
    new = doc_id_for(text_hash(LONGER))
    assert fake.encoded_texts == [LONGER]  # the document now stands on its remaining text
    assert (summary["documents"], summary["aliases"], summary["added"], summary["removed"]) == (5, 1, 1, 1)

    with Index.open(index, embedder=fake) as idx:
        doc = idx.get(old)
        assert (doc.id, doc.text, doc.aliases) == (new, LONGER, [old])
        assert idx.info().aliases == 1
        assert [h.id for h in idx.related(old, k=4)] == [h.id for h in idx.related(new, k=4)]
    hits = json.loads(run(["related", old, "--index", str(index), "--json", "-k", "2"], fake).stdout)
    assert new not in [h["id"] for h in hits] and len(hits) == 2
    info = json.loads(run(["info", "--index", str(index), "--json"], fake).stdout)
    assert info["aliases"] == 1
    assert "aliases:" in run(["info", "--index", str(index)], fake).stdout

    # Aliases are carried forward by later versions: a refresh, and a removal of another document.
    index_json(fake, index, str(corpus))
    assert run(["remove", doc_id_for(text_hash(PAPERS["graph"])), "--index", str(index)], fake).exit_code == 0
    with Index.open(index, embedder=fake) as idx:
        assert idx.get(old).id == new
        assert idx.info().aliases == 1
    # Once no text of the document remains, its ids (and aliases) are gone with it.
    (corpus / "b.txt").unlink()
    index_json(fake, index, str(corpus))
    result = run(["related", old, "--index", str(index)], fake)
    assert result.exit_code == 2 and "no document" in result.output
    assert json.loads(run(["info", "--index", str(index), "--json"], fake).stdout)["aliases"] == 0


def test_an_abstract_edited_in_place_keeps_its_old_id_as_an_alias(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    old = doc_id_for(text_hash(PAPERS["rl"]))
    seed(corpus / "a.txt", [EDITED if name == "rl" else t for name, t in PAPERS.items()])
    summary = index_json(fake, index, str(corpus))
    assert (summary["encoded"], summary["aliases"]) == (1, 1)
    with Index.open(index, embedder=fake) as idx:
        doc = idx.get(old)
        assert (doc.id, doc.text) == (doc_id_for(text_hash(EDITED)), EDITED)


def test_api_resolves_an_alias(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    index = tmp_path / "idx"
    options = BuildOptions(progress=False)
    build_index([str(corpus)], index, options, embedder=fake)
    seed(corpus / "b.txt", [LONGER])
    seed(corpus / "a.txt", [t for name, t in PAPERS.items() if name != "fed"])
    build_index([str(corpus)], index, options, embedder=fake)
    old = doc_id_for(text_hash(PAPERS["fed"]))
    with TestClient(create_app(index, embedder=fake), base_url="http://localhost") as client:
        doc = client.get(f"/api/documents/{old}").json()
        assert (doc["id"], doc["aliases"]) == (doc_id_for(text_hash(LONGER)), [old])
        related = client.get(f"/api/related/{old}", params={"k": 2})
        assert related.status_code == 200 and len(related.json()["hits"]) == 2
        assert client.get("/api/info").json()["aliases"] == 1


def record(text: str, number: int, file: str = "a.txt") -> Record:
    return Record(text=text, provenance=Provenance(file, "paragraph", number))


def test_dedup_prefers_the_origin_and_merges_two_documents_into_one_with_an_alias(tmp_path: Path) -> None:
    """Unit level: two live documents that an arriving text joins become one; the other id is an alias."""
    base = PAPERS["llm"]
    variant = base.replace("Large language", "Huge language")
    assert is_near_duplicate(base, variant)
    index = tmp_path / "idx"
    # Built without near-duplicate merging, the two texts are two documents.
    seed_file = tmp_path / "p.txt"
    seed(seed_file, [base, variant])
    build_index([str(seed_file)], index, BuildOptions(progress=False, near=False), embedder=FakeEmbedder())
    previous = read_identity(current_version(index))
    assert previous is not None and len(previous.origins) == 2
    longer = base + " Accuracy holds at four bits."
    result = deduplicate([record(base, 1), record(variant, 2), record(longer, 3)], previous=previous)
    [doc] = result.documents
    kept = min((base, variant), key=lambda t: (-len(t), text_hash(t)))  # the usual rule among the origins
    other = variant if kept == base else base
    assert doc.id == doc_id_for(text_hash(kept))
    assert doc.aliases == [doc_id_for(text_hash(other))]
    assert sorted(doc.texts) == sorted({text_hash(other), text_hash(longer)})
    # Without the previous version, the longest text would have been chosen (and a new id made).
    assert deduplicate([record(base, 1), record(longer, 3)]).documents[0].id == doc_id_for(text_hash(longer))


def test_versions_written_before_aliases_existed_still_open_and_refresh(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder
) -> None:
    """A docs.sqlite without the texts, aliases and title-only tables reads as having none of them."""
    import shutil
    import sqlite3

    from semsearch.store.documents import DocumentStore
    from semsearch.store.layout import DOCS, MANIFEST

    index = tmp_path / "idx"
    build_index([str(corpus)], index, BuildOptions(progress=False), embedder=fake)
    old = tmp_path / "old-version"
    old.mkdir()
    shutil.copy(current_version(index) / DOCS, old / DOCS)
    shutil.copy(current_version(index) / MANIFEST, old / MANIFEST)  # read_identity asks it for the segments
    conn = sqlite3.connect(old / DOCS)
    conn.executescript("DROP TABLE document_texts; DROP TABLE aliases; DROP TABLE title_only;")
    conn.close()
    store = DocumentStore(old / DOCS)
    try:
        fed = store.find(doc_id_for(text_hash(PAPERS["fed"])))
        assert fed is not None and (fed.texts, fed.aliases, fed.title_only) == ([], [], False)
        assert store.alias_count() == 0
    finally:
        store.close()
    previous = read_identity(old)
    assert previous is not None and previous.aliases == {}
    assert set(previous.owner.values()) == {doc_id_for(text_hash(t)) for t in PAPERS.values()}
    [doc] = deduplicate([record(PAPERS["fed"] + " Code and models are released.", 1)], previous=previous).documents
    assert doc.aliases == [doc_id_for(text_hash(PAPERS["fed"]))]  # the vanished original, matched as a near copy


def test_a_titled_copy_lends_its_title_and_the_id_stays(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    before = ids_by_name(index)
    row = {"id": "cat-1", "title": "Private federated learning", "abstract": LONGER}
    (corpus / "catalogue.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    fake.calls.clear()
    summary = index_json(fake, index, str(corpus))
    assert ids_by_name(index) == before
    # The document gains the title, so its text is encoded once with it; the copy itself is not.
    assert fake.encoded_texts == ["Private federated learning " + PAPERS["fed"]]
    assert (summary["added"], summary["removed"]) == (0, 0)
    with Index.open(index, embedder=fake) as idx:
        doc = idx.get("cat-1")
        assert (doc.id, doc.title, doc.text) == (before["fed"], "Private federated learning", PAPERS["fed"])
