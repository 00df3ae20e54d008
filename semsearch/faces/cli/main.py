"""The ``semsearch`` group: every command joins it the same way, named in ``COMMANDS`` and loaded when run.

A command is found by its name in ``COMMANDS`` (its family's module and function), so ``semsearch query`` loads
the search commands only; ``--help`` loads them all. Library errors become one-line messages here, once.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from typing import Any

import click

from semsearch.app.operations import CLI, OPERATIONS, face_name
from semsearch.core.errors import NoMatchWarning, SemsearchError
from semsearch.core.version import __version__
from semsearch.faces.cli.common import SemsearchCliError

# Each command: "module:function" in this package, by family.
COMMANDS: dict[str, str] = {
    "digest": "recs:digest",
    "eval": "quality:eval_",
    "export": "search:export",
    "index": "build:index",
    "info": "search:info",
    "map": "servers:map_",
    "mcp": "servers:mcp",
    "models": "models:models",
    "new": "recs:new",
    "query": "search:query",
    "recommend": "recs:recommend",
    "related": "search:related",
    "remove": "build:remove",
    "serve": "servers:serve",
    "tag": "tags:tag",
    "verify": "build:verify",
    "watch": "tags:watch",
}


def _operation_of(command: str | None) -> str | None:
    """The operation a command carries (None for face-only commands: serve, mcp, ...)."""
    for op in OPERATIONS:
        if op.cli is not None and op.cli.split()[0] == command:
            return op.name
    return None


class Group(click.Group):
    """The commands of ``COMMANDS``, loaded on use; library errors as one-line messages instead of tracebacks."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *self.commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands or name not in COMMANDS:
            return super().get_command(ctx, name)
        module, _, attr = COMMANDS[name].partition(":")
        command: click.Command = getattr(importlib.import_module(f"semsearch.faces.cli.{module}"), attr)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        try:
            with warnings.catch_warnings():
                # A command says why a filter matched nothing in its own lines (its result's warnings; the server in
                # its answers'): the library's NoMatchWarning would say it a second time, as a Python warning.
                warnings.simplefilter("ignore", NoMatchWarning)
                return super().invoke(ctx)
        except SemsearchError as exc:
            # A message about a request field names it as this command's flag (--where, -k, --not).
            command = _operation_of(ctx.invoked_subcommand)
            raise SemsearchCliError(exc.message_for(lambda f: face_name(CLI, f, command))) from exc
        except OSError as exc:
            # Disk full, permissions, a path that is a file: the OS's reason and the path, in one line.
            where = f": {exc.filename}" if exc.filename else ""
            raise SemsearchCliError(f"{exc.strerror or exc}{where}") from exc
        except KeyboardInterrupt:
            click.echo("semsearch: interrupted", err=True)
            sys.exit(130)


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="semsearch")
def cli() -> None:
    """Semantic search over research-paper abstracts.

    \b
    Build an index from abstract files, then ask it questions in plain words:
      semsearch index seeds/
      semsearch query "federated learning with differential privacy"
      semsearch related 3f2a9c01d4e5b6a7
      semsearch info
    """


def main() -> None:
    """Console-script entry point."""
    # OpenBLAS starts one thread per core when numpy is imported; semsearch does no large BLAS work (ONNX Runtime
    # and FAISS have their own threads), and the idle pool slows a cold query. A value the user set wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    cli(prog_name="semsearch")
