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
