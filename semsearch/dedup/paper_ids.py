"""A paper known by its id: the DOI and arXiv id a record carries, normalised, and the PDFs they tie to records.

A PDF's first page often shows its DOI or arXiv id (``ingest/pdf.py`` reads them into the record's ``doi`` and
``arxiv``); a JSONL, BibTeX or Zotero record carries them as fields (``doi``, ``arxiv``, ``eprint``, a doi.org or
arxiv.org ``url``, an ``arXiv:`` id in its ``journal``). A PDF and a record of another source that share one are
the same paper even when their abstracts differ (the published version's was edited), so dedup merges them as it
merges near copies.

Ids are compared normalised: a DOI lower-cased without its resolver or ``doi:``, an arXiv id without ``arXiv:``
and its version (arXiv's own DOI, ``10.48550/arXiv.…``, counts as the arXiv id too); a DOI only ever matches a
DOI and an arXiv id an arXiv id. Two guards keep two papers apart: where both sides carry an id of one kind, they
must share one (a preprint's arXiv id beside another paper's DOI is no match), and their titles, when both have
one, must share most of their words (a DOI that page 1 cites is not the paper's own). Only a PDF is tied this
way: two records of other sources that share an id stay as their abstracts say, as they always have.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from semsearch.core.records import Document, Record, SourceFile
from semsearch.core.safe_text import bare_doi
from semsearch.ingest.sources import PathLookup

DOI, ARXIV = "doi", "arxiv"
PaperId = tuple[str, str]  # (kind, normalised id)
PDF_KIND = "page"  # the provenance kind of a record read from a PDF (ingest.pdf: page 1)
PDF_FORMAT = "pdf"  # the format a version's manifest records for a PDF file
_PDF_MAGIC = b"%PDF-"
_MAGIC_WITHIN = 1024  # as ingest.pdf: readers accept a header this far in

_ID_FIELDS = ("doi", "arxiv", "arxiv_id", "eprint", "url", "pdf_url", "link")
# Free-text fields where a record names its own arXiv id: Google Scholar's BibTeX says journal = {arXiv preprint
# arXiv:2106.09685}; Zotero's JSON export keeps "arXiv: 2106.09685" in extra.
_TEXT_FIELDS = ("journal", "venue", "note", "extra", "howpublished")
_ARXIV_ID = r"(\d{4}\.\d{4,5}|[a-z][a-z\-]*(?:\.[a-z]{2})?/\d{7})(?:v\d+)?"
_ARXIV_BARE = re.compile(r"(?:arxiv\s*:\s*)?" + _ARXIV_ID, re.I)
_ARXIV_URL = re.compile(r"arxiv\.org/(?:abs|pdf|html)/" + _ARXIV_ID, re.I)
_ARXIV_DOI = re.compile(r"10\.48550/arxiv\." + _ARXIV_ID, re.I)
_ARXIV_SAID = re.compile(r"\barxiv\s*:\s*" + _ARXIV_ID, re.I)
_DOI_URL = re.compile(r"^(?:https?://)?(?:dx\.)?doi\.org/", re.I)
_WORD = re.compile(r"[^\W_]{2,}")
# Titles whose shorter one shares at least this share of its words with the other name one paper (a subtitle,
# a reworded word or a reading slip apart).
TITLE_OVERLAP = 0.6
_SMALL_WORDS = frozenset(
    ["a", "an", "and", "as", "at", "by", "for", "from", "in", "of", "on", "or", "the", "to", "via", "with"]
)


def normal_doi(value: Any) -> str | None:
    """A DOI as compared: ``10.prefix/suffix`` lower-cased (from bare, ``doi:…`` or a doi.org link); else None."""
    doi = bare_doi(value.strip().rstrip(".") if isinstance(value, str) else value)
    return doi.lower() if doi else None


def normal_arxiv(value: Any) -> str | None:
    """An arXiv id as compared: without ``arXiv:`` and its version, lower-cased (2106.09685, cs/0112017)."""
    if not isinstance(value, str):
        return None
    found = _ARXIV_BARE.fullmatch(value.strip())
    return found.group(1).lower() if found else None


def paper_ids(metadata: Mapping[str, Any]) -> set[PaperId]:
    """The normalised DOIs and arXiv ids a record's (or a document's) metadata names."""
    out: set[PaperId] = set()
    fields = {str(key).strip().lower(): value for key, value in metadata.items()}
    prefix = str(fields.get("archiveprefix") or "arxiv").strip().lower()
    for name in _ID_FIELDS:
        for value in _values(fields.get(name)):
            if name == "doi":
                doi = normal_doi(value)
                if doi:
                    out.add((DOI, doi))
                    arxiv = _ARXIV_DOI.fullmatch(doi)
                    if arxiv:
                        out.add((ARXIV, arxiv.group(1).lower()))
            elif name in ("arxiv", "arxiv_id") or (name == "eprint" and prefix == "arxiv"):
                arxiv_id = normal_arxiv(value)
                if arxiv_id:
                    out.add((ARXIV, arxiv_id))
            else:  # a link: doi.org or arxiv.org
                url = _ARXIV_URL.search(value)
                if url:
                    out.add((ARXIV, url.group(1).lower()))
                elif _DOI_URL.match(value.strip()):
                    doi = normal_doi(value)
                    if doi:
                        out.add((DOI, doi))
    for name in _TEXT_FIELDS:
        for value in _values(fields.get(name)):
            out.update((ARXIV, found.group(1).lower()) for found in _ARXIV_SAID.finditer(value))
    return out


def _values(value: Any) -> Iterable[str]:
    """The strings of a field: itself, or a list's."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        yield from (v for v in value if isinstance(v, str))


