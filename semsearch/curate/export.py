"""Citations out: papers (hits or documents) as BibTeX, RIS, CSL-JSON or CSV for reference managers.

What is written is what a person reads (``semsearch.core.paperinfo``): titles and abstracts with their markup
resolved, authors as names, the venue as people write it. BibTeX keys are unique within an export and
stable: the record's own citation key when it has one (a ``.bib`` key, or a catalogue id that looks like
one), else first author's family name + year + first title word (``wang2025timeo1``), else ``doc`` + the
document id; repeats get ``a``, ``b``, ... in document-id order. Special characters are escaped so that
bibtexparser (and BibTeX) read back the same titles, authors and years.
"""

from __future__ import annotations

import csv
import io
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from semsearch.core.errors import QueryError
from semsearch.core.latex import text_to_bibtex
from semsearch.core.name_parts import NameParts, author_parts, parse_name
from semsearch.core.paperinfo import authors_of, link_of, plain_text, venue_of, year_of
from semsearch.core.paperinfo import field as meta_field
from semsearch.core.safe_text import bare_doi, clean_text, csv_cell
from semsearch.core.wording import count
from semsearch.store.filters import matcher, parse_where

FORMATS = ("bibtex", "ris", "csljson", "csv")
MEDIA_TYPES = {
    "bibtex": "application/x-bibtex; charset=utf-8",
    "ris": "application/x-research-info-systems; charset=utf-8",
    "csljson": "application/vnd.citationstyles.csl+json; charset=utf-8",
    "csv": "text/csv; charset=utf-8",
}
EXTENSIONS = {"bibtex": "bib", "ris": "ris", "csljson": "json", "csv": "csv"}

_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_:.\-+/]*")
_WORD = re.compile(r"[A-Za-z0-9]+")
_STOP_WORDS = frozenset(
    ("a", "an", "the", "on", "of", "in", "for", "to", "and", "with", "from", "by", "at", "via", "is", "are")
    + ("do", "does", "towards", "toward")
)
_VERBATIM_UNSAFE = re.compile(r"[{}\\]")
# A title's words, hyphenated and with apostrophes ("R-KV", "Q-learning", "Bayes'"), for brace protection.
_TITLE_WORD = re.compile(r"\w+(?:[-'\u2019]\w+)*")


class Paper(Protocol):
    """What an export needs of a paper; both ``Hit`` and ``Document`` have it."""

    id: str
    title: str | None
    text: str
    metadata: dict[str, Any]
    external_ids: list[str]


@dataclass
class Citation:
    """One paper as a reference manager sees it."""

    id: str  # the semsearch document id
    key: str  # the BibTeX key / CSL id, unique in its export
    kind: str  # "inproceedings", "article" or "misc" (BibTeX entry types)
    title: str | None
    authors: list[str]
    year: str | None
    venue: str | None
    abstract: str
    doi: str | None = None
    url: str | None = None
    eprint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # rank and score of a hit
    names: list[NameParts] = field(default_factory=list)  # the authors in parts, those with something to show


def citations(papers: Sequence[Paper]) -> list[Citation]:
    """The papers as citations, with keys unique within the list."""
    out = [_citation(p) for p in papers]
    by_key: dict[str, list[Citation]] = {}
    for c in out:
        by_key.setdefault(c.key.lower(), []).append(c)
    # BibTeX compares keys ignoring case. Keys held once stay; repeated ones take the first free suffix.
    used = {key for key, same in by_key.items() if len(same) == 1}
    for same in by_key.values():
        if len(same) > 1:
            n = 0
            for c in sorted(same, key=lambda c: c.id):
                while f"{c.key}{_suffix(n)}".lower() in used:
                    n += 1
                c.key = f"{c.key}{_suffix(n)}"
                used.add(c.key.lower())
    return out


def _suffix(n: int) -> str:
    """a, b, ..., z, aa, ab, ...: the usual disambiguation of equal author-year keys."""
    letters = ""
    n += 1
    while n:
        n, r = divmod(n - 1, 26)
        letters = chr(97 + r) + letters
    return letters


