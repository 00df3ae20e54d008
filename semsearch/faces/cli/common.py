"""What every command shares: the one-line error, the face-only option groups (index, output), the injected
encoder, the application a command runs its operation on, and each operation's own options, made from its
request's fields.

``request_options("search")`` adds to a command the click parameters of every field the table gives the CLI,
with the table's flag, help, default and integer bounds, and hands the command the typed request made from
them (``request=``); options only a terminal has (--index, --json, ...) stay in the command.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from semsearch.app.operations import CLI, Param, operation
from semsearch.core import options
from semsearch.core.errors import QueryError
from semsearch.core.limits import check_length
from semsearch.core.safe_text import clean_text

if TYPE_CHECKING:
    from semsearch.app.application import Application


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


def application(ctx: click.Context, index_dir: Path | None, *, model: str | None = None) -> Application:
    """The application over ``index_dir`` for this command, closed when the command ends."""
    from semsearch.app.application import Application

    app = Application(index_dir, embedder=embedder_of(ctx), model=model)
    ctx.call_on_close(app.close)
    return app


def say(line: str) -> None:
    """A line on stderr, as every notice of the command line: ``semsearch: ...``."""
    click.echo(f"semsearch: {line}", err=True)


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


# ---------------------------------------------------------------- options made from the operation table


class Bounded(click.IntRange):
    """An integer whose range the table declares (help shows it) and the library enforces: out of range is the
    library's one-line error naming the flag, not a usage screen."""

    name = "integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return click.INT.convert(value, param, ctx)


class BoundedText(click.ParamType):
    """A text whose length the table bounds on every face: a longer one is one line naming the field, not a
    usage screen. A blank one is left to the library, whose line also covers text that is only spaces."""

    name = "text"

    def __init__(self, min_length: int | None, max_length: int | None) -> None:
        self.min_length = min_length
        self.max_length = max_length

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str):
            self.check(value, param)
        return value

    def check(self, value: str, param: click.Parameter | None) -> None:
        """Raise the one-line error when ``value`` is longer than the table allows."""
        if self.max_length is None:
            return
        if param is None:
            name = "the value"
        elif isinstance(param, click.Argument):  # "the query TEXT", as the usage line names it
            name = f"the {param.name} {(param.metavar or '').strip('[].')}".rstrip()
        else:
            name = param.opts[0]
        try:
            check_length(value, self.max_length, name)
        except QueryError as exc:
            raise SemsearchCliError(str(exc)) from None


class RegistryChoice(click.Choice):
    """A click.Choice whose choices are read from the registry when first needed (help, parsing)."""

    def __init__(self, read: Callable[[], Sequence[str]], accept: Callable[[], Sequence[str]] | None = None) -> None:
        super().__init__(())
        self._read = read
        self._accept = accept

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if self._accept is not None and value in self._accept():
            return value  # registered but not offered (a stand-in for tests and benchmarks)
        return super().convert(value, param, ctx)

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self._read())

    @choices.setter
    def choices(self, value: Sequence[str]) -> None:
        pass


def click_type(param: Param) -> Any:
    """The click type of a field: a Choice, a Bounded integer, a BoundedText, a finite float, or the plain type."""
    if callable(param.spec.choices):
        return RegistryChoice(param.spec.choices, param.spec.accepts)
    if param.choices:
        return click.Choice(param.choices)
    base = param.base
    spec = param.spec
    if spec.file:
        return click.Path(file_okay=spec.file != "folder", dir_okay=spec.file != "file", exists=spec.file == "folder")
    if base is int and spec.ge is None and spec.le is None and spec.lt is None:
        return click.INT
    if base is int:
        return Bounded(min=spec.ge, max=spec.le if spec.lt is None else spec.lt - 1)
    if base is str and (spec.min_length is not None or spec.max_length is not None):
        return BoundedText(spec.min_length, spec.max_length)
    return {float: FINITE_FLOAT, str: str, bool: bool}.get(base, str)


def check_read_text(ctx: click.Context, field: str, text: str) -> None:
    """Hold a text the command read itself (a query from stdin for '-') to the bound of the field it stands for."""
    for param in ctx.command.params:
        if param.name == field and isinstance(param.type, BoundedText):
            param.type.check(text.strip(), param)


def click_parameter(param: Param) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The click argument or option of one field."""
    spec = param.spec
    default = None if spec.required else spec.default
    if param.positional:
        shown = param.name if spec.required else f"[{param.name}]"  # as click writes an argument's own name
        return click.argument(
            param.field,
            metavar=shown + ("..." if param.is_list else ""),
            nargs=-1 if param.is_list else 1,
            required=spec.required,
            type=click_type(param) if not param.is_list else None,
            **({} if spec.required or param.is_list else {"default": default}),
        )
    kwargs: dict[str, Any] = {"help": spec.help or None}
    if "/" in param.name:  # --follow-links/--no-follow-links: unset unless given
        return click.option(param.name, param.field, default=spec.default, **kwargs)
    if param.base is bool:
        kwargs.update(is_flag=True, default=bool(default))
    elif param.is_list:
        kwargs.update(multiple=True, metavar=spec.metavar)
        if param.spec.choices:
            kwargs["type"] = click_type(param)
    else:
        kwargs.update(type=click_type(param), default=default, metavar=spec.metavar)
        kwargs["show_default"] = default is not None
    return click.option(param.name, param.field, **kwargs)


def request_options(
    name: str, after: dict[str, Callable[[Callable[..., Any]], Any]] | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add operation ``name``'s CLI fields to a command, in the table's order; the command gets ``request=``.

    ``after``: a face's own option to list right after a field (eval's ``--index`` after ``--split``).
    """
    op = operation(name)
    params = op.params(CLI)

    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            fields = {p.field: kwargs.pop(p.field) for p in params}
            return fn(*args, request=op.request(**fields), **kwargs)

        made: Callable[..., Any] = command
        for param in reversed(params):  # decorators apply bottom up; help lists them top down
            if after and param.field in after:
                made = after[param.field](made)
            made = click_parameter(param)(made)
        return made

    return add
