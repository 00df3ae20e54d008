"""A PDF of a paper already read from JSONL is the same document: by its abstract, or by the DOI/arXiv id it shows.

The fixture papers of tests/fixtures/pdf/ are indexed beside a JSONL file holding their title, authors and abstract,
plus tests/fixtures/pdf/ids/: PDFs whose abstract was edited (no near-duplicate of the JSONL copy) but whose first
page shows the DOI or arXiv id the JSONL record names. In one build, and as a refresh in either order, every paper
is one document holding both sources.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from semsearch.ingest import pdf
from tests.helpers import PDF_EXPECTED, PDFS, FakeEmbedder, pdf_compare_form, run

IDS = PDFS / "ids"
ID_EXPECTED: dict[str, dict[str, Any]] = {
    e["file"]: e for e in map(json.loads, (IDS / "expected.jsonl").read_text(encoding="utf-8").splitlines())
}
SHOWN = {  # each id fixture: what page 1 shows, as read
    "sam-arxiv-stamp.pdf": (None, "2304.02643v3"),
    "mvsnet-springer-doi.pdf": ("10.1007/978-3-030-01237-3_47", None),
    "transpose-doi-line.pdf": ("10.1109/ICCV48922.2021.01159", None),
}
RECORD_IDS = {  # what the JSONL copy of each names it by (a field of the kind a source gives)
    "sam-arxiv-stamp.pdf": {"url": "https://arxiv.org/abs/2304.02643", "doi": "10.1109/ICCV51070.2023.00371"},
    "mvsnet-springer-doi.pdf": {"doi": "10.1007/978-3-030-01237-3_47"},
    "transpose-doi-line.pdf": {"doi": "10.1109/ICCV48922.2021.01159"},
}
MAIN = sorted(name for name in PDF_EXPECTED if name != "encrypted-owner-only.pdf")


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_page_one_shows_its_id_and_the_stamp_is_not_the_title(name: str) -> None:
    head = pdf.extract((IDS / name).read_bytes(), IDS / name)
    expected = ID_EXPECTED[name]
    assert (head.doi, head.arxiv) == SHOWN[name]
    assert head.title == expected["title"]  # the rotated 20 pt stamp is larger than the title: not taken for it
    assert set(head.authors) <= set(expected["authors"]) and len(head.authors) >= 3
    assert pdf_compare_form(head.abstract) == pdf_compare_form(expected["abstract"])


@pytest.mark.parametrize(
    ("page", "margin", "ids"),
    [
        ("Title\nAbstract\nWe study ...", "arXiv:2106.09685v2 [cs.LG] 16 Oct 2021", (None, "2106.09685v2")),
        ("as in BERT (Devlin et al., arXiv preprint arXiv:1810.04805, 2018)", "", (None, None)),
        ("Preprint. Under review.\narXiv:2304.02643v1", "", (None, "2304.02643v1")),
        (
            "ACM Reference Format: ... KDD '23. https://doi.org/10.1145/3580305.3599256",
            "",
            ("10.1145/3580305.3599256", None),
        ),
        ("J. Mach. Learn. Res. doi:10.5555/3122009.3242010.", "", ("10.5555/3122009.3242010", None)),
        (
            "cites 10.1000/182 before its own\nDOI 10.1109/ICCV48922.2021.01159",
            "",
            ("10.1109/ICCV48922.2021.01159", None),
        ),
        ("arXiv:cs/0112017v1 [cs.AI] 7 Dec 2001", "", (None, "cs/0112017v1")),
        ("no id at all on this page", "", (None, None)),
    ],
)
def test_the_id_patterns_on_realistic_first_pages(page: str, margin: str, ids: tuple[str | None, str | None]) -> None:
    assert pdf.paper_ids(page, margin) == ids


def _records() -> list[dict[str, Any]]:
    """The JSONL copies of every fixture paper: the anthology's title, authors, abstract (and ids where it has them)."""
    rows: dict[str, dict[str, Any]] = {}
    for name in MAIN:
        e = PDF_EXPECTED[name]
        rows[e["id"]] = {"id": e["id"], "title": e["title"], "authors": e["authors"], "abstract": e["abstract"]}
    for name, e in ID_EXPECTED.items():
        row = rows.setdefault(e["id"], {"id": e["id"], "title": e["title"], "authors": e["authors"]})
        row["abstract"] = e["record_abstract"]
        row.update(RECORD_IDS[name])
    return list(rows.values())


