"""Digests: what arrived since a digest last ran, as Markdown, HTML, JSON or Atom.

Every arrival is listed once: the ones that fit an interest (a positive tag or a saved query; see
``semsearch.curate.whats_new``) first, grouped by the interest they fit best, then "also new" (titles only, at most
``ALSO_NEW_CAP``, with the count of the rest).

``semsearch digest --since last --name daily`` reports the papers that arrived after the version the digest
named ``daily`` last reported, then moves its bookmark to the live version, so a daily cron job lists each
paper once.
"""

from __future__ import annotations

import html
import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from semsearch.core.errors import QueryError
from semsearch.core.fileio import utc_now
from semsearch.core.limits import check_finite
from semsearch.core.options import ALSO_NEW_CAP, MIN_FIT
from semsearch.core.paperinfo import authors_of, link_of, plain_text
from semsearch.core.safe_text import clean_text, json_text, markdown_text, markdown_url
from semsearch.core.wording import count
from semsearch.curate.arrivals import live_seq, new_since, set_bookmark
from semsearch.curate.whats_new import NewPaper, Section, explain, fitted_arrivals, grouped, profile_of

if TYPE_CHECKING:
    from semsearch.query.search import Index

FORMATS = ("md", "html", "json", "atom")
ATOM = "http://www.w3.org/2005/Atom"


@dataclass
class Digest:
    """One digest: where it started and stopped (versions), its sections, and the other arrivals."""

    name: str
    index: str
    since: str
    version: str
    generated: str
    arrived: int
    sections: list[Section]
    also_new: list[NewPaper] = field(default_factory=list)  # at most the cap, best fit first
    also_new_count: int = 0  # every arrival not in a section, shown or not
    min_fit: float = MIN_FIT

    @property
    def also_new_more(self) -> int:
        """Arrivals outside the sections that the cap left out (counted, not listed)."""
        return self.also_new_count - len(self.also_new)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "since": self.since,
            "version": self.version,
            "generated": self.generated,
            "arrived": self.arrived,
            "min_fit": self.min_fit,
            "sections": [s.to_dict() for s in self.sections],
            "also_new": [_title_row(p) for p in self.also_new],
            "also_new_count": self.also_new_count,
        }


def _title_row(paper: NewPaper) -> dict[str, Any]:
    return {"id": paper.hit.id, "title": paper.hit.title or paper.hit.label, "fit": round(paper.fit, 4)}


def make_digest(
    index: Index,
    *,
    name: str = "default",
    since: str | None = "last",
    k: int = 10,
    where: Sequence[str] = (),
    bookmark: bool = True,
    min_fit: float = MIN_FIT,
    also_max: int = ALSO_NEW_CAP,
) -> Digest:
    """The digest of what arrived since ``since`` (``last``: the bookmark of digest ``name``).

    ``k`` caps each section (matches beyond it join "also new"); ``min_fit`` is the fit a paper needs to be
    listed under an interest rather than as "also new". ``bookmark`` moves the digest's bookmark afterwards.
    """
    from semsearch.curate.tags import check_name

    check_name(name, "digest")
    if k < 1 or k > 100:
        raise QueryError(f"k must be 1..100 for a digest, got {k}")
    check_finite(min_fit, "min_fit")  # NaN put every paper in a section; either would be bare NaN in the JSON
    if not 0 <= also_max <= 10_000:
        raise QueryError(f"the 'also new' cap must be 0..10000, got {also_max}")
    clauses = new_since(index, since, name=name) if since is not None else []
    profile = profile_of(index)
    papers = fitted_arrivals(index, clauses, where=where, profile=profile)
    found, rest = grouped(papers, min_fit=min_fit, per_section=k)
    for section in found:
        for paper in section.papers:
            explain(paper, profile, index)
    digest = Digest(
        name, str(index.path), since or "all", index.version.name, utc_now(), len(papers), found,
        rest[:also_max], len(rest), min_fit,
    )  # fmt: skip
    if bookmark:
        set_bookmark(index.path, name, live_seq(index))
    return digest


def link(paper: NewPaper) -> str:
    """The paper's http(s) link (``paperinfo.link_of``: never ``javascript:`` and the like), or ""."""
    return link_of(paper.hit.metadata) or ""


def authors(paper: NewPaper) -> str:
    names = [plain_text(a) for a in authors_of(paper.hit.metadata)]
    return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")


