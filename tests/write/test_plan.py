"""The refresh planner (semsearch/write/plan.py): each outcome, and each reason it rewrites the index whole."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest

from semsearch.core.errors import SemsearchError
from semsearch.core.options import READINGS
from semsearch.store.layout import MANIFEST, current_version
from semsearch.store.manifest import Manifest
from semsearch.write.build import build_index, up_to_date
from semsearch.write.plan import Append, Rewrite, Unchanged, plan_refresh, survey
from semsearch.write.remove import remove_documents
from semsearch.write.settings import BuildOptions, map_method_of
from tests.helpers import FakeEmbedder

WORDS = [f"w{i}" for i in range(800)]
OPTS = BuildOptions(progress=False)


def _write(path: Path, seed: int, count: int) -> Path:
    rng = random.Random(seed)
    records = [{"title": f"paper {seed} {i}", "abstract": " ".join(rng.choices(WORDS, k=40))} for i in range(count)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def built(tmp_path: Path, fake: FakeEmbedder) -> tuple[Path, Path]:
    """A folder of five files (42 documents) and an index built from it."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(4):
        _write(src / f"f{i}.jsonl", i, 10)
    _write(src / "small.jsonl", 7, 2)
    index = tmp_path / "idx"
    build_index([str(src)], index, OPTS, embedder=fake)
    return src, index


def plan(
    index: Path, fake: FakeEmbedder | None, sources: list[str] | None = None, opts: BuildOptions = OPTS, **kw: str
) -> Unchanged | Append | Rewrite:
    return plan_refresh(sources, index, opts, fake, map_method=kw.get("map_method", map_method_of(opts)))


def _edit_manifest(index: Path, **changes: object) -> None:
    version = current_version(index)
    manifest = replace(Manifest.read(version), **changes)  # type: ignore[arg-type]
    (version / MANIFEST).write_text(manifest.to_json(), encoding="utf-8")


