"""PDFs as a source: a paper's title, authors and abstract read from its first page, cached by file content.

PDFium (``pypdfium2``, imported only when a PDF is read) gives each page's text and glyphs. Page 1's lines are
put in reading order (``pdf_layout.column_order``); the title is its largest type, the authors the name-like
parts of the lines between the title and the abstract, and the abstract the text under an "Abstract" heading
(or a run-in "Abstract—") up to the first section heading, else the first long prose paragraph, which the record
marks (``abstract_source: "first-paragraph"``). Only the first pages are read, so a book costs what a paper does.

A PDF that cannot be read (encrypted, no text layer, damaged, not a PDF, empty) is one line in the build's
summary and no records: the build goes on. What a file yields is cached under its content's sha256, so an
unchanged PDF is never read twice. ``paper_of_file`` reads a file given as a query's paper (``related --file``):
a PDF the same way, with its content hash and ids, and one that yields nothing is an ``InputError``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import tempfile
import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from semsearch.core import registry
from semsearch.core.errors import InputError
from semsearch.core.records import GivenPaper, Provenance, Record, SourceFile
from semsearch.ingest.fields import collect
from semsearch.ingest.formats import FileFormat
from semsearch.ingest.pdf_layout import Glyph, column_order, page_glyphs, page_lines, segments, turned
from semsearch.ingest.walk import suffix

# Bumped when extraction changes, so results cached by an older reader are read again.
EXTRACTOR_VERSION = 2
HEAD_PAGES = 3  # pages read: the head is on page 1; the next pages only lend words to hyphen joins
MIN_TEXT_CHARS = 20  # per page read: fewer on all of them is a page image without a text layer
_MAGIC = b"%PDF-"
_MAGIC_WITHIN = 1024  # readers accept a header this far in (some producers prepend junk)

_AFFILIATION = re.compile(
    r"@|\b(Department|Institute|School|Laborator|University|Research|Correspondence|Inc\.|Lab)\b|"
    r"Journal|conference|review",
    re.I,
)
_PROSE = re.compile(r"\b(the|of|a|an|we|is|are|to|in|for|with|that|this)\b")
_NAME = re.compile(r"^[A-ZÀ-Þ][\w.'’\-]*(?: (?:[A-ZÀ-Þ][\w.'’\-]*|de|van|von|der|da|del|la|le|di))+$")
_ABSTRACT_HEADING = re.compile(r"(?im)^\s*abstract\s*$\n|^\s*abstract\s*[—–:.\-]\s*")
_SECTION = re.compile(r"\n\s*(?:1\.?|I\.)\s+[A-Z][A-Za-z ]{3,40}\s*\n|\n\s*Keywords?:|\n\s*Index Terms")
_DOI = re.compile(r"\b(10\.\d{4,9}/[^\s\"<>]+[^\s\"<>.,;)\]])")
# A DOI the page labels as one ("doi:10.1145/…", "DOI 10.1109/…", "https://doi.org/10.…") before a bare one.
_DOI_SAID = re.compile(r"(?:\bdoi\s*:?\s*|\bdoi\.org/)" + _DOI.pattern.removeprefix(r"\b"), re.I)
# New-style (2106.09685v2) and old-style (cs/0112017, math.GT/0309136) arXiv ids.
_ARXIV = re.compile(r"\barXiv\s*:\s*((?:\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[A-Z]{2})?/\d{7})(?:v\d+)?)", re.I)
# What comes before an arXiv id that page 1 cites rather than is ("arXiv preprint arXiv:1810.04805").
_CITED = re.compile(r"(?:preprint|e-?prints?|CoRR|abs/)[\s,]*$", re.I)
_TEXT_SUFFIXES = frozenset(
    ext for name, declared in registry.BUILT_IN_NAMES.items() if name != "pdf" for ext in declared.extensions
)
_LOOSE = re.compile(r"[\s\-\u2010\u00ad\ufffe\x02]+")


class BadPdf(Exception):
    """A PDF that yields nothing, and why (one line)."""


@dataclass
class PdfHead:
    """What a PDF's first page says about its paper."""

    title: str
    authors: list[str]
    abstract: str
    abstract_source: str  # "heading" (under an Abstract heading) or "first-paragraph"
    pages: int
    doi: str | None = None
    arxiv: str | None = None
    version: int = field(default=EXTRACTOR_VERSION)


