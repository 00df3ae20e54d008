"""The commands for tags, recommendations and arrivals: ``tag``, ``recommend``, ``new``, ``watch``, ``digest``.

Registered on the main group by ``semsearch.cli``; each is a thin layer over the library.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .cli_options import SemsearchCliError, embedder_of, index_option, k_option

FOR_YOU_HELP = "Tag names or paper ids (ids, external ids such as citation keys, unambiguous prefixes, DOIs)."


def _print_rows(rows: list[dict[str, Any]], fmt: str, table: str, hits: Sequence[Any]) -> None:
    from .export import FORMATS, export
    from .render import to_json, to_jsonl

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
    from .search import Index
    from .tags import TagStore, check_name, resolve_papers

    check_name(name)
    with Index.open(index_dir) as idx:
        docs = resolve_papers(idx, ids)
    added = TagStore(index_dir).add(name, docs)
    click.echo(f"{name}: tagged {added} papers ({len(docs) - added} were already)")


@tag.command(name="remove")
@click.argument("name")
@click.argument("ids", nargs=-1, required=True)
@index_option
def tag_remove(name: str, ids: tuple[str, ...], index_dir: Path) -> None:
    """Untag papers (dangling ones too: name them by id, prefix or external id)."""
    from .tags import TagStore

    removed = TagStore(index_dir).remove(name, ids)
    click.echo(f"{name}: untagged {removed} papers")


@tag.command(name="import")
@click.argument("name")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--skip-unknown", is_flag=True, help="Tag what is found and list the rest, instead of failing.")
@index_option
def tag_import(name: str, file: Path, skip_unknown: bool, index_dir: Path) -> None:
    """Tag every paper FILE names: one id, external id, citation key or DOI a line (# starts a comment)."""
    from .errors import UnknownDocumentError
    from .search import Index
    from .tags import TagStore, check_name, read_id_file, resolve_papers

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
    click.echo(f"{name}: tagged {added} papers from {file} ({len(unknown)} not found)")


@tag.command(name="list")
@click.argument("name", required=False)
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def tag_list(name: str | None, index_dir: Path, as_json: bool) -> None:
    """List the tags (counts, dangling entries), or NAME's papers."""
    from .search import Index
    from .tags import TagStore, members

    store = TagStore(index_dir)
    with Index.open(index_dir) as idx:
        names = [name] if name else store.names()
        resolved = {n: members(idx, store, n) for n in names}
    if as_json:
        if name:
            click.echo(json.dumps([m.to_dict() for m in resolved[name]], ensure_ascii=False, indent=2))
        else:
            summary = {n: {"papers": len(ms), "dangling": sum(m.dangling for m in ms)} for n, ms in resolved.items()}
            click.echo(json.dumps(summary, ensure_ascii=False, indent=2))
        return
    if not resolved:
        click.echo("no tags yet (semsearch tag add NAME ID...)")
    for n, ms in resolved.items():
        dangling = sum(m.dangling for m in ms)
        click.echo(f"{n}: {len(ms)} papers" + (f", {dangling} dangling (not in the live index)" if dangling else ""))
        if name:
            for m in ms:
                state = "dangling " if m.dangling else ""
                shown = m.live_id or m.entry.id
                click.echo(f"  {state}{shown}  {m.entry.label}")


# ---------------------------------------------------------------- recommend


@click.command()
@click.option("--like", "like", multiple=True, metavar="TAG|ID", help=f"Papers you liked (repeatable). {FOR_YOU_HELP}")
@click.option("--not", "not_like", multiple=True, metavar="TAG|ID", help="Papers you do not want more of.")
@click.option(
    "--like-text",
    "like_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A file holding an abstract you liked that is not in the index ('-': stdin).",
)
@k_option
@index_option
@click.option("--where", "where", multiple=True, metavar="FIELD OP VALUE", help="Metadata filters, as for query.")
@click.option(
    "--since", metavar="VERSION|DATE|last", help="Only papers that arrived after a version or on/after a date."
)
@click.option("--include-tagged", is_flag=True, help="Also list papers that are in a tag (left out by default).")
@click.option("--method", help="Scoring method (see semsearch.recommend) [default: the one measured best].")
@_format_option
@click.pass_context
def recommend(
    ctx: click.Context,
    like: tuple[str, ...],
    not_like: tuple[str, ...],
    like_files: tuple[Path, ...],
    k: int,
    index_dir: Path,
    where: tuple[str, ...],
    since: str | None,
    include_tagged: bool,
    method: str | None,
    fmt: str,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Papers like the ones you liked, and unlike the ones you did not; each says which liked paper it is near.

    \b
      semsearch recommend --like liked                       # a tag's papers
      semsearch recommend --like 6a24ce769ac8 --like 447e10ab --not 4fec9eb5
      semsearch recommend --like-text my_abstract.txt --since 2026-12-01 --format bibtex
    The default method is the one scripts/bench_recommend.py measured best (docs: Explanations, Quality).
    """
    from .search import Index

    fmt = _fmt(fmt, as_json, as_jsonl)
    texts = [_read_file(p) for p in like_files]
    with Index.open(index_dir, embedder=embedder_of(ctx)) as idx:
        recs = idx.recommend(
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
    from .render import hits_table

    if not recs:
        return "no results"
    blocks = hits_table([r.hit for r in recs]).split("\n\n")
    out = []
    for block, rec in zip(blocks, recs, strict=True):
        near = rec.because.id or "your abstract"
        out.append(f"{block}\n    because: near {near} ({rec.because.label[:60]}, cosine {rec.because.cosine:.3f})")
    return "\n\n".join(out)


# ---------------------------------------------------------------- new, watch, digest


@click.command()
@click.option(
    "--since",
    metavar="VERSION|DATE|last",
    help="Arrived after this version (v-000003 or 3), on/after this date, or since the last `new --since last` "
    "[default: the latest arrivals, i.e. what the last build that added papers added].",
)
@click.option("-k", "k", type=int, default=20, show_default=True, help="How many papers to list.")
@index_option
@click.option("--where", "where", multiple=True, metavar="FIELD OP VALUE", help="Metadata filters, as for query.")
@_format_option
@click.pass_context
def new(
    ctx: click.Context,
    since: str | None,
    k: int,
    index_dir: Path,
    where: tuple[str, ...],
    fmt: str,
    as_json: bool,
    as_jsonl: bool,
) -> None:
    """Papers that arrived since a version or date, ranked for your tags and saved queries.

    A reformatted copy of an abstract the index already held is not new. Each paper names the
    tags and saved queries (watch) that rank it; with neither, the newest come first.

    \b
      semsearch index                    # re-read the sources: new abstracts arrive
      semsearch new                      # what that build added
      semsearch new --since 2026-12-01 --json
    """
    from .arrivals import live_seq, new_since, set_bookmark
    from .limits import check_k
    from .search import Index
    from .whats_new import ranked_new

    fmt = _fmt(fmt, as_json, as_jsonl)
    check_k(k)
    with Index.open(index_dir, embedder=embedder_of(ctx)) as idx:
        papers = ranked_new(idx, new_since(idx, since), k=k, where=where)
        if since == "last":
            set_bookmark(idx.path, "new", live_seq(idx))
    rows = [p.to_dict() for p in papers]
    table = _new_table(papers)
    _print_rows(rows, fmt, table, [p.hit for p in papers])


def _new_table(papers: Sequence[Any]) -> str:
    from .render import hits_table

    if not papers:
        return "nothing new"
    blocks = hits_table([p.hit for p in papers]).split("\n\n")
    out = []
    for block, paper in zip(blocks, papers, strict=True):
        when = f"added {paper.added.at} (version {paper.added.seq})" if paper.added else "added: unknown"
        why = f"  ·  for {', '.join(paper.reasons[:3])}" if paper.reasons else ""
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
@click.argument("name")
@click.argument("query")
@index_option
def watch_add(name: str, query: str, index_dir: Path) -> None:
    """Save QUERY under NAME (replacing a saved query of that name)."""
    from .arrivals import add_watch
    from .layout import current_version

    current_version(index_dir)
    saved = add_watch(index_dir, name, query)
    click.echo(f"saved query {saved.name}: {saved.query}")


@watch.command(name="list")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def watch_list(index_dir: Path, as_json: bool) -> None:
    """List the saved queries."""
    from .arrivals import read_watches

    found = read_watches(index_dir)
    if as_json:
        click.echo(json.dumps([w.to_dict() for w in found], ensure_ascii=False, indent=2))
    elif not found:
        click.echo('no saved queries (semsearch watch add NAME "query")')
    for w in found if not as_json else []:
        click.echo(f"{w.name}: {w.query}")


@watch.command(name="remove")
@click.argument("name")
@index_option
def watch_remove(name: str, index_dir: Path) -> None:
    """Forget the saved query NAME."""
    from .arrivals import remove_watch

    remove_watch(index_dir, name)
    click.echo(f"removed saved query {name}")


@click.command()
@click.option(
    "--since",
    default="last",
    show_default=True,
    metavar="last|VERSION|DATE",
    help="last: where this digest (--name) stopped the previous time (everything the first time).",
)
@click.option("--name", default="default", show_default=True, help="The digest's name: each keeps its own bookmark.")
@click.option("--format", "fmt", type=click.Choice(["md", "html", "json", "atom"]), default="md", show_default=True)
@click.option("-k", "k", type=int, default=5, show_default=True, help="Papers per tag and per saved query.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write to this file instead of stdout.")
@click.option("--no-bookmark", is_flag=True, help="Do not move the bookmark (a preview).")
@click.option(
    "--min-cosine",
    type=float,
    default=0.3,
    show_default=True,
    help="List a paper under a tag or saved query only when its cosine to the nearest liked paper (or the "
    "query) reaches this; 0 lists the best k whatever they are.",
)
@index_option
@click.option("--where", "where", multiple=True, metavar="FIELD OP VALUE", help="Metadata filters, as for query.")
@click.pass_context
def digest(
    ctx: click.Context,
    since: str,
    name: str,
    fmt: str,
    k: int,
    out: Path | None,
    no_bookmark: bool,
    min_cosine: float,
    index_dir: Path,
    where: tuple[str, ...],
) -> None:
    """A report of what arrived, per tag and per saved query: title, authors, link, best sentence.

    With --since last (the default) the digest remembers where it stopped, so a daily cron job
    reports each paper once:

    \b
      0 7 * * *  semsearch index --index ~/papers -q &&
                 semsearch digest --index ~/papers --name daily --format html --out ~/digest.html
    """
    from .digest import make_digest, render
    from .search import Index

    with Index.open(index_dir, embedder=embedder_of(ctx)) as idx:
        made = make_digest(idx, name=name, since=since, k=k, where=where, bookmark=False, min_cosine=min_cosine)
        text = render(made, fmt)
        if out is not None:
            from .fileio import write_text_atomic

            write_text_atomic(out, text)
        else:
            click.echo(text, nl=False)
        if not no_bookmark:  # only once the digest is out
            from .arrivals import live_seq, set_bookmark

            set_bookmark(idx.path, name, live_seq(idx))
    if out is not None:
        papers = sum(len(s.papers) for s in made.sections)
        click.echo(f"digest {name}: {papers} papers in {len(made.sections)} sections -> {out}", err=True)


def register(group: click.Group) -> None:
    """Add these commands to the ``semsearch`` group."""
    for command in (tag, recommend, new, watch, digest):
        group.add_command(command)
