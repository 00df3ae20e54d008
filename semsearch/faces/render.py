"""Turning results into text for people (tables) and for pipes (JSON, JSON lines)."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from semsearch.core.paperinfo import byline, link_of, plain_text
from semsearch.core.records import Hit
from semsearch.core.safe_text import clean_text, json_text
from semsearch.core.wording import count
from semsearch.query.highlight import highlight

if TYPE_CHECKING:
    from semsearch.query.index_info import IndexInfo

SNIPPET_CHARS = 240
MAX_SOURCES_SHOWN = 2


def to_json(data: Any) -> str:
    """Pretty JSON, UTF-8 kept readable (controls a terminal would act on written as escapes)."""
    return json_text(json.dumps(data, ensure_ascii=False, indent=2))


def to_jsonl(rows: Sequence[dict[str, Any]]) -> str:
    """One JSON object per line."""
    return "\n".join(json_text(json.dumps(r, ensure_ascii=False)) for r in rows)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The opening of a text, cut at a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut.rstrip(",;:.") + " …"


def sources_line(hit: Hit) -> str:
    """Where a hit came from, shortened when it came from many places."""
    labels = [clean_text(s.label(), one_line=True) for s in hit.sources[:MAX_SOURCES_SHOWN]]
    extra = len(hit.sources) - MAX_SOURCES_SHOWN
    return ", ".join(labels) + (f" (+{extra} more)" if extra > 0 else "")


def use_color(stream: Any) -> bool:
    """ANSI styling for a stream: only a terminal, and never when NO_COLOR is set and non-empty (no-color.org)."""
    if os.environ.get("NO_COLOR", ""):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def hits_table(hits: Sequence[Hit], *, color: bool = False) -> str:
    """Ranked hits as an indented block per hit: rank, score, label; id and sources; a snippet."""
    if not hits:
        return "no results"
    import click

    width = min(shutil.get_terminal_size((100, 24)).columns, 120)
    blocks = []
    if any(h.relevance_rank is not None for h in hits):
        # Scores then no longer fall down the list: say so once, and where each hit stood by relevance alone.
        ranks = ", ".join(str(h.relevance_rank) for h in hits)
        blocks.append(f"re-ranked for diversity (--diverse): not in score order; ranks by relevance: {ranks}")
    for hit in hits:
        label = plain_text(hit.label)
        # A named person's paper is first for its author, not its score: say whose it is instead.
        mark = f"by {clean_text(hit.by)}" if hit.by is not None else f"{hit.score:.4f}"
        head = f"{hit.rank:>2}. {mark}  {label}"
        if color:
            head = f"{hit.rank:>2}. " + click.style(mark, fg="green") + "  " + click.style(label, bold=True)
        ids = f"    id {clean_text(hit.id)}  ·  {sources_line(hit)}" + ("  ·  title only" if hit.title_only else "")
        # Who wrote it, where, and where to read it, when the sources or a catalogue say.
        about = "  ·  ".join(x for x in (byline(hit.metadata), link_of(hit.metadata)) if x)
        if about:
            ids = f"    {about}\n{ids}"
        # The best-matching sentence explains the hit; the opening of the abstract stands in when none matched.
        shown = plain_text(hit.highlights[0] if hit.highlights else snippet(hit.text))
        body = textwrap.fill(
            snippet(shown, 2 * SNIPPET_CHARS), width=width, initial_indent="    ", subsequent_indent="    "
        )
        if color and hit.matched_terms:
            body = highlight(body, hit.matched_terms, "ansi")
        lines = [head, click.style(ids, dim=True) if color else ids]
        if hit.passage is not None:  # a full-text index: the passage that matched, and its page
            said = textwrap.fill(
                f"p. {hit.passage['page']}: " + plain_text(snippet(str(hit.passage["text"]), 2 * SNIPPET_CHARS)),
                width=width,
                initial_indent="    ",
                subsequent_indent="      ",
            )
            # A passage listing (--passages) shows the passage in the abstract's place.
            lines += [said] if hit.mode == "passages" else [body, said]
        else:
            lines.append(body)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def eval_table(results: dict[str, Any]) -> str:
    """Metrics per mode as an aligned table."""
    lines = [f"{'mode':<8} {'nDCG@10':>8} {'R@100':>7} {'MRR@10':>7} {'seconds':>8}"]
    for mode, m in results.items():
        if isinstance(m, dict) and mode != "tune":
            lines.append(
                f"{mode:<8} {m['ndcg@10']:>8.4f} {m['recall@100']:>7.4f} {m['mrr@10']:>7.4f} {m['seconds']:>8.1f}"
            )
    skipped = results.get("skipped_documents", 0)
    note = f"; {count(skipped, 'corpus entry', 'corpus entries')} skipped: no text and no title" if skipped else ""
    lines.append(f"({count(results.get('queries', 0), 'judged query', 'judged queries')}{note})")
    if "tune" in results:
        lines += ["", tune_table(results["tune"])]
    return "\n".join(lines)


def tune_table(tune: dict[str, Any]) -> str:
    """eval --tune's weightings, each against the one the index recorded, and what was decided."""
    lines = [f"{'hybrid weighting':<18} {'nDCG@10':>8} {'vs recorded':>18}"]
    for row in tune["candidates"]:
        mark = " <- recorded" if row["name"] == tune["recorded"] else ""
        mark = " <- chosen" if row["name"] == tune["chosen"] and tune["chosen"] != tune["recorded"] else mark
        vs = f"{row['difference']:+.4f} ± {row['stderr']:.4f}"
        lines.append(f"{row['name']:<18} {row['ndcg@10']:>8.4f} {vs:>18}{mark}")
    where = f"; recorded in {tune['version']}" if tune.get("version") else "; nothing written"
    lines.append(f"{tune['reason']}{where}")
    return "\n".join(lines)


