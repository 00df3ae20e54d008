"""A PDF's full text by page, cut into passages of a few sentences (``semsearch index --full-text``).

Every page (up to ``MAX_PAGES``: a book past that has its first pages read) is put in reading order by the
same column pass as the head (``pdf_layout.column_order``); lines repeated at the top or bottom of most pages
(running headers, footers) and bare page numbers are dropped; words broken at line ends are joined with the
whole document's words as the dictionary. The text from a "References" (or "Bibliography") heading on is left
out. Each page's sentences (``core.sentences``) are grouped into passages of at most ``PASSAGE_SENTENCES``
sentences and ``PASSAGE_WORDS`` words (what a short-window encoder reads whole); a passage never spans two
pages, so its page is the page of all its words but a sentence carried over a page break.

The passages of a file are cached under its content's sha256 beside the head's reading, in an entry of their
own (``<sha256>.full.json``): an index built without ``--full-text`` never reads or writes one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from semsearch.core.records import Passage, Record
from semsearch.core.sentences import split_sentences
from semsearch.ingest.pdf import _MAGIC, _MAGIC_WITHIN, BadPdf, _keep, cache_folder, clean
from semsearch.ingest.pdf_layout import column_order, page_lines

# Bumped when the full-text reading changes, so passages cached by an older reader are read again.
FULL_TEXT_VERSION = 1
MAX_PAGES = 300  # pages read for passages: a book's first 300 (a paper has far fewer)
PASSAGE_SENTENCES = 2  # three let the neighbours of a matching sentence outweigh it (docs/guides/pdfs.md)
PASSAGE_WORDS = 70  # about 90 word pieces: well within the 256 a MiniLM encoder reads
MIN_PASSAGE_CHARS = 20  # a shorter leftover (a caption's number, a stray heading) is no passage
_REFERENCES = re.compile(r"^\s*(?:\d+\.?|[IVX]+\.)?\s*(references|bibliography|literature cited)\s*$", re.I)
_PAGE_NUMBER = re.compile(r"^\s*(?:page\s*)?\d{1,4}(?:\s*(?:/|of)\s*\d{1,4})?\s*$", re.I)
_DIGITS = re.compile(r"\d+")
# A reference entry's marks: "[5] Batuhan Koyuncu," at its start, "In ICCV, 2023." at its end.
_ENTRY = re.compile(
    r"\[\d{1,3}\] [A-Z][\w'’\-]+ |\bIn [A-Z][\w\- ]{1,40}, (?:19|20)\d\d\b|^\W*(?:19|20)\d\d\.?$"
    r"|(?:[A-Z][\w'’\-]+ (?:[A-Z]\. )?[A-Z][\w'’\-]+, ){2,}"
)


def full_text_of(path: Path) -> list[Passage]:
    """The passages of a PDF file (from the cache when its content was read before); none when it has no text.

    OSError when the file cannot be read.
    """
    raw = path.read_bytes()
    return cached_passages(raw, hashlib.sha256(raw).hexdigest())


def cached_passages(raw: bytes, digest: str) -> list[Passage]:
    """The passages of a PDF's content, from its cache entry or read now and kept."""
    entry = cache_folder() / f"{digest}.full.json"
    try:
        kept = json.loads(entry.read_text(encoding="utf-8"))
        if kept.get("version") == FULL_TEXT_VERSION:
            return [Passage(int(page), str(text)) for page, text in kept["passages"]]
    except (OSError, ValueError, TypeError, KeyError):
        pass  # absent, damaged or from another reader: read the file again
    try:
        found = passages(read_pages(raw))
    except BadPdf:
        found = []  # the head's reading says why; a file without text has no passages
    _keep(entry, {"version": FULL_TEXT_VERSION, "passages": [[p.page, p.text] for p in found]})
    return found


