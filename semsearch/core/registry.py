"""One registry for every extension point: input formats, ANN kinds, encoder backends and models.

Each entry is a name and a target, ``"module:attr"`` (imported the first time the entry is used) or the object
itself. The built-ins are declared below as the same ``"module:attr"`` strings an installed package names in its
entry points, and go through the same ``register``; so the registry imports nothing to list them, and
``semsearch --help`` or a query that uses the built-ins never imports a plugin or a module it does not use.

A package adds an extension by naming its target in the entry-point group of the kind, e.g. in its
``pyproject.toml``::

    [project.entry-points."semsearch.ann_kinds"]
    brute = "mypackage.brute:Brute"

The groups are ``semsearch.formats``, ``semsearch.ann_kinds``, ``semsearch.backends`` and ``semsearch.models``;
they are read once per process, the first time a kind's names are listed or a name that is no built-in is asked
for. A plugin that cannot be loaded is one ``InputError`` line naming it, its target and its package.
What each kind's target must be (a ``TextFormat`` class, an ``AnnKind`` class, an encoder backend, a
``ModelSpec``) is checked by the layer that uses it; this module only names and loads.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from semsearch.core.errors import InputError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

Kind = Literal["format", "ann", "backend", "model"]


@dataclass(frozen=True)
class KindInfo:
    """One extension point: its entry-point group, and how messages name one of its entries."""

    group: str
    label: str


KINDS: dict[Kind, KindInfo] = {
    "format": KindInfo("semsearch.formats", "input format"),
    "ann": KindInfo("semsearch.ann_kinds", "ANN kind"),
    "backend": KindInfo("semsearch.backends", "encoder backend"),
    "model": KindInfo("semsearch.models", "model"),
}

# The built-in entries, in the order they are listed (formats: the order their extensions are named in messages;
# backends: the first is the default). Strings, never imports: a target is imported when its entry is first used.
BUILT_IN: dict[Kind, tuple[tuple[str, str], ...]] = {
    "format": (
        ("seed", "semsearch.ingest.seed:SeedText"),
        ("jsonl", "semsearch.ingest.json_formats:JsonLines"),
        ("json", "semsearch.ingest.json_formats:Json"),
        ("csv", "semsearch.ingest.csv_rows:Csv"),
        ("tsv", "semsearch.ingest.csv_rows:Tsv"),
        ("bibtex", "semsearch.ingest.bibtex:BibTeX"),
        ("zotero", "semsearch.ingest.zotero:Zotero"),
        ("pdf", "semsearch.ingest.pdf:Pdf"),
    ),
    "ann": (
        ("flat", "semsearch.store.ann_kinds:Flat"),
        ("ivf", "semsearch.store.ann_kinds:Ivf"),
        ("ivfpq", "semsearch.store.ann_kinds:IvfPq"),
        ("hnsw", "semsearch.store.ann_kinds:Hnsw"),
    ),
    "backend": (
        ("onnx", "semsearch.encode.encoder_choice:OnnxBackend"),
        ("torch", "semsearch.encode.encoder_choice:TorchBackend"),
        ("hashed", "semsearch.encode.hashed:HashedBackend"),
    ),
    "model": (
        ("all-MiniLM-L6-v2", "semsearch.encode.catalogue:MINILM"),
        ("all-mpnet-base-v2", "semsearch.encode.catalogue:MPNET"),
    ),
}


@dataclass(frozen=True)
class WalkedNames:
    """What a folder walk needs to know of a built-in input format, declared so that a walk imports no format."""

    extensions: tuple[str, ...] = ()  # the file extensions a format's walk reads, as its class names them
    data_file: str = ""  # a whole-file format: the file that makes a folder argument its data folder


# Beside each built-in format's target: the stale-sources check walks the source folders without loading a reader.
# A plugin's are read from its class when it is loaded.
BUILT_IN_NAMES: dict[str, WalkedNames] = {
    "seed": WalkedNames((".txt", ".md")),
    "jsonl": WalkedNames((".jsonl", ".ndjson", ".json")),
    "json": WalkedNames((".json",)),
    "csv": WalkedNames((".csv",)),
    "tsv": WalkedNames((".tsv",)),
    "bibtex": WalkedNames((".bib",)),
    "zotero": WalkedNames(data_file="zotero.sqlite"),
    "pdf": WalkedNames((".pdf",)),
}


@dataclass(frozen=True)
class Entry:
    """One registered name: what it points at and where it comes from."""

    kind: Kind
    name: str
    target: object  # "module:attr", or the object itself
    built_in: bool = False
    plugin: str = ""  # for a plugin: its target and the package that installs it

    def describe(self) -> str:
        """How messages name it: ``ANN kind plugin 'brute' (mypackage.brute:Brute, from the mypackage package)``."""
        label = KINDS[self.kind].label
        return f"{label} plugin {self.name!r} ({self.plugin})" if self.plugin else f"{label} {self.name!r}"


_built_in: dict[Kind, dict[str, Entry]] = {kind: {} for kind in KINDS}
_registered: dict[Kind, dict[str, Entry]] = {kind: {} for kind in KINDS}  # by a module at run time
_plugins: dict[Kind, dict[str, Entry]] | None = None  # None until the entry points are read
_loaded: dict[tuple[Kind, str], tuple[Entry, object]] = {}
_generation = 0  # counts the changes, so what is built from the entries (the format registry) knows it is stale


def register(kind: Kind, name: str, target: object, *, built_in: bool = False) -> None:
    """Make ``target`` (``"module:attr"`` or the object) the entry ``name`` of ``kind``; replaces a run-time one.

    Built-in names cannot be taken: ``ValueError``.
    """
    if kind not in KINDS:
        raise ValueError(f"no extension point is called {kind!r} (choose from {', '.join(KINDS)})")
    if not name:
        raise ValueError(f"a {KINDS[kind].label} needs a name")
    entry = Entry(kind, name, target, built_in=built_in)
    if built_in:
        _built_in[kind][name] = entry
        return
    if name in _built_in[kind]:
        raise ValueError(f"{name!r} is a built-in {KINDS[kind].label}")
    _registered[kind][name] = entry
    _loaded.pop((kind, name), None)
    _changed()


def unregister(kind: Kind, name: str) -> None:
    """Withdraw an entry registered at run time (built-in ones stay: ``ValueError``)."""
    if name in _built_in[kind]:
        raise ValueError(f"{name!r} is a built-in {KINDS[kind].label}")
    _registered[kind].pop(name, None)
    _loaded.pop((kind, name), None)
    _changed()


def built_in_names(kind: Kind) -> tuple[str, ...]:
    """The built-in entries' names, in their order (reads no entry point)."""
    return tuple(_built_in[kind])


