"""Citations out: BibTeX, RIS, CSL-JSON and CSV that reference managers (and semsearch itself) read back."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from semsearch.core.paperinfo import plain_text
from semsearch.core.records import Document, Provenance
from semsearch.curate.export import citations, export
from semsearch.dedup.duplicates import deduplicate
from semsearch.faces.cli import cli
from semsearch.ingest.sources import read_sources
from tests.helpers import FIXTURES, SEEDS, FakeEmbedder, requires_shared, run

FIXTURE = FIXTURES / "catalogue" / "neurips2025_slice.jsonl"
HOSTILE_TITLE = r"50% of {Graphs} & #tags: a_b $x^2$ ~ \alpha -- ``quoted'' Rényi ¡Sí! 中文"


def doc(doc_id: str, title: str | None, text: str, ext: list[str] | None = None, **metadata: object) -> Document:
    return Document(
        id=doc_id,
        text=text,
        title=title,
        sources=[Provenance("a.txt", "paragraph", 1)],
        external_ids=ext or [],
        metadata=dict(metadata),
    )


def papers() -> list[Document]:
    return [
        doc(
            "00000000000000a1",
            HOSTILE_TITLE,
            r"We study *sparse* $\mathcal{O}(n)$ methods -- 30% faster {sic} with C:\path\to & co.",
            ["wen2025fedask"],
            authors=["Jérôme Müller", "ACME, Inc.", "Tom and Jerry Lab", "DINGDING HAN"],
            year="2025",
            venue="neurips",
            venue_type="conference",
            doi="10.5555/x_y",
        ),
        doc("00000000000000b2", "On the Graph Problem", "Graphs are hard.", ["4983"], authors=["Jane Doe"], year=2024),
        doc("00000000000000c3", "Graph Problems Revisited", "Graphs again.", [], authors=["Jane Doe"], year="2024"),
        doc("00000000000000d4", None, "An abstract with no title, authors or year.", []),
        doc("00000000000000e5", "Graph Learning", "Third graph paper.", [], authors=["John Doe"], year="2024"),
    ]


# ------------------------------------------------------------------------------------------------ keys


def test_keys_are_own_then_author_year_word_then_id_and_unique() -> None:
    keys = [c.key for c in citations(papers())]
    # Own key; a numeric BEIR-style id is no key; "On", "the" are skipped; the untitled one has its id.
    assert keys == ["wen2025fedask", "doe2024grapha", "doe2024graphb", "doc00000000000000d4", "doe2024graphc"]
    # A suffixed key never takes a key another paper holds; a "Jr" is not a family name.
    crowded = [*papers(), doc("00000000000000f6", "Graph Theory", "x", ["doe2024grapha"], authors=["J. Doe, Jr"])]
    keys = [c.key for c in citations(crowded)]
    assert keys[1:3] + keys[4:] == ["doe2024graphb", "doe2024graphc", "doe2024graphd", "doe2024grapha"]
    assert len({k.lower() for k in keys}) == len(keys)
    assert citations([doc("00000000000000f7", "Graph Theory", "x", [], authors=["John Smith, Jr"])])[0].key == (
        "smithgraph"
    )
    # Stable: the same documents in another order get the same keys.
    again = {c.id: c.key for c in citations(list(reversed(papers())))}
    assert again == {c.id: c.key for c in citations(papers())}


# ------------------------------------------------------------------------------------------ round trips


def test_bibtex_round_trips_through_bibtexparser(tmp_path: Path) -> None:
    bibtexparser = pytest.importorskip("bibtexparser")
    text = export(papers(), "bibtex")
    library = bibtexparser.parse_string(text)
    assert library.failed_blocks == []
    assert [e.key for e in library.entries] == [c.key for c in citations(papers())]
    # Read back by semsearch's BibTeX reader (bibtexparser 2 + LaTeX decoding; math stays $\alpha$ in the stored
    # text, which is read as α): the same text a person reads.
    path = tmp_path / "out.bib"
    path.write_text(text, encoding="utf-8")
    back = {r.external_id: r for r in read_sources([str(path)]).records}
    for c in citations(papers()):
        r = back[c.key]
        assert (plain_text(r.title) if r.title else None) == c.title
        assert plain_text(r.text) == c.abstract
        assert r.metadata.get("authors", []) == c.authors
        assert r.metadata.get("year") == c.year
    first = back["wen2025fedask"]
    assert plain_text(first.title or "") == plain_text(HOSTILE_TITLE)
    assert first.metadata["authors"] == ["Jérôme Müller", "ACME, Inc.", "Tom and Jerry Lab", "DINGDING HAN"]
    assert first.metadata["doi"] == "10.5555/x_y"
    assert first.metadata["booktitle"] == "NeurIPS"
    assert library.entries[0].entry_type == "inproceedings" and library.entries[3].entry_type == "misc"


def parse_ris(text: str) -> list[dict[str, list[str]]]:
    records: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        tag, sep, value = line.partition("  - ")
        assert sep and len(tag) == 2, line
        if tag == "ER":
            records.append(current)
            current = {}
        else:
            current.setdefault(tag, []).append(value)
    assert current == {}
    return records


def test_ris_round_trip() -> None:
    records = parse_ris(export(papers(), "ris"))
    cites = citations(papers())
    assert len(records) == len(cites)
    for r, c in zip(records, cites, strict=True):
        assert r["ID"] == [c.key]
        assert r.get("TI", [None]) == [c.title]
        assert r.get("PY", [None]) == [c.year]
        assert r["AB"] == [c.abstract]
    # Authors as RIS writes them, "Last, First"; organisations as they are.
    assert records[0]["AU"] == ["Müller, Jérôme", "ACME, Inc.", "Tom and Jerry Lab", "HAN, DINGDING"]
    assert [r.get("AU") for r in records[1:]] == [["Doe, Jane"], ["Doe, Jane"], None, ["Doe, John"]]
    assert records[0]["TY"] == ["CPAPER"] and records[0]["T2"] == ["NeurIPS"] and records[0]["DO"] == ["10.5555/x_y"]


def test_csljson_has_the_variables_zotero_and_pandoc_read(tmp_path: Path) -> None:
    items = json.loads(export(papers(), "csljson"))
    allowed = {"id", "type", "title", "author", "issued", "container-title", "DOI", "URL", "abstract", "note"}
    csl_types = {"paper-conference", "article-journal", "article"}
    for item in items:
        assert set(item) <= allowed and item["type"] in csl_types
        for name in item.get("author", []):
            assert set(name) in ({"family", "given"}, {"literal"})  # the hard names: tests/core/test_citation_names.py
        if "issued" in item:
            assert isinstance(item["issued"]["date-parts"][0][0], int)
    first = items[0]
    assert first["author"][0] == {"family": "Müller", "given": "Jérôme"}
    assert first["author"][1:] == [
        {"literal": "ACME, Inc."},
        {"literal": "Tom and Jerry Lab"},
        {"family": "HAN", "given": "DINGDING"},
    ]
    assert first["issued"] == {"date-parts": [[2025]]} and first["container-title"] == "NeurIPS"
    assert first["DOI"] == "10.5555/x_y" and first["URL"] == "https://doi.org/10.5555/x_y"
    # semsearch reads its own CSL-JSON back as a JSON source: same titles, authors and years.
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    back = read_sources([str(path)]).records
    from semsearch.core.paperinfo import authors_of, year_of

    for r, c in zip(back, citations(papers()), strict=True):
        assert (r.external_id, r.title, r.text) == (c.key, c.title, c.abstract)
        assert (authors_of(r.metadata), year_of(r.metadata)) == (c.authors, c.year)


def test_csv_round_trip(tmp_path: Path) -> None:
    text = export(papers(), "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["key"] for r in rows] == [c.key for c in citations(papers())]
    assert rows[0]["authors"] == "Jérôme Müller; ACME, Inc.; Tom and Jerry Lab; DINGDING HAN"
    path = tmp_path / "refs.csv"
    path.write_text(text, encoding="utf-8")
    back = read_sources([str(path)]).records
    for r, c in zip(back, citations(papers()), strict=True):
        assert (r.title or None, r.text, r.metadata["year"] or None) == (c.title, c.abstract, c.year)


def test_unknown_format_is_a_query_error() -> None:
    from semsearch.core.errors import QueryError

    with pytest.raises(QueryError, match="unknown export format 'endnote'"):
        export(papers(), "endnote")


def test_every_neurips_2025_record_round_trips_through_bibtex(tmp_path: Path) -> None:
    pytest.importorskip("bibtexparser")
    source = requires_shared("data", "mlanthology", "neurips2025.jsonl.gz")
    docs = deduplicate(read_sources([str(source)]).records, near=False).documents
    path = tmp_path / "neurips.bib"
    path.write_text(export(docs, "bibtex"), encoding="utf-8")
    back = {r.external_id: r for r in read_sources([str(path)]).records}
    cites = citations(docs)
    assert len(back) == len(cites) == len(docs)
    for c in cites:
        r = back[c.key]
        title = plain_text(r.title) if r.title else None  # math is stored as $\omega$, read as ω
        assert (title, r.metadata.get("authors", []), r.metadata.get("year")) == (c.title, c.authors, c.year)
        assert plain_text(r.text) == c.abstract


# ------------------------------------------------------------------------------------------------- CLI


@pytest.fixture
def catalogued(tmp_path: Path, fake: FakeEmbedder) -> Path:
    index = tmp_path / "idx"
    result = run(["index", str(SEEDS), "--index", str(index), "--catalogue", str(FIXTURE), "-q"], fake)
    assert result.exit_code == 0, result.output
    return index


def test_query_format_bibtex_is_valid_bibtex(catalogued: Path, fake: FakeEmbedder) -> None:
    bibtexparser = pytest.importorskip("bibtexparser")
    result = run(["query", "federated LoRA privacy", "-k", "5", "--index", str(catalogued), "--format", "bibtex"], fake)
    assert result.exit_code == 0, result.output
    library = bibtexparser.parse_string(result.stdout)
    assert library.failed_blocks == [] and len(library.entries) == 5
    first = library.entries[0]
    assert first.key == "wen2025neurips-differentially"
    assert first["title"] == "Differentially Private Federated Low Rank Adaptation Beyond Fixed-Matrix"
    assert first["author"].startswith("Wen, Ming and Zhu, Jiaqi")
    # Uncatalogued seeds have no title or authors: their key is the document id.
    assert all(e.key.startswith("doc") for e in library.entries[1:] if "title" not in e.fields_dict)


def test_related_format_csv_leads_with_rank_and_score(catalogued: Path, fake: FakeEmbedder) -> None:
    result = run(["related", "6a24ce769ac8de0d", "-k", "3", "--index", str(catalogued), "--format", "csv"], fake)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["rank"] for r in rows] == ["1", "2", "3"] and all(float(r["score"]) > 0 for r in rows)
    assert "6a24ce769ac8de0d" not in [r["id"] for r in rows]


def test_export_command_by_ids_where_and_to_a_file(catalogued: Path, fake: FakeEmbedder, tmp_path: Path) -> None:
    result = run(["export", "wen2025neurips-differentially", "6a24ce", "--index", str(catalogued), "--format", "ris"])
    assert result.exit_code == 0, result.output
    assert [r["ID"] for r in parse_ris(result.stdout)] == [["wen2025neurips-differentially"]]  # the same paper once
    result = run(["export", "--where", "venue=neurips", "--index", str(catalogued), "--format", "csljson"])
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)) == 3  # the three catalogued seeds
    out = tmp_path / "all.bib"
    result = run(["export", "--index", str(catalogued), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"exported 91 documents to {out} (bibtex)" in result.output
    assert out.read_text(encoding="utf-8").count("\n@") == 90


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["export", "nosuchpaper"], "no document 'nosuchpaper'"),
        (["export", "--where", "year"], "malformed --where 'year'"),
        (["query", "privacy", "--json", "--format", "ris"], "choose one of --json, --jsonl and --format"),
    ],
)
def test_export_errors_are_one_line(catalogued: Path, fake: FakeEmbedder, args: list[str], message: str) -> None:
    result = run([*args, "--index", str(catalogued)], fake)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output


@pytest.fixture
def uncatalogued(tmp_path: Path, fake: FakeEmbedder) -> Path:
    index = tmp_path / "plain"
    result = run(["index", str(SEEDS), "--index", str(index), "-q"], fake)
    assert result.exit_code == 0, result.output
    return index


def test_export_where_on_a_field_no_document_has_says_why(uncatalogued: Path, fake: FakeEmbedder) -> None:
    result = CliRunner().invoke(cli, ["export", "--where", "venue=neurips", "--index", str(uncatalogued)])
    assert result.exit_code == 0 and result.stdout == ""
    # The same one line query prints for the same filter.
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("semsearch: ") and "venue" in lines[0], result.stderr
    args = ["query", "privacy", "--where", "venue=neurips", "--index", str(uncatalogued)]
    query = CliRunner().invoke(cli, args, obj={"embedder": fake})
    assert lines[0] in query.stderr.splitlines()


def test_untitled_citations_say_why_once(uncatalogued: Path, catalogued: Path, fake: FakeEmbedder) -> None:
    result = CliRunner().invoke(cli, ["export", "--index", str(uncatalogued)])
    assert result.exit_code == 0 and result.stdout.count("@misc{") == 91
    assert result.stderr.strip().splitlines() == [
        "semsearch: 91 of 91 entries have no title: the index has no catalogue; "
        "join one with semsearch index --catalogue FILE"
    ]
    hits = CliRunner().invoke(
        cli, ["query", "privacy", "-k", "3", "--format", "ris", "--index", str(uncatalogued)], obj={"embedder": fake}
    )
    assert hits.exit_code == 0 and hits.stderr.count("entries have no title") == 1
    assert "3 of 3 entries have no title: the index has no catalogue" in hits.stderr
    # A catalogued index names the other reason; titled entries alone say nothing.
    result = CliRunner().invoke(cli, ["export", "--index", str(catalogued)])
    assert "88 of 91 entries have no title: no catalogue record matched them" in result.stderr
    titled = CliRunner().invoke(cli, ["export", "wen2025neurips-differentially", "--index", str(catalogued)])
    assert titled.exit_code == 0 and titled.stderr == ""


# ------------------------------------------------------------------------------------------------- API


def test_api_export(catalogued: Path, fake: FakeEmbedder) -> None:
    pytest.importorskip("fastapi")
    pytest.importorskip("httpx")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    with TestClient(create_app(catalogued, embedder=fake), base_url="http://localhost") as client:
        response = client.get("/api/export", params={"ids": "6a24ce769ac8de0d,19c4411b285c30dd", "format": "ris"})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("application/x-research-info-systems")
        assert len(parse_ris(response.text)) == 2
        response = client.get("/api/export", params=[("ids", "6a24ce769ac8de0d"), ("format", "csljson")])
        assert json.loads(response.text)[0]["title"].startswith("Differentially Private Federated")
        assert client.get("/api/export?ids=6a24ce769ac8de0d").text.startswith("@inproceedings{")  # bibtex default
        missing = client.get("/api/export", params={"ids": "nosuchpaper"})
        assert missing.status_code == 404 and "nosuchpaper" in missing.json()["error"]
        assert client.get("/api/export", params={"ids": "6a24ce", "format": "endnote"}).status_code == 422
        assert client.get("/api/export").status_code == 422
        assert client.get("/api/export", params={"ids": ","}).status_code == 422
        hit = client.get("/api/search", params={"q": "federated LoRA", "k": 1}).json()["hits"][0]
        assert hit["byline"] == "Ming Wen, Jiaqi Zhu, … · NeurIPS 2025"
        paper = client.get("/api/documents/6a24ce769ac8de0d").json()
        assert paper["link"] == "https://openreview.net/forum?id=TecJ926Vgn" and paper["authors"][0] == "Ming Wen"