def _title(paper: NewPaper) -> str:
    return plain_text(paper.hit.title or paper.hit.label)


def _sentence(paper: NewPaper) -> str:
    return plain_text(paper.best_sentence or "")


def _note(digest: Digest) -> str:
    """The line under the count: why there are no sections, when there are none."""
    if not digest.arrived:
        return "Nothing arrived."
    if not digest.sections:
        return (
            f"None of them fits your tags and saved queries closely (fit {digest.min_fit:g} or more); "
            "they are all below."
        )
    return ""


def _also_heading(digest: Digest) -> str:
    return f"Also new ({digest.also_new_count})" if digest.sections else f"New ({digest.also_new_count})"


def _heading(section: Section) -> str:
    return f"Tag: {section.name}" if section.kind == "tag" else f"Saved query: {section.name}"


def render(digest: Digest, fmt: str) -> str:
    """The digest as md, html, json or atom."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown digest format {fmt!r} (choose from {', '.join(FORMATS)})")
    return {"md": to_markdown, "html": to_html, "json": to_json, "atom": to_atom}[fmt](digest)


def to_json(digest: Digest) -> str:
    return json_text(json.dumps(digest.to_dict(), ensure_ascii=False, indent=2))


# Every text below is data from records: markup made readable (paperinfo.plain_text, which also drops control
# characters and bidi overrides), then escaped for the format, so no mail client or feed reader runs any of it.


def to_markdown(digest: Digest) -> str:
    m = markdown_text
    lines = [f"# semsearch digest: {m(digest.name)}", ""]
    lines.append(
        f"{count(digest.arrived, 'paper')} arrived in {m(digest.index)} since {m(digest.since)} "
        f"(now {m(digest.version)})."
    )
    note = _note(digest)
    if note:
        lines += ["", m(note)]
    for section in digest.sections:
        lines += ["", f"## {m(_heading(section))}", ""]
        for n, paper in enumerate(section.papers, start=1):
            title = m(_title(paper))
            url = link(paper)
            lines.append(f"{n}. **[{title}]({markdown_url(url)})**" if url else f"{n}. **{title}**")
            who = authors(paper)
            if who:
                lines.append(f"   {m(who)}")
            if paper.best_sentence:
                lines.append(f"   > {m(_sentence(paper))}")
            lines.append(f"   `{clean_text(paper.hit.id, one_line=True).replace('`', '')}`")  # no escapes in code
    if digest.also_new_count:
        lines += ["", f"## {m(_also_heading(digest))}", ""]
        lines += [f"- {m(_title(p))} `{clean_text(p.hit.id, one_line=True).replace('`', '')}`" for p in digest.also_new]
        if digest.also_new_more:
            lines.append(f"- … and {digest.also_new_more} more")
    return "\n".join(lines) + "\n"


# Each element carries its own style: many mail clients drop or rewrite a <style> in <head> (and class names with
# it), so the HTML part is styled inline, in properties mail clients keep (no CSS variables, grid or web fonts).
_FONT = "-apple-system,'Segoe UI',Helvetica,Arial,sans-serif"
STYLES = {
    "body": f"margin:0;padding:0;background:#ffffff;color:#1f2328;font-family:{_FONT};font-size:15px;line-height:1.5",
    "div": "max-width:720px;margin:0 auto;padding:16px",
    "h1": "margin:0 0 8px;font-size:20px;font-weight:600;color:#1f2328",
    "h2": "margin:24px 0 8px;padding-bottom:4px;border-bottom:1px solid #d0d7de;font-size:17px;font-weight:600;"
    "color:#1f2328",
    "p": "margin:0 0 12px;color:#59636e",
    "ol": "margin:0;padding-left:24px",
    "ul": "margin:0;padding-left:24px;color:#59636e",
    "li": "margin:0 0 14px",
    "b": "font-weight:600;color:#1f2328",
    "a": "color:#0969da;text-decoration:none",
    "span": "color:#59636e;font-size:13px",
    "i": "color:#1f2328",
    "code": "font-family:Consolas,Menlo,monospace;font-size:12px;color:#59636e;background:#f6f8fa;padding:1px 4px",
}


def _open(tag: str, attrs: str = "") -> str:
    """An opening tag with the element's inline style (``STYLES``) and any other attributes."""
    return f'<{tag}{attrs} style="{STYLES[tag]}">'