def is_pdf(record: Record) -> bool:
    """Whether a record was read from a PDF file (not a record of another source that names one)."""
    return record.provenance.kind == PDF_KIND


def titles_agree(a: str | None, b: str | None) -> bool:
    """Whether two titles may name one paper: either missing, or the shorter's words mostly in the other."""
    words_a, words_b = _title_words(a), _title_words(b)
    if not words_a or not words_b:
        return True
    return len(words_a & words_b) >= TITLE_OVERLAP * min(len(words_a), len(words_b))


def _title_words(title: str | None) -> set[str]:
    text = unicodedata.normalize("NFKC", title or "").lower()
    return {w for w in _WORD.findall(text) if w not in _SMALL_WORDS}


def ids_agree(a: set[PaperId], b: set[PaperId]) -> bool:
    """Whether two id sets share an id and disagree on no kind both carry."""
    if not a & b:
        return False
    for kind in (DOI, ARXIV):
        mine, theirs = {i for k, i in a if k == kind}, {i for k, i in b if k == kind}
        if mine and theirs and not mine & theirs:
            return False
    return True


def pdf_files(doc: Document, recorded: Sequence[SourceFile]) -> list[str]:
    """The files a document was read from as a PDF (its page-1 sources), as a version's manifest records them."""
    lookup = PathLookup([s.path for s in recorded if s.format == PDF_FORMAT])
    out: list[str] = []
    for source in doc.sources:
        found = lookup.named(source.file) if source.kind == PDF_KIND else []
        if len(found) == 1 and found[0] not in out:  # a name that could mean two files names neither
            out.append(found[0])
    return out


def is_pdf_file(path: Path, recorded: SourceFile | None = None) -> bool:
    """Whether a path is still a regular file, reached through no link, that starts as a PDF does.

    With ``recorded``, also whether it is still the file the index read (same size and modification time): a
    file saved over it since is not served as the paper.
    """
    try:
        if os.path.realpath(path) != os.path.abspath(path) or not path.is_file():
            return False
        with path.open("rb") as handle:
            stat = os.fstat(handle.fileno())
            if recorded is not None and (
                stat.st_size != recorded.size or (recorded.mtime_ns and stat.st_mtime_ns != recorded.mtime_ns)
            ):
                return False
            return _PDF_MAGIC in handle.read(_MAGIC_WITHIN)
    except OSError:
        return False


def same_paper_links(records: Sequence[Record]) -> list[tuple[int, int]]:
    """(i, j), i < j: a PDF's record and another source's record that name the same paper by DOI or arXiv id."""
    if not any(is_pdf(r) for r in records):
        return []  # the usual build: nothing to tie, and no record's metadata is looked at
    pdfs: dict[PaperId, list[int]] = {}
    others: dict[PaperId, list[int]] = {}
    ids: dict[int, set[PaperId]] = {}
    for i, record in enumerate(records):
        found = paper_ids(record.metadata)
        if not found:
            continue
        ids[i] = found
        side = pdfs if is_pdf(record) else others
        for pid in found:
            side.setdefault(pid, []).append(i)
    links: set[tuple[int, int]] = set()
    for pid, readers in pdfs.items():
        for j in others.get(pid, ()):
            for i in readers:
                if ids_agree(ids[i], ids[j]) and titles_agree(records[i].title, records[j].title):
                    links.add((min(i, j), max(i, j)))
    return sorted(links)
