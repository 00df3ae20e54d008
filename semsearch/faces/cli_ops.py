"""The CLI face of the operation table: each command's options and arguments made from its request's fields.

``request_options("search")`` adds to a command the click parameters of every field the table gives the CLI,
with the table's flag, help, default and integer bounds; options only a terminal has (--index, --json, ...)
stay in the command.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from semsearch.core.errors import QueryError
from semsearch.core.limits import check_length
from semsearch.faces.cli_options import FINITE_FLOAT, SemsearchCliError
from semsearch.faces.operations import CLI, Param, operation


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


def click_type(param: Param) -> Any:
    """The click type of a field: a Choice, a Bounded integer, a BoundedText, a finite float, or the plain type."""
    if param.choices:
        return click.Choice(param.choices)
    base = param.base
    spec = param.spec
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
    if param.base is bool:
        kwargs.update(is_flag=True, default=bool(default))
    elif param.is_list:
        kwargs.update(multiple=True, metavar=spec.metavar)
    else:
        kwargs.update(type=click_type(param), default=default, metavar=spec.metavar)
        kwargs["show_default"] = default is not None
    return click.option(param.name, param.field, **kwargs)


def request_options(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add operation ``name``'s CLI fields to a command, in the table's order."""
    params = operation(name).params(CLI)

    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        for param in reversed(params):  # decorators apply bottom up; help lists them top down
            fn = click_parameter(param)(fn)
        return fn

    return add
