"""Digests: what arrived since a digest last ran, per tag and per saved query, as Markdown, HTML, JSON or Atom.

``semsearch digest --since last --name daily`` reports the papers that arrived after the version the digest
named ``daily`` last reported, then moves its bookmark to the live version, so a daily cron job lists each
paper once.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from xml.sax.saxutils import escape

from .arrivals import MIN_COSINE, live_seq, new_since, set_bookmark
from .errors import QueryError
from .fileio import utc_now
from .whats_new import NewPaper, Section, sections

if TYPE_CHECKING:
    from .search import Index

FORMATS = ("md", "html", "json", "atom")
LINK_FIELDS = ("url", "venue_url", "openreview_url", "pdf_url", "doi")
DIGEST_MIN_COSINE = MIN_COSINE  # a paper is listed under a tag or saved query only this close to it


@dataclass
class Digest:
    """One digest: where it started and stopped (versions), and its sections."""

    name: str
    index: str
    since: str
    version: str
    generated: str
    arrived: int
    sections: list[Section]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "index": self.index,
            "since": self.since,
            "version": self.version,
            "generated": self.generated,
            "arrived": self.arrived,
            "sections": [s.to_dict() for s in self.sections],
        }


def make_digest(
    index: Index,
    *,
    name: str = "default",
    since: str | None = "last",
    k: int = 5,
    where: Sequence[str] = (),
    bookmark: bool = True,
    min_cosine: float = DIGEST_MIN_COSINE,
) -> Digest:
    """The digest of what arrived since ``since`` (``last``: the bookmark of digest ``name``).

    ``bookmark`` moves the digest's bookmark to the live version afterwards.
    """
    from .tags import check_name

    check_name(name, "digest")
    if k < 1 or k > 100:
        raise QueryError(f"k must be 1..100 for a digest, got {k}")
    clauses = new_since(index, since, name=name) if since is not None else []
    allowed = index.allowed_rows(list(where) + clauses)
    arrived = len(index) if allowed is None else len(allowed)
    threshold = min_cosine if min_cosine > 0 else None  # 0 (or below): the best k, whatever their cosine
    found = sections(index, clauses, k=k, where=where, min_cosine=threshold) if arrived else []
    found = [s for s in found if s.papers]
    digest = Digest(name, str(index.path), since or "all", index.version.name, utc_now(), arrived, found)
    if bookmark:
        set_bookmark(index.path, name, live_seq(index))
    return digest


def link(paper: NewPaper) -> str:
    meta = paper.hit.metadata
    for key in LINK_FIELDS:
        value = meta.get(key)
        if isinstance(value, str) and value.strip():
            value = value.strip()
            return f"https://doi.org/{value}" if key == "doi" and not value.startswith("http") else value
    return ""


def authors(paper: NewPaper) -> str:
    value = paper.hit.metadata.get("authors")
    if isinstance(value, list):
        names = [str(a) for a in value]
        return ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    return str(value) if value else ""


def _heading(section: Section) -> str:
    return f"Tag: {section.name}" if section.kind == "tag" else f"Saved query: {section.name}"


def render(digest: Digest, fmt: str) -> str:
    """The digest as md, html, json or atom."""
    if fmt not in FORMATS:
        raise QueryError(f"unknown digest format {fmt!r} (choose from {', '.join(FORMATS)})")
    return {"md": to_markdown, "html": to_html, "json": to_json, "atom": to_atom}[fmt](digest)


def to_json(digest: Digest) -> str:
    return json.dumps(digest.to_dict(), ensure_ascii=False, indent=2)


def to_markdown(digest: Digest) -> str:
    lines = [f"# semsearch digest: {digest.name}", ""]
    lines.append(f"{digest.arrived} papers arrived in {digest.index} since {digest.since} (now {digest.version}).")
    if not digest.sections:
        lines += ["", "Nothing new for your tags and saved queries."]
    for section in digest.sections:
        lines += ["", f"## {_heading(section)}", ""]
        for n, paper in enumerate(section.papers, start=1):
            title = paper.hit.title or paper.hit.label
            url = link(paper)
            lines.append(f"{n}. **[{title}]({url})**" if url else f"{n}. **{title}**")
            who = authors(paper)
            if who:
                lines.append(f"   {who}")
            if paper.best_sentence:
                lines.append(f"   > {paper.best_sentence}")
            lines.append(f"   `{paper.hit.id}`")
    return "\n".join(lines) + "\n"


def to_html(digest: Digest) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>semsearch digest: {e(digest.name)}</title></head><body>",
        f"<h1>semsearch digest: {e(digest.name)}</h1>",
        f"<p>{digest.arrived} papers arrived in {e(digest.index)} since {e(digest.since)}"
        f" (now {e(digest.version)}).</p>",
    ]
    if not digest.sections:
        parts.append("<p>Nothing new for your tags and saved queries.</p>")
    for section in digest.sections:
        parts.append(f"<h2>{e(_heading(section))}</h2><ol>")
        for paper in section.papers:
            title = e(paper.hit.title or paper.hit.label)
            url = link(paper)
            head = f"<a href='{e(url)}'>{title}</a>" if url else title
            parts.append(
                f"<li><b>{head}</b><br>{e(authors(paper))}<br><i>{e(paper.best_sentence)}</i>"
                f" <code>{e(paper.hit.id)}</code></li>"
            )
        parts.append("</ol>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def to_atom(digest: Digest) -> str:
    """An Atom feed: one entry per paper (a paper in two sections appears once, under its first)."""
    tag_base = f"tag:semsearch,{digest.generated[:10]}:{digest.name}"
    out = [
        "<?xml version='1.0' encoding='utf-8'?>",
        "<feed xmlns='http://www.w3.org/2005/Atom'>",
        f"<title>semsearch digest: {escape(digest.name)}</title>",
        f"<id>{escape(tag_base)}</id>",
        f"<updated>{digest.generated}</updated>",
    ]
    seen: set[str] = set()
    for section in digest.sections:
        for paper in section.papers:
            if paper.hit.id in seen:
                continue
            seen.add(paper.hit.id)
            url = link(paper)
            updated = paper.added.at if paper.added else digest.generated
            out += [
                "<entry>",
                f"<title>{escape(paper.hit.title or paper.hit.label)}</title>",
                f"<id>urn:semsearch:{paper.hit.id}</id>",
                f"<updated>{escape(updated)}</updated>",
                f"<category term='{escape(section.kind)}:{escape(section.name)}'/>",
            ]
            if url:
                out.append(f"<link href='{escape(url)}'/>")
            who = authors(paper)
            if who:
                out.append(f"<author><name>{escape(who)}</name></author>")
            out += [f"<summary>{escape(paper.best_sentence or paper.hit.text[:300])}</summary>", "</entry>"]
    out.append("</feed>")
    return "\n".join(out) + "\n"