def names(kind: Kind) -> tuple[str, ...]:
    """Every name of ``kind``: the built-in ones first, then those registered at run time, then plugins by name."""
    return tuple(e.name for e in entries(kind))


def entries(kind: Kind) -> tuple[Entry, ...]:
    """Every entry of ``kind``, in the order ``names`` gives; a plugin that takes a built-in name is an InputError."""
    plugins = _plugin_entries()[kind]
    for name, entry in plugins.items():
        if name in _built_in[kind]:
            raise InputError(f"{entry.describe()} takes the name of a built-in {KINDS[kind].label}")
    found = {**_built_in[kind], **_registered[kind]}
    return (*found.values(), *(e for n, e in sorted(plugins.items()) if n not in found))


def entry(kind: Kind, name: str) -> Entry | None:
    """The entry registered under ``name``, or None; the entry points are read only for a name not built in."""
    found = _built_in[kind].get(name) or _registered[kind].get(name)
    if found is not None:
        return found
    return _plugin_entries()[kind].get(name)


def has(kind: Kind, name: str) -> bool:
    """Whether ``name`` is registered for ``kind`` (built in, at run time or by a plugin)."""
    return entry(kind, name) is not None


def load(kind: Kind, name: str) -> object:
    """The object behind ``name``, imported on first use (KeyError when none is registered).

    A plugin that raises anything while it is imported, ``SystemExit`` included (it would end the command with
    status 0, having done nothing), is one InputError line; only a Ctrl-C stays an interruption.
    """
    found = entry(kind, name)
    if found is None:
        raise KeyError(name)
    cached = _loaded.get((kind, name))
    if cached is not None and cached[0] is found:
        return cached[1]
    if not isinstance(found.target, str):
        value = found.target
    elif not found.plugin:
        value = resolve(found.target)
    else:
        try:
            value = resolve(found.target)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a plugin can fail in any way; the user gets its name, origin and reason
            raise InputError(f"{found.describe()} cannot be loaded ({failure(exc)})") from None
    _loaded[(kind, name)] = (found, value)
    return value


def resolve(target: str) -> object:
    """The object a ``"module:attr"`` (or ``"module:outer.inner"``, or ``"module"``) string names."""
    module_name, _, attrs = target.partition(":")
    value: object = importlib.import_module(module_name.strip())
    for attr in filter(None, attrs.strip().split(".")):
        value = getattr(value, attr)
    return value


def reload_plugins() -> None:
    """Read the entry points again (next use): a plugin installed meanwhile, in a test, is seen."""
    global _plugins
    _plugins = None
    for key in [k for k, (e, _) in _loaded.items() if e.plugin]:
        del _loaded[key]
    _changed()


def generation() -> int:
    """A number that changes whenever an entry is registered or withdrawn, or the plugins are read again."""
    return _generation


def _changed() -> None:
    global _generation
    _generation += 1


def failure(exc: BaseException) -> str:
    """An exception as "Type: first line of its message" (at most 200 characters), for a one-line error."""
    lines = str(exc).strip().splitlines()
    detail = " ".join(lines[0].split()) if lines else ""
    if len(detail) > 200:
        detail = detail[:199] + "…"
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def _plugin_entries() -> dict[Kind, dict[str, Entry]]:
    """Every installed plugin by kind, read from the entry points once per process (``reload_plugins`` again)."""
    global _plugins
    if _plugins is None:
        from importlib.metadata import entry_points

        found: dict[Kind, dict[str, Entry]] = {kind: {} for kind in KINDS}
        for kind, info in KINDS.items():
            for point in entry_points(group=info.group):
                found[kind][point.name] = Entry(kind, point.name, point.value, plugin=_origin(point))
        _plugins = found
    return _plugins


def _origin(point: EntryPoint) -> str:
    """Where a plugin comes from: its target, and the distribution that installs it."""
    dist = getattr(point, "dist", None)
    package = getattr(dist, "name", None)
    return f"{point.value}, from the {package} package" if package else point.value


for _kind, _entries in BUILT_IN.items():
    for _name, _target in _entries:
        register(_kind, _name, _target, built_in=True)
