"""Incremental rebuilds, stale warnings, verify and remove, through the CLI with the fake encoder."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import Result

from tests.helpers import PAPERS, FakeEmbedder, assert_one_line_error, run, snapshot

EXTRA = [
    "Protein structure prediction with diffusion models generates plausible backbones for enzymes.",
    "Sparse mixture of experts routes tokens to few experts and cuts the cost of language model training.",
]


def index_json(fake: FakeEmbedder, index: Path, *args: str) -> dict:
    result = run(["index", *args, "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def seed(path: Path, texts: list[str]) -> Path:
    path.write_text("Papers\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    folder.mkdir()
    seed(folder / "a.txt", list(PAPERS.values()))
    return folder


def test_incremental_counts(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    assert index_json(fake, index, str(corpus))["encoded"] == 5
    # Same sources: nothing encoded.
    again = index_json(fake, index, str(corpus))
    assert (again["encoded"], again["added"], again["removed"]) == (0, 0, 0)
    # A new file: only its new unique abstracts (one of its three is already indexed, re-wrapped).
    seed(corpus / "b.txt", [*EXTRA, PAPERS["rl"].replace(" for ", "\nfor ")])
    grown = index_json(fake, index, str(corpus))
    assert (grown["encoded"], grown["added"], grown["documents"]) == (2, 2, 7)
    assert sorted(fake.calls[-1]) == sorted(EXTRA)
    # An edited file: only the changed paragraph.
    edited = [*PAPERS.values()][:4] + ["Quantum error correction codes protect logical qubits from noise."]
    seed(corpus / "a.txt", edited)
    changed = index_json(fake, index, str(corpus))
    assert (changed["encoded"], changed["added"], changed["removed"]) == (1, 1, 1)
    # A removed file: what no remaining source provides goes; the rl paper stays, from a.txt only.
    (corpus / "b.txt").unlink()
    shrunk = index_json(fake, index, str(corpus))
    assert (shrunk["encoded"], shrunk["removed"], shrunk["documents"]) == (0, 2, 5)
    hits = json.loads(run(["query", "robot navigation", "--index", str(index), "--json", "-k", "1"], fake).stdout)
    assert [s["file"].endswith("a.txt") for s in hits[0]["sources"]] == [True]
    # --full rebuilds from scratch but still never re-encodes known text.
    assert index_json(fake, index, str(corpus), "--full")["encoded"] == 0


def test_no_sources_means_the_last_build_sources(tmp_path: Path, corpus: Path, fake: FakeEmbedder, monkeypatch) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    seed(corpus / "b.txt", EXTRA)
    monkeypatch.chdir(tmp_path)  # no ./seeds here: the recorded sources are used
    refreshed = index_json(fake, index)
    assert (refreshed["encoded"], refreshed["documents"]) == (2, 7)


def stderr_of(result: Result) -> str:
    return result.stderr if hasattr(result, "stderr") else result.output


@pytest.mark.parametrize("change", ["new", "changed", "missing"])
def test_stale_warning(tmp_path: Path, corpus: Path, fake: FakeEmbedder, change: str) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    fresh = run(["query", "graph", "--index", str(index), "--json"], fake)
    assert fresh.exit_code == 0 and "stale" not in fresh.stderr
    if change == "new":
        seed(corpus / "b.txt", EXTRA)
    elif change == "changed":
        seed(corpus / "a.txt", [*PAPERS.values(), EXTRA[0]])
    else:
        (corpus / "a.txt").rename(tmp_path / "elsewhere.txt")
    result = run(["query", "graph", "--index", str(index), "--json"], fake)
    assert result.exit_code == 0
    lines = [line for line in result.stderr.splitlines() if "stale" in line]
    assert len(lines) == 1 and f"1 {change}" in lines[0] and "semsearch index --index" in lines[0]
    json.loads(result.stdout)  # stdout stays clean JSON for pipes


def test_touched_but_unchanged_file_is_not_stale(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    os.utime(corpus / "a.txt", (1, 1))
    assert "stale" not in run(["query", "graph", "--index", str(index)], fake).stderr


def live(index: Path) -> Path:
    return index / (index / "CURRENT").read_text().strip()


def test_verify_sound_index(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    result = run(["verify", "--index", str(index)])
    assert result.exit_code == 0 and result.output.startswith("ok:")
    assert json.loads(run(["verify", "--index", str(index), "--json"]).output) == {"ok": True, "problems": []}


@pytest.mark.parametrize(
    "damage",
    ["flip-byte-vectors", "flip-byte-docs", "truncate-docs", "delete-vectors", "manifest-count", "bad-current"],
)
def test_verify_names_what_is_wrong(tmp_path: Path, corpus: Path, fake: FakeEmbedder, damage: str) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    version = live(index)
    if damage.startswith("flip-byte"):
        path = version / ("vectors.npy" if damage.endswith("vectors") else "docs.sqlite")  # flat: the only copy
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
        expected = path.name
    elif damage == "truncate-docs":
        path = version / "docs.sqlite"
        path.write_bytes(path.read_bytes()[:100])
        expected = "docs.sqlite"
    elif damage == "delete-vectors":
        (version / "vectors.npy").unlink()
        expected = "vectors.npy"
    elif damage == "manifest-count":
        manifest = json.loads((version / "manifest.json").read_text())
        manifest["counts"]["vectors"] = 99
        (version / "manifest.json").write_text(json.dumps(manifest))
        expected = "99"
    else:
        (index / "CURRENT").write_text("v-nonexistent\n")
        expected = "v-nonexistent"
    result = run(["verify", "--index", str(index)])
    assert result.exit_code == 1
    assert expected in result.stderr
    assert "Traceback" not in result.output


def test_remove_by_id_and_by_source(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    seed(corpus / "b.txt", [*EXTRA, PAPERS["fed"]])
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    hits = json.loads(run(["query", "graph networks", "--index", str(index), "--json", "-k", "1"], fake).stdout)
    result = run(["remove", hits[0]["id"], "--index", str(index), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["removed"] == 1 and json.loads(result.stdout)["documents"] == 6
    result = run(["remove", "--source", str(corpus / "b.txt"), "--index", str(index), "--json"])
    assert result.exit_code == 0, result.output
    # The two papers only b.txt provided go; the federated paper stays, now from a.txt alone.
    assert json.loads(result.stdout)["removed"] == 2
    assert run(["verify", "--index", str(index)]).exit_code == 0
    top = json.loads(run(["query", "federated privacy", "--index", str(index), "--json", "-k", "1"], fake).stdout)[0]
    assert top["text"] == PAPERS["fed"] and [s["file"].endswith("a.txt") for s in top["sources"]] == [True]
    # Re-indexing the sources brings them back.
    assert index_json(fake, index, str(corpus))["added"] == 3


def test_remove_bad_input_changes_nothing(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    before = snapshot(index)
    assert_one_line_error(run(["remove", "feedfacefeedface", "--index", str(index)]), "feedfacefeedface")
    assert_one_line_error(run(["remove", "--source", "nowhere.txt", "--index", str(index)]), "nowhere.txt")
    assert_one_line_error(run(["remove", "--index", str(index)]), "--source")
    assert_one_line_error(run(["remove", "abc", "--index", str(tmp_path / "none")]), "no index")
    assert snapshot(index) == before


def versions(index: Path) -> list[str]:
    return sorted(p.name for p in index.glob("v-*"))


def test_unchanged_refresh_writes_nothing(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    first = index_json(fake, index, str(corpus))
    before = versions(index)
    calls = len(fake.calls)
    again = index_json(fake, index)  # a plain refresh of the recorded sources
    assert again["unchanged"] is True and again["version"] == first["version"]
    assert (again["documents"], again["encoded"], again["added"], again["removed"]) == (5, 0, 0, 0)
    assert versions(index) == before and len(fake.calls) == calls
    # The same sources named again, and a file touched without being edited: still nothing to do.
    os.utime(corpus / "a.txt", ns=(1, 1))
    assert index_json(fake, index, str(corpus))["unchanged"] is True
    text = run(["index", "--index", str(index)], fake).output
    assert text.startswith("up to date: 5 documents from 1 file,") and "nothing written" in text


@pytest.mark.parametrize(
    "change",
    ["edit", "new file", "other sources", "no-near", "ann", "map", "full", "catalogue", "damaged"],
)
def test_any_change_makes_a_refresh_rebuild(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    args: list[str] = []
    if change == "edit":
        seed(corpus / "a.txt", [*PAPERS.values()][:4])
    elif change == "new file":
        seed(corpus / "b.txt", EXTRA)
    elif change == "other sources":
        args = [str(seed(tmp_path / "other.txt", EXTRA))]
    elif change == "no-near":
        args = ["--no-near"]
    elif change == "ann":
        args = ["--ann", "hnsw"]
    elif change == "map":
        monkeypatch.setenv("SEMSEARCH_MAP", "off")
    elif change == "full":
        args = ["--full"]
    elif change == "catalogue":
        args = ["--catalogue", str(seed(tmp_path / "cat.txt", EXTRA))]
    elif change == "damaged":
        live = index / (index / "CURRENT").read_text().strip()
        (live / "ids.npy").write_bytes(b"")
    # A damaged live version is never called up to date: the refresh writes a whole new one.
    result = run(["index", *args, "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["unchanged"] is False and len(versions(index)) == 2


def test_changed_catalogue_file_makes_a_refresh_rebuild(tmp_path: Path, corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    catalogue = tmp_path / "cat.jsonl"
    catalogue.write_text(json.dumps({"title": "Robots", "abstract": PAPERS["rl"]}) + "\n", encoding="utf-8")
    index_json(fake, index, str(corpus), "--catalogue", str(catalogue))
    assert index_json(fake, index)["unchanged"] is True
    catalogue.write_text(json.dumps({"title": "Robot navigation", "abstract": PAPERS["rl"]}) + "\n", encoding="utf-8")
    assert index_json(fake, index)["unchanged"] is False


def live_manifest_path(index: Path) -> Path:
    return index / (index / "CURRENT").read_text().strip() / "manifest.json"


@pytest.mark.parametrize("edit", ["older semsearch", "removed ids"])
def test_a_version_the_refresh_must_redo_is_not_up_to_date(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder, edit: str
) -> None:
    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    if edit == "older semsearch":
        path = live_manifest_path(index)
        data = json.loads(path.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**data, "semsearch_version": "0.0.1"}), encoding="utf-8")
    else:
        doc = json.loads(run(["query", "robot navigation", "--index", str(index), "--json", "-k", "1"], fake).stdout)
        assert run(["remove", doc[0]["id"], "--index", str(index)], fake).exit_code == 0
    again = index_json(fake, index)
    assert again["unchanged"] is False and again["documents"] == 5  # a removed id comes back, as remove promises
    assert index_json(fake, index)["unchanged"] is True  # and the refresh after that has nothing to do


def test_the_map_kind_is_what_the_build_would_draw(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "idx"
    monkeypatch.setenv("SEMSEARCH_MAP", "pca")
    index_json(fake, index, str(corpus))
    monkeypatch.delenv("SEMSEARCH_MAP")
    assert index_json(fake, index)["unchanged"] is True  # five documents: auto draws PCA too
    monkeypatch.setenv("SEMSEARCH_MAP", "off")
    assert index_json(fake, index)["unchanged"] is False
    monkeypatch.delenv("SEMSEARCH_MAP")
    assert index_json(fake, index)["unchanged"] is False  # the map comes back
    monkeypatch.setenv("SEMSEARCH_MAP", "sideways")
    result = run(["index", "--index", str(index)], fake)  # a bad setting is the full path's one-line error
    assert_one_line_error(result, "not a map method")


def test_model_files_changed_under_the_same_name_are_not_up_to_date(
    tmp_path: Path, corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    from semsearch.core.options import encoder_regime
    from semsearch.store.manifest import Manifest
    from semsearch.write import plan
    from semsearch.write.settings import BuildOptions

    index = tmp_path / "idx"
    index_json(fake, index, str(corpus))
    manifest = Manifest.read(live_manifest_path(index).parent)
    manifest.model = replace(manifest.model, backend="onnx", precision="int8", regime=encoder_regime("onnx"))
    options = BuildOptions(progress=False)
    for on_disk, same in ((manifest.model.fingerprint, True), (None, True), ("0123456789abcdef", False)):
        monkeypatch.setattr("semsearch.encode.encoder_store.source_fingerprint", lambda _name, fp=on_disk: fp)
        assert (plan.encoder_differs(options, manifest, None) == "") is same
