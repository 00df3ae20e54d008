"""`related --file X.pdf` and `recommend --like-file X.pdf` never return X's own paper: not only a copy of its
abstract, but the document read from a PDF with X's content, or naming X's DOI or arXiv id (query/given.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from semsearch.core.records import Document, GivenPaper, Provenance, SourceFile
from semsearch.dedup.duplicates import same_paper, text_hash
from semsearch.ingest.pdf import paper_of_file
from semsearch.query.given import GivenMatch
from tests.helpers import PDF_EXPECTED, PDFS, FakeEmbedder, run, synthetic_abstracts

MERGED = "01-single.pdf"  # a PDF merged into a record whose abstract differs (it shows no DOI or arXiv id)
SAM = PDFS / "ids" / "sam-arxiv-stamp.pdf"  # shows arXiv:2304.02643; its abstract is an edit of the anthology's
SAM_RECORD: dict[str, Any] = json.loads((PDFS / "ids" / "expected.jsonl").read_text(encoding="utf-8").splitlines()[0])


def _edit(abstract: str, share: float) -> str:
    """The abstract with its last ``share`` of words changed and a sentence added: a revised version of it."""
    words = abstract.split()
    cut = int(len(words) * (1 - share))
    extra = "moreover the proposed framework generalises across several unseen domains with careful ablations"
    return " ".join([*words[:cut], *(w + "x" for w in words[cut:]), *extra.split()])


def _filler(count: int) -> list[dict[str, str]]:
    return [{"id": f"f{i}", "title": f"Filler {i}", "abstract": t} for i, t in enumerate(synthetic_abstracts(count, 3))]


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _index(tmp_path: Path, papers: Path) -> Path:
    index = tmp_path / "idx"
    built = run(["index", str(papers), "--index", str(index), "-q"], FakeEmbedder())
    assert built.exit_code == 0, built.output
    return index


def _ids(output: str) -> list[str]:
    data = json.loads(output)
    return [row["id"] for row in (data["results"] if isinstance(data, dict) else data)]


def _doc_of(index: Path, title: str) -> Document:
    from semsearch.query.search import Index

    with Index.open(index, embedder=FakeEmbedder()) as opened:
        (doc,) = [d for d in opened.store.iter_documents() if d.title == title]
        return doc


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index where MERGED's PDF is one source of a paper whose text is another source's, far from the PDF's."""
    tmp = tmp_path_factory.mktemp("merged")
    exp = PDF_EXPECTED[MERGED]
    papers = tmp / "papers"
    papers.mkdir()
    shutil.copy(PDFS / MERGED, papers / MERGED)
    _jsonl(papers / "filler.jsonl", _filler(20))
    # b is too far from the PDF's abstract to be its copy; c, a near copy of both, ties the three into one paper
    # whose text is b's (the longest).
    _jsonl(papers / "b.jsonl", [{"id": "b", "title": exp["title"], "abstract": _edit(exp["abstract"], 0.2)}])
    _jsonl(papers / "c.jsonl", [{"id": "c", "title": exp["title"], "abstract": _edit(exp["abstract"], 0.1)}])
    index = _index(tmp, papers)
    doc = _doc_of(index, exp["title"])
    assert {p.file.rsplit("/", 1)[-1] for p in doc.sources} == {MERGED, "b.jsonl", "c.jsonl"}
    given = paper_of_file(PDFS / MERGED)
    assert not same_paper(doc.text, text_hash(given.text), given.text) and not given.ids  # only its file tells
    return index


def test_a_pdf_reads_as_a_paper_with_its_content_hash_and_ids() -> None:
    import hashlib

    paper = paper_of_file(SAM)
    assert paper.sha256 == hashlib.sha256(SAM.read_bytes()).hexdigest()
    assert paper.title == "Segment Anything" and ("arxiv", "2304.02643v3") in paper.ids
    assert paper.text.startswith("Segment Anything ")


