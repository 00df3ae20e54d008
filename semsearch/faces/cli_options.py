"""What every command shares: the one-line error, the face-only option groups (index, output) and the injected
encoder; ``cli.py`` and ``cli_recs.py`` build on these, and take each operation's own options from ``cli_ops``."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from semsearch.core import options
from semsearch.core.safe_text import clean_text


class SemsearchCliError(click.ClickException):
    """A one-line error with exit status 2."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # Messages quote what was read (a record, a clause, a file name): no escape of it reaches the terminal.
        super().__init__(clean_text(message))


class FiniteFloat(click.ParamType):
    """A float option that refuses nan and the infinities (``float()`` reads both): one line naming the flag.

    A NaN floor drops every hit ("no results", exit 0) and an infinite one drops or keeps them all: neither is
    a number the user meant.
    """

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            flag = param.opts[0] if param is not None and param.opts else "the value"
            raise SemsearchCliError(f"{flag} must be a finite number, got {value!r}")
        return number


FINITE_FLOAT = FiniteFloat()


def index_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    return click.option(
        "--index",
        "index_dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar=options.INDEX_ENV,
        default=options.DEFAULT_INDEX,
        show_default=True,
        help="Index directory (or set SEMSEARCH_INDEX).",
    )(fn)


def output_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """--json / --jsonl / --format on every command that prints hits."""

    @click.option("--json", "as_json", is_flag=True, help="Print a JSON array of hits.")
    @click.option("--jsonl", "as_jsonl", is_flag=True, help="Print one JSON object per hit per line.")
    @click.option(
        "--format",
        "fmt",
        type=click.Choice(["bibtex", "ris", "csljson", "csv"]),
        help="Print the hits as citations: bibtex, ris, csljson (CSL-JSON for Zotero and Pandoc) or csv.",
    )
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if sum(bool(kwargs[name]) for name in ("as_json", "as_jsonl", "fmt")) > 1:
            raise SemsearchCliError("choose one of --json, --jsonl and --format")
        return fn(*args, **kwargs)

    return wrapper


def embedder_of(ctx: click.Context) -> Any:
    """An encoder injected by the caller of the CLI (tests), else None to load the index's own."""
    return (ctx.obj or {}).get("embedder")


class SeveralValues(click.Command):
    """A command whose repeatable options each take several values in a row: ``--like A B --not C`` reads as
    ``--like A --like B --not C``, and the repeated form still works.

    click has no option that takes a variable number of values; this spreads them before click parses. Only for
    a command with no positional argument, where a bare word after an option's value has no other meaning (click
    would refuse it as an unexpected extra argument).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if any(isinstance(p, click.Argument) for p in self.params):
            raise TypeError(f"{self.name}: a command with arguments cannot spread option values")

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, spread_values(args, self.params))


def spread_values(args: list[str], params: list[click.Parameter]) -> list[str]:
    """``args`` with every bare word after a repeatable option's value given that option again."""
    several = {name for p in params if isinstance(p, click.Option) and p.multiple for name in p.opts}
    out: list[str] = []
    current: str | None = None  # the repeatable option the last value went to
    waiting: str | None = None  # the repeatable option whose value comes next
    rest = iter(args)
    for token in rest:
        if waiting is not None:  # an option's own value, whatever it looks like
            out.append(token)
            current, waiting = waiting, None
        elif token == "--":
            out += [token, *rest]
        elif token.startswith("-") and token != "-":  # an option ("-" alone is a value: stdin)
            name, inline, _ = token.partition("=")
            repeatable = name in several
            current = name if repeatable and inline else None
            waiting = name if repeatable and not inline else None
            out.append(token)
        else:
            out += [current, token] if current is not None else [token]
    return out
