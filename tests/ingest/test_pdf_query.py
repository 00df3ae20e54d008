"""A PDF outside the index as the query: `related --file paper.pdf`, `recommend --like-text paper.pdf`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from semsearch.core.errors import InputError
from semsearch.ingest.pdf import abstract_of_file
from tests.helpers import BAD_PDFS, PAPERS, PDF_EXPECTED, PDFS, FakeEmbedder, assert_one_line_error, run

PAPER = "05-twocol.pdf"  # two columns, the abstract inside the left one


def earlier_version(entry: dict[str, str]) -> str:
    """The paper's abstract cut to its first half: the same subject, too different to be a copy of it."""
    words = entry["abstract"].split()
    return " ".join(words[: len(words) // 2])


def build(root: Path, *, whole: bool) -> Path:
    """An index of the other fixture papers, the small corpus, and the paper (whole, or an earlier version)."""
    rows = [
        {"id": e["id"], "title": e["title"], "abstract": e["abstract"]}
        for f, e in PDF_EXPECTED.items()
        if f[:2].isdigit()
    ]
    rows = [r for r in rows if r["id"] != PDF_EXPECTED[PAPER]["id"]]
    rows += [{"id": name, "title": name, "abstract": text} for name, text in PAPERS.items()]
    paper = PDF_EXPECTED[PAPER]
    abstract = paper["abstract"] if whole else earlier_version(paper)
    rows.append({"id": "the-paper", "title": paper["title"], "abstract": abstract})
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    index = root / "idx"
    built = run(["index", str(corpus), "--index", str(index), "-q"], FakeEmbedder())
    assert built.exit_code == 0, built.output
    return index


@pytest.fixture(scope="module")
def near(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("near"), whole=False)


def texts(output: str) -> list[str]:
    return [h["text"] for h in json.loads(output)]


def test_a_pdf_reads_as_its_title_and_abstract(tmp_path: Path) -> None:
    paper = PDF_EXPECTED[PAPER]
    text = abstract_of_file(PDFS / PAPER)
    assert " ".join(text.split()) == " ".join(f"{paper['title']} {paper['abstract']}".split())
    # Known by its %PDF- header, whatever its name; a text file is read as text.
    for name in ("paper", "paper.txt"):
        shutil.copy(PDFS / PAPER, tmp_path / name)
        assert abstract_of_file(tmp_path / name) == text
    (tmp_path / "abstract.txt").write_text("\ufeffGraph networks pass messages.\n", encoding="utf-8")
    assert abstract_of_file(tmp_path / "abstract.txt") == "Graph networks pass messages.\n"


def test_related_file_pdf_ranks_its_paper_first(near: Path, tmp_path: Path) -> None:
    result = run(["related", "--file", str(PDFS / PAPER), "--index", str(near), "--json", "-k", "3"], FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert texts(result.output)[0] == earlier_version(PDF_EXPECTED[PAPER])
    # A PDF saved without its extension is still read as one.
    shutil.copy(PDFS / PAPER, tmp_path / "download")
    unnamed = run(["related", "--file", str(tmp_path / "download"), "--index", str(near), "--json"], FakeEmbedder())
    assert unnamed.exit_code == 0, unnamed.output
    assert texts(unnamed.output)[:3] == texts(result.output)


def test_related_file_pdf_of_an_indexed_paper_leaves_it_out(tmp_path: Path) -> None:
    index = build(tmp_path, whole=True)
    result = run(["related", "--file", str(PDFS / PAPER), "--index", str(index), "--json"], FakeEmbedder())
    assert result.exit_code == 0, result.output
    found = texts(result.output)
    assert found and PDF_EXPECTED[PAPER]["abstract"] not in found  # the paper itself, as for DOC_ID and --text


@pytest.mark.parametrize("flag", ["--like-text", "--like-file"])
def test_recommend_like_text_pdf_gives_cards(near: Path, flag: str) -> None:
    fake = FakeEmbedder()
    result = run(["recommend", flag, str(PDFS / PAPER), "--index", str(near), "--json", "-k", "3"], fake)
    assert result.exit_code == 0, result.output
    cards = json.loads(result.output)
    assert len(cards) == 3
    assert cards[0]["text"] == earlier_version(PDF_EXPECTED[PAPER])
    table = run(["recommend", "--like-text", str(PDFS / PAPER), "--index", str(near), "-k", "2"], fake)
    assert table.exit_code == 0 and "because: near your abstract" in table.output, table.output


@pytest.mark.parametrize("name", sorted(BAD_PDFS))
def test_a_bad_pdf_as_the_query_is_one_line(near: Path, name: str) -> None:
    path = PDFS / "bad" / name
    for args in (["related", "--file", str(path)], ["recommend", "--like-text", str(path)]):
        assert_one_line_error(run([*args, "--index", str(near)], FakeEmbedder()), str(path), BAD_PDFS[name])
    with pytest.raises(InputError, match=BAD_PDFS[name].split(" (")[0]):
        abstract_of_file(path)


def test_a_text_file_works_as_before(near: Path, tmp_path: Path) -> None:
    path = tmp_path / "abstract.txt"
    path.write_text(earlier_version(PDF_EXPECTED[PAPER]).replace(". ", ".\r\n"), encoding="utf-8-sig")
    for args in (["related", "--file", str(path)], ["recommend", "--like-text", str(path)]):
        result = run([*args, "--index", str(near), "--json", "-k", "2"], FakeEmbedder())
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)
    missing = run(["related", "--file", str(tmp_path / "no.txt"), "--index", str(near)], FakeEmbedder())
    assert_one_line_error(missing, "cannot read", "no.txt")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    bad = run(["related", "--file", str(tmp_path / "latin1.txt"), "--index", str(near)], FakeEmbedder())
    assert_one_line_error(bad, "cannot read", "latin1.txt")
