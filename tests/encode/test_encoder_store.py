"""The shared encoder store: one export per model, precision and version, copied into every index, checked."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from semsearch.core.errors import IndexCorruptError
from semsearch.core.fileio import file_sha256
from semsearch.encode import encoder_store
from semsearch.encode.encoder_store import StoreUnavailable, intact, provide, store_dir, store_key
from semsearch.encode.onnx_backend import SPEC_FILE, TOKENIZER_FILE, EncoderSpec, model_filename, write_spec

FINGERPRINT = "0123456789abcdef"


class FakeExport:
    """Writes a complete export folder (arbitrary bytes, true checksums) and counts its calls in a file."""

    def __init__(
        self, calls: Path, *, seconds: float = 0.0, fail: bool = False, fingerprint: str = FINGERPRINT
    ) -> None:
        self.calls = calls
        self.fingerprint = fingerprint
        self.seconds = seconds
        self.fail = fail

    def __call__(self, model: str, folder: Path, precision: str) -> None:
        with self.calls.open("a") as fh:
            fh.write(f"{os.getpid()}\n")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / TOKENIZER_FILE).write_text('{"tokenizer": true}')
        time.sleep(self.seconds)
        onnx = model_filename(precision)
        (folder / onnx).write_bytes(os.urandom(4096))
        if self.fail:
            raise RuntimeError("the exporter died half-way")
        files = {
            n: {"sha256": file_sha256(folder / n), "size": (folder / n).stat().st_size} for n in (onnx, TOKENIZER_FILE)
        }
        spec = EncoderSpec(
            source_model=model,
            source_fingerprint=self.fingerprint,
            dimension=8,
            max_seq_length=16,
            pooling="mean",
            normalize_module=True,
            do_lower_case=False,
            inputs=("input_ids", "attention_mask"),
            pad_token_id=0,
            files=files,
            precisions={precision: onnx},
            versions={},
        )
        write_spec(folder, spec)

    @property
    def count(self) -> int:
        return len(self.calls.read_text().split()) if self.calls.exists() else 0


def _provide(root: Path, target: Path, export: FakeExport, notes: list[str] | None = None) -> None:
    provide(
        "all-MiniLM-L6-v2",
        FINGERPRINT,
        "int8",
        target,
        export,
        notify=(notes if notes is not None else []).append,
        root=root,
    )


def test_exported_once_then_copied_into_every_index(tmp_path: Path) -> None:
    root, export, notes = tmp_path / "store", FakeExport(tmp_path / "calls"), []
    _provide(root, tmp_path / "a" / "encoder", export, notes)
    _provide(root, tmp_path / "b" / "encoder", export, notes)
    assert export.count == 1
    assert intact(tmp_path / "a" / "encoder") and intact(tmp_path / "b" / "encoder")
    shared = root / store_key("all-MiniLM-L6-v2", FINGERPRINT, "int8")
    onnx = model_filename("int8")
    # A copy of its own, never a hard link: an in-place write into one index's file reaches no other.
    inodes = {(p / onnx).stat().st_ino for p in (shared, tmp_path / "a" / "encoder", tmp_path / "b" / "encoder")}
    assert len(inodes) == 3
    assert notes[0].startswith("exporting all-MiniLM-L6-v2 to ONNX int8 (once per model")
    assert notes[1].startswith("exported all-MiniLM-L6-v2 (int8) in ")
    assert len(notes) == 2  # the second index says nothing: nothing slow happened


def test_another_precision_or_fingerprint_exports_again(tmp_path: Path) -> None:
    root, export = tmp_path / "store", FakeExport(tmp_path / "calls")
    _provide(root, tmp_path / "a", export)
    provide("all-MiniLM-L6-v2", FINGERPRINT, "fp32", tmp_path / "b", export, notify=print, root=root)
    assert export.count == 2
    # A model whose files changed under its name has another fingerprint: the old export is not used.
    assert store_key("m", "aaaa", "int8") != store_key("m", "bbbb", "int8") != store_key("m", "bbbb", "fp32")
    with pytest.raises(IndexCorruptError):  # the fake records FINGERPRINT: another one is never accepted
        provide("all-MiniLM-L6-v2", "ffff000000000000", "int8", tmp_path / "c", export, notify=print, root=root)
    assert not (tmp_path / "c").exists()


def test_key_follows_the_semsearch_version(monkeypatch: pytest.MonkeyPatch) -> None:
    before = store_key("m", FINGERPRINT, "int8")
    monkeypatch.setattr(encoder_store, "__version__", "999.0")
    assert store_key("m", FINGERPRINT, "int8") != before


@pytest.mark.parametrize("damage", ["flipped", "truncated", "spec-missing", "file-missing"])
def test_a_damaged_shared_copy_is_exported_again_never_used(tmp_path: Path, damage: str) -> None:
    root, export = tmp_path / "store", FakeExport(tmp_path / "calls")
    _provide(root, tmp_path / "a", export)
    shared = root / store_key("all-MiniLM-L6-v2", FINGERPRINT, "int8")
    onnx = shared / model_filename("int8")
    (tmp_path / "a" / onnx.name).unlink()  # the first index keeps nothing in common with what is damaged
    if damage == "flipped":
        data = bytearray(onnx.read_bytes())
        data[100] ^= 0xFF
        onnx.write_bytes(bytes(data))
    elif damage == "truncated":
        onnx.write_bytes(onnx.read_bytes()[:100])
    elif damage == "spec-missing":
        (shared / SPEC_FILE).unlink()
    else:
        onnx.unlink()
    notes: list[str] = []
    _provide(root, tmp_path / "b", export, notes)
    assert export.count == 2
    assert intact(tmp_path / "b") and intact(shared)
    assert any("is damaged; exporting all-MiniLM-L6-v2 again" in n for n in notes)


def test_a_killed_export_leaves_nothing_that_is_used(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with pytest.raises(RuntimeError):
        _provide(root, tmp_path / "a", FakeExport(tmp_path / "calls", fail=True))
    key = store_key("all-MiniLM-L6-v2", FINGERPRINT, "int8")
    assert not (root / key).exists() and not list(root.glob(f".{key}.tmp-*"))
    assert not (tmp_path / "a").exists()
    # A temp folder left by a process killed outright is removed by the next one, which exports whole.
    stale = root / f".{key}.tmp-999999"
    stale.mkdir()
    export = FakeExport(tmp_path / "calls2")
    _provide(root, tmp_path / "b", export)
    assert export.count == 1 and not stale.exists() and intact(tmp_path / "b")


def _worker(root: str, target: str, calls: str) -> None:
    _provide(Path(root), Path(target), FakeExport(Path(calls), seconds=1.0))


def test_two_processes_export_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    calls = tmp_path / "calls"
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "store"), str(tmp_path / n), str(calls))) for n in "ab"]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(calls.read_text().split()) == 1
    assert intact(tmp_path / "a") and intact(tmp_path / "b")


def test_an_unusable_store_is_reported_and_nothing_written(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the store folder should be")
    with pytest.raises(StoreUnavailable):
        _provide(blocker / "store", tmp_path / "a", FakeExport(tmp_path / "calls"))
    assert not (tmp_path / "a").exists()


def test_a_build_exports_into_the_index_when_the_store_cannot_be_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from semsearch.encode import encoder_choice
    from semsearch.encode.encoder_store import source_fingerprint

    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("SEMSEARCH_ENCODERS_DIR", str(blocker / "store"))
    export = FakeExport(tmp_path / "calls", fingerprint=str(source_fingerprint("all-MiniLM-L6-v2")))
    monkeypatch.setattr(encoder_choice, "_export", export)
    notes: list[str] = []
    encoder_choice.shared_export("all-MiniLM-L6-v2", "int8", tmp_path / "idx" / "encoder", notify=notes.append)
    assert export.count == 1 and intact(tmp_path / "idx" / "encoder")
    assert notes[0].startswith("cannot use the shared encoder store (") and "exporting into this index only" in notes[0]
    assert notes[1].startswith("exporting all-MiniLM-L6-v2 to ONNX int8")


def test_quiet_builds_say_nothing_of_the_export_but_still_warn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from semsearch.encode import encoder_choice
    from semsearch.encode.encoder_store import source_fingerprint

    monkeypatch.setenv("SEMSEARCH_ENCODERS_DIR", str(tmp_path / "store"))
    export = FakeExport(tmp_path / "calls", fingerprint=str(source_fingerprint("all-MiniLM-L6-v2")))
    monkeypatch.setattr(encoder_choice, "_export", export)
    notes: list[str] = []
    encoder_choice.shared_export("all-MiniLM-L6-v2", "int8", tmp_path / "a", notify=notes.append, progress=False)
    assert export.count == 1 and notes == []
    shared = next(p for p in (tmp_path / "store").iterdir() if p.is_dir())
    (shared / TOKENIZER_FILE).write_text('{"tokenizer": false}')  # same size, other bytes
    encoder_choice.shared_export("all-MiniLM-L6-v2", "int8", tmp_path / "b", notify=notes.append, progress=False)
    assert export.count == 2 and len(notes) == 1 and "is damaged" in notes[0]
    assert intact(tmp_path / "b")


def test_store_dir_is_in_the_model_folder_unless_set(tmp_path: Path) -> None:
    assert store_dir({"SEMSEARCH_MODELS_DIR": str(tmp_path)}) == tmp_path / "encoders"
    assert store_dir({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "semsearch" / "models" / "encoders"
    assert store_dir({"SEMSEARCH_ENCODERS_DIR": str(tmp_path / "e"), "SEMSEARCH_MODELS_DIR": "/x"}) == tmp_path / "e"


def test_tests_never_touch_the_users_store() -> None:
    assert os.environ.get("SEMSEARCH_ENCODERS_DIR"), "conftest points the store at a temporary folder"
    assert not store_dir().is_relative_to(Path.home() / ".cache")


@pytest.mark.slow
def test_new_indexes_export_the_model_once(
    tmp_path: Path, small_corpus: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from semsearch.encode import onnx_export
    from semsearch.query.search import Index
    from semsearch.write.build import BuildOptions, build_index

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("SEMSEARCH_ENCODERS_DIR", str(tmp_path / "store"))
    real, calls = onnx_export.export_onnx, []

    def counting(model: str, *args: object, **kwargs: object) -> object:
        calls.append(model)
        return real(model, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(onnx_export, "export_onnx", counting)
    opts = BuildOptions(progress=True)  # -q builds say nothing of the export (tested above); this one does
    build_index([str(small_corpus)], tmp_path / "one", opts)
    first = capsys.readouterr().err
    build_index([str(small_corpus)], tmp_path / "two", opts)
    second = capsys.readouterr().err
    assert calls == ["all-MiniLM-L6-v2"]
    assert "exporting all-MiniLM-L6-v2 to ONNX int8 (once per model" in first and "exported all-MiniLM-L6-v2" in first
    assert "exporting" not in second
    answers = []
    for name in ("one", "two"):
        with Index.open(tmp_path / name) as index:
            answers.append([(h.id, round(h.score, 6)) for h in index.search("privacy of federated clients", k=3)])
    assert answers[0] == answers[1] and answers[0]
