"""The formats ingest reads: the built-in ones, and those installed packages add through an entry point.

A package adds a format by naming a ``TextFormat`` or ``FileFormat`` subclass (or instance) in the
``semsearch.formats`` entry-point group, e.g. in its ``pyproject.toml``::

    [project.entry-points."semsearch.formats"]
    lines = "mypackage.lines:LinesFormat"

Nothing in semsearch changes: folder walks, format detection, refreshes and stale checks all ask the registry.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from semsearch.core.errors import InputError
from semsearch.ingest.bibtex import BibTeX
from semsearch.ingest.csv_rows import Csv, Tsv
from semsearch.ingest.formats import FileFormat, Format, FormatRegistry, TextFormat, failure
from semsearch.ingest.json_formats import Json, JsonLines
from semsearch.ingest.seed import SeedText
from semsearch.ingest.zotero import Zotero

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = "semsearch.formats"
# Registration order is the order extensions are listed in messages; sniff_order decides detection.
BUILTIN_FORMATS: tuple[Format, ...] = (SeedText(), JsonLines(), Json(), Csv(), Tsv(), BibTeX(), Zotero())
BUILTIN = FormatRegistry(BUILTIN_FORMATS, fallback=SeedText.name)


@functools.lru_cache(maxsize=1)
def installed_formats() -> FormatRegistry:
    """The built-in formats and every plugin format (looked up once per process)."""
    from importlib.metadata import entry_points

    points = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda p: p.name)
    if not points:
        return BUILTIN
    plugins = {point.name: _load(point) for point in points}
    return FormatRegistry(
        (*BUILTIN_FORMATS, *plugins.values()),
        fallback=SeedText.name,
        plugins={fmt.name: name for name, fmt in plugins.items()},
    )


def _load(point: EntryPoint) -> Format:
    """One plugin's format, instantiated when the entry point names a class; a broken plugin is one error line.

    A plugin that raises anything on import, ``SystemExit`` included (it would end the command with status 0,
    having built nothing), is that line; only a Ctrl-C stays an interruption.
    """
    name = point.name
    try:
        loaded = point.load()
        fmt = loaded() if isinstance(loaded, type) else loaded
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a plugin can fail in any way; the user gets its name, its module and the reason
        raise InputError(f"input format plugin {name!r} ({_origin(point)}) cannot be loaded ({failure(exc)})") from None
    if not isinstance(fmt, (TextFormat, FileFormat)):
        raise InputError(f"input format plugin {name!r} ({_origin(point)}) is not a TextFormat or FileFormat")
    return fmt


def _origin(point: EntryPoint) -> str:
    """Where a plugin comes from: its target, and the distribution that installs it."""
    dist = getattr(point, "dist", None)
    package = getattr(dist, "name", None)
    return f"{point.value}, from the {package} package" if package else point.value
