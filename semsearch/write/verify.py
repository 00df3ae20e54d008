"""End-to-end checks of an index version: manifest, checksums, every index part's own check, then vectors and encoder.

The manifest's checksums are what the writer saw; a writer that once took damaged bytes for sound ones recorded
them so. The vectors' finiteness and the encoder's bytes against the sha256 its export recorded (``encoder.json``,
written by the export itself) are checked on their own, so such a version is not called sound.
"""

from __future__ import annotations

from pathlib import Path

from semsearch.core.errors import IndexCorruptError, SemsearchError
from semsearch.store.layout import ENCODER_DIR, current_version, point_back_hint
from semsearch.store.manifest import Manifest
from semsearch.store.vectors import non_finite_problems
from semsearch.write.contents import INDEX_PARTS


def verify_index(index_dir: str | Path) -> list[str]:
    """Every problem found in the live version of an index, one line each; an empty list means sound."""
    try:
        version = current_version(Path(index_dir))
    except SemsearchError as exc:
        return [str(exc)]
    try:
        problems = _check_version(version, Manifest.read(version))
    except SemsearchError as exc:  # the manifest cannot be read (damaged, or written by a newer release)
        if not isinstance(exc, IndexCorruptError):
            return [str(exc)]
        problems = [str(exc)]
    if problems:  # the live version is damaged: say where CURRENT can point back to, when an older one is intact
        hint = point_back_hint(Path(index_dir), version)
        problems += [hint] if hint is not None else []
    return problems


def _check_version(version: Path, manifest: Manifest) -> list[str]:
    problems = manifest.check_file_hashes(version)
    if problems:
        return problems  # the rest would only repeat what a damaged file breaks
    for part in INDEX_PARTS:
        try:
            problems += part.verify(version, manifest)
        except SemsearchError as exc:  # the part cannot be read at all: what follows would only repeat it
            return [*problems, str(exc)]
    try:
        problems += non_finite_problems(version, manifest)
    except SemsearchError as exc:
        problems.append(str(exc))
    if manifest.model.backend == "onnx":
        problems += _check_encoder(version / ENCODER_DIR, manifest.model.fingerprint, manifest.model.precision)
    return problems


def _check_encoder(folder: Path, fingerprint: str, precision: str | None) -> list[str]:
    """The export's spec names the index's model and precision, and every file it lists has its recorded sha256."""
    from semsearch.encode.encoder_store import damaged_files
    from semsearch.encode.onnx_backend import read_spec

    try:
        spec = read_spec(folder)
    except SemsearchError as exc:
        return [str(exc)]
    if spec.get("source_fingerprint") != fingerprint:
        return [f"{folder}: exported from model {spec.get('source_fingerprint')}, the index says {fingerprint}"]
    problems = []
    if precision and precision not in spec.precisions:
        problems.append(f"{folder}: holds no {precision} model (it has {', '.join(sorted(spec.precisions))})")
    return problems + list(damaged_files(folder, spec.files))  # the words a refused reuse says (encoder_store)
