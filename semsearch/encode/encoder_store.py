"""The shared encoder store: each model's ONNX export is made once per machine and copied into every index.

Exporting a model to ONNX int8 (torch trace, int8 pass, probe checks) takes longer than encoding a small corpus;
without the store every new index and every ``semsearch eval`` collection paid it.
The store lives beside the installed models (``models.models_dir()/encoders``, or ``$SEMSEARCH_ENCODERS_DIR``):

    KEY/             a finished export; only a complete, checked folder is ever renamed to this name
    KEY.lock         flock held while one process checks, exports or copies KEY (two builds export once)
    .KEY.tmp-PID     an export in progress (left by a killed one: removed by the next holder of the lock)

KEY names the model, its files' fingerprint, the precision, this semsearch version and a digest of the exporter's
library versions, so a model changed under its name, another release or another torch/onnx exports afresh.
An index gets its own copy of the files (a reflink where the filesystem offers one, never a hard link: one
index's damage must never become another's) and checks every one against the sha256 that ``encoder.json``
records: a damaged shared copy is exported again, never used, and a damaged index copy is never reused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import importlib.metadata
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from semsearch.core.errors import IndexCorruptError, ModelLoadError
from semsearch.core.fileio import file_sha256, fsync_path
from semsearch.core.version import __version__
from semsearch.encode.catalogue import find_spec, models_dir, resolve_model
from semsearch.encode.embedder import fingerprint_folder

ENCODERS_DIR_ENV = "SEMSEARCH_ENCODERS_DIR"
# The libraries whose versions shape the exported bytes: another version exports afresh rather than reuse.
EXPORTER_PACKAGES = ("torch", "onnx", "onnxruntime", "transformers", "sentence-transformers", "tokenizers")
# How semsearch itself makes an export; a new recipe exports afresh, as a new library version does.
EXPORT_RECIPE = "int8-per-channel-reduce-range"
# Seconds per MB of model an export takes on a small machine (all-MiniLM-L6-v2's, timed): the notice's estimate.
_EXPORT_SECONDS_PER_MB = 25 / 92
Notify = Callable[[str], None]
Export = Callable[[str, Path, str], object]  # (model name, folder, precision): writes a complete export


class StoreUnavailable(Exception):
    """The store folder cannot be created or locked (read-only, not a folder): builds export into the index."""


def store_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where shared exports live: $SEMSEARCH_ENCODERS_DIR, else ``encoders`` in the user's model folder."""
    env = os.environ if environ is None else environ
    if env.get(ENCODERS_DIR_ENV):
        return Path(env[ENCODERS_DIR_ENV]).expanduser()
    return models_dir(env) / "encoders"


def exporter_digest() -> str:
    """A short digest of semsearch's version and the exporter libraries' versions (read without importing them)."""
    parts = [f"semsearch={__version__}", f"recipe={EXPORT_RECIPE}"]
    for package in EXPORTER_PACKAGES:
        try:
            parts.append(f"{package}={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{package}=none")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def source_fingerprint(model: str) -> str | None:
    """The fingerprint an export of ``model`` would record, when the model is a local folder (else None)."""
    try:
        location = Path(resolve_model(model))
    except ModelLoadError:
        return None
    return fingerprint_folder(location) if location.is_dir() else None


def store_key(model: str, fingerprint: str, precision: str) -> str:
    """The folder name of one export: model, fingerprint, precision, semsearch and exporter versions."""
    short = "".join(c if c.isalnum() or c in "-_." else "_" for c in model.rsplit("/", 1)[-1])[:64]
    return f"{short}-{fingerprint[:16]}-{precision}-v{__version__}-{exporter_digest()}"


def export_notice(model: str, precision: str) -> str:
    """The progress line printed while a model is exported (the one slow step a first build may take)."""
    spec = find_spec(model)
    guess = f"~{max(5, round(spec.disk_mb * _EXPORT_SECONDS_PER_MB / 5) * 5)} s" if spec else "up to a few minutes"
    return f"exporting {model} to ONNX {precision} (once per model, shared by every index; {guess})..."


def damage_of(folder: Path) -> str:
    """What is wrong with an export folder that failed its copy check, in words naming the file (every listed file
    intact: it lacks a precision or holds a file its spec does not list, so it is incomplete)."""
    from semsearch.encode.onnx_backend import read_spec

    try:
        spec = read_spec(folder)
    except IndexCorruptError as exc:
        return exc.problem
    return next(damaged_files(folder, spec.files), f"the ONNX export in {folder} is incomplete")


def damaged_files(folder: Path, files: Mapping[str, Mapping[str, object]]) -> Iterator[str]:
    """Each file an export's ``encoder.json`` lists that is missing or not the bytes it records, in words (lazily:
    the first costs only the hashes before it)."""
    for name, entry in files.items():
        path = folder / name
        if not path.is_file():
            yield f"{path} is missing"
        elif file_sha256(path) != entry["sha256"]:
            yield f"{path} does not match the sha256 its encoder.json records (changed in place or damaged)"


def intact(folder: Path, fingerprint: str | None = None, precision: str | None = None) -> bool:
    """Whether ``folder`` holds a complete export whose every listed file matches its recorded size and sha256."""
    from semsearch.encode.onnx_backend import SPEC_FILE, read_spec

    try:
        spec = read_spec(folder)
    except (IndexCorruptError, OSError):
        return False
    if fingerprint is not None and spec.source_fingerprint != fingerprint:
        return False
    if precision is not None and precision not in spec.precisions:
        return False
    expected = {SPEC_FILE, *spec.files}
    try:
        if {p.name for p in folder.iterdir()} != expected:
            return False  # a leftover or missing file: not what an export wrote
        for name, entry in spec.files.items():
            path = folder / name
            if path.stat().st_size != entry["size"] or file_sha256(path) != entry["sha256"]:
                return False
    except OSError:
        return False
    return True