def _citation(paper: Paper) -> Citation:
    meta = paper.metadata
    extra: dict[str, Any] = {}
    for name in ("rank", "score"):
        value = getattr(paper, name, None)
        if value is not None:
            extra[name] = value
    title = _one_line(plain_text(paper.title)) if paper.title else None
    authors = [_one_line(plain_text(a)) for a in authors_of(meta)]
    year = year_of(meta)
    doi = meta_field(meta, ("doi",))
    eprint = meta_field(meta, ("eprint",))
    return Citation(
        id=paper.id,
        key=own_key(paper) or derived_key(authors, year, title) or f"doc{paper.id}",
        kind=_kind(meta),
        title=title,
        authors=authors,
        year=year,
        venue=venue_of(meta),
        abstract=_one_line(plain_text(paper.text)),
        doi=bare_doi(doi),
        url=link_of(meta),
        eprint=_one_line(str(eprint)) if eprint else None,
        extra=extra,
        names=[n for n in author_parts(meta) if n.display],  # an empty name would read as " and Smith" in BibTeX
    )


def _one_line(text: str) -> str:
    """One line without control characters (a newline would start a new RIS tag)."""
    return " ".join(clean_text(text, one_line=True).split())


def own_key(paper: Paper) -> str | None:
    """The paper's own citation key: its BibTeX key, or the first external id that looks like a key."""
    for external in paper.external_ids:
        # Numeric ids (BEIR's "4983") and ids with spaces or URLs say nothing to a person as a key.
        if _KEY.fullmatch(external) and not external.isdigit() and "://" not in external:
            return external
    return None


def derived_key(authors: Sequence[str], year: str | None, title: str | None) -> str | None:
    """``wang2025timeo1``: first author's family name, year, first significant title word (ASCII)."""
    name = parse_name(authors[0]) if authors else None
    # The family name's last word ("Vallée Poussin" -> poussin; "John Smith, Jr" -> smith, "Hal Daumé III" ->
    # daume); an organisation's last word before any comma ("ACME, Inc." -> acme).
    words = (name.family or name.literal.partition(",")[0]).split() if name else []
    family = _ascii_word(words[-1]) if words else ""
    words = [_ascii_word(w) for w in (title or "").split()]
    first = next((w for w in words if w and w not in _STOP_WORDS), "")
    if not family and not first:
        return None
    return f"{family or 'anon'}{year or ''}{first}"


def _ascii_word(word: str) -> str:
    folded = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode("ascii")
    return "".join(_WORD.findall(folded)).lower()


def _kind(meta: Mapping[str, Any]) -> str:
    """The BibTeX entry type: as the source said, else from the venue's type or field."""
    stated = meta_field(meta, ("entry_type",))
    if isinstance(stated, str) and stated.lower() in ("inproceedings", "article", "misc"):
        return stated.lower()
    venue_type = str(meta_field(meta, ("venue_type",)) or "").lower()
    if venue_type in ("conference", "workshop") or meta_field(meta, ("booktitle",)):
        return "inproceedings"
    if venue_type == "journal" or meta_field(meta, ("journal",)):
        return "article"
    return "misc"


def untitled_notice(papers: Sequence[Paper], catalogued: bool) -> str | None:
    """Why some citations are ``@misc`` entries with no title, in one line; None when every paper has a title."""
    untitled = sum(1 for p in papers if not p.title)
    if not untitled:
        return None
    head = f"{untitled} of {count(len(papers), 'entry', 'entries')} {'has' if untitled == 1 else 'have'} no title"
    if not catalogued:
        return f"{head}: the index has no catalogue; join one with semsearch index --catalogue FILE"
    return f"{head}: no catalogue record matched them (semsearch index --list-uncatalogued lists them)"


def select_documents(index: Any, ids: Sequence[str], where: Sequence[str]) -> list[Any]:
    """The documents an export names: by id (in the order given, each once), else all; then --where."""
    holds = matcher(parse_where(where)) if where else None
    if ids:
        docs = []
        seen: set[str] = set()
        for key in ids:
            doc = index.get(key)
            if doc.id not in seen:
                seen.add(doc.id)
                docs.append(doc)
    else:
        docs = list(index.store.iter_documents())
    return [d for d in docs if holds is None or holds(d)]


# --------------------------------------------------------------------------------------------- formats


