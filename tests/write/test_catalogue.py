"""Catalogue join: documents take the title, authors, venue, links and id of the record they match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semsearch.core.records import Provenance, Record
from semsearch.dedup.duplicates import deduplicate
from semsearch.ingest.sources import read_sources
from semsearch.query.search import Index
from semsearch.write.catalogue import apply_catalogue, join_catalogue
from tests.helpers import FIXTURES, SEEDS, FakeEmbedder, requires_shared, run

SLICE = FIXTURES / "catalogue" / "neurips2025_slice.jsonl"  # 4 lines of neurips2025.jsonl.gz (1, 1581, 1585, 2473)
FEDASK_ID = "6a24ce769ac8de0d"  # seeds/000: "Applying differential privacy (DP) to federated LoRA ..."
FEDASK_TITLE = "Differentially Private Federated Low Rank Adaptation Beyond Fixed-Matrix"


def seed_documents():
    return deduplicate(read_sources([str(SEEDS)]).records).documents


def slice_records() -> list[Record]:
    return read_sources([str(SLICE)]).records


def record(text: str, title: str, rid: str, number: int = 1) -> Record:
    return Record(text=text, provenance=Provenance("cat.jsonl", "line", number), title=title, external_id=rid)


# --------------------------------------------------------------------------------------------- library


def test_slice_matches_one_exact_and_two_near_seed_abstracts() -> None:
    docs = seed_documents()
    records = slice_records()
    matches, ties = join_catalogue(docs, records)
    found = {docs[i].id: (records[j].title, m.kind, m.similarity) for i, (j, m) in matches.items()}
    assert ties == []
    assert found[FEDASK_ID] == (FEDASK_TITLE, "exact", 1.0)
    near = {title: sim for title, kind, sim in found.values() if kind == "near"}
    # The seed copies differ from the catalogue by markup and small edits: near, by the dedup rule.
    assert set(near) == {
        "Probing Neural Combinatorial Optimization Models",
        "Does Object Binding Naturally Emerge in Large Pretrained Vision Transformers?",
    }
    assert all(0.7 <= sim < 1.0 for sim in near.values())
    # The fourth record (Time-o1) is in no seed file.
    assert len(found) == 3


def test_matched_document_takes_title_authors_links_and_id() -> None:
    docs = seed_documents()
    report = apply_catalogue(docs, [str(SLICE)])
    assert (report.catalogued, report.exact, report.near, report.documents) == (3, 1, 2, 91)
    doc = next(d for d in docs if d.id == FEDASK_ID)
    assert doc.title == FEDASK_TITLE
    assert doc.metadata["authors"] == ["Ming Wen", "Jiaqi Zhu", "Yuedong Xu", "Yipeng Zhou", "DINGDING HAN"]
    assert doc.metadata["venue"] == "neurips" and doc.metadata["year"] == "2025"
    assert doc.metadata["openreview_url"] == "https://openreview.net/forum?id=TecJ926Vgn"
    assert "doi" not in doc.metadata  # the record's doi is "": nothing to take
    assert doc.metadata["collection"] == "NeurIPS 2025 论文列表"  # the document's own metadata stays
    assert doc.metadata["catalogue"]["match"] == "exact"
    assert doc.external_ids == ["wen2025neurips-differentially"]
    assert doc.text.startswith("Large language models (LLMs) typically")  # the text is never replaced
    assert len(report.uncatalogued) == 88 and (FEDASK_ID, doc.label()) not in report.uncatalogued


def test_exact_beats_near_and_equal_matches_are_a_reported_tie() -> None:
    docs = seed_documents()
    fed = next(d for d in docs if d.id == FEDASK_ID)
    edited = fed.text.replace("dilemma", "problem").replace("synthetic", "extra")
    records = [
        record(edited, "Edited copy", "near-1", 1),
        record(fed.text, "Exact copy", "exact-1", 2),
        record(" ".join(fed.text.split()), "Same text re-spaced", "exact-2", 3),
    ]
    matches, ties = join_catalogue(docs, records)
    fed_index = docs.index(fed)
    j, match = matches[fed_index]
    assert (records[j].title, match.kind) == ("Exact copy", "exact")  # first of the equal ones, not the near one
    assert len(ties) == 1 and ties[0].startswith(FEDASK_ID) and "exact-1" in ties[0] and "exact-2" in ties[0]

    # Two near records: the more similar wins, no tie.
    closer = fed.text.replace("dilemma", "problem")
    matches, ties = join_catalogue(docs, [record(edited, "Two edits", "a", 1), record(closer, "One edit", "b", 2)])
    j, match = matches[fed_index]
    assert match.kind == "near" and j == 1 and ties == []


def test_without_near_only_exact_matches_count() -> None:
    docs = seed_documents()
    matches, _ = join_catalogue(docs, slice_records(), near=False)
    assert [docs[i].id for i in matches] == [FEDASK_ID]


def test_records_without_an_abstract_cannot_match(tmp_path: Path) -> None:
    from semsearch.core.errors import InputError

    fed_text = next(d.text for d in seed_documents() if d.id == FEDASK_ID)
    cat = tmp_path / "titles.jsonl"
    title_only = json.dumps({"id": "t1", "title": "Only a title", "abstract": ""})
    cat.write_text(title_only + "\n", encoding="utf-8")
    # Title-only records are read (they are documents in a source), but a catalogue of them can name nothing.
    with pytest.raises(InputError, match="no record with an abstract"):
        apply_catalogue(seed_documents(), [str(cat)])
    # Beside a usable record, a title-only one is passed over (it has nothing to match an abstract by).
    cat.write_text(title_only + "\n" + json.dumps({"id": "f", "title": "Fed", "abstract": fed_text}) + "\n")
    report = apply_catalogue(seed_documents(), [str(cat)])
    assert (report.records, report.catalogued) == (1, 1)


# ------------------------------------------------------------------------------------------------- CLI


def test_index_with_catalogue_reports_counts_and_query_shows_titles(tmp_path: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    result = run(["index", str(SEEDS), "--index", str(index), "--catalogue", str(SLICE), "--json"], fake)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output)
    cat = summary["catalogue"]
    assert (cat["catalogued"], cat["of"], cat["exact"], cat["near"], cat["ties"]) == (3, 91, 1, 2, [])
    assert "uncatalogued" not in cat  # only on request

    result = run(["query", "federated LoRA differential privacy", "-k", "1", "--index", str(index)], fake)
    assert result.exit_code == 0, result.output
    assert FEDASK_TITLE in result.output
    assert "Ming Wen, Jiaqi Zhu, … · NeurIPS 2025" in result.output
    assert "https://openreview.net/forum?id=TecJ926Vgn" in result.output

    hit = json.loads(run(["query", "federated LoRA", "-k", "1", "--index", str(index), "--json"], fake).output)[0]
    assert hit["title"] == FEDASK_TITLE
    assert hit["byline"] == "Ming Wen, Jiaqi Zhu, … · NeurIPS 2025"
    assert hit["link"] == "https://openreview.net/forum?id=TecJ926Vgn"
    assert hit["authors"][0] == "Ming Wen"
    # The catalogue's id resolves like any external id.
    related = run(["related", "wen2025neurips-differentially", "-k", "1", "--index", str(index), "--json"], fake)
    assert related.exit_code == 0, related.output


def test_refresh_keeps_the_catalogue_until_dropped(tmp_path: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    assert run(["index", str(SEEDS), "--index", str(index), "--catalogue", str(SLICE), "-q"], fake).exit_code == 0
    result = run(["index", "--index", str(index), "--list-uncatalogued"], fake)  # plain refresh
    assert result.exit_code == 0, result.output
    assert "catalogued: 3 of 91 (1 exact, 2 near; 0 ties) from 4 records in 1 file" in result.output
    assert result.output.count("uncatalogued: ") == 88
    with Index.open(index, embedder=fake) as idx:
        assert idx.get(FEDASK_ID).title == FEDASK_TITLE
    info = run(["info", "--index", str(index)]).output
    assert f"catalogue: 3 of 91 documents (1 exact, 2 near) from {SLICE}" in " ".join(info.split())
    # Sources named again, no --catalogue: still kept.
    summary = json.loads(run(["index", str(SEEDS), "--index", str(index), "--json"], fake).output)
    assert summary["catalogue"]["catalogued"] == 3
    summary = json.loads(run(["index", "--index", str(index), "--no-catalogue", "--json"], fake).output)
    assert summary["catalogue"] is None
    with Index.open(index, embedder=fake) as idx:
        assert idx.get(FEDASK_ID).title is None
    summary = json.loads(run(["index", "--index", str(index), "--json"], fake).output)
    assert summary["catalogue"] is None  # dropped for good


def test_list_uncatalogued_writes_nothing_when_nothing_changed(tmp_path: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    assert run(["index", str(SEEDS), "--index", str(index), "--catalogue", str(SLICE), "-q"], fake).exit_code == 0
    before = sorted(p.name for p in index.iterdir())
    live = (index / "CURRENT").read_text()
    result = run(["index", "--index", str(index), "--list-uncatalogued"], fake)
    assert result.exit_code == 0, result.output
    assert "nothing written" in result.output and result.output.count("uncatalogued: ") == 88
    assert sorted(p.name for p in index.iterdir()) == before and (index / "CURRENT").read_text() == live
    summary = json.loads(run(["index", "--index", str(index), "--list-uncatalogued", "--json"], fake).output)
    assert summary["unchanged"] is True and len(summary["catalogue"]["uncatalogued"]) == 88
    assert FEDASK_ID not in {row["id"] for row in summary["catalogue"]["uncatalogued"]}
    assert sorted(p.name for p in index.iterdir()) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--catalogue", "missing.jsonl"], "no such file or directory: missing.jsonl"),
        (["--catalogue", str(SLICE), "--no-catalogue"], "choose one of --catalogue and --no-catalogue"),
    ],
)
def test_bad_catalogue_is_one_line_and_leaves_the_index(
    tmp_path: Path, fake: FakeEmbedder, args: list[str], message: str
) -> None:
    index = tmp_path / "idx"
    assert run(["index", str(SEEDS), "--index", str(index), "-q"], fake).exit_code == 0
    before = sorted(p.name for p in index.iterdir())
    current = (index / "CURRENT").read_text()
    result = run(["index", str(SEEDS), "--index", str(index), *args], fake)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [f"Error: {message}"]
    assert sorted(p.name for p in index.iterdir()) == before
    assert (index / "CURRENT").read_text() == current


# ------------------------------------------------------------------------------------- the real file


def test_real_neurips_catalogue_names_at_least_90_of_91_seeds() -> None:
    catalogue = requires_shared("data", "mlanthology", "neurips2025.jsonl.gz")
    docs = seed_documents()
    report = apply_catalogue(docs, [str(catalogue)])
    assert report.documents == 91
    assert report.catalogued >= 90, report.uncatalogued
    assert report.ties == []
    assert sum(1 for d in docs if d.title) >= 90


@pytest.mark.slow
def test_acceptance_fedask_with_real_model_and_real_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's acceptance: seeds + NeurIPS 2025 catalogue, real encoder; the FedASK paper by name, BibTeX out."""
    bibtexparser = pytest.importorskip("bibtexparser")
    catalogue = requires_shared("data", "mlanthology", "neurips2025.jsonl.gz")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    index = tmp_path / "idx"
    built = run(["index", str(SEEDS), "--index", str(index), "--catalogue", str(catalogue), "--json", "-q"])
    assert built.exit_code == 0, built.output
    assert json.loads(built.output)["catalogue"]["catalogued"] >= 90
    table = run(["query", "federated privacy", "--index", str(index)])
    assert table.exit_code == 0, table.output
    first = table.output.split("\n\n")[0]
    assert FEDASK_TITLE in first and "Ming Wen, Jiaqi Zhu, … · NeurIPS 2025" in first
    bib = run(["query", "federated privacy", "-k", "5", "--format", "bibtex", "--index", str(index)])
    assert bib.exit_code == 0, bib.output
    library = bibtexparser.parse_string(bib.output)
    assert library.failed_blocks == [] and len(library.entries) == 5
    assert library.entries[0].key == "wen2025neurips-differentially"
