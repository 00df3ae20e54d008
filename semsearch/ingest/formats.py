"""The input formats: one reader class per format, each saying which files it reads and how, and their registry.

A ``TextFormat`` reads decoded text (``sources.py`` has already gunzipped and decoded it): it names the file
extensions it owns (a folder walk reads only files so named), whether such a name decides the format
(``name_decides``; a ``.txt`` file is still sniffed), ``sniff`` to claim text whose name does not decide, and
``items`` to parse it into objects for ingest's field rules (``fields.py``). A ``FileFormat`` reads a whole file
itself (Zotero's SQLite database, a PDF); one that names ``extensions`` is read by folder walks too.
``FormatRegistry`` holds them in one place and answers the questions ``sources.py`` asks; ``installed_formats``
builds it from the extension registry's format entries (the built-in ones and any installed in the
``semsearch.formats`` entry-point group). Every call into a plugin's format goes through the registry, which
turns whatever the plugin raises (but a ``SemsearchError`` or a Ctrl-C) into one ``InputError`` line naming the
plugin and the file it was reading.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from semsearch.core import registry
from semsearch.core.errors import InputError, SemsearchError
from semsearch.core.records import Record, SourceFile
from semsearch.core.registry import failure
from semsearch.ingest.fields import Item, collect
from semsearch.ingest.walk import suffix


class TextFormat:
    """A format read from decoded text; subclasses set ``name`` and ``extensions`` and define ``items``."""

    name: ClassVar[str]  # recorded as the source file's format in the manifest
    extensions: ClassVar[tuple[str, ...]] = ()  # lower case, with the dot: ".jsonl"
    name_decides: ClassVar[bool] = True  # a file so named is this format (among its extension's owners)
    sniff_order: ClassVar[int] = 100  # formats are sniffed in this order (ties: registration order)

    def sniff(self, text: str) -> bool:
        """Whether text whose name does not decide its format is in this one (default: never claimed)."""
        return False

    def items(self, text: str, display: str) -> Iterator[Item]:
        """One (provenance, object or reason it is bad) per record, in file order."""
        raise NotImplementedError

    def records(self, text: str, display: str, skip_bad: bool) -> tuple[list[Record], list[str]]:
        """The records of a decoded file, and the bad records skipped."""
        return collect(self.items(text, display), skip_bad)


class FileFormat:
    """A format read from the file itself rather than its decoded text (a database)."""

    name: ClassVar[str]
    extensions: ClassVar[tuple[str, ...]] = ()  # files a folder walk reads (a database is named, not walked)

    def in_folder(self, folder: Path) -> Path | None:
        """The file a folder argument means when it is this format's data folder, else None."""
        return None

    def sniff_file(self, path: Path) -> bool:
        """Whether a file is in this format (from its first bytes; never blocks on a FIFO)."""
        raise NotImplementedError

    def read(self, path: Path, display: str, *, skip_bad: bool) -> tuple[list[Record], SourceFile, list[str]]:
        """The file's records, its description and the bad records skipped."""
        raise NotImplementedError


Format = TextFormat | FileFormat
_T = TypeVar("_T")