def test_nothing_changed_is_unchanged(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    outcome = plan(index, fake)
    assert isinstance(outcome, Unchanged) and outcome.live.version == current_version(index)
    assert isinstance(plan(index, fake, [str(src)]), Unchanged)  # the same sources named again
    assert up_to_date([str(src)], index, OPTS, embedder=fake)


def test_a_new_file_is_appended_with_the_change_decided(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    _write(src / "f9.jsonl", 9, 1)
    outcome = plan(index, fake)
    assert isinstance(outcome, Append)
    assert [d.title for d in outcome.change.new] == ["paper 9 0"] and outcome.arrived.gone == []
    assert outcome.previous.path == current_version(index) and len(outcome.previous.ids) == 42
    assert not up_to_date(None, index, OPTS, embedder=fake)


def test_a_file_taken_away_is_appended_as_dropped_documents(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    (src / "small.jsonl").unlink()
    outcome = plan(index, fake)
    assert isinstance(outcome, Append), outcome
    assert len(outcome.change.dropped) == 2 and outcome.arrived.gone == [str(src / "small.jsonl")]


@pytest.mark.parametrize(
    ("opts", "reason"),
    [
        (replace(OPTS, full=True), "--full"),
        (replace(OPTS, rewrite=True), "--optimize"),
        (replace(OPTS, near=False), "near-duplicate merging"),
        (replace(OPTS, ann="hnsw"), "ANN settings"),
    ],
)
def test_options_that_rewrite(built: tuple[Path, Path], fake: FakeEmbedder, opts: BuildOptions, reason: str) -> None:
    _, index = built
    outcome = plan(index, fake, opts=opts)
    assert isinstance(outcome, Rewrite) and reason in outcome.reason and not outcome.reported


def test_another_reading_rewrites(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    _, index = built
    recorded = Manifest.read(current_version(index)).model.reading or "truncated"
    other = next(r for r in READINGS if r != recorded)
    outcome = plan(index, fake, opts=replace(OPTS, reading=other))
    assert isinstance(outcome, Rewrite) and outcome.reason == "another reading was asked for"


def test_another_map_method_rewrites(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    _, index = built
    outcome = plan(index, fake, map_method="off")
    assert isinstance(outcome, Rewrite) and "the map method is off" in outcome.reason


def test_another_encoder_rewrites(built: tuple[Path, Path]) -> None:
    _, index = built
    outcome = plan(index, FakeEmbedder(dimension=32))
    assert isinstance(outcome, Rewrite) and outcome.reason == "the encoder differs"


def test_no_live_version_or_an_unreadable_one_rewrites(tmp_path: Path, built: tuple[Path, Path]) -> None:
    _, index = built
    outcome = plan(tmp_path / "nothing", None)
    assert isinstance(outcome, Rewrite) and outcome.reason == "the index has no live version"
    (current_version(index) / MANIFEST).write_text("{", encoding="utf-8")
    outcome = plan(index, None)
    assert isinstance(outcome, Rewrite) and outcome.reason == "the live version cannot be read"


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"removed_ids": True}, "removed by id"),
        ({"semsearch_version": "0.0.1"}, "written by semsearch 0.0.1"),
        ({"format_version": 1}, "format 1"),
    ],
)
def test_a_live_version_the_refresh_must_redo_rewrites(
    built: tuple[Path, Path], fake: FakeEmbedder, changes: dict[str, object], reason: str
) -> None:
    _, index = built
    _edit_manifest(index, **changes)
    outcome = plan(index, fake)
    assert isinstance(outcome, Rewrite) and reason in outcome.reason and outcome.live is not None


def test_options_that_rule_out_appending(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    _write(src / "f9.jsonl", 9, 1)
    relayout = plan(index, fake, opts=replace(OPTS, relayout=True))
    assert isinstance(relayout, Rewrite) and "--relayout" in relayout.reason
    ray = plan(index, fake, opts=replace(OPTS, engine="ray"))
    assert isinstance(ray, Rewrite) and ray.reason == "encoding runs on ray"
    catalogue = plan(index, fake, opts=replace(OPTS, catalogues=[str(src / "f0.jsonl")]))
    assert isinstance(catalogue, Rewrite) and "catalogue" in catalogue.reason


def test_files_removed_by_hand_stay_out_of_a_refresh_from_the_record(
    built: tuple[Path, Path], fake: FakeEmbedder
) -> None:
    src, index = built
    remove_documents(index, sources=[str(src / "f1.jsonl")])
    assert isinstance(plan(index, fake), Unchanged)  # f1 is still on disk, but left out
    _write(src / "f9.jsonl", 9, 1)
    outcome = plan(index, fake)
    assert isinstance(outcome, Rewrite) and "remove --source" in outcome.reason


def test_no_recorded_sources_rewrites(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    _edit_manifest(index, source_args=[])
    _write(src / "f2.jsonl", 22, 10)  # not up to date: the full build then says what to name
    outcome = plan(index, fake)
    assert isinstance(outcome, Rewrite) and outcome.reason == "the live version records no sources"


def test_a_source_that_names_nothing_rewrites(built: tuple[Path, Path], fake: FakeEmbedder, tmp_path: Path) -> None:
    src, index = built
    outcome = plan(index, fake, [str(src), str(tmp_path / "missing")])
    assert isinstance(outcome, Rewrite) and outcome.reason == "a source names no readable file"


def test_a_changed_file_rewrites_and_says_so(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    _write(src / "f2.jsonl", 22, 10)
    outcome = plan(index, fake)
    assert isinstance(outcome, Rewrite) and outcome.reported
    assert outcome.reason == f"{src / 'f2.jsonl'} changed"


def test_other_arguments_for_the_same_files_rewrite(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    outcome = plan(index, fake, [str(p) for p in sorted(src.iterdir())])
    assert isinstance(outcome, Rewrite) and outcome.reason == "no file came or went"


def test_a_change_too_big_for_a_segment_rewrites_and_says_so(built: tuple[Path, Path], fake: FakeEmbedder) -> None:
    src, index = built
    _write(src / "f9.jsonl", 9, 30)  # 30 arrivals on 40 documents: more than the segments' share
    outcome = plan(index, fake)
    assert isinstance(outcome, Rewrite) and outcome.reported and "more than" in outcome.reason


def test_the_survey_walks_once_and_sorts_files_as_a_build_reads_them(built: tuple[Path, Path]) -> None:
    src, index = built
    manifest = Manifest.read(current_version(index))
    (src / "f1.jsonl").unlink()
    (src / "a").mkdir()
    _write(src / "a" / "z.jsonl", 5, 1)
    seen = survey([str(src)], manifest)
    kept = [str(src / name) for name in ("f0.jsonl", "f2.jsonl", "f3.jsonl", "small.jsonl")]
    assert seen.current == [str(src / "a" / "z.jsonl"), *kept] and seen.kept == kept
    assert seen.new == [str(src / "a" / "z.jsonl")] and seen.gone == [str(src / "f1.jsonl")]
    assert seen.changed == [str(src / "f1.jsonl")] and seen.complete  # missing counts as changed for freshness


def test_a_bad_map_setting_is_one_error_before_anything_is_read(
    built: tuple[Path, Path], fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, index = built
    with pytest.raises(SemsearchError, match="'sideways' is not a map method"):
        build_index(None, index, replace(OPTS, map_method="sideways"), embedder=fake)
    monkeypatch.setenv("SEMSEARCH_MAP", "pca")
    assert map_method_of(OPTS) == "pca" and map_method_of(replace(OPTS, map_method="OFF")) == "off"


def test_the_walk_as_strings_lists_what_expand_sources_lists_in_its_order(tmp_path: Path) -> None:
    from semsearch.ingest.sources import expand_source_names, expand_sources

    root = tmp_path / "tree"
    for rel in ("a/b.txt", "a-b/x.txt", "a/c/d.jsonl", "z.md", ".hidden/h.txt", "a/.h.txt", "a/skip.bin"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("Papers\n\nan abstract\n", encoding="utf-8")
    (root / "link.txt").symlink_to(root / "z.md")
    (root / "linked").symlink_to(root / "a", target_is_directory=True)  # linked folders are not entered
    args = [str(root), str(root / "z.md"), str(tmp_path / "tree" / "a" / "*.txt")]
    names = expand_source_names(args)
    assert names == [str(p) for p in expand_sources(args)]
    assert names[:2] == [str(root / "a" / "b.txt"), str(root / "a" / "c" / "d.jsonl")]  # a/ before a-b/


def test_a_removal_with_a_bad_map_setting_changes_nothing(built: tuple[Path, Path]) -> None:
    src, index = built
    live = current_version(index)
    with pytest.raises(SemsearchError, match="'sideways' is not a map method"):
        remove_documents(index, sources=[str(src / "small.jsonl")], map_method="sideways")
    assert current_version(index) == live and str(src / "small.jsonl") not in Manifest.read(live).excluded_sources