def _add_pdfs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in MAIN:
        shutil.copy(PDFS / name, folder / name)
    for name in SHOWN:
        shutil.copy(IDS / name, folder / name)


def _add_jsonl(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "papers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _records()), encoding="utf-8")


def _documents(index: Path) -> list[Any]:
    from semsearch.query.search import Index

    with Index.open(index, embedder=FakeEmbedder()) as idx:
        return list(idx.store.iter_documents())


def _every_paper_is_one_document_with_both_sources(index: Path) -> None:
    docs = _documents(index)
    assert len(docs) == len(_records())
    for doc in docs:
        kinds = {p.kind for p in doc.sources}
        assert kinds == {"line", "page"}, (doc.title, doc.sources)
        assert doc.metadata.get("file", "").endswith(".pdf")


def test_one_build_merges_each_pdf_with_its_jsonl_copy(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    _add_pdfs(papers)
    _add_jsonl(papers)
    index = tmp_path / "idx"
    built = run(["index", str(papers), "--index", str(index)], FakeEmbedder())
    assert built.exit_code == 0, built.output
    assert f"read {len(MAIN) + len(SHOWN) + len(_records())} abstracts" in built.output
    _every_paper_is_one_document_with_both_sources(index)
    # The PDF is a source of the document: a file filter finds the paper that merged by its DOI.
    found = run(
        ["query", "keypoint heatmaps", "--where", "file=*transpose-doi-line.pdf", "--index", str(index), "--json"],
        FakeEmbedder(),
    )
    assert found.exit_code == 0, found.output
    hits = json.loads(found.output)
    rows = hits["results"] if isinstance(hits, dict) else hits
    assert [r["title"] for r in rows] == ["TransPose: Keypoint Localization via Transformer"]


@pytest.mark.parametrize("first", ["jsonl", "pdfs"])
def test_a_refresh_merges_in_either_order_and_ids_never_move(tmp_path: Path, first: str) -> None:
    from semsearch.write.build import BuildOptions, build_index

    papers = tmp_path / "papers"
    (_add_jsonl if first == "jsonl" else _add_pdfs)(papers)
    index = tmp_path / "idx"
    opts = BuildOptions(progress=False, merge_share=1.0)  # a refresh may append: the incremental path decides
    build_index([str(papers)], index, opts, embedder=FakeEmbedder())
    before = {d.id for d in _documents(index)}
    (_add_pdfs if first == "jsonl" else _add_jsonl)(papers)
    summary = build_index(None, index, opts, embedder=FakeEmbedder())
    _every_paper_is_one_document_with_both_sources(index)
    after = {d.id for d in _documents(index)}
    if first == "jsonl":
        assert after == before  # every PDF joined the document its record created
    else:
        # TransPose was two PDFs (the anthology's abstract, and the published one showing its DOI): the JSONL copy
        # ties them into one document, which keeps one of their ids; the other resolves to it as an alias.
        assert after < before and len(before - after) == 1
        from semsearch.query.search import Index

        with Index.open(index, embedder=FakeEmbedder()) as idx:
            merged = idx.store.find(next(iter(before - after)))
        assert merged is not None and merged.id in after and merged.title.startswith("TransPose")
    # The papers that match only by their id are decided by a full build, which says why.
    assert summary.rewritten_because == "an arriving paper shows the DOI or arXiv id of an indexed document"


def test_a_second_copy_of_an_indexed_pdf_is_appended_as_a_late_copy(tmp_path: Path) -> None:
    from semsearch.write.build import BuildOptions, build_index

    papers = tmp_path / "papers"
    _add_pdfs(papers)
    index = tmp_path / "idx"
    opts = BuildOptions(progress=False, merge_share=1.0)
    build_index([str(papers)], index, opts, embedder=FakeEmbedder())
    before = {d.id for d in _documents(index)}
    shutil.copy(IDS / "sam-arxiv-stamp.pdf", papers / "downloaded-again.pdf")  # the same id, two PDFs: no id match
    summary = build_index(None, index, opts, embedder=FakeEmbedder())
    assert summary.segments == 1 and summary.rewritten_because == "", summary
    assert {d.id for d in _documents(index)} == before


def test_arrivals_naming_no_indexed_paper_are_still_appended(tmp_path: Path) -> None:
    from semsearch.write.build import BuildOptions, build_index

    papers = tmp_path / "papers"
    _add_pdfs(papers)
    index = tmp_path / "idx"
    opts = BuildOptions(progress=False, merge_share=1.0)
    build_index([str(papers)], index, opts, embedder=FakeEmbedder())
    other = {"title": "Another paper", "abstract": "A study of tides and their effect on coastal erosion models."}
    rows = [{**other, "id": "x1", "doi": "10.1000/unrelated.1"}, {**other, "id": "x2", "title": "Tides", "url": "x"}]
    rows[1]["abstract"] = "Sea level rise changes how harbours silt up over decades of observation."
    (papers / "more.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    summary = build_index(None, index, opts, embedder=FakeEmbedder())
    assert summary.segments == 1 and summary.rewritten_because == "", summary
    assert summary.added == 2


def _one_page_pdf(path: Path, lines: list[tuple[str, int, str]]) -> Path:
    """A one-page PDF of Helvetica text made with the standard library: (matrix, size, text) per line."""
    ops = "\n".join(f"BT /F1 {size} Tf {matrix} Tm ({text}) Tj ET" for matrix, size, text in lines)
    stream = ops.encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
        b"/Contents 5 0 R >>",
        f"<< /Length {len(stream)} >>\nstream\n".encode() + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


ABSTRACT = (
    "We propose a method that adapts large language models with few trainable parameters, freezing the pretrained "
    "weights and injecting trainable rank decomposition matrices into each layer of the Transformer architecture."
)


def _page(x: int, y: int, *, turned: bool = False) -> str:
    return f"0 1 -1 0 {x} {y}" if turned else f"1 0 0 1 {x} {y}"


def test_a_latex_style_stamp_drawn_up_the_margin_is_read_as_the_id_not_the_title(tmp_path: Path) -> None:
    words = ABSTRACT.split()
    body = [(_page(72, 560 - 14 * i), 10, " ".join(words[i * 10 : i * 10 + 10])) for i in range(4)]
    made = _one_page_pdf(
        tmp_path / "lora.pdf",
        [
            (_page(30, 250, turned=True), 20, "arXiv:2106.09685v2  [cs.CL]  16 Oct 2021"),
            (_page(150, 700), 17, "Low-Rank Adaptation of Large Language Models"),
            (_page(230, 670), 10, "Edward Hu, Yelong Shen"),
            (_page(280, 620), 12, "Abstract"),
            *body,
            (_page(72, 480), 12, "1 Introduction"),
            (_page(72, 460), 10, "Many applications in natural language processing adapt one large model."),
        ],
    )
    head = pdf.extract(made.read_bytes(), made)
    assert head.arxiv == "2106.09685v2"
    assert head.title == "Low-Rank Adaptation of Large Language Models"
    assert head.authors == ["Edward Hu", "Yelong Shen"]
    assert head.abstract == " ".join(words[:40])
