"""The commands for recommendations and arrivals: ``recommend``, ``new`` and ``digest``."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from semsearch.app import operations as ops
from semsearch.core.records import GivenPaper
from semsearch.core.wording import count
from semsearch.faces.cli.common import SemsearchCliError, SeveralValues, application, index_option, request_options

BECAUSE_CHARS = 60  # of the liked paper's title in a "because" line
FOR_YOU_HELP = "Tag names or paper ids (ids, external ids such as citation keys, unambiguous prefixes, DOIs)."


def _print_rows(rows: list[dict[str, Any]], fmt: str, table: str, hits: Sequence[Any]) -> None:
    from semsearch.curate.export import FORMATS, export
    from semsearch.faces.render import to_json, to_jsonl

    if fmt == "json":
        click.echo(to_json(rows))
    elif fmt == "jsonl":
        if rows:
            click.echo(to_jsonl(rows))
    elif fmt in FORMATS:  # citations, as `semsearch export` writes them
        click.echo(export(hits, fmt), nl=False)
    else:
        click.echo(table)


def _format_option(fn: Any) -> Any:
    fn = click.option("--jsonl", "as_jsonl", is_flag=True, help="One JSON object per hit per line.")(fn)
    fn = click.option("--json", "as_json", is_flag=True, help="A JSON array of hits.")(fn)
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json", "jsonl", "bibtex", "ris", "csljson", "csv"]),
        default="table",
        show_default=True,
        help="Output: a readable table, JSON, JSON lines, or citations (bibtex, ris, csljson, csv).",
    )(fn)


def _fmt(fmt: str, as_json: bool, as_jsonl: bool) -> str:
    if as_json and as_jsonl:
        raise SemsearchCliError("choose one of --json and --jsonl")
    return "json" if as_json else "jsonl" if as_jsonl else fmt


# ---------------------------------------------------------------- recommend


@click.command(cls=SeveralValues)
@request_options("recommend")
@click.option(
    "--like-text",
    "--like-file",
    "like_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding an abstract you liked that is not in the index: text, or a PDF (its title and abstract); "
    "'-': stdin.",
)
@index_option
@_format_option
@click.pass_context
def recommend(
    ctx: click.Context,
    request: ops.Recommend,
    like_files: tuple[Path, ...],
    index_dir: Path,
    fmt: str,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Papers like the ones you liked, and unlike the ones you did not; each says which liked paper it is near.

    \b
      semsearch recommend --like liked                       # a tag's papers
      semsearch recommend --like 6a24ce769ac8 447e10ab --not 4fec9eb5    # several ids after one flag
      semsearch recommend --like-text my_abstract.txt --since 2026-12-01 --format bibtex
      semsearch recommend --like-text paper.pdf             # a PDF's title and abstract
    The default method is the one measured best (docs: Explanations, Quality).
    """
    fmt = _fmt(fmt, as_json, as_jsonl)
    papers = tuple(_read_file(p) for p in like_files)
    request = dataclasses.replace(request, like_texts=tuple(p.text for p in papers), like_papers=papers)
    recs = application(ctx, index_dir).run("recommend", request).recommendations
    rows = [r.to_dict() for r in recs]
    _print_rows(rows, fmt, _recommend_table(recs), [r.hit for r in recs])


def _read_file(path: Path) -> GivenPaper:
    from semsearch.ingest.pdf import paper_of_file

    return GivenPaper(sys.stdin.read()) if str(path) == "-" else paper_of_file(path)


def _recommend_table(recs: Sequence[Any]) -> str:
    from semsearch.core.paperinfo import plain_text
    from semsearch.faces.render import hits_table, snippet

    if not recs:
        return "no results"
    blocks = hits_table([r.hit for r in recs]).split("\n\n")
    out = []
    for block, rec in zip(blocks, recs, strict=True):
        near = rec.because.id or "your abstract"
        label = snippet(plain_text(rec.because.label), BECAUSE_CHARS)  # cut at a word, not mid-phrase
        out.append(f"{block}\n    because: near {near} ({label}, cosine {rec.because.cosine:.3f})")
    return "\n\n".join(out)


# ---------------------------------------------------------------- new, watch, digest


@click.command()
@request_options("new")
@index_option
@_format_option
@click.pass_context
def new(ctx: click.Context, request: ops.New, index_dir: Path, fmt: str, as_json: bool, as_jsonl: bool) -> None:
    """Papers that arrived since a version or date, ranked by how well they fit your interests.

    Your interests are your positive tags and saved queries (watch); negative tags such as
    not-for-me count against. Each paper's fit is its best interest's score (a z-score over the
    index; 2 or more fits), and it names the interests it fits; with none, the newest
    come first, and papers like a not-for-me one last. A reformatted copy of an abstract
    the index already held is not new.

    \b
      semsearch index                    # re-read the sources: new abstracts arrive
      semsearch new                      # what that build added
      semsearch new --since 2026-12-01 --json
    """
    fmt = _fmt(fmt, as_json, as_jsonl)
    papers = application(ctx, index_dir).run("new", request).papers
    rows = [p.to_dict() for p in papers]
    _print_rows(rows, fmt, _new_table(papers), [p.hit for p in papers])