def to_html(digest: Digest) -> str:
    def e(text: str) -> str:
        return html.escape(clean_text(text))

    def code(text: str) -> str:
        return f"{_open('code')}{e(text)}</code>"

    parts = [
        '<!doctype html><html><head><meta charset="utf-8">',
        f"<title>semsearch digest: {e(digest.name)}</title></head>{_open('body')}{_open('div')}",
        f"{_open('h1')}semsearch digest: {e(digest.name)}</h1>",
        f"{_open('p')}{count(digest.arrived, 'paper')} arrived in {e(digest.index)} since {e(digest.since)}"
        f" (now {e(digest.version)}).</p>",
    ]
    note = _note(digest)
    if note:
        parts.append(f"{_open('p')}{e(note)}</p>")
    for section in digest.sections:
        parts.append(f"{_open('h2')}{e(_heading(section))}</h2>{_open('ol')}")
        for paper in section.papers:
            title = e(_title(paper))
            url = link(paper)
            href = f' href="{e(url)}"'
            head = f"{_open('a', href)}{title}</a>" if url else title
            who = authors(paper)
            byline = f"<br>{_open('span')}{e(who)}</span>" if who else ""
            sentence = f"<br>{_open('i')}{e(_sentence(paper))}</i>" if paper.best_sentence else ""
            parts.append(f"{_open('li')}{_open('b')}{head}</b>{byline}{sentence} {code(paper.hit.id)}</li>")
        parts.append("</ol>")
    if digest.also_new_count:
        parts.append(f"{_open('h2')}{e(_also_heading(digest))}</h2>{_open('ul')}")
        parts += [f"{_open('li')}{e(_title(p))} {code(p.hit.id)}</li>" for p in digest.also_new]
        if digest.also_new_more:
            parts.append(f"{_open('li')}… and {digest.also_new_more} more</li>")
        parts.append("</ul>")
    parts.append("</div></body></html>")
    return "\n".join(parts) + "\n"


def to_atom(digest: Digest) -> str:
    """An Atom feed: one entry per paper (a paper in two sections appears once, under its first).

    Built with ElementTree, so quotes and angle brackets in any field are escaped; the texts carry no
    character XML 1.0 forbids (``clean_text``).
    """
    c = clean_text
    feed = ET.Element("feed", xmlns=ATOM)

    def add(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
        node = ET.SubElement(parent, tag, {k: c(v) for k, v in attrs.items()})
        if text is not None:
            node.text = c(text)
        return node

    add(feed, "title", f"semsearch digest: {digest.name}")
    add(feed, "id", f"tag:semsearch,{digest.generated[:10]}:{digest.name}")
    add(feed, "updated", digest.generated)
    add(add(feed, "author"), "name", "semsearch")  # RFC 4287: a feed whose entries may have no author names one

    def link_or_content(entry: ET.Element, paper: NewPaper) -> None:
        """RFC 4287: an entry without content needs an alternate link; one without a link carries its text."""
        url = link(paper)
        if url:
            add(entry, "link", href=url)
        else:
            add(entry, "content", plain_text(paper.hit.text[:300]), type="text")

    def entry_of(paper: NewPaper, category: str) -> ET.Element | None:
        """One entry per paper (a paper in two sections appears once, under its first)."""
        if paper.hit.id in seen:
            return None
        seen.add(paper.hit.id)
        entry = add(feed, "entry")
        add(entry, "title", _title(paper))
        add(entry, "id", f"urn:semsearch:{paper.hit.id}")
        add(entry, "updated", paper.added.at if paper.added else digest.generated)
        add(entry, "category", term=category)
        link_or_content(entry, paper)
        return entry

    seen: set[str] = set()
    for section in digest.sections:
        for paper in section.papers:
            entry = entry_of(paper, f"{section.kind}:{section.name}")
            if entry is None:
                continue
            who = authors(paper)
            if who:
                add(add(entry, "author"), "name", who)
            add(entry, "summary", _sentence(paper) or plain_text(paper.hit.text[:300]))
    for paper in digest.also_new:
        entry_of(paper, "also-new")
    ET.indent(feed, space="")
    return "<?xml version='1.0' encoding='utf-8'?>\n" + ET.tostring(feed, encoding="unicode") + "\n"