class Pdf(FileFormat):
    """A PDF file: one paper, read from its first page."""

    name = "pdf"
    extensions = (".pdf",)

    def sniff_file(self, path: Path) -> bool:
        """A file named ``*.pdf`` (or ``*.pdf.gz``, to say it is not read), or one that starts as a PDF does.

        A name a text format owns (``.jsonl``, ``.txt.gz``) is not opened: every file of a folder is sniffed.
        """
        name = path.name.lower()
        if name.endswith((".pdf", ".pdf.gz")):
            return True
        if suffix(name.removesuffix(".gz")) in _TEXT_SUFFIXES:
            return False
        try:
            if not path.is_file():  # a FIFO would block the read
                return False
            with path.open("rb") as handle:
                return handle.read(len(_MAGIC)) == _MAGIC
        except OSError:
            return False

    def read(self, path: Path, display: str, *, skip_bad: bool) -> tuple[list[Record], SourceFile, list[str]]:
        """The paper's record; a PDF that cannot be read is one skipped line and no record."""
        return read_pdf(path, display, skip_bad=skip_bad)


def read_pdf(path: Path, display: str, *, skip_bad: bool = False) -> tuple[list[Record], SourceFile, list[str]]:
    """One record from a PDF (its cached reading when the content was read before), or the line saying why not."""
    try:
        mtime_ns = path.stat().st_mtime_ns  # before the read: a file changed meanwhile looks stale, never fresh
        outcome, digest, size = head_of(path)
    except OSError as exc:
        raise InputError(f"{display}: cannot be read ({exc.strerror or exc})") from None
    source = SourceFile(str(path.resolve()), digest, size, "pdf", "binary", 0, mtime_ns)
    if isinstance(outcome, str):
        return [], source, [f"{display}: {outcome}"]
    item: dict[str, Any] = {"title": outcome.title or None, "abstract": outcome.abstract or None}
    if outcome.authors:
        item["authors"] = outcome.authors
    item["file"] = str(path.resolve())
    item["pages"] = outcome.pages
    if outcome.abstract and outcome.abstract_source != "heading":
        item["abstract_source"] = outcome.abstract_source
    for key in ("doi", "arxiv"):
        if getattr(outcome, key):
            item[key] = getattr(outcome, key)
    records, skipped = collect([(Provenance(display, "page", 1), item)], skip_bad=True)
    if not records:
        return [], source, [f"{display}: no title or abstract found on page 1"]
    return records, dataclasses.replace(source, records=len(records)), skipped


# ------------------------------------------------------------------------------------------------- cache


def cache_folder() -> Path:
    """Where readings are kept: $SEMSEARCH_PDF_CACHE, else $XDG_CACHE_HOME/semsearch/pdf (~/.cache when unset)."""
    chosen = os.environ.get("SEMSEARCH_PDF_CACHE")
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "semsearch" / "pdf"


def head_of(path: Path) -> tuple[PdfHead | str, str, int]:
    """A PDF file's reading (its head, or why it has none), its content's sha256 and its size; OSError if unreadable."""
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    return cached_head(raw, digest, path), digest, len(raw)


def cached_head(raw: bytes, digest: str, path: Path) -> PdfHead | str:
    """The reading of a PDF's content (its head, or why it has none), from the cache or read now and kept."""
    entry = cache_folder() / f"{digest}.json"
    try:
        kept = json.loads(entry.read_text(encoding="utf-8"))
        if kept.get("version") == EXTRACTOR_VERSION:
            return str(kept["bad"]) if "bad" in kept else PdfHead(**kept)
    except (OSError, ValueError, TypeError, KeyError):
        pass  # absent, damaged or from another reader: read the file again
    try:
        outcome: PdfHead | str = extract(raw, path)
    except BadPdf as exc:
        outcome = str(exc)
    data = {"version": EXTRACTOR_VERSION, "bad": outcome} if isinstance(outcome, str) else asdict(outcome)
    _keep(entry, data)
    return outcome


def _keep(entry: Path, data: dict[str, Any]) -> None:
    """Write a cache entry whole (a temporary file renamed in); a cache that cannot be written costs re-reading."""
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".pdf-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, ensure_ascii=False)
        os.replace(tmp, entry)
    except OSError:
        pass


# ------------------------------------------------------------------------------------------------- reading