def _reading_line(info: IndexInfo) -> str:
    if info.reading == "truncated":
        return "truncated (the model's first window of each abstract)"
    if info.reading == "pooled":
        return "pooled (each vector averages the abstract's windows past the model's first)"
    what = "sentence" if info.reading == "sentences" else "window"
    return f"{info.reading} ({count(info.windows, what + ' vector')} beside the documents' own)"


def _verb(n: int, verb: str) -> str:
    """The verb agreeing with a count of ``n`` things: "resolves" for one, "resolve" otherwise."""
    return verb + "s" if n == 1 else verb


def info_text(facts: IndexInfo | dict[str, Any]) -> str:
    """The manifest as aligned ``key: value`` lines (from ``IndexInfo`` or its ``to_dict()``)."""
    if isinstance(facts, dict):
        from types import SimpleNamespace

        sources = [SimpleNamespace(**s) for s in facts.get("sources", [])]
        facts = SimpleNamespace(**{**facts, "sources": sources})  # type: ignore[assignment]
    info: Any = facts
    rows = [
        ("index", f"{info.path} ({info.version})"),
        ("model", f"{info.model} ({info.dimension}-d, fingerprint {info.fingerprint})"),
        ("encoder", f"{info.backend} {info.precision}".strip()),
        ("reading", _reading_line(info)),
        ("fusion", info.fusion),
        ("documents", f"{info.documents}" + (f" ({info.title_only} title-only)" if info.title_only else "")),
        ("aliases", f"{count(info.aliases, 'former id')} {_verb(info.aliases, 'resolve')} to current documents"),
        (
            "read",
            f"{count(info.read, 'abstract')} ({count(info.exact_duplicates, 'duplicate')}, "
            f"{count(info.near_duplicates, 'near-duplicate')})",
        ),
        ("vectors", f"{info.faiss}, inner product on unit vectors (score = cosine)"),
        ("ann", info.ann),
        ("size on disk", human_bytes(info.size_bytes)),
        ("built at", f"{info.built_at} in {info.build_seconds:.1f} s"),
        ("format", str(info.format_version)),
        ("sources", count(len(info.sources), "file")),
    ]
    if info.catalogue:
        c = info.catalogue
        rows.insert(  # before "sources", which its file list follows
            len(rows) - 1,
            (
                "catalogue",
                f"{c['catalogued']} of {count(c['of'], 'document')} ({c['exact']} exact, {c['near']} near) "
                f"from {', '.join(c['files'])}",
            ),
        )
    if info.map:
        rows.insert(len(rows) - 1, ("map", map_line(info.map)))
    if info.segments or info.hidden:
        rows.insert(
            len(rows) - 1,
            (
                "segments",
                f"base + {info.segments} appended, {count(info.hidden, 'row')} hidden "
                "(semsearch index --optimize writes one base)",
            ),
        )
    width = max(len(k) for k, _ in rows)
    lines = [f"{k + ':':<{width + 1}} {v}" for k, v in rows]
    lines += [f"  {s.path}  ({s.format}, {count(s.records, 'abstract')}, {s.encoding})" for s in info.sources]
    return clean_text("\n".join(lines))  # file names are anyone's bytes


def map_line(entry: dict[str, Any]) -> str:
    """The manifest's map entry in words: 'umap, 40 clusters, laid out <when> on 5,823 documents (22 changed since)'."""
    if entry.get("method") in (None, "off"):
        return "none (built with SEMSEARCH_MAP=off)"
    line = f"{entry['method']}, {count(entry.get('clusters', 0), 'cluster')}"
    if entry.get("laid_out_at"):
        laid_out = count(entry.get("laid_out_documents", 0), "document", grouped=True)
        line += f", laid out {entry['laid_out_at']} on {laid_out}"
        changed = entry.get("changed_since_layout") or 0
        line += f" ({changed:,} added or removed since)" if changed else ""
    return line


def human_bytes(size: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"