def test_related_file_leaves_out_the_paper_its_pdf_was_merged_into(merged: Path, tmp_path: Path) -> None:
    doc = _doc_of(merged, PDF_EXPECTED[MERGED]["title"])
    result = run(["related", "--file", str(PDFS / MERGED), "--index", str(merged), "--json", "-k", "5"], FakeEmbedder())
    assert result.exit_code == 0, result.output
    found = _ids(result.output)
    assert len(found) == 5 and doc.id not in found
    # By content, whatever the file's name or folder now.
    shutil.copy(PDFS / MERGED, tmp_path / "download.pdf")
    moved = run(["related", "--file", str(tmp_path / "download.pdf"), "--index", str(merged), "--json"], FakeEmbedder())
    assert moved.exit_code == 0, moved.output
    assert doc.id not in _ids(moved.output)
    # Its text alone (--text) finds the paper: only the file says it is the same paper.
    text = run(
        ["related", "--text", paper_of_file(PDFS / MERGED).text, "--index", str(merged), "--json"], FakeEmbedder()
    )
    assert text.exit_code == 0, text.output
    assert _ids(text.output)[0] == doc.id


def test_recommend_like_file_leaves_out_the_paper_its_pdf_was_merged_into(merged: Path) -> None:
    doc = _doc_of(merged, PDF_EXPECTED[MERGED]["title"])
    args = ["recommend", "--like-file", str(PDFS / MERGED), "--index", str(merged), "--json", "-k", "5"]
    result = run(args, FakeEmbedder())
    assert result.exit_code == 0, result.output
    cards = json.loads(result.output)
    assert len(cards) == 5 and doc.id not in [c["id"] for c in cards]


def test_related_file_leaves_out_the_record_naming_its_arxiv_id(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    own = {"id": "sam", "title": SAM_RECORD["title"], "abstract": SAM_RECORD["record_abstract"]}
    own["url"] = "https://arxiv.org/abs/2304.02643"
    # The same id on a record of another title is another paper (a slip in its metadata): it stays.
    other = {"id": "other", "title": "Promptable mask decoders for cells", "arxiv": "2304.02643"}
    words = SAM_RECORD["record_abstract"].split()
    other["abstract"] = " ".join(words[: len(words) // 2])  # near its subject, too short to be a copy of it
    _jsonl(papers / "papers.jsonl", [own, other, *_filler(10)])
    index = _index(tmp_path, papers)
    sam, cells = _doc_of(index, own["title"]), _doc_of(index, other["title"])
    result = run(["related", "--file", str(SAM), "--index", str(index), "--json", "-k", "5"], FakeEmbedder())
    assert result.exit_code == 0, result.output
    found = _ids(result.output)
    assert sam.id not in found and cells.id in found
    recommended = run(
        ["recommend", "--like-file", str(SAM), "--index", str(index), "--json", "-k", "5"], FakeEmbedder()
    )
    assert recommended.exit_code == 0, recommended.output
    ids = [c["id"] for c in json.loads(recommended.output)]
    assert sam.id not in ids and cells.id in ids


def test_a_text_file_names_no_paper_and_a_pdf_only_the_pdf_sources_with_its_content(tmp_path: Path) -> None:
    text = tmp_path / "abstract.txt"
    text.write_text("Graph networks pass messages.", encoding="utf-8")
    assert paper_of_file(text) == GivenPaper("Graph networks pass messages.")
    assert not GivenMatch(paper_of_file(text), [SourceFile(str(text), "0" * 64, 1, "text", "utf-8", 1)])
    given = GivenPaper("t", sha256="ab" * 32)
    recorded = [
        SourceFile("/papers/a.pdf", "ab" * 32, 10, "pdf", "binary", 1),
        SourceFile("/papers/notes.txt", "ab" * 32, 10, "text", "utf-8", 3),  # never a text file's paragraphs
        SourceFile("/other/a.pdf", "cd" * 32, 10, "pdf", "binary", 1),
    ]
    match = GivenMatch(given, recorded)

    def doc(*sources: Provenance) -> Document:
        return Document("1", "t", None, list(sources))

    assert match(doc(Provenance("/papers/a.pdf", "page", 1)))
    assert match(doc(Provenance("papers/a.pdf", "page", 1)))
    assert not match(doc(Provenance("a.pdf", "page", 1)))  # a name that could mean either PDF names neither
    assert not match(doc(Provenance("/other/a.pdf", "page", 1)))
    assert not match(doc(Provenance("/papers/notes.txt", "paragraph", 2)))