def extract(raw: bytes, path: Path) -> PdfHead:
    """Title, authors and abstract from a PDF's bytes; ``BadPdf`` says why a file yields none."""
    if not raw:
        raise BadPdf("empty file")
    if _MAGIC not in raw[:_MAGIC_WITHIN]:
        raise BadPdf("not a PDF (no %PDF header)")
    import pypdfium2 as pdfium

    try:
        document = pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as exc:
        if getattr(exc, "err_code", None) == pdfium.raw.FPDF_ERR_PASSWORD:
            raise BadPdf("encrypted (needs a password)") from None
        raise BadPdf("damaged or truncated PDF (PDFium cannot open it)") from None
    try:
        return _read_document(document)
    except pdfium.PdfiumError as exc:
        raise BadPdf(f"damaged PDF ({exc})") from None
    finally:
        document.close()


def _read_document(document: Any) -> PdfHead:
    """The head of an open document, from page 1 in reading order and the words of its first pages."""
    pages = len(document)
    if pages == 0:
        raise BadPdf("no pages")
    texts: list[str] = []
    page1 = margin = ""
    glyphs: list[Glyph] = []
    for index in range(min(pages, HEAD_PAGES)):
        page = document[index]
        textpage = page.get_textpage()
        try:
            if index == 0:
                width, height = page.get_width(), page.get_height()
                page1 = "\n".join(line.text for line in column_order(page_lines(textpage, height), width))
                glyphs = page_glyphs(textpage, height)
                margin = margin_text(textpage)
                texts.append(page1)
            else:
                texts.append(textpage.get_text_range())
        finally:
            textpage.close()
            page.close()
    if all(len(text.strip()) < MIN_TEXT_CHARS for text in texts):
        raise BadPdf("no text layer (a scanned image?); not read: semsearch does no OCR")
    vocabulary = Counter(re.findall(r"\w+", "\n".join(texts)))
    title, authors = _title_and_authors(glyphs)
    abstract, source = find_abstract(page1, title)
    title = clean(title, vocabulary)
    doi, arxiv = paper_ids(page1, margin)
    return PdfHead(
        title=title,
        authors=[clean(name, vocabulary) for name in authors],
        abstract=clean(abstract, vocabulary),
        abstract_source=source,
        pages=pages,
        doi=doi,
        arxiv=arxiv,
    )


def margin_text(textpage: Any) -> str:
    """The page's rotated text (an arXiv stamp up the margin) in drawing order, spaced where PDFium spaces it."""
    import pypdfium2.raw as raw

    out: list[str] = []
    last = -1
    text = textpage.get_text_range()
    turn = turned(textpage, text)
    for k in range(min(textpage.count_chars(), len(text))):
        if text[k].isspace() or not turn[k] or raw.FPDFText_IsGenerated(textpage.raw, k):
            continue
        if out and " " in text[last + 1 : k]:
            out.append(" ")
        out.append(text[k])
        last = k
    return "".join(out)


def paper_ids(page1: str, margin: str = "") -> tuple[str | None, str | None]:
    """The DOI and the arXiv id that page 1 shows for its own paper, as printed (None where it shows none).

    The arXiv stamp up the margin comes first, then an ``arXiv:`` id in the text that no "preprint" introduces (a
    citation's); a DOI labelled as one (``doi:``, ``DOI``, ``doi.org/``) before a bare ``10.…/…``.
    """
    found = _ARXIV.search(margin)
    if found is None:
        found = next(
            (m for m in _ARXIV.finditer(page1) if not _CITED.search(page1[max(0, m.start() - 24) : m.start()])), None
        )
    both = f"{margin}\n{page1}"
    doi = _DOI_SAID.search(both) or _DOI.search(both)
    return (doi.group(1) if doi else None), (found.group(1) if found else None)


def _title_and_authors(glyphs: list[Glyph]) -> tuple[str, list[str]]:
    """Page 1's largest type as the title, and the name-like parts of the lines between it and the abstract."""
    segs = [s for s in segments(glyphs) if s.text.strip()]
    sized = [s.size for s in segs if len(s.text.strip()) > 3]
    if not sized:
        return "", []
    big = max(sized)
    title_segs = sorted(
        (s for s in segs if s.size >= big - 0.5 and len(s.text.strip()) > 1), key=lambda s: (s.top, s.x0)
    )
    title = " ".join(s.text.strip() for s in title_segs)
    below = max(s.bottom for s in title_segs)
    rest = sorted((s for s in segs if s.top > below - 1), key=lambda s: (round(s.top), s.x0))
    abstract_top = None
    for seg in rest:
        text = seg.text.strip()
        if re.match(r"^abstract\b", text, re.I) or (
            len(text.split()) >= 12 and not _AFFILIATION.search(text) and _PROSE.search(text)
        ):
            abstract_top = seg.top
            break
    authors: list[str] = []
    for seg in rest:
        if abstract_top is not None and seg.top >= abstract_top - 0.5:
            break
        text = unicodedata.normalize("NFKC", seg.text)
        if _AFFILIATION.search(text):
            continue
        for part in re.split(r",|&|;|\band\b", text):
            part = " ".join(re.sub(r"[\d*†‡§]+", " ", part).split())  # affiliation marks
            if _NAME.match(part) and len(part.split()) <= 5:
                authors.append(part)
    return title, authors


