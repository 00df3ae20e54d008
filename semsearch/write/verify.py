"""End-to-end checks of an index version: manifest, checksums, then every index part's own check, then the encoder."""

from __future__ import annotations

from pathlib import Path

from semsearch.core.errors import SemsearchError
from semsearch.store.layout import ENCODER_DIR, current_version
from semsearch.store.manifest import Manifest
from semsearch.write.contents import INDEX_PARTS


def verify_index(index_dir: str | Path) -> list[str]:
    """Every problem found in the live version of an index, one line each; an empty list means sound."""
    try:
        version = current_version(Path(index_dir))
        manifest = Manifest.read(version)
    except SemsearchError as exc:
        return [str(exc)]
    problems = manifest.check_file_hashes(version)
    if problems:
        return problems  # the rest would only repeat what a damaged file breaks
    for part in INDEX_PARTS:
        try:
            problems += part.verify(version, manifest)
        except SemsearchError as exc:  # the part cannot be read at all: what follows would only repeat it
            return [*problems, str(exc)]
    if manifest.model.backend == "onnx":
        problems += _check_encoder(version / ENCODER_DIR, manifest.model.fingerprint)
    return problems


def _check_encoder(folder: Path, fingerprint: str) -> list[str]:
    from semsearch.encode.onnx_backend import read_spec

    try:
        spec = read_spec(folder)
    except SemsearchError as exc:
        return [str(exc)]
    if spec.get("source_fingerprint") != fingerprint:
        return [f"{folder}: exported from model {spec.get('source_fingerprint')}, the index says {fingerprint}"]
    return []