class FormatRegistry:
    """Every format ingest knows, in one place: the walk's name filter, format detection and the readers."""

    def __init__(self, formats: Iterable[Format], *, fallback: str, plugins: Mapping[str, str] | None = None) -> None:
        """``plugins``: the name of the entry point each plugin format came from, by format name."""
        self.plugins = dict(plugins or {})
        self.text: tuple[TextFormat, ...] = tuple(f for f in formats if isinstance(f, TextFormat))
        self.files: tuple[FileFormat, ...] = tuple(f for f in formats if isinstance(f, FileFormat))
        every: list[Format] = [*self.text, *self.files]
        names = [f.name for f in every]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise InputError(f"two input formats are named {', '.join(map(repr, twice))}")
        by_name = {f.name: f for f in self.text}
        if fallback not in by_name:
            raise InputError(f"the fallback input format {fallback!r} is not registered")
        self.fallback = by_name[fallback]
        self._by_name = by_name
        # Sniffed in sniff_order; an extension's owners are tried in that order too, the last one the default.
        self._sniffing = sorted(self.text, key=lambda f: f.sniff_order)
        self._owners: dict[str, list[TextFormat]] = {}
        for fmt in self._sniffing:
            for ext in fmt.extensions:
                if fmt.name_decides:
                    self._owners.setdefault(ext, []).append(fmt)
        # The walk's filter: every extension some format reads, in registration order (for messages too).
        self.extensions: dict[str, str] = {}
        for owner in every:
            for ext in owner.extensions:
                self.extensions.setdefault(ext, owner.name)

    def get(self, name: str) -> TextFormat:
        """The text format of that name."""
        return self._by_name[name]

    def for_name(self, name: str) -> str | None:
        """The format a file name's extension implies, looking through a trailing .gz (None: not read by walks)."""
        return self.extensions.get(suffix(name.lower().removesuffix(".gz")))

    def detect(self, name: str, text: str, display: str | None = None) -> TextFormat:
        """The format of a decoded file, from its name (``.gz`` already removed) and its text."""
        where = display or name

        def claims(fmt: TextFormat) -> bool:
            return self.guarded(fmt, where, "sniffing", fmt.sniff, text)

        owners = self._owners.get(suffix(name.lower()))
        if owners:
            return next((f for f in owners if claims(f)), owners[-1])
        return next((f for f in self._sniffing if claims(f)), self.fallback)

    def file_format(self, path: Path) -> FileFormat | None:
        """The whole-file format a file is in, if any."""
        return next((f for f in self.files if self.guarded(f, str(path), "sniffing", f.sniff_file, path)), None)

    def folder_source(self, folder: Path) -> Path | None:
        """The file a folder argument means when it is a whole-file format's data folder."""
        for fmt in self.files:
            found = self.guarded(fmt, str(folder), "looking into", fmt.in_folder, folder)
            if found is not None:
                return found
        return None

    def records(self, fmt: TextFormat, text: str, display: str, skip_bad: bool) -> tuple[list[Record], list[str]]:
        """``fmt.records``, a plugin's failure worded as one line."""
        return self.guarded(fmt, display, "reading", fmt.records, text, display, skip_bad)

    def read(
        self, fmt: FileFormat, path: Path, display: str, skip_bad: bool
    ) -> tuple[list[Record], SourceFile, list[str]]:
        """``fmt.read``, a plugin's failure worded as one line."""
        return self.guarded(fmt, display, "reading", fmt.read, path, display, skip_bad=skip_bad)

    def guarded(self, fmt: Format, display: str, doing: str, call: Callable[..., _T], *args: Any, **kw: Any) -> _T:
        """``call(*args, **kw)``, a method of a format; what a plugin raises is one InputError naming it and the file.

        A plugin's own ``SemsearchError`` is its message already; a Ctrl-C stays an interruption. Anything else,
        ``SystemExit`` included (it would end the command with status 0), is the plugin's failure, not a crash
        of semsearch: no traceback.
        """
        plugin = self.plugins.get(fmt.name)
        if plugin is None:
            return call(*args, **kw)
        try:
            return call(*args, **kw)
        except (SemsearchError, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raise InputError(
                f"{display}: input format plugin {plugin!r} failed while {doing} it ({failure(exc)})"
            ) from None

    def names(self) -> Sequence[str]:
        """Every format's name, text formats first, in registration order."""
        every: list[Format] = [*self.text, *self.files]
        return [f.name for f in every]


FALLBACK = "seed"  # the format of a text file no other format claims


@functools.lru_cache(maxsize=1)
def built_in_formats() -> FormatRegistry:
    """The built-in formats alone, in their registry order (the order extensions are named in messages)."""
    return FormatRegistry(
        [_format(registry.entry("format", n)) for n in registry.built_in_names("format")], fallback=FALLBACK
    )


class _InstalledFormats:
    """``installed_formats()``: the registry's formats, built again only when its entries changed."""

    def __init__(self) -> None:
        self._built: tuple[int, FormatRegistry] | None = None

    def __call__(self) -> FormatRegistry:
        """The built-in formats and every plugin and run-time format (the entry points read once per process)."""
        generation = registry.generation()
        if self._built is None or self._built[0] != generation:
            self._built = (generation, self._build())
        return self._built[1]

    def cache_clear(self) -> None:
        """Look the plugins up again at the next call (a test installs one)."""
        registry.reload_plugins()
        self._built = None

    @staticmethod
    def _build() -> FormatRegistry:
        entries = registry.entries("format")
        if all(e.built_in for e in entries):
            return built_in_formats()
        formats = [_format(e) for e in entries]
        plugins = {fmt.name: e.name for e, fmt in zip(entries, formats, strict=True) if not e.built_in}
        return FormatRegistry(formats, fallback=FALLBACK, plugins=plugins)


installed_formats = _InstalledFormats()


def _format(entry: registry.Entry | None) -> Format:
    """One entry's format, instantiated when it names a class; a plugin that is no format is one error line."""
    assert entry is not None
    loaded = registry.load("format", entry.name)
    try:
        fmt = loaded() if isinstance(loaded, type) else loaded
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a plugin's constructor can fail in any way: one line, as a failed import is
        raise InputError(f"{entry.describe()} cannot be loaded ({failure(exc)})") from None
    if not isinstance(fmt, (TextFormat, FileFormat)):
        raise InputError(f"{entry.describe()} is not a TextFormat or FileFormat")
    return fmt
