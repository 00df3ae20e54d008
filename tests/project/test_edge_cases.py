"""Odd inputs found in review: each must give one line and exit 2 (or do the right thing), never a traceback."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from semsearch import BuildOptions
from semsearch.store.manifest import Counts, Manifest, ModelInfo
from semsearch.write.settings import encoder_settings
from tests.helpers import PAPERS, FakeEmbedder, assert_one_line_error, beir, run, snapshot


def live(index: Path) -> Path:
    return index / (index / "CURRENT").read_text().strip()


def test_current_pointer_not_utf8(built: Path, fake: FakeEmbedder) -> None:
    (built / "CURRENT").write_bytes(b"\xff\xfe\x00v")
    assert_one_line_error(run(["query", "graph", "--index", str(built)], fake), "CURRENT")
    result = run(["verify", "--index", str(built)])
    assert result.exit_code == 1 and "CURRENT" in result.stderr


@pytest.mark.parametrize("damage", [{"counts": {}}, {"files": []}, {"model": "x"}, {"sources": None}])
def test_malformed_manifest(built: Path, fake: FakeEmbedder, damage: dict) -> None:
    path = live(built) / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest.update(damage)
    path.write_text(json.dumps(manifest))
    assert_one_line_error(run(["query", "graph", "--index", str(built)], fake), "manifest.json")
    assert_one_line_error(run(["info", "--index", str(built)]), "manifest.json")
    assert run(["verify", "--index", str(built)]).exit_code == 1


def test_index_path_below_a_file(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    assert_one_line_error(run(["index", str(small_corpus), "--index", str(blocker / "sub")], fake), "afile")
    assert_one_line_error(run(["query", "graph", "--index", str(blocker / "sub")], fake), "no index")


def test_stdin_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    import click

    from semsearch.faces.cli import search

    monkeypatch.setattr("sys.stdin", None)
    with pytest.raises(click.ClickException, match="stdin is closed"):
        search._read_text_arg("-")


def test_remove_on_a_missing_index_creates_nothing(tmp_path: Path) -> None:
    assert_one_line_error(run(["remove", "abcdef", "--index", str(tmp_path / "typo")]), "no index")
    assert not (tmp_path / "typo").exists()


def test_remove_source_from_another_directory_and_refresh(
    tmp_path: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.txt").write_text("A\n\n" + "\n\n".join(list(PAPERS.values())[:3]))
    (src / "b.txt").write_text("B\n\n" + "\n\n".join(list(PAPERS.values())[3:]))
    monkeypatch.chdir(tmp_path)
    index = tmp_path / "idx"
    assert run(["index", "src", "--index", str(index), "-q"], fake).exit_code == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = run(["remove", "--source", str(src / "b.txt"), "--index", str(index), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["removed"] == 2
    # The removed file is not "new" to the stale check, and a refresh keeps it out.
    query = run(["query", "graph", "--index", str(index), "--json"], fake)
    assert "stale" not in query.stderr
    refresh = run(["index", "--index", str(index), "--json"], fake)
    assert refresh.exit_code == 0, refresh.output
    assert json.loads(refresh.stdout)["documents"] == 3
    # Naming it again brings it back.
    again = run(["index", str(src), "--index", str(index), "--json"], fake)
    assert json.loads(again.stdout)["documents"] == 5


def _manifest(backend: str, precision: str) -> Manifest:
    return Manifest(model=ModelInfo("m", "f", 4, backend, precision), counts=Counts(0, 0, 0, 0, 0))


def test_refresh_keeps_the_indexencoder_settings() -> None:
    manifest = _manifest("onnx", "fp32")
    assert encoder_settings(BuildOptions(), manifest) == ("onnx", "fp32")
    assert encoder_settings(BuildOptions(precision="int8"), manifest) == ("onnx", "int8")
    assert encoder_settings(BuildOptions(backend="torch"), manifest) == ("torch", "int8")
    assert encoder_settings(BuildOptions(), _manifest("fake", "fp32")) == ("onnx", "int8")
    assert encoder_settings(BuildOptions(), None) == ("onnx", "int8")


def test_eval_refuses_an_index_of_other_sources(built: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    before = snapshot(built)
    assert_one_line_error(run(["eval", str(folder), "--index", str(built)], fake), "other sources")
    assert snapshot(built) == before


def test_eval_rebuilds_for_another_model(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    index = tmp_path / "evalidx"
    assert run(["eval", str(folder), "--index", str(index), "--json"], fake).exit_code == 0
    other = FakeEmbedder(dimension=32, name="other", fingerprint="other001")
    result = run(["eval", str(folder), "--index", str(index), "--json", "--mode", "dense"], other)
    assert result.exit_code == 0, result.output
    assert other.calls, "a new model must encode the corpus"


def test_eval_non_utf8_queries(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    (folder / "queries.jsonl").write_bytes(b'{"_id": "q1", "text": "\xff\xfe"}\n')
    assert_one_line_error(run(["eval", str(folder), "--index", str(tmp_path / "i")], fake), "queries.jsonl")


def test_unreadable_source_does_not_break_queries(built: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    os.utime(small_corpus, (1, 1))  # forces the content check
    small_corpus.chmod(0)
    try:
        result = run(["query", "graph", "--index", str(built), "--json"], fake)
    finally:
        small_corpus.chmod(0o644)
    assert result.exit_code == 0, result.output


def test_eval_reuses_its_index_until_the_model_changes(tmp_path: Path, fake: FakeEmbedder) -> None:
    folder = beir(tmp_path)
    index = tmp_path / "evalidx"
    assert run(["eval", str(folder), "--index", str(index), "--json"], fake).exit_code == 0
    first = sorted(p.name for p in index.glob("v-*"))
    assert run(["eval", str(folder), "--index", str(index), "--json"], fake).exit_code == 0
    assert sorted(p.name for p in index.glob("v-*")) == first  # answered by the same version
    same_name = FakeEmbedder(name=fake.name, fingerprint="changed1")  # other weights under the same name
    assert run(["eval", str(folder), "--index", str(index), "--json"], same_name).exit_code == 0
    assert sorted(p.name for p in index.glob("v-*")) != first
