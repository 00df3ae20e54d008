"""A refresh is one pass: the live version opened once, each file read once, no call back up a layer."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import REPO


def _tracer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trace_refresh", REPO / "scripts" / "trace_refresh.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("fallback", "ann"), [(False, None), (True, None), (True, "hnsw")], ids=["append", "fallback", "tuned-rewrite"]
)
def test_a_refresh_opens_the_live_version_once_and_reads_each_file_once(
    tmp_path: Path, fallback: bool, ann: str | None
) -> None:
    found = _tracer().measure(REPO, tmp_path, fallback=fallback, ann=ann)
    assert found["documents_after"] == found["documents_before"] + 1
    assert (found["segments"] == 0) is fallback, found["rewritten_because"]
    # One parse of the live manifest and one open of its document store, whatever the plan.
    assert (found["live_manifest_reads"], found["live_store_opens"], found["pointer_reads"]) == (1, 1, 1)
    # The new file is read once; a fallback reads the five seed files and reuses it.
    assert found["files_read"] == (6 if fallback else 1)
    # No callback up a layer: an approximate index's tuning queries are handed down encoded.
    assert found["calls_up"] == 0, found["calls_up_pairs"]
