"""Benchmark PDF reading: pages/s of extraction on the fixture papers, and an unchanged folder of PDFs refreshed.

Extraction: every good fixture PDF (``tests/fixtures/pdf``) read ``--repeat`` times with the cache bypassed; the
head reading (``ingest.pdf.extract``: page 1 in column order, the next pages' plain text) in files/s and pages
read/s, and the column pass over every page of every paper (what full-text passages will cost) in pages/s.
Accuracy: each fixture's title, authors and abstract against ``expected.jsonl`` (exact after Unicode
compatibility folding and whitespace collapsing), counted per layout.
Refresh: a folder of ``--files`` PDFs (the fixtures, each copy made distinct by a trailing comment after %%EOF),
built once with the stand-in encoder, then refreshed with nothing changed. Prints one JSON line; run it on one
core to compare with the target (``taskset -c 0 nice python -m benchmarks.bench_pdf``).

    python -m benchmarks.bench_pdf [--repeat 3] [--files 1000] [--full-text] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

from benchmarks.harness import HashedWords
from semsearch.ingest import pdf
from semsearch.ingest.pdf_layout import column_order, page_lines
from semsearch.write.build import BuildOptions, build_index

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "pdf"


def good_fixtures() -> list[Path]:
    """The fixture papers that read (the bad ones live in ``bad/``)."""
    return sorted(FIXTURES.glob("*.pdf"))


def extraction(repeat: int) -> dict[str, float]:
    """Head readings and whole-document column passes, timed in CPU seconds."""
    import pypdfium2 as pdfium

    files = good_fixtures()
    blobs = [(p, p.read_bytes()) for p in files]
    head_pages = sum(min(pdf.HEAD_PAGES, len(pdfium.PdfDocument(raw))) for _, raw in blobs)
    start = time.process_time()
    for _ in range(repeat):
        for path, raw in blobs:
            pdf.extract(raw, path)
    head_cpu = time.process_time() - start
    all_pages = 0
    start = time.process_time()
    for _ in range(repeat):
        for _, raw in blobs:
            document = pdfium.PdfDocument(raw)
            for index in range(len(document)):
                page = document[index]
                textpage = page.get_textpage()
                column_order(page_lines(textpage, page.get_height()), page.get_width())
                textpage.close()
                page.close()
                all_pages += 1
            document.close()
    full_cpu = time.process_time() - start
    return {
        "files": len(files),
        "head_files_per_cpu_s": round(repeat * len(files) / head_cpu, 1),
        "head_pages_per_cpu_s": round(repeat * head_pages / head_cpu, 1),
        "column_pass_pages_per_cpu_s": round(all_pages / full_cpu, 1),
    }


def _compare_form(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u00ad", "")
    return " ".join(text.split())


def accuracy() -> dict[str, Any]:
    """Per layout: papers, and how many read their title, authors and abstract exactly."""
    layouts: dict[str, dict[str, int]] = {}
    for line in (FIXTURES / "expected.jsonl").read_text(encoding="utf-8").splitlines():
        want = json.loads(line)
        got = pdf.extract((FIXTURES / want["file"]).read_bytes(), FIXTURES / want["file"])
        row = layouts.setdefault(want["layout"], {"papers": 0, "title": 0, "authors": 0, "abstract": 0})
        row["papers"] += 1
        row["title"] += _compare_form(got.title) == _compare_form(want["title"])
        row["authors"] += [_compare_form(a) for a in got.authors] == [_compare_form(a) for a in want["authors"]]
        row["abstract"] += _compare_form(got.abstract) == _compare_form(want["abstract"])
    total = {key: sum(row[key] for row in layouts.values()) for key in ("papers", "title", "authors", "abstract")}
    return {"layouts": layouts, "accuracy": total}


def refresh(count: int, workdir: Path, full_text: bool = False) -> dict[str, float]:
    """Seconds to build a folder of ``count`` PDFs, and to refresh it unchanged."""
    folder = workdir / "papers"
    folder.mkdir(parents=True, exist_ok=True)
    sources = good_fixtures()
    for i in range(count):
        raw = sources[i % len(sources)].read_bytes()
        (folder / f"paper{i:05d}.pdf").write_bytes(raw + f"%copy {i}\n".encode())
    os.environ["SEMSEARCH_PDF_CACHE"] = str(workdir / "pdf-cache")
    index = workdir / "index"
    options = BuildOptions(skip_bad=True, full_text=full_text)
    start = time.perf_counter()
    build_index([str(folder)], index, options, embedder=HashedWords())
    first = time.perf_counter() - start
    start = time.perf_counter()
    build_index([str(folder)], index, options, embedder=HashedWords())
    unchanged = time.perf_counter() - start
    return {
        "pdfs": count,
        "full_text": full_text,
        "first_build_s": round(first, 2),
        "unchanged_refresh_s": round(unchanged, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--full-text", action="store_true", help="build the folder with --full-text passages")
    parser.add_argument("--workdir", type=Path)
    args = parser.parse_args()
    result: dict[str, Any] = extraction(args.repeat) | accuracy()
    if args.files:
        with tempfile.TemporaryDirectory(prefix="bench-pdf-") as tmp:
            result |= refresh(args.files, args.workdir or Path(tmp), args.full_text)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
