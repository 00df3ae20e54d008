"""benchmarks/bench_arrivals.py's step timer names only what the package still has, and times each part's writer."""

from __future__ import annotations

from pathlib import Path

from benchmarks.bench_arrivals import with_steps
from semsearch.write.build import BuildOptions, build_index
from semsearch.write.contents import INDEX_PARTS
from tests.helpers import SEEDS, FakeEmbedder


def test_with_steps_times_a_build_and_leaves_the_package_as_it_was(tmp_path: Path) -> None:
    before = {(type(p), n): type(p).__dict__.get(n) for p in INDEX_PARTS for n in ("write_base", "write_segment")}
    summary, steps = with_steps(
        lambda: build_index([str(SEEDS)], tmp_path / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    )
    assert summary.documents == 91
    assert {"read_files", "documents.write_base", "BM25.write_base", "vectors.write_base"} <= set(steps)
    assert all(step["s"] >= 0 for step in steps.values())
    after = {(type(p), n): type(p).__dict__.get(n) for p in INDEX_PARTS for n in ("write_base", "write_segment")}
    assert after == before
