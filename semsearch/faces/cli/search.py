"""The reading commands: ``query``, ``related``, ``info`` and ``export``."""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from semsearch.app import operations as ops
from semsearch.core import options
from semsearch.core.wording import count
from semsearch.faces.cli.common import (
    SemsearchCliError,
    application,
    check_read_text,
    index_option,
    output_options,
    request_options,
    say,
)

HELP_SCORES = (
    "Scores by --mode: dense is the cosine similarity of unit-length embeddings (-1..1; about 0.5+ is usually on "
    "topic for all-MiniLM-L6-v2); lexical is the BM25 score (0 up, unbounded, grows with rare matching words); "
    "hybrid (the default) is alpha·z(cosine) + (1-alpha)·z(BM25), each z-scored over this query's top 1000 "
    f"candidates, alpha as the index's fusion says: {options.DEFAULT_FUSION} by default (chosen per query from how "
    "far each side's best candidates stand out and what the query's words are), one alpha when `eval --tune` "
    "recorded it, 0.5 with --fusion fixed. About 0 is average for the query, 2+ stands out. Compare hybrid scores "
    "within one query only; --json shows the cosine and BM25 parts of every hit, and alpha with its reason."
)


def print_hits(
    hits: list[Any],
    as_json: bool,
    as_jsonl: bool,
    fmt: str | None = None,
    *,
    catalogued: bool = True,
    parsed: dict[str, Any] | None = None,
    spelling: dict[str, Any] | None = None,
) -> None:
    from semsearch.faces.render import hits_table, to_json, to_jsonl, use_color

    if fmt is not None:
        from semsearch.curate.export import export

        notice_untitled(hits, catalogued)  # first: it then stays ahead of the citations through any pipe
        click.echo(export(hits, fmt), nl=False)
        return

    # Each row carries the query as read (fields, phrases, -words) and what BM25 searched (each typo corrected):
    # the list's shape stays a list.
    about = {key: value for key, value in (("parsed", parsed), ("spelling", spelling)) if value is not None}
    rows = [{**h.to_dict(), **about} for h in hits]
    if as_json:
        click.echo(to_json(rows))
    elif as_jsonl:
        if rows:
            click.echo(to_jsonl(rows))
    else:
        click.echo(hits_table(hits, color=use_color(sys.stdout)))


def notice_untitled(papers: Sequence[Any], catalogued: bool) -> None:
    """One line on stderr when citations lack titles, saying why (no catalogue, or none matched)."""
    from semsearch.curate.export import untitled_notice

    notice = untitled_notice(papers, catalogued)
    if notice:
        say(notice)


def _read_text_arg(text: str) -> str:
    """``-`` reads the text from standard input."""
    if text != "-":
        return text
    if sys.stdin is None or sys.stdin.closed:
        raise SemsearchCliError("'-' reads the query from stdin, but stdin is closed")
    try:
        return sys.stdin.read()
    except UnicodeDecodeError as exc:
        raise SemsearchCliError(f"stdin is not UTF-8 text ({exc.reason})") from exc


def _say_stale(app: Any) -> None:
    """One line on stderr when the index's sources changed since it was built."""
    notice = app.stale_notice()
    if notice:
        say(notice)


@click.command()
@request_options("search")
@index_option
@click.option("--model", help="Refuse to answer unless the index was built with this model.")
@output_options
@click.pass_context
def query(
    ctx: click.Context,
    request: ops.Search,
    index_dir: Path,
    model: str | None,
    as_json: bool,
    as_jsonl: bool,
    fmt: str | None,
) -> None:
    """Find the abstracts that best answer TEXT ('-' reads it from stdin).

    Each hit shows rank, score, title (or the abstract's opening words), id, sources, and the
    sentence that matched best with the query's words highlighted.
    """
    text = _read_text_arg(request.query)
    if request.query == "-":
        check_read_text(ctx, "query", text)  # as bounded as one typed on the command line
    request = dataclasses.replace(request, query=text)
    app = application(ctx, index_dir, model=model)
    found = app.run("search", request)
    _say_stale(app)
    for line in found.warnings:  # year:, venue:, title: in the text are filters too
        say(line)
    _say_spelling(found.spelling, request, found=bool(found.hits), table=not (as_json or as_jsonl or fmt))
    print_hits(
        found.hits,
        as_json,
        as_jsonl,
        fmt,
        catalogued=found.catalogued,
        parsed=found.parsed.to_dict(),
        spelling=found.spelling.to_dict(),
    )