def find_abstract(page1: str, title: str) -> tuple[str, str]:
    """The text under the Abstract heading up to the first section heading, else the first long paragraph."""
    text = page1.replace("\r\n", "\n")
    heading = _ABSTRACT_HEADING.search(text)
    if heading is not None:
        start, source = heading.end(), "heading"
    else:
        start, source = _first_paragraph(text, title), "first-paragraph"
        if start < 0:
            return "", source
    end = _SECTION.search(text, start)
    return text[start : end.start() if end else len(text)].strip(), source


def _first_paragraph(text: str, title: str) -> int:
    """Where the first prose line after the title starts (-1: none)."""
    key = _LOOSE.sub("", unicodedata.normalize("NFKC", title))[-12:]
    seen_title = not key
    position = 0
    for line in text.split("\n"):
        if not seen_title and key in _LOOSE.sub("", unicodedata.normalize("NFKC", line)):
            seen_title = True
        elif seen_title and len(line.split()) >= 10 and not _AFFILIATION.search(line) and _PROSE.search(line):
            return position
        position += len(line) + 1
    return -1


def clean(text: str, vocabulary: Counter[str]) -> str:
    """Text as a record holds it: ligatures folded, words broken at line ends joined, whitespace collapsed."""
    text = unicodedata.normalize("NFKC", join_hyphens(text, vocabulary)).replace("\u00ad", "")
    return " ".join(text.split())


def join_hyphens(text: str, vocabulary: Counter[str]) -> str:
    """Join words broken at a line end.

    A soft hyphen or U+2010 there is typesetting: joined. A plain hyphen (PDFium reports one at a line end as
    U+FFFE) may be a compound's ("privacy-friendly"): joined only when the document spells the joined word
    elsewhere; before a capital or a digit it is always a compound's ("KNN-Shapley").
    """
    text = text.replace("\r\n", "\n")
    text = re.sub(r"(\w) ?[\u00ad\u2010\x02][ \t]*\n[ \t]*(\w)", r"\1\2", text)

    def join(match: re.Match[str]) -> str:
        first, second = match.group(1), match.group(2)
        return first + second if vocabulary[first + second] > 0 else f"{first}-{second}"

    text = re.sub(r"(\w+)-[ \t]*\n[ \t]*([a-z]\w*)", join, text)
    text = re.sub(r"(\w)-[ \t]*\n[ \t]*([A-Z0-9])", r"\1-\2", text)
    return re.sub(r"(\w+)\ufffe\s*(\w+)", join, text)


# ------------------------------------------------------------------------------------------------- a query


def abstract_of_file(path: Path) -> str:
    """A file given as an abstract: a PDF's title and abstract, read as a PDF source is, else the file's text."""
    return paper_of_file(path).text


def paper_of_file(path: Path) -> GivenPaper:
    """A file given as a paper: a PDF's title and abstract, read as a PDF source is, else the file's text.

    A PDF's also says what names it in an index: its content hash, and the DOI and arXiv id its first page shows.
    A PDF is known by its name or by its ``%PDF-`` header, whatever its name; one that yields no title or abstract
    raises ``InputError`` naming the file and why.
    """
    try:
        with path.open("rb") as handle:
            start = handle.read(len(_MAGIC))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if start != _MAGIC and not path.name.lower().endswith(".pdf"):
        try:
            return GivenPaper(path.read_text(encoding="utf-8-sig"))
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    records, source, lines = read_pdf(path, str(path))
    if not records:
        raise InputError(lines[0] if lines else f"{path}: no title or abstract found on page 1")
    record = records[0]
    # The text a document of this paper is encoded from: its title, then its abstract.
    text = f"{record.title} {record.text}" if record.title and not record.title_only else record.text
    ids = tuple((key, value) for key in ("doi", "arxiv") if isinstance(value := record.metadata.get(key), str))
    return GivenPaper(text, record.title, source.sha256, ids)
