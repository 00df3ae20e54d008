"""Counts in what semsearch says: "1 paper", "2 papers", "0 papers".

One rule for every message with a number of things in it (CLI, HTTP, MCP, the digest); ``web/app.js`` keeps a twin
(``count``) for the page. A leaf: standard library only.
"""

from __future__ import annotations


def count(n: int, noun: str, plural: str = "", *, grouped: bool = False) -> str:
    """``n`` and the noun, singular for exactly one: ``count(1, "paper")`` is "1 paper".

    ``plural``: the plural where adding "s" does not make it ("entry", "entries"); ``grouped``: thousands
    separated by commas ("157,000 papers").
    """
    number = f"{n:,}" if grouped else str(n)
    return f"{number} {noun if n == 1 else plural or noun + 's'}"