def _say_spelling(spelling: Any, r: ops.Search, *, found: bool, table: bool) -> None:
    """On stderr: what BM25 searched when typos were corrected (tables only), and why BM25 alone found nothing."""
    if spelling.changed and table:
        say(spelling.describe())
    if r.mode == "lexical" and not found and spelling.text:
        tried = "with typos corrected" if spelling.changed else "as typed"  # --exact corrects none
        hint = "" if r.exact or spelling.changed else "; no word was close enough to a frequent word to correct"
        say(
            f"no document holds any of the words searched for ({tried}): {spelling.text}{hint}; "
            "try --mode hybrid, which also reads meaning"
        )


query.help = f"{inspect.cleandoc(query.help or '')}\n\n{HELP_SCORES}"


@click.command()
@request_options("related")
@click.option(
    "--file",
    "file_",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Find papers related to the abstract in this file: a text file, or a PDF (its title and abstract).",
)
@index_option
@output_options
@click.pass_context
def related(
    ctx: click.Context,
    request: ops.Related,
    file_: Path | None,
    index_dir: Path,
    as_json: bool,
    as_jsonl: bool,
    fmt: str | None,
) -> None:
    """Papers nearest to one you know: by DOC_ID (or an external id such as a BEIR _id), --text or --file.

    --file reads a text file, or a PDF's title and abstract as an index reads them. The paper itself and its
    duplicates are never returned. Scores are cosine similarities; a paper's 100 nearest are ordered by its own
    subject words too (its most distinctive words), so its topic comes first.
    """
    given = [x for x in (request.id, request.text, file_) if x is not None]
    if len(given) != 1:
        raise SemsearchCliError("give exactly one of DOC_ID, --text or --file")
    if file_ is not None:
        from semsearch.ingest.pdf import paper_of_file  # imported here: a query reads no file

        paper = paper_of_file(file_)
        request = dataclasses.replace(request, text=paper.text, paper=paper)
    if request.text is not None:
        request = dataclasses.replace(request, text=request.text or "")
    app = application(ctx, index_dir)
    found = app.run("related", dataclasses.replace(request, explain=fmt is None))  # citations show no sentence
    _say_stale(app)
    for line in found.warnings:
        say(line)
    print_hits(found.hits, as_json, as_jsonl, fmt, catalogued=found.catalogued)


@click.command()
@request_options("export")
@index_option
@click.option(
    "--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of standard output."
)
@click.pass_context
def export(ctx: click.Context, request: ops.Export, index_dir: Path, out: Path | None) -> None:
    """Export documents as citations: the IDS given (ids, id prefixes, external ids or citation keys), else
    every document, narrowed by --where.

    \b
      semsearch export 6a24ce769ac8de0d wen2025neurips-differentially > refs.bib
      semsearch export --where venue=neurips --where "year>=2025" --format csljson --out refs.json
      semsearch query "federated privacy" -k 5 --format bibtex     # the hits of a query
    """
    done = application(ctx, index_dir).run("export", request)
    for line in done.warnings:  # as query does: why the filter matched nothing (a field no document has)
        say(line)
    notice_untitled(done.documents, done.catalogued)  # first: it then stays ahead of the citations through any pipe
    if out is None:
        click.echo(done.text, nl=False)
        return
    from semsearch.core.fileio import write_output

    write_output(out, done.text)  # the one --out writer: never replaces a link, a FIFO or a device
    click.echo(f"exported {count(len(done.documents), 'document')} to {out} ({done.format})", err=True)


@click.command()
@request_options("info")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print the manifest facts as JSON.")
@click.pass_context
def info(ctx: click.Context, request: ops.Info, index_dir: Path, as_json: bool) -> None:
    """Show what an index holds: model, dimension, documents, sources, size on disk, build time."""
    from semsearch.faces.render import info_text, to_json

    facts = application(ctx, index_dir).run("info", request)
    click.echo(to_json(facts) if as_json else info_text(facts))