# Linux's FICLONE ioctl: a reflink (btrfs, XFS, bcachefs) shares blocks copy-on-write, so a write to one copy
# never reaches the other; elsewhere the bytes are copied (an int8 export is small enough to copy quickly).
_FICLONE = 0x40049409


def clone_file(src: Path, dst: Path) -> None:
    """Copy one file into a new inode: a reflink where the filesystem offers one, else a plain copy.

    Never a hard link: an in-place write (rsync --inplace, dd conv=notrunc) into one index's encoder would
    otherwise change the answers of every index and version sharing that inode.
    """
    dst.unlink(missing_ok=True)
    with src.open("rb") as fin, dst.open("wb") as fout:
        try:
            fcntl.ioctl(fout.fileno(), _FICLONE, fin.fileno())
            return
        except OSError:
            pass  # no reflinks here (ext4, tmpfs, another filesystem): copy the bytes
        shutil.copyfileobj(fin, fout, 1 << 20)


def copy_checked(src: Path, dst: Path, precision: str | None = None, fingerprint: str | None = None) -> bool:
    """Copy the export in ``src`` into a new folder ``dst`` and check the copy against its recorded sha256.

    ``precision`` keeps only that precision's ONNX file (and requires it); ``fingerprint`` requires the export to
    be of that model. False (and ``dst`` removed) when ``src`` is no complete, intact export: its damage is
    never carried into ``dst``, let alone recorded there as the truth. A full disk raises, as any write does.
    """
    from semsearch.encode.onnx_backend import SPEC_FILE, keep_precision, read_spec, write_spec

    try:
        spec = read_spec(src)
    except (IndexCorruptError, OSError):
        return False
    if precision is not None:
        if precision not in spec.precisions:
            return False
        spec = keep_precision(spec, precision)
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir(parents=True)
    try:
        for name in spec.files:
            clone_file(src / name, dst / name)
        if precision is None:
            clone_file(src / SPEC_FILE, dst / SPEC_FILE)
        else:
            write_spec(dst, spec)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        shutil.rmtree(dst, ignore_errors=True)
        return False
    except BaseException:
        shutil.rmtree(dst, ignore_errors=True)
        raise
    if not intact(dst, fingerprint, precision):
        shutil.rmtree(dst, ignore_errors=True)
        return False
    return True


@contextlib.contextmanager
def _locked(root: Path, key: str, model: str, progress: Notify) -> Iterator[None]:
    """Hold KEY's lock file; says so when another process holds it (it is exporting the same model)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StoreUnavailable(f"{root}: {exc.strerror or exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise StoreUnavailable(f"{root}: cannot lock ({exc.strerror or exc})") from exc
            progress(f"waiting for another semsearch exporting {model} to {root}...")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _clear_leftovers(root: Path, key: str) -> None:
    """Remove what killed exports of KEY left (only the lock holder works on KEY, so none is in progress)."""
    for leftover in (*root.glob(f".{key}.tmp-*"), *root.glob(f".{key}.old-*")):
        shutil.rmtree(leftover, ignore_errors=True)


def _discard(folder: Path) -> None:
    """Move a damaged export out of the way at once (one rename), then delete it."""
    if folder.exists():
        aside = folder.with_name(f".{folder.name}.old-{os.getpid()}")
        os.rename(folder, aside)
        shutil.rmtree(aside, ignore_errors=True)


def provide(
    model: str,
    fingerprint: str,
    precision: str,
    target: Path,
    export: Export,
    *,
    notify: Notify,
    progress: Notify | None = None,
    root: Path | None = None,
) -> None:
    """Put a checked export of ``model`` at ``precision`` into ``target``: copied from the store, exported once.

    ``notify`` says what went wrong (a damaged shared copy); ``progress`` (default ``notify``) what takes time.
    Raises StoreUnavailable (nothing written to ``target``) when the store folder cannot be used.
    """
    progress = notify if progress is None else progress
    root = store_dir() if root is None else root
    key = store_key(model, fingerprint, precision)
    shared = root / key
    with _locked(root, key, model, progress):
        _clear_leftovers(root, key)
        if shared.exists():
            # The index's own copy is what is checked: it is what the index will load.
            if copy_checked(shared, target, precision, fingerprint):
                return
            notify(f"the shared ONNX export {shared} is damaged; exporting {model} again")
            _discard(shared)
        _export_into_store(model, precision, shared, export, progress)
        if not copy_checked(shared, target, precision, fingerprint):
            # A fresh export that fails its own checksums is the shared store's problem, not this index's.
            problem = f"the ONNX export of {model} in {shared} does not match its own checksums"
            raise IndexCorruptError(problem, hint=None)


def _export_into_store(model: str, precision: str, shared: Path, export: Export, progress: Notify) -> None:
    """Export into a temp folder beside ``shared`` and rename it into place once complete."""
    tmp = shared.with_name(f".{shared.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    progress(export_notice(model, precision))
    started = time.perf_counter()
    try:
        export(model, tmp, precision)
        fsync_path(tmp)
        os.rename(tmp, shared)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    fsync_path(shared.parent)
    progress(f"exported {model} ({precision}) in {time.perf_counter() - started:.0f} s to {shared}")


def export_direct(model: str, precision: str, target: Path, export: Export, *, progress: Notify) -> None:
    """Export into ``target`` alone (no store), with the same progress lines."""
    progress(export_notice(model, precision))
    started = time.perf_counter()
    export(model, target, precision)
    progress(f"exported {model} ({precision}) in {time.perf_counter() - started:.0f} s")