def read_pages(raw: bytes) -> list[str]:
    """The text of each page (at most ``MAX_PAGES``) in reading order, cleaned; ``BadPdf`` when none can be read."""
    if not raw or _MAGIC not in raw[:_MAGIC_WITHIN]:
        raise BadPdf("not a PDF")
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(raw)
    except pdfium.PdfiumError:
        raise BadPdf("PDFium cannot open it") from None
    try:
        pages: list[list[str]] = []
        for index in range(min(len(document), MAX_PAGES)):
            page = document[index]
            textpage = page.get_textpage()
            try:
                width, height = page.get_width(), page.get_height()
                pages.append([line.text for line in column_order(page_lines(textpage, height), width)])
            finally:
                textpage.close()
                page.close()
    except pdfium.PdfiumError as exc:
        raise BadPdf(f"damaged PDF ({exc})") from None
    finally:
        document.close()
    pages = _before_references(_without_running_lines(pages))
    vocabulary = Counter(re.findall(r"\w+", "\n".join("\n".join(lines) for lines in pages)))
    return [clean("\n".join(lines), vocabulary) for lines in pages]


def _before_references(pages: list[list[str]]) -> list[list[str]]:
    """The pages up to the last References heading after page 1 (its page cut there, the pages after it dropped)."""
    for number in range(len(pages) - 1, 0, -1):
        lines = pages[number]
        at = next((i for i in range(len(lines) - 1, -1, -1) if _REFERENCES.match(lines[i])), None)
        if at is not None:
            return [*pages[:number], lines[:at]]
    return pages


def _without_running_lines(pages: list[list[str]]) -> list[list[str]]:
    """Pages without bare page numbers and without the lines most pages repeat at their top or bottom.

    A running header differs from page to page by its number only, so lines are compared with digits removed.
    """

    def key(line: str) -> str:
        return " ".join(_DIGITS.sub("#", line).split()).lower()

    edges: Counter[str] = Counter()
    for lines in pages:
        edges.update({key(line) for line in [*lines[:2], *lines[-2:]] if line.strip()})
    repeated = {k for k, n in edges.items() if len(pages) >= 3 and n >= max(3, len(pages) // 2)}
    out = []
    for lines in pages:
        kept = [
            line
            for i, line in enumerate(lines)
            if not _PAGE_NUMBER.match(line) and not ((i < 2 or i >= len(lines) - 2) and key(line) in repeated)
        ]
        out.append(kept)
    return out


def passages(pages: Sequence[str]) -> list[Passage]:
    """Each page's sentences in passages of a few sentences, with their 1-based page; reference entries left out.

    The References heading cuts the text already, but a column pass can put the entries that continue in the
    other column before it: a sentence that reads as an entry (``_ENTRY``) or a list of authors is left out.
    """
    return [Passage(number, body) for number, text in enumerate(pages, start=1) for body in page_passages(text)]


def page_passages(text: str) -> list[str]:
    """A page's text in passages of at most ``PASSAGE_SENTENCES`` sentences and ``PASSAGE_WORDS`` words."""
    out: list[str] = []
    current: list[str] = []
    words = 0
    for start, end in split_sentences(text):
        sentence = text[start:end]
        if _ENTRY.search(sentence):
            continue
        size = len(sentence.split())
        if current and (len(current) >= PASSAGE_SENTENCES or words + size > PASSAGE_WORDS):
            out.append(" ".join(current))
            current, words = [], 0
        if size > PASSAGE_WORDS:  # one long run (a table read as text): cut by words
            parts = sentence.split()
            for i in range(0, len(parts), PASSAGE_WORDS):
                out.append(" ".join(parts[i : i + PASSAGE_WORDS]))
            continue
        current.append(sentence)
        words += size
    if current:
        out.append(" ".join(current))
    return [p for p in out if len(p) >= MIN_PASSAGE_CHARS]


def add_full_text(records: Sequence[Record]) -> None:
    """Give each record read from a PDF (a PDF source, or a Zotero item's attachment) that file's passages.

    A file that cannot be read again gives none: its record keeps its abstract.
    """
    for record in records:
        if record.passages:
            continue
        for path in _pdfs_of(record):
            try:
                record.passages = full_text_of(Path(path))
            except OSError:
                continue  # missing or unreadable: the next attachment, if any
            if record.passages:
                break


def _pdfs_of(record: Record) -> list[str]:
    """The PDFs a record's full text may come from: its source PDF (``file``), else its attachments."""
    pdf = record.metadata.get("file") if record.provenance.kind == "page" else None
    return [pdf] if isinstance(pdf, str) else list(record.pdf_files)
