"""``GET /api/documents/{id}/pdf``: the PDF a paper was read from, and nothing else, ever (404 otherwise)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers import PDF_EXPECTED, PDFS, FakeEmbedder

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from fastapi.testclient import TestClient  # noqa: E402

from semsearch import BuildOptions, build_index  # noqa: E402
from semsearch.faces.serve import create_app  # noqa: E402

PAPER = "05-twocol.pdf"


@pytest.fixture
def papers(tmp_path: Path) -> Path:
    """A PDF, the same paper's JSONL copy (one document with both sources), and a paper of JSONL alone."""
    folder = tmp_path / "papers"
    folder.mkdir()
    shutil.copy(PDFS / PAPER, folder / PAPER)
    e = PDF_EXPECTED[PAPER]
    rows = [
        {"id": "copy", "title": e["title"], "abstract": e["abstract"], "file": "/etc/passwd"},
        {"id": "alone", "title": "Tides", "abstract": "Sea level rise and how harbours silt up over decades."},
    ]
    (folder / "papers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


@pytest.fixture
def client(tmp_path: Path, papers: Path) -> Iterator[TestClient]:
    index = tmp_path / "index"
    build_index([str(papers)], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    with TestClient(create_app(index, embedder=FakeEmbedder()), base_url="http://localhost") as c:
        yield c


def test_a_paper_read_from_a_pdf_links_its_file_and_the_route_streams_it(client: TestClient, papers: Path) -> None:
    paper = client.get("/api/documents/copy").json()  # found by the JSONL record's id: one document
    assert {s["kind"] for s in paper["sources"]} == {"line", "page"}
    response = client.get(f"/api/documents/{paper['id']}/pdf")
    assert response.status_code == 200, response.text
    assert response.content == (papers / PAPER).read_bytes()
    assert response.headers["content-type"] == "application/pdf"
    assert response.headers["content-disposition"].startswith("inline")
    assert "script-src" not in response.headers["content-security-policy"]
    assert response.headers["x-content-type-options"] == "nosniff"
    # The external id works as every paper route takes it.
    assert client.get("/api/documents/copy/pdf").content == response.content


def test_a_paper_without_a_pdf_source_is_404_whatever_its_metadata_says(client: TestClient) -> None:
    response = client.get("/api/documents/alone/pdf")
    assert response.status_code == 404
    assert "not read from a PDF" in response.json()["error"]


@pytest.mark.parametrize(
    "path",
    [
        "/api/documents/0000000000000000/pdf",  # no such paper
        "/api/documents/..%2F..%2Fetc%2Fpasswd/pdf",  # a path is never read from the request
        "/api/documents/%2Fetc%2Fpasswd/pdf",
        "/api/documents/copy/pdf/../../../etc/passwd",
    ],
)
def test_anything_but_a_known_paper_is_404(client: TestClient, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 404, response.text
    assert b"root:" not in response.content


def test_a_pdf_that_moved_or_was_replaced_is_not_sent(client: TestClient, papers: Path, tmp_path: Path) -> None:
    doc = client.get("/api/documents/copy").json()["id"]
    target = papers / PAPER
    (tmp_path / "secret.txt").write_text("not for the page", encoding="utf-8")
    target.unlink()
    target.symlink_to(tmp_path / "secret.txt")  # the recorded path now links elsewhere
    assert client.get(f"/api/documents/{doc}/pdf").status_code == 404
    target.unlink()
    target.write_text("not a PDF any more", encoding="utf-8")
    assert client.get(f"/api/documents/{doc}/pdf").status_code == 404
    other = PDFS / "06-twocol.pdf"  # another paper saved at the recorded path
    target.unlink()
    shutil.copy(other, target)
    assert client.get(f"/api/documents/{doc}/pdf").status_code == 404
    target.unlink()
    response = client.get(f"/api/documents/{doc}/pdf")
    assert response.status_code == 404 and "no longer the file the index read" in response.json()["error"]


def test_a_pdf_reached_through_a_linked_folder_is_not_sent(client: TestClient, papers: Path, tmp_path: Path) -> None:
    doc = client.get("/api/documents/copy").json()["id"]
    assert client.get(f"/api/documents/{doc}/pdf").status_code == 200
    moved = tmp_path / "elsewhere"
    papers.rename(moved)
    papers.symlink_to(moved)  # the recorded path's folder is now a link
    assert client.get(f"/api/documents/{doc}/pdf").status_code == 404
    papers.unlink()
    moved.rename(papers)
    assert client.get(f"/api/documents/{doc}/pdf").status_code == 200


def test_the_route_takes_no_other_method(client: TestClient) -> None:
    doc = client.get("/api/documents/copy").json()["id"]
    assert client.post(f"/api/documents/{doc}/pdf").status_code == 405
