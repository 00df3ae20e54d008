"""The commands for tags, recommendations and arrivals: ``tag``, ``recommend``, ``new``, ``watch``, ``digest``.

Registered on the main group by ``semsearch.faces.cli``; each is a thin layer over the library.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from semsearch.core.safe_text import clean_text, json_text
from semsearch.core.wording import count
from semsearch.faces.cli_ops import request_options
from semsearch.faces.cli_options import SemsearchCliError, SeveralValues, embedder_of, index_option

BECAUSE_CHARS = 60  # of the liked paper's title in a "because" line
FOR_YOU_HELP = "Tag names or paper ids (ids, external ids such as citation keys, unambiguous prefixes, DOIs)."


def _print_rows(rows: list[dict[str, Any]], fmt: str, table: str, hits: Sequence[Any]) -> None:
    from semsearch.faces.render import to_json, to_jsonl
    from semsearch.reader.export import FORMATS, export

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


# ---------------------------------------------------------------- tag


@click.group()
def tag() -> None:
    """Named sets of papers ("liked", "reading-group", ...) kept beside the index.

    \b
    Tags survive rebuilds, --full and remove. A tagged paper that leaves the sources stays
    in the tag as a dangling entry (tag list shows it) and is live again when its text returns.
      semsearch tag add liked 6a24ce769ac8de0d 447e10ab   # ids, prefixes, citation keys, DOIs
      semsearch tag import liked my_papers.txt      # one id, citation key or DOI a line
      semsearch tag list liked
      semsearch recommend --like liked
    """


@tag.command(name="add")
@click.argument("name")
@click.argument("ids", nargs=-1, required=True)
@index_option
def tag_add(name: str, ids: tuple[str, ...], index_dir: Path) -> None:
    """Tag papers (ids, external ids, unambiguous prefixes or DOIs) as NAME."""
    from semsearch.query.search import Index
    from semsearch.reader.tags import TagStore, check_name, resolve_papers

    check_name(name)
    with Index.open(index_dir) as idx:
        docs = resolve_papers(idx, ids)
    added = TagStore(index_dir).add(name, docs)
    already = len(docs) - added
    click.echo(f"{name}: tagged {count(added, 'paper')} ({already} {'was' if already == 1 else 'were'} already)")


@tag.command(name="create")
@click.argument("name")
@click.option("--negative", "polarity", flag_value="negative", help="Papers not for you: counter-examples everywhere.")
@click.option("--positive", "polarity", flag_value="positive", default=True, help="An interest (the default).")
@index_option
def tag_create(name: str, polarity: str, index_dir: Path) -> None:
    """Create the tag NAME (or change its polarity): an interest, or with --negative papers not for you.

    \b
    "liked" is positive and "not-for-me" negative without being created. A negative tag is never
    an interest of its own: recommend, new, digest, the page and MCP use its papers as counter-examples.
    """
    from semsearch.reader.tags import TagStore
    from semsearch.store.layout import current_version

    current_version(index_dir)
    changed = TagStore(index_dir).create(name, negative=polarity == "negative")
    click.echo(f"{name}: {polarity}" + ("" if changed else " (unchanged)"))


@tag.command(name="remove")
@click.argument("name")
@click.argument("ids", nargs=-1, required=True)
@index_option
def tag_remove(name: str, ids: tuple[str, ...], index_dir: Path) -> None:
    """Untag papers (dangling ones too: name them by id, prefix or external id)."""
    from semsearch.reader.tags import TagStore

    removed = TagStore(index_dir).remove(name, ids)
    click.echo(f"{name}: untagged {count(removed, 'paper')}")


@tag.command(name="import")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--skip-unknown", is_flag=True, help="Tag what is found and list the rest, instead of failing.")
@index_option
def tag_import(name: str, file: Path, skip_unknown: bool, index_dir: Path) -> None:
    """Tag every paper FILE names: one id, external id, citation key or DOI a line (# starts a comment)."""
    from semsearch.core.errors import UnknownDocumentError
    from semsearch.query.search import Index
    from semsearch.reader.tags import TagStore, check_name, read_id_file, resolve_papers

    check_name(name)
    keys = read_id_file(file)
    docs = []
    unknown = []
    with Index.open(index_dir) as idx:
        for key in keys:
            try:
                docs.extend(resolve_papers(idx, [key]))
            except UnknownDocumentError:
                unknown.append(key)
    if unknown and not skip_unknown:
        shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
        raise SemsearchCliError(f"{file}: not in the index: {shown} (--skip-unknown tags the rest)")
    for key in unknown:
        click.echo(f"semsearch: not in the index: {key}", err=True)
    added = TagStore(index_dir).add(name, docs)
    click.echo(f"{name}: tagged {count(added, 'paper')} from {file} ({len(unknown)} not found)")


@tag.command(name="list")
@request_options("tags")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tag_list(name: str | None, index_dir: Path, as_json: bool) -> None:
    """List the tags (counts, dangling entries), or NAME's papers."""
    from semsearch.core.paperinfo import plain_text
    from semsearch.query.search import Index
    from semsearch.reader.tags import TagStore, all_members

    store = TagStore(index_dir)
    with Index.open(index_dir) as idx:
        resolved = all_members(idx, store, [name] if name else None)  # one read of tags.json
    if as_json:
        if name:
            click.echo(json_text(json.dumps([m.to_dict() for m in resolved[name]], ensure_ascii=False, indent=2)))
        else:
            polarity = store.polarities()
            # A tag a line: json's indented encoder is pure Python (1.8 s of 50,000 tags' 2.5 s), one line each is C.
            lines = [
                f"  {json.dumps(n, ensure_ascii=False)}: "
                + json.dumps({"papers": len(ms), "dangling": sum(m.dangling for m in ms), "polarity": polarity.get(n)})
                for n, ms in resolved.items()
            ]
            click.echo("{\n" + ",\n".join(lines) + "\n}" if lines else "{}")
        return
    if not resolved:
        click.echo("no tags yet (semsearch tag add NAME ID...)")
    polarities = store.polarities()
    for n, ms in resolved.items():
        dangling = sum(m.dangling for m in ms)
        sign = " (negative: not for me)" if polarities.get(n) == "negative" else ""
        click.echo(
            f"{n}{sign}: {count(len(ms), 'paper')}"
            + (f", {dangling} dangling (not in the live index)" if dangling else "")
        )
        if name:
            for m in ms:
                state = "dangling " if m.dangling else ""
                shown = m.live_id or m.entry.id
                click.echo(f"  {state}{shown}  {plain_text(m.entry.label)}")


# ---------------------------------------------------------------- recommend


@click.command(cls=SeveralValues)
@request_options("recommend")
@click.option(
    "--like-text",
    "like_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding an abstract you liked that is not in the index ('-': stdin).",
)
@index_option
@_format_option
@click.pass_context
def recommend(
    ctx: click.Context,
    like: tuple[str, ...],
    not_like: tuple[str, ...],
    k: int,
    since: str | None,
    include_tagged: bool,
    method: str | None,
    like_files: tuple[Path, ...],
    index_dir: Path,
    where: tuple[str, ...],
    fmt: str,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Papers like the ones you liked, and unlike the ones you did not; each says which liked paper it is near.

    \b
      semsearch recommend --like liked                       # a tag's papers
      semsearch recommend --like 6a24ce769ac8 447e10ab --not 4fec9eb5    # several ids after one flag
      semsearch recommend --like-text my_abstract.txt --since 2026-12-01 --format bibtex
    The default method is the one scripts/bench_recommend.py measured best (docs: Explanations, Quality).
    """
    from semsearch.query.search import Index
    from semsearch.reader.recommend import recommend as recommend_papers

    fmt = _fmt(fmt, as_json, as_jsonl)
    texts = [_read_file(p) for p in like_files]
    with Index.open(index_dir, embedder=embedder_of(ctx)) as idx:
        recs = recommend_papers(
            idx,
            like,
            k,
            not_like=not_like,
            like_texts=texts,
            where=where,
            since=since,
            include_tagged=include_tagged,
            method=method,
        )
    rows = [r.to_dict() for r in recs]
    _print_rows(rows, fmt, _recommend_table(recs), [r.hit for r in recs])


def _read_file(path: Path) -> str:
    if str(path) == "-":
        return sys.stdin.read()
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SemsearchCliError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from exc


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
def new(
    ctx: click.Context,
    since: str | None,
    k: int,
    where: tuple[str, ...],
    index_dir: Path,
    fmt: str,
    as_json: bool,
    as_jsonl: bool,
) -> None:
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
    from semsearch.core.limits import check_k
    from semsearch.query.search import Index
    from semsearch.reader.arrivals import NEW_BOOKMARK, live_seq, new_since, set_bookmark
    from semsearch.reader.whats_new import ranked_new

    fmt = _fmt(fmt, as_json, as_jsonl)
    check_k(k)
    with Index.open(index_dir, embedder=embedder_of(ctx)) as idx:
        papers = ranked_new(idx, new_since(idx, since), k=k, where=where)
        if since == "last":
            set_bookmark(idx.path, NEW_BOOKMARK, live_seq(idx))
    rows = [p.to_dict() for p in papers]
    table = _new_table(papers)
    _print_rows(rows, fmt, table, [p.hit for p in papers])


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


@click.group()
def watch() -> None:
    """Saved queries: `new` and `digest` rank what arrived for them.

    \b
      semsearch watch add privacy "federated learning with differential privacy"
      semsearch watch list
      semsearch watch remove privacy
    """


@watch.command(name="add")
@request_options("watch")
@index_option
def watch_add(name: str, query: str, index_dir: Path) -> None:
    """Save QUERY under NAME (replacing a saved query of that name)."""
    from semsearch.reader.arrivals import add_watch
    from semsearch.store.layout import current_version

    current_version(index_dir)
    saved = add_watch(index_dir, name, query)
    click.echo(f"saved query {saved.name}: {clean_text(saved.query, one_line=True)}")


@watch.command(name="list")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def watch_list(index_dir: Path, as_json: bool) -> None:
    """List the saved queries."""
    from semsearch.reader.arrivals import read_watches

    found = read_watches(index_dir)
    if as_json:  # faithful to the file; json_text escapes what JSON would leave raw (C1, bidi controls)
        click.echo(json_text(json.dumps([w.to_dict() for w in found], ensure_ascii=False, indent=2)))
    elif not found:
        click.echo('no saved queries (semsearch watch add NAME "query")')
    for w in found if not as_json else []:  # a hand-edited watches.json may hold anything
        click.echo(f"{clean_text(w.name, one_line=True)}: {clean_text(w.query, one_line=True)}")


@watch.command(name="remove")
@click.argument("name")
@index_option
def watch_remove(name: str, index_dir: Path) -> None:
    """Forget the saved query NAME."""
    from semsearch.reader.arrivals import remove_watch

    remove_watch(index_dir, name)
    click.echo(f"removed saved query {name}")


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
    since: str,
    name: str,
    format: str,
    k: int,
    min_fit: float,
    also_max: int,
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
    where: tuple[str, ...],
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
    from semsearch.query.search import Index
    from semsearch.reader.digest import make_digest, render

    fmt = format
    settings = None
    if mail_to:
        from semsearch.reader.mail import check_address, resolve_settings

        for address in mail_to:
            check_address(address)
        options = {
            "host": smtp_host,
            "port": smtp_port,
            "security": smtp_security,
            "from": smtp_from,
            "user": smtp_user,
            "password_file": smtp_password_file,
            "cafile": smtp_cafile,
        }
        settings = resolve_settings(options, config=smtp_config)  # bad settings fail before any work
    with Index.open(index_dir, embedder=embedder_of(ctx)) as idx:
        made = make_digest(
            idx, name=name, since=since, k=k, where=where, bookmark=False, min_fit=min_fit, also_max=also_max
        )
        # The file first: a path that cannot be written fails before anything is mailed (the bookmark stays,
        # so a rerun would mail the same digest again).
        if out is not None:
            from semsearch.core.fileio import write_output

            write_output(out, render(made, fmt))  # the one --out writer: OutputError is one line
        # A daily cron job should not mail "0 new" every quiet day (an --out file is still written).
        quiet = settings is not None and made.arrived == 0 and not mail_empty
        papers = sum(len(s.papers) for s in made.sections)
        if settings is not None and not quiet:
            from semsearch.reader.mail import build_message, send

            subject = f"semsearch digest {name}: {made.arrived} new, {papers} for you"
            message = build_message(subject, settings.sender, list(mail_to), render(made, "md"), render(made, "html"))
            send(settings, message)
        elif settings is None and out is None:
            click.echo(render(made, fmt), nl=False)
        if not no_bookmark:  # only once the digest is out
            from semsearch.reader.arrivals import live_seq, set_bookmark

            set_bookmark(idx.path, name, live_seq(idx))
    summary = f"digest {name}: {made.arrived} arrived, {papers} in {count(len(made.sections), 'section')}"
    if quiet:
        click.echo(f"{summary}, nothing arrived: no mail sent (--mail-empty sends it anyway)", err=True)
    elif settings is not None:
        click.echo(f"{summary}, mailed to {', '.join(mail_to)} via {settings.host}:{settings.port}", err=True)
    if out is not None:
        click.echo(f"{summary} -> {out}", err=True)


def register(group: click.Group) -> None:
    """Add these commands to the ``semsearch`` group."""
    for command in (tag, recommend, new, watch, digest):
        group.add_command(command)
