"""The bounds every face applies to what a caller asks (library, CLI, server, MCP): k, non-blank text, a text's
length, finite numbers."""

from __future__ import annotations

import math

from semsearch.core.errors import QueryError
from semsearch.core.options import MAX_K


def check_k(k: int) -> None:
    """Raise QueryError unless k is an integer in 1..MAX_K."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise QueryError(f"k must be a positive integer, got {k!r}")
    if k > MAX_K:
        raise QueryError(f"k must be at most {MAX_K}, got {k}")


def check_text(text: str, what: str = "query") -> str:
    """The text without surrounding space; QueryError when it is not a string or is blank."""
    if not isinstance(text, str) or not text.strip():
        raise QueryError(f"the {what} is empty")
    return text.strip()


def check_length(text: str, limit: int, what: str, hint: str = "") -> None:
    """Raise QueryError when ``text`` is longer than ``limit`` characters; ``what`` names it as the face does."""
    if len(text) > limit:
        raise QueryError(f"{what} is {len(text):,} characters; the limit is {limit:,}{hint}")


def check_finite(value: float | None, field: str) -> None:
    """Raise QueryError (naming ``field``) for a number that is nan or an infinity; None is no number given."""
    if value is not None and not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise QueryError(f"{{field}} must be a finite number, got {value!r}", field=field)
