"""The package data a wheel must carry: every non-Python file inside semsearch/ is listed in pyproject.toml."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import tomllib

from tests.helpers import REPO

ROOT = REPO
PACKAGE = ROOT / "semsearch"


def _owner(path: Path) -> Path:
    """The deepest package (folder with __init__.py) holding a file."""
    folder = path.parent
    while not (folder / "__init__.py").is_file():
        folder = folder.parent
    return folder


def _data_files() -> list[Path]:
    skip = {".py", ".pyc", ".pyi"}
    return sorted(
        p
        for p in PACKAGE.rglob("*")
        if p.is_file() and p.suffix not in skip and "__pycache__" not in p.parts and p.name != "py.typed"
    )


def test_every_data_file_is_package_data() -> None:
    """The page's assets (faces/web) and the model checksums (encode/checksums) ship in the wheel."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed: dict[str, list[str]] = config["tool"]["setuptools"]["package-data"]
    files = _data_files()
    assert any(p.parent.name == "web" for p in files) and any(p.parent.name == "checksums" for p in files)
    missing = []
    for path in files:
        owner = _owner(path)
        package = ".".join(owner.relative_to(ROOT).parts)
        inside = path.relative_to(owner).as_posix()
        if not any(fnmatch.fnmatch(inside, pattern) for pattern in listed.get(package, [])):
            missing.append(f"{package}: {inside}")
    assert not missing, f"not in [tool.setuptools.package-data]: {missing}"
