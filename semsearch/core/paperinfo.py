"""What a person reads about a paper: its authors, a short author line, a link, and markup-free text.

Everything here reads a document's title, metadata and external ids as stored (catalogue join, BibTeX,
JSON fields) and never changes them: readable text is for display only. Pure functions; LaTeX is decoded by
``latex`` (pylatexenc, imported only when a text has markup), so the query path stays fast. ``web/app.js``
has its own ``readable`` for the page. Links are only ever http(s) (``safe_text.safe_url``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from semsearch.core.latex import latex_to_text
from semsearch.core.safe_text import clean_text, doi_url, safe_url

MAX_AUTHORS_SHOWN = 2  # "Hao Wang, Licheng Pan, … · NeurIPS 2025"; three authors are all shown

# Venue codes as the ML Anthology and similar dumps write them (lowercase), as people write them.
VENUE_NAMES = {
    "neurips": "NeurIPS",
    "nips": "NeurIPS",
    "icml": "ICML",
    "iclr": "ICLR",
    "cvpr": "CVPR",
    "iccv": "ICCV",
    "eccv": "ECCV",
    "wacv": "WACV",
    "aistats": "AISTATS",
    "uai": "UAI",
    "colt": "COLT",
    "alt": "ALT",
    "acml": "ACML",
    "corl": "CoRL",
    "l4dc": "L4DC",
    "jmlr": "JMLR",
    "tmlr": "TMLR",
    "mlj": "Machine Learning",
    "jair": "JAIR",
    "neco": "Neural Computation",
    "ecml": "ECML",
    "ecmlpkdd": "ECML PKDD",
    "mlhc": "MLHC",
    "midl": "MIDL",
    "chil": "CHIL",
    "pgm": "PGM",
    "clear": "CLeaR",
    "collas": "CoLLAs",
    "isipta": "ISIPTA",
    "log": "LoG",
    "automl": "AutoML",
    "cpal": "CPAL",
    "dmlr": "DMLR",
    "mloss": "MLOSS",
    "acl": "ACL",
    "emnlp": "EMNLP",
    "naacl": "NAACL",
    "aaai": "AAAI",
    "ijcai": "IJCAI",
    "kdd": "KDD",
    "sigir": "SIGIR",
    "colm": "COLM",
}
_WORKSHOP_SUFFIX = "w"  # cvprw, iclrw, ...: the venue's workshops

AUTHOR_KEYS = ("authors", "author", "creators")
# A CSL-JSON name's parts, and Zotero's firstName/lastName, in the order people write them.
_NAME_PART_KEYS = ("given", "firstName", "dropping-particle", "non-dropping-particle", "family", "lastName", "suffix")
VENUE_KEYS = ("venue", "booktitle", "journal", "container-title", "publication")
YEAR_KEYS = ("year", "date", "issued")
# Where a person would go to read the paper, best first.
LINK_KEYS = ("openreview_url", "url", "venue_url", "doi", "pdf_url", "eprint")
_EPRINT = re.compile(r"[\w.\-/]+")


def field(metadata: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The first non-empty value among keys named (any case) in ``names``."""
    lowered = {str(k).strip().lower(): v for k, v in metadata.items()}
    for name in names:
        value = lowered.get(name)
        if value not in (None, "", [], {}):
            return value
    return None


def authors_of(metadata: Mapping[str, Any]) -> list[str]:
    """Author names as a list: from a list of names (or of {given, family}/{name}), or a BibTeX-style string."""
    value = field(metadata, AUTHOR_KEYS)
    if value is None:
        return []
    if isinstance(value, str):
        parts = re.split(r"\s+and\s+|;", value) if re.search(r"\s+and\s+|;", value) else [value]
        return [_first_last(p.strip()) for p in parts if p.strip()]
    if isinstance(value, list):
        names = []
        for item in value:
            if isinstance(item, str) and item.strip():
                names.append(item.strip())
            elif isinstance(item, dict):
                name = name_of(item)
                if name:
                    names.append(name)
        return names
    return []


def name_of(item: Mapping[str, Any]) -> str:
    """A name given as a mapping (CSL-JSON, Zotero, APIs) as people write it: ``Teun van der Weij``; "" if none."""
    whole = item.get("name") or item.get("literal")
    if whole:
        return str(whole)
    return " ".join(str(item[k]) for k in _NAME_PART_KEYS if item.get(k))


