"""The commands that write or check the index: ``index``, ``remove`` and ``verify``."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import click

from semsearch.app import operations as ops
from semsearch.core.errors import SkippedInputError
from semsearch.core.wording import count
from semsearch.faces.cli.common import SemsearchCliError, application, index_option, request_options, say


@click.command()
@index_option
@request_options("build")
@click.option("--json", "as_json", is_flag=True, help="Print the build summary as one JSON line.")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def index(ctx: click.Context, request: ops.Build, index_dir: Path, as_json: bool, quiet: bool) -> None:
    """Build or update an index from SOURCES (files, directories, globs).

    The index then holds exactly what SOURCES provide: abstracts of files no longer given are
    removed. Without SOURCES, the sources of the last build are read again (./seeds for a new
    index). Only new or changed abstracts are encoded; the rest come from the embedding cache.

    \b
    Formats are detected from content and extension:
      seed text  first line a collection header, then one abstract per blank-line-separated paragraph
      JSONL, JSON array, CSV, TSV  fields title, abstract|text|summary, _id|id|paper_id; others kept
      BibTeX (.bib)  title, abstract, author, year, booktitle|journal, doi, url; the citation key as id
      any of them gzipped (.gz); UTF-8 (BOM or not), UTF-16 with BOM, GB18030/GBK; CRLF line ends
      Zotero     ~/Zotero or ~/Zotero/zotero.sqlite (read from a private copy; Zotero may be running)
      PDF (.pdf) title, authors and abstract from page 1; a file that cannot be read is one line
    A record with a title and no abstract is indexed by its title (marked title-only).
    Identical abstracts become one document that remembers every source; near-duplicates
    (re-wrapped, markup, a few words changed) are merged too unless --no-near, and so is a PDF
    with a record naming the DOI or arXiv id its first page shows. A copy that
    arrives later joins the document it copies, which keeps its id and is not encoded again.
    The new index is written beside the old one and swapped in atomically.

    \b
    Titles and authors from a catalogue (documents whose abstract matches a record exactly
    or as a near-duplicate take its metadata):
      semsearch index seeds/ --catalogue ../shared/data/mlanthology/neurips2025.jsonl.gz
      semsearch index --list-uncatalogued     # refresh; the catalogue is remembered
    """
    if request.recover or request.recover_to is not None:
        if request.recover and request.recover_to is not None:
            raise SemsearchCliError("choose one of --recover and --recover-to VERSION")
        flag = "--recover" if request.recover_to is None else "--recover-to"
        if request.sources:
            raise SemsearchCliError(f"{flag} takes no SOURCES: it only points CURRENT back at a version")
        _say_recovered(application(ctx, index_dir).run("build", request), index_dir, as_json)
        return
    if request.batch_size < 1:
        raise SemsearchCliError(f"--batch-size must be a positive integer, got {request.batch_size}")
    if request.no_catalogue and request.catalogues:
        raise SemsearchCliError("choose one of --catalogue and --no-catalogue")
    request = dataclasses.replace(request, progress=not quiet and not as_json)
    try:
        summary = application(ctx, index_dir).run("build", request)
    except SkippedInputError as refused:  # --strict: each skipped input is named as a build names it, then the error
        _say_skipped(refused.skipped)
        raise
    _say_built(summary, request, as_json)


def _say_skipped(lines: list[str]) -> None:
    """A build's notices of what it skipped, on stderr, one line each."""
    from semsearch.core.safe_text import clean_text

    for line in lines:  # lines can quote a record: no control character reaches the terminal
        say(f"skipped {clean_text(line, one_line=True)}")


