"""One error module: every error class in semsearch.core.errors, one wording for extras, the rebuild hint by default."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from semsearch.core import errors
from semsearch.core.errors import (
    REBUILD_HINT,
    ExtraNotInstalledError,
    IndexCorruptError,
    IndexPointerError,
    SemsearchError,
)
from tests.helpers import REPO


def test_every_error_class_is_defined_in_the_errors_module() -> None:
    names = {n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, SemsearchError)}
    elsewhere = []
    for path in sorted((REPO / "semsearch").rglob("*.py")):
        if path == REPO / "semsearch" / "core" / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases} & names:
                elsewhere.append(f"{path.relative_to(REPO)}:{node.name}")
    assert elsewhere == []


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("semsearch.curate.mail", "MailError"),
        ("semsearch.curate.tags", "NotTaggedError"),
        ("semsearch.encode.install", "ModelInstallError"),
        ("semsearch.encode.catalogue", "UnknownModelError"),
        ("semsearch.encode.ray_engine", "RayUnavailableError"),
        ("semsearch.encode.ray_engine", "RayEngineError"),
        ("semsearch.core.writefail", "DiskFullError"),
        ("semsearch.core.writefail", "IndexReadOnlyError"),
        ("semsearch.core.writefail", "WriteIOError"),
        ("semsearch.faces.mcp_server", "McpUnavailableError"),
        ("semsearch.faces.serve", "ServeUnavailableError"),
    ],
)
def test_the_old_names_still_import_from_where_they_were(module: str, name: str) -> None:
    import importlib

    assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_one_wording_for_every_missing_extra() -> None:
    serve = ExtraNotInstalledError("serve", "semsearch serve", "fastapi")
    assert str(serve) == "semsearch serve needs the 'serve' extra (fastapi is missing): pip install 'semsearch[serve]'"
    assert (serve.extra, serve.feature, serve.missing) == ("serve", "semsearch serve", "fastapi")
    assert str(ExtraNotInstalledError("ray", "the ray engine")) == (
        "the ray engine needs the 'ray' extra: pip install 'semsearch[ray]'"
    )
    assert errors.ServeUnavailableError is errors.McpUnavailableError is errors.RayUnavailableError
    assert errors.RayUnavailableError is ExtraNotInstalledError


def test_an_extra_error_from_a_ray_actor_keeps_its_text() -> None:
    from semsearch.encode.ray_worker import as_text, from_text

    sent = ExtraNotInstalledError("bibtex", "a.bib: reading BibTeX", "bibtexparser")
    back = from_text(as_text(sent))
    assert type(back) is SemsearchError and str(back) == str(sent)


def test_the_rebuild_hint_is_the_default_of_index_corrupt_error() -> None:
    plain = IndexCorruptError("vectors.npy is truncated")
    assert str(plain) == f"vectors.npy is truncated; {REBUILD_HINT}"
    assert plain.problem == "vectors.npy is truncated" and plain.hint == REBUILD_HINT
    # A message that already carries the hint (written before it was the default, or rebuilt from text) keeps one.
    assert str(IndexCorruptError(str(plain))) == str(plain)
    assert str(IndexCorruptError("x", hint=None)) == "x"
    assert str(IndexCorruptError("x", hint="delete it")) == "x; delete it"
    # CURRENT's errors say how to recover; a rebuild is not it.
    assert str(IndexPointerError("CURRENT names no version")) == "CURRENT names no version"


def test_a_damaged_onnx_encoder_says_how_to_repair_it(tmp_path: Path) -> None:
    from semsearch.encode.onnx_backend import OnnxEmbedder

    with pytest.raises(IndexCorruptError, match=rf"^ONNX encoder spec .* is missing; {REBUILD_HINT}$"):
        OnnxEmbedder.load(tmp_path / "encoder", "int8")