def export(papers: Sequence[Paper], fmt: str) -> str:
    """The papers in one of FORMATS, as text."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    cites = citations(papers)
    if fmt == "bibtex":
        return to_bibtex(cites)
    if fmt == "ris":
        return to_ris(cites)
    if fmt == "csljson":
        return json.dumps(to_csl(cites), ensure_ascii=False, indent=2) + "\n"
    return to_csv(cites)


def bibtex_escape(value: str) -> str:
    """A value BibTeX and bibtexparser read back as the same text: one line, specials escaped, non-ASCII as LaTeX."""
    return text_to_bibtex(" ".join(value.split()))


def bibtex_verbatim(value: str) -> str:
    """A DOI, URL or eprint as BibTeX styles and readers take it: as it is (they print it raw), one line.

    Only a brace or backslash, which would end or break the value, is escaped (then the whole value is).
    """
    value = " ".join(value.split())
    return bibtex_escape(value) if _VERBATIM_UNSAFE.search(value) else value


def bibtex_title(title: str) -> str:
    """A title as ``bibtex_escape`` writes it, with acronyms and other capitals braced: ``{R-KV}``, ``{LLMs}``.

    Bibliography styles set titles in sentence case; a braced word keeps its case, so "R-KV: … KV Cache …
    LLMs" is not printed "R-kv: … kv cache … llms". Plainly capitalised words ("Cache", "Self-Supervised")
    are left to the style.
    """
    title = " ".join(title.split())
    out: list[str] = []
    last = 0
    for match in _TITLE_WORD.finditer(title):
        out.append(text_to_bibtex(title[last : match.start()]))
        word = text_to_bibtex(match.group())
        out.append(f"{{{word}}}" if _keeps_case(match.group()) else word)
        last = match.end()
    out.append(text_to_bibtex(title[last:]))
    return "".join(out)


def _keeps_case(word: str) -> bool:
    """Whether a title word has capitals a sentence-case style would lose: any but a plain capitalised word's."""
    parts = re.split(r"[-'\u2019]", word)
    return any(c.isupper() for c in word) and not all(p.islower() or not p or _capitalised(p) for p in parts)


def _capitalised(part: str) -> bool:
    """One capital, then lowercase letters or digits: "Cache", "Müller", "Model2"."""
    return len(part) > 1 and part[0].isupper() and not any(c.isupper() for c in part[1:])


def bibtex_name(name: NameParts) -> str:
    """A name as BibTeX's "von Last, Jr, First": ``van der Weij, Teun``, ``King, Jr., Martin Luther``.

    BibTeX, pybtex and citation-js split it back into the same parts: the particle stays bare (a lower-case
    von part), a family name of several words or hyphenated is braced (``{Le Cun}, Yann``,
    ``{d'Alché-Buc}, Florence``: BibTeX and citation-js split at spaces and hyphens and take a piece they read as
    lower case, such as ``d'Alché`` or an accented capital written as a LaTeX command, for a particle), and an
    organisation is braced whole (``{The MLPerf Consortium}``).
    """
    if name.literal:
        return f"{{{bibtex_escape(name.literal)}}}"
    family = bibtex_escape(name.family)
    if re.search(r"[\s,-]", name.family):
        family = f"{{{family}}}"
    last = " ".join(p for p in (_bibtex_part(name.particle), family) if p)
    if not name.given and not name.suffix:
        return last
    given = _bibtex_part(name.given)
    return f"{last}, {_bibtex_part(name.suffix)}, {given}" if name.suffix else f"{last}, {given}"


def _bibtex_part(part: str) -> str:
    """A part of a name, braced when a comma or an "and" in it would split the name or the author list."""
    escaped = bibtex_escape(part)
    return f"{{{escaped}}}" if "," in part or re.search(r"(?:^|\s)and(?:\s|$)", part, re.IGNORECASE) else escaped


