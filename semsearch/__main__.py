"""``python -m semsearch`` runs the CLI."""

from __future__ import annotations

from .cli import cli

if __name__ == "__main__":
    cli(prog_name="semsearch")