def _say_built(summary: Any, r: ops.Build, as_json: bool) -> None:
    """The build summary: notices on stderr, then one JSON line or the summary's lines."""
    from semsearch.core.safe_text import clean_text, json_text

    _say_skipped(summary.skipped)
    uncatalogued = (summary.catalogue or {}).get("uncatalogued", []) if r.list_uncatalogued else []
    for line in (summary.catalogue or {}).get("ties", []):
        say(f"catalogue tie: {clean_text(line, one_line=True)}")
    if as_json:
        click.echo(json_text(json.dumps(summary.to_dict(), ensure_ascii=False)))
        return
    if summary.unchanged:
        click.echo(
            f"up to date: {count(summary.documents, 'document')} from {count(summary.files, 'file')}, "
            f"no source or setting changed "
            f"since {summary.version}; nothing written ({summary.seconds:.1f} s). --full rebuilds anyway."
        )
        if r.list_uncatalogued:
            if summary.catalogue is not None:
                from semsearch.write.catalogue import summary_line

                click.echo(summary_line(summary.catalogue))
            _echo_uncatalogued(summary.catalogue, uncatalogued)
        return
    click.echo(
        f"read {count(summary.read, 'abstract')} from {count(summary.files, 'file')}: "
        f"{count(summary.documents, 'document')} "
        f"({count(summary.duplicates, 'duplicate')}, {count(summary.near_duplicates, 'near-duplicate')} merged)"
    )
    click.echo(
        f"encoded: {summary.encoded}, from cache: {summary.cached}, added: {summary.added}, removed: {summary.removed}"
    )
    if summary.title_only or summary.aliases:
        click.echo(f"title-only documents: {summary.title_only}, former ids kept as aliases: {summary.aliases}")
    if summary.catalogue is not None:
        from semsearch.write.catalogue import summary_line

        click.echo(summary_line(summary.catalogue))
    if r.list_uncatalogued:
        _echo_uncatalogued(summary.catalogue, uncatalogued)
    if summary.rewritten_because:
        click.echo(f"rewrote the index whole rather than appending a segment: {summary.rewritten_because}")
    appended = f" + {summary.segments} appended segment(s); --optimize merges them" if summary.segments else ""
    click.echo(f"vectors: {summary.ann}{appended}")
    on_ray = ", encoded on ray" if summary.engine == "ray" else ""
    click.echo(f"index: {summary.index} ({summary.version}, {summary.backend}{on_ray}) in {summary.seconds:.1f} s")


def _echo_uncatalogued(catalogue: dict[str, Any] | None, rows: list[dict[str, str]]) -> None:
    """``--list-uncatalogued``'s lines: one per document no record matched."""
    from semsearch.core.paperinfo import plain_text

    if catalogue is None:
        click.echo("uncatalogued: no catalogue (give one with --catalogue FILE)")
    for row in rows:
        click.echo(f"uncatalogued: {row['id']}  {plain_text(row['label'])}")


def _say_recovered(done: Any, index_dir: Path, as_json: bool) -> None:
    """``semsearch index --recover`` (or ``--recover-to VERSION``): what was done."""
    if as_json:
        click.echo(json.dumps(done.to_dict()))
    elif done.recovered:
        click.echo(f"recovered: {done.problem}; CURRENT now names {done.version} (nothing was deleted)")
    else:
        click.echo(f"nothing to recover: CURRENT names {done.version}, a version of {index_dir}")


@click.command()
@index_option
@request_options("verify")
@click.option("--json", "as_json", is_flag=True, help="Print {ok, problems} as JSON.")
@click.pass_context
def verify(ctx: click.Context, request: ops.Verify, index_dir: Path, as_json: bool) -> None:
    """Check an index end to end: manifest, checksums, vector and document counts, ids, model.

    Exits 1 when anything is wrong, naming each problem.
    """
    problems = application(ctx, index_dir).run("verify", request)
    if as_json:
        click.echo(json.dumps({"ok": not problems, "problems": problems}))
    elif not problems:
        click.echo(f"ok: {index_dir} is sound")
    for line in problems if not as_json else []:
        say(line)
    if problems:
        sys.exit(1)


@click.command()
@request_options("remove", after={"sources": index_option})
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON line.")
@click.pass_context
def remove(ctx: click.Context, request: ops.Remove, index_dir: Path, as_json: bool) -> None:
    """Remove documents by id, or everything a --source file provided.

    A document that other sources also provide keeps those. A removed --source file stays out
    of later `semsearch index` refreshes until it is named as a source again; a removed id comes
    back with the next build from a source that still provides it.
    """
    summary = application(ctx, index_dir).run("remove", request)
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        click.echo(f"removed: {summary.removed}, documents: {summary.documents} ({summary.version})")