def _new_table(papers: Sequence[Any]) -> str:
    from semsearch.faces.render import hits_table

    if not papers:
        return "nothing new"
    blocks = hits_table([p.hit for p in papers]).split("\n\n")
    out = []
    for block, paper in zip(blocks, papers, strict=True):
        when = f"added {paper.added.at} (version {paper.added.seq})" if paper.added else "added: unknown"
        why = f"  ·  fit {paper.fit:.2f}" + (f" for {', '.join(paper.reasons[:3])}" if paper.reasons else "")
        out.append(f"{block}\n    {when}{why}")
    return "\n\n".join(out)


def _mail_options(fn: Any) -> Any:
    """The SMTP settings of ``digest --mail-to`` (each also from the environment or the mail settings file)."""
    from semsearch.core.options import SMTP_SECURITIES as SECURITIES

    specs: list[tuple[str, dict[str, Any]]] = [
        ("--smtp-config", dict(type=click.Path(dir_okay=False, path_type=Path), help="Mail settings (TOML).")),
        ("--smtp-cafile", dict(help="Trust this CA file (a private or self-signed server certificate).")),
        ("--smtp-password-file", dict(help="Read the SMTP password from this file (or SEMSEARCH_SMTP_PASSWORD).")),
        ("--smtp-user", dict(help="SMTP login (or SEMSEARCH_SMTP_USER).")),
        ("--smtp-from", dict(help="The sender address [default: the user].")),
        ("--smtp-security", dict(type=click.Choice(SECURITIES), help="starttls (default), ssl, or none.")),
        ("--smtp-port", dict(type=int, help="[default: 587 starttls, 465 ssl, 25 none]")),
        ("--smtp-host", dict(help="SMTP server (or SEMSEARCH_SMTP_HOST, or host in the mail settings).")),
        (
            "--mail-empty",
            dict(is_flag=True, help="Mail the digest even when nothing arrived (by default no mail is sent then)."),
        ),
        (
            "--mail-to",
            dict(multiple=True, metavar="ADDR", help="Mail the digest (text + HTML) to ADDR (repeatable)."),
        ),
    ]
    for flag, kwargs in specs:
        fn = click.option(flag, **kwargs)(fn)
    return fn


@click.command()
@request_options("digest")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout.")
@click.option("--no-bookmark", is_flag=True, help="Do not move the bookmark (a preview).")
@_mail_options
@index_option
@click.pass_context
def digest(
    ctx: click.Context,
    request: ops.Digest,
    out: Path | None,
    no_bookmark: bool,
    mail_to: tuple[str, ...],
    mail_empty: bool,
    smtp_host: str | None,
    smtp_port: int | None,
    smtp_security: str | None,
    smtp_from: str | None,
    smtp_user: str | None,
    smtp_password_file: str | None,
    smtp_cafile: str | None,
    smtp_config: Path | None,
    index_dir: Path,
) -> None:
    """A report of every paper that arrived: those that fit your interests first, grouped by interest
    (title, authors, link, best sentence), then the others as titles.

    With --since last (the default) the digest remembers where it stopped, so a daily cron job
    reports each paper once; the bookmark moves only once the digest is written or mailed:

    \b
      0 7 * * *  semsearch index --index ~/papers -q &&
                 semsearch digest --index ~/papers --name daily --mail-to me@example.org
    With --mail-to, the SMTP settings come from the --smtp-* options, SEMSEARCH_SMTP_* variables
    or ~/.config/semsearch/mail.toml; the password only from SEMSEARCH_SMTP_PASSWORD or a file.
    """
    from semsearch.curate.digest import render

    name = request.name
    app = application(ctx, index_dir)
    settings = None
    if mail_to:
        given = {
            "host": smtp_host,
            "port": smtp_port,
            "security": smtp_security,
            "from": smtp_from,
            "user": smtp_user,
            "password_file": smtp_password_file,
            "cafile": smtp_cafile,
        }
        settings = app.mail_settings(mail_to, given, smtp_config)  # bad settings fail before any work
    made = app.run("digest", request)
    # The file first: a path that cannot be written fails before anything is mailed (the bookmark stays,
    # so a rerun would mail the same digest again).
    if out is not None:
        from semsearch.core.fileio import write_output

        write_output(out, render(made, request.format))  # the one --out writer: OutputError is one line
    # A daily cron job should not mail "0 new" every quiet day (an --out file is still written).
    quiet = settings is not None and made.arrived == 0 and not mail_empty
    papers = sum(len(s.papers) for s in made.sections)
    if settings is not None and not quiet:
        app.mail_digest(made, name, mail_to, settings)
    elif settings is None and out is None:
        click.echo(render(made, request.format), nl=False)
    if not no_bookmark:  # only once the digest is out
        app.mark_read(name)
    summary = f"digest {name}: {made.arrived} arrived, {papers} in {count(len(made.sections), 'section')}"
    if quiet:
        click.echo(f"{summary}, nothing arrived: no mail sent (--mail-empty sends it anyway)", err=True)
    elif settings is not None:
        click.echo(f"{summary}, mailed to {', '.join(mail_to)} via {settings.host}:{settings.port}", err=True)
    if out is not None:
        click.echo(f"{summary} -> {out}", err=True)