def _first_last(name: str) -> str:
    """``Doe, Jane`` (BibTeX's order) as ``Jane Doe``; other forms as they are."""
    last, comma, first = name.partition(",")
    return f"{first.strip()} {last.strip()}" if comma and first.strip() and "," not in first else name


def year_of(metadata: Mapping[str, Any]) -> str | None:
    """The publication year as four digits, from ``year`` or the start of a date."""
    value = field(metadata, YEAR_KEYS)
    match = re.search(r"\b(1[5-9]\d\d|2\d\d\d)\b", str(value)) if value is not None else None
    return match.group(1) if match else None


def venue_of(metadata: Mapping[str, Any]) -> str | None:
    """The venue as people write it: ``neurips`` -> ``NeurIPS``, ``iclrw`` -> ``ICLR Workshop``."""
    value = field(metadata, VENUE_KEYS)
    if not isinstance(value, str):
        return None
    venue = plain_text(value).strip()
    code = venue.lower()
    if code in VENUE_NAMES:
        return VENUE_NAMES[code]
    if code.endswith(_WORKSHOP_SUFFIX) and code[:-1] in VENUE_NAMES:
        return f"{VENUE_NAMES[code[:-1]]} Workshop"
    return venue or None


def byline(metadata: Mapping[str, Any]) -> str | None:
    """``Hao Wang, Licheng Pan, … · NeurIPS 2025``: a few authors, then venue and year; None when none known."""
    authors = authors_of(metadata)
    shown = authors if len(authors) <= MAX_AUTHORS_SHOWN + 1 else [*authors[:MAX_AUTHORS_SHOWN], "…"]
    where = " ".join(x for x in (venue_of(metadata), year_of(metadata)) if x)
    parts = [", ".join(plain_text(a) for a in shown), where]
    line = " · ".join(p for p in parts if p)
    return line or None


def link_of(metadata: Mapping[str, Any]) -> str | None:
    """The paper's page: OpenReview, its URL, the venue page, the DOI, the PDF or arXiv; None when unknown.

    Only http(s) links are given (``javascript:`` and the like are passed over); a DOI becomes its doi.org link.
    """
    lowered = {str(k).strip().lower(): v for k, v in metadata.items()}
    for key in LINK_KEYS:
        value = lowered.get(key)
        if not isinstance(value, str) or not value.strip():
            continue
        value = value.strip()
        if key == "doi":
            found = doi_url(value) or safe_url(value)
        elif key == "eprint":
            prefix = str(lowered.get("archiveprefix") or "arxiv").lower()
            found = (
                safe_url(f"https://arxiv.org/abs/{value}") if prefix == "arxiv" and _EPRINT.fullmatch(value) else None
            )
        else:
            found = safe_url(value)
        if found:
            return found
    return None


def paper_fields(title: str | None, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The fields hits and documents add for people: readable title, authors, author line and link."""
    return {
        "display_title": plain_text(title) if title else None,
        "authors": authors_of(metadata),
        "byline": byline(metadata),
        "link": link_of(metadata),
    }


# ------------------------------------------------------------------------------------------- markup

_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])")
_CODE = re.compile(r"`([^`\n]+)`")


def plain_text(text: str) -> str:
    """Text a person reads: LaTeX and Markdown emphasis resolved (``$\\texttt{Mozart}$`` -> ``Mozart``).

    LaTeX is decoded by ``latex.latex_to_text`` (accents as letters, ``\\emph{x}`` as ``x``, inline math as
    symbols: ``$\\tilde{\\mathcal{O}}(1/N)$`` -> ``Õ(1/N)``); ``*emphasis*``, ``**bold**`` and ```code```
    lose their marks. Terminal escapes, control characters and bidi overrides are dropped (``safe_text.clean_text``).
    """
    text = latex_to_text(clean_text(text))
    if "*" not in text and "`" not in text:
        return text
    out = _BOLD.sub(r"\1", text)
    out = _EMPHASIS.sub(r"\1", out)
    return _CODE.sub(r"\1", out)
