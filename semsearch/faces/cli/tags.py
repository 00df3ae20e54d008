"""The commands for tags and saved queries: ``tag`` (add, create, remove, import, list) and ``watch``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from semsearch.app import operations as ops
from semsearch.core.safe_text import clean_text, json_text
from semsearch.core.wording import count
from semsearch.faces.cli.common import application, index_option, request_options, say


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
@request_options("tag_add")
@index_option
@click.pass_context
def tag_add(ctx: click.Context, request: ops.TagAdd, index_dir: Path) -> None:
    """Tag papers (ids, external ids, unambiguous prefixes or DOIs) as NAME."""
    done = application(ctx, index_dir).run("tag_add", request)
    already = done.named - done.added
    click.echo(
        f"{request.name}: tagged {count(done.added, 'paper')} ({already} {'was' if already == 1 else 'were'} already)"
    )


@tag.command(name="create")
@request_options("tag_create")
@index_option
@click.pass_context
def tag_create(ctx: click.Context, request: ops.TagCreate, index_dir: Path) -> None:
    """Create the tag NAME (or change its polarity): an interest, or with --negative papers not for you.

    \b
    "liked" is positive and "not-for-me" negative without being created. A negative tag is never
    an interest of its own: recommend, new, digest, the page and MCP use its papers as counter-examples.
    """
    changed = application(ctx, index_dir).run("tag_create", request)
    polarity = "negative" if request.negative else "positive"
    click.echo(f"{request.name}: {polarity}" + ("" if changed else " (unchanged)"))


@tag.command(name="remove")
@request_options("tag_remove")
@index_option
@click.pass_context
def tag_remove(ctx: click.Context, request: ops.TagRemove, index_dir: Path) -> None:
    """Untag papers (dangling ones too: name them by id, prefix or external id)."""
    removed = application(ctx, index_dir).run("tag_remove", request)
    click.echo(f"{request.name}: untagged {count(removed, 'paper')}")


@tag.command(name="import")
@request_options("tag_import")
@index_option
@click.pass_context
def tag_import(ctx: click.Context, request: ops.TagImport, index_dir: Path) -> None:
    """Tag every paper FILE names: one id, external id, citation key or DOI a line (# starts a comment)."""
    done = application(ctx, index_dir).run("tag_import", request)
    for key in done.unknown:
        say(f"not in the index: {key}")
    click.echo(
        f"{request.name}: tagged {count(done.added, 'paper')} from {request.file} ({len(done.unknown)} not found)"
    )


@tag.command(name="list")
@request_options("tags")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def tag_list(ctx: click.Context, request: ops.Tags, index_dir: Path, as_json: bool) -> None:
    """List the tags (counts, dangling entries), or NAME's papers."""
    from semsearch.core.paperinfo import plain_text

    name = request.name
    listing = application(ctx, index_dir).run("tags", request)
    resolved, polarity = listing.members, listing.polarities
    if as_json:
        if name:
            click.echo(json_text(json.dumps([m.to_dict() for m in resolved[name]], ensure_ascii=False, indent=2)))
        else:
            # A tag a line: json's indented encoder is pure Python, slow on many tags; one line each is C.
            lines = [
                f"  {json.dumps(n, ensure_ascii=False)}: "
                + json.dumps({"papers": len(ms), "dangling": sum(m.dangling for m in ms), "polarity": polarity.get(n)})
                for n, ms in resolved.items()
            ]
            click.echo("{\n" + ",\n".join(lines) + "\n}" if lines else "{}")
        return
    if not resolved:
        click.echo("no tags yet (semsearch tag add NAME ID...)")
    for n, ms in resolved.items():
        dangling = sum(m.dangling for m in ms)
        sign = " (negative: not for me)" if polarity.get(n) == "negative" else ""
        click.echo(
            f"{n}{sign}: {count(len(ms), 'paper')}"
            + (f", {dangling} dangling (not in the live index)" if dangling else "")
        )
        if name:
            for m in ms:
                state = "dangling " if m.dangling else ""
                shown = m.live_id or m.entry.id
                click.echo(f"  {state}{shown}  {plain_text(m.entry.label)}")


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
@click.pass_context
def watch_add(ctx: click.Context, request: ops.Watch, index_dir: Path) -> None:
    """Save QUERY under NAME (replacing a saved query of that name)."""
    saved = application(ctx, index_dir).run("watch", request)
    click.echo(f"saved query {saved.name}: {clean_text(saved.query, one_line=True)}")


@watch.command(name="list")
@request_options("watch_list")
@index_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def watch_list(ctx: click.Context, request: ops.WatchList, index_dir: Path, as_json: bool) -> None:
    """List the saved queries."""
    found = application(ctx, index_dir).run("watch_list", request)
    if as_json:  # faithful to the file; json_text escapes what JSON would leave raw (C1, bidi controls)
        click.echo(json_text(json.dumps([w.to_dict() for w in found], ensure_ascii=False, indent=2)))
    elif not found:
        click.echo('no saved queries (semsearch watch add NAME "query")')
    for w in found if not as_json else []:  # a hand-edited watches.json may hold anything
        click.echo(f"{clean_text(w.name, one_line=True)}: {clean_text(w.query, one_line=True)}")


@watch.command(name="remove")
@request_options("watch_remove")
@index_option
@click.pass_context
def watch_remove(ctx: click.Context, request: ops.WatchRemove, index_dir: Path) -> None:
    """Forget the saved query NAME."""
    application(ctx, index_dir).run("watch_remove", request)
    click.echo(f"removed saved query {request.name}")