def to_bibtex(cites: Sequence[Citation]) -> str:
    entries = []
    for c in cites:
        fields: list[tuple[str, str]] = []
        if c.title:
            fields.append(("title", bibtex_title(c.title)))
        if c.names:
            fields.append(("author", " and ".join(bibtex_name(n) for n in c.names)))
        if c.year:
            fields.append(("year", c.year))
        if c.venue:
            fields.append(
                (
                    "booktitle" if c.kind == "inproceedings" else "journal" if c.kind == "article" else "howpublished",
                    bibtex_escape(c.venue),
                )
            )
        for name, value in (("doi", c.doi), ("url", c.url), ("eprint", c.eprint)):
            if value:
                fields.append((name, bibtex_verbatim(value)))
        fields.append(("abstract", bibtex_escape(c.abstract)))
        body = ",\n".join(f"  {name} = {{{value}}}" for name, value in fields)
        entries.append(f"@{c.kind}{{{c.key},\n{body}\n}}\n")
    return "\n".join(entries)


_RIS_TYPES = {"inproceedings": "CPAPER", "article": "JOUR", "misc": "GEN"}


def to_ris(cites: Sequence[Citation]) -> str:
    """RIS: ``TAG  - value`` lines, one record per paper, each ending with ``ER  -``."""
    lines: list[str] = []
    for c in cites:
        rows: list[tuple[str, str | None]] = [("TY", _RIS_TYPES[c.kind]), ("ID", c.key), ("TI", c.title)]
        rows += [("AU", ris_name(n)) for n in c.names]
        rows += [("PY", c.year), ("T2", c.venue), ("DO", c.doi), ("UR", c.url), ("AB", c.abstract)]
        lines += [f"{tag}  - {' '.join(value.split())}" for tag, value in rows if value]
        lines += ["ER  - ", ""]
    return "\n".join(lines)


_CSL_TYPES = {"inproceedings": "paper-conference", "article": "article-journal", "misc": "article"}


def ris_name(name: NameParts) -> str:
    """A name as RIS writes it, "Last, First, Suffix": ``van der Weij, Teun``; an organisation as it is."""
    if name.literal:
        return name.literal
    last = " ".join(p for p in (name.particle, name.family) if p)
    if name.suffix:
        return f"{last}, {name.given}, {name.suffix}"
    return f"{last}, {name.given}" if name.given else last


def csl_name(name: NameParts) -> dict[str, str]:
    """A CSL name: ``{"family": "Weij", "given": "Teun", "non-dropping-particle": "van der"}``, or a literal."""
    if name.literal:
        return {"literal": name.literal}
    fields = (
        ("family", name.family),
        ("given", name.given),
        ("non-dropping-particle", name.particle),
        ("suffix", name.suffix),
    )
    return {key: value for key, value in fields if value}


def to_csl(cites: Sequence[Citation]) -> list[dict[str, Any]]:
    """CSL-JSON items with the variable names Zotero and Pandoc (citeproc) read."""
    items = []
    for c in cites:
        item: dict[str, Any] = {"id": c.key, "type": _CSL_TYPES[c.kind]}
        if c.title:
            item["title"] = c.title
        if c.names:
            item["author"] = [csl_name(n) for n in c.names]
        if c.year:
            item["issued"] = {"date-parts": [[int(c.year)]]}
        if c.venue:
            item["container-title"] = c.venue
        if c.doi:
            item["DOI"] = c.doi
        if c.url:
            item["URL"] = c.url
        item["abstract"] = c.abstract
        item["note"] = f"semsearch id: {c.id}"
        items.append(item)
    return items


CSV_COLUMNS = ("key", "id", "title", "authors", "year", "venue", "doi", "url", "abstract")


def to_csv(cites: Sequence[Citation]) -> str:
    """One row per paper; authors joined with "; ". A hit's rank and score lead when known."""
    extra = [name for name in ("rank", "score") if any(name in c.extra for c in cites)]
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*extra, *CSV_COLUMNS])
    for c in cites:
        row = {
            "key": c.key,
            "id": c.id,
            "title": c.title or "",
            "authors": "; ".join(c.authors),
            "year": c.year or "",
            "venue": c.venue or "",
            "doi": c.doi or "",
            "url": c.url or "",
            "abstract": c.abstract,
        }
        # A cell starting "=", "+", "-" or "@" would be a formula to a spreadsheet: csv_cell quotes it.
        writer.writerow([*(c.extra.get(name, "") for name in extra), *(csv_cell(row[k]) for k in CSV_COLUMNS)])
    return out.getvalue()
