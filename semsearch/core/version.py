"""The release number, in a module of its own so that any module may import it without a cycle."""

from __future__ import annotations

__version__ = "0.1.0"
