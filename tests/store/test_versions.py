"""The version lifecycle (lock, write beside the live version, publish or abandon), the typed manifest and the
document store, each through its own public names."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from semsearch.core.errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexLockedError,
    IndexNotFoundError,
    IndexPointerError,
)
from semsearch.core.records import Document, Provenance, SourceFile
from semsearch.store.documents import DocumentStore
from semsearch.store.documents_writer import write_documents
from semsearch.store.layout import (
    BUILD_PREFIX,
    CURRENT,
    MANIFEST,
    PUBLISHING,
    current_version,
    live_version,
    newest_sound_version,
    read_pointer,
)
from semsearch.store.manifest import READABLE_FORMAT_VERSION, Counts, Manifest, ModelInfo
from semsearch.store.versions import PreviousVersion, new_version, prune_versions, recover, writer_lock


def _manifest(documents: int = 1) -> Manifest:
    return Manifest(
        model=ModelInfo("fake-bow", "fake0001", 4, "fake", "fp32"),
        counts=Counts(read=documents, documents=documents, exact_duplicates=0, near_duplicates=0, vectors=documents),
        sources=[SourceFile("/data/a.txt", "ab" * 32, 10, "seed", "utf-8", documents)],
        source_args=["/data/a.txt"],
    )


def _doc(doc_id: str, text: str, *, title: str | None = None, external: list[str] | None = None) -> Document:
    return Document(
        id=doc_id,
        text=text,
        title=title,
        sources=[Provenance("a.txt", "paragraph", 1), Provenance("b.txt", "line", 3)],
        external_ids=external or [],
        metadata={"year": 2025},
        text_hash="h" + doc_id,
    )


def _publish(index_dir: Path, docs: list[Document]) -> Path:
    with new_version(index_dir) as writer:
        write_documents(writer.path / "docs.sqlite", docs)
        return writer.publish(_manifest(len(docs)))


# ---------------------------------------------------------------- lifecycle


def test_publish_makes_the_version_live_and_records_its_files(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    final = _publish(index, [_doc("00000000000000a1", "alpha")])
    assert read_pointer(index) == final.name and current_version(index) == final == live_version(index)
    manifest = Manifest.read(final)
    assert set(manifest.files) == {"docs.sqlite"} and manifest.files["docs.sqlite"]["size"] > 0
    assert manifest.check_file_hashes(final) == []
    assert not list(index.glob(f"{BUILD_PREFIX}*"))


def test_a_failed_block_leaves_the_live_version_and_no_partial_folder(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    first = _publish(index, [_doc("00000000000000a1", "alpha")])
    with pytest.raises(RuntimeError, match="disk went away"), new_version(index) as writer:
        (writer.path / "docs.sqlite").write_bytes(b"half")
        raise RuntimeError("disk went away")
    assert current_version(index) == first
    assert not list(index.glob(f"{BUILD_PREFIX}*"))


def test_a_block_that_does_not_publish_leaves_nothing(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    with new_version(index) as writer:
        (writer.path / "x").write_text("unused")
    assert not list(index.glob(f"{BUILD_PREFIX}*")) and not (index / CURRENT).exists()


def test_a_second_writer_is_refused_while_one_holds_the_lock(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    with writer_lock(index), pytest.raises(IndexLockedError, match="another semsearch process"), new_version(index):
        pass


def test_previous_version_is_read_once_with_its_ids(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    assert PreviousVersion.load(index) is None
    final = _publish(index, [_doc("00000000000000a1", "alpha"), _doc("00000000000000b2", "beta")])
    previous = PreviousVersion.load(index)
    assert previous is not None and previous.path == final
    assert previous.ids == {"00000000000000a1", "00000000000000b2"}
    assert previous.manifest.counts.documents == 2


def test_previous_version_damage_is_an_error_unless_tolerated(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    final = _publish(index, [_doc("00000000000000a1", "alpha")])
    (final / MANIFEST).write_text("{not json", encoding="utf-8")
    with pytest.raises(IndexCorruptError, match="unreadable"):
        PreviousVersion.load(index)
    assert PreviousVersion.load(index, tolerate_damage=True) is None


def test_current_never_points_outside_the_index(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    _publish(index, [_doc("00000000000000a1", "alpha")])
    (tmp_path / MANIFEST).write_text("{}", encoding="utf-8")  # a manifest one level up must not be reachable
    for name in ("..", ".", "../idx", ""):
        (index / CURRENT).write_text(name + "\n", encoding="utf-8")
        assert live_version(index) is None
        with pytest.raises(IndexCorruptError, match="points to a missing version"):
            current_version(index)
    with pytest.raises(IndexNotFoundError, match="no index at"):
        current_version(tmp_path / "nowhere")


# ---------------------------------------------------------------- manifest


def test_manifest_round_trips_and_keeps_keys_it_does_not_know(tmp_path: Path) -> None:
    manifest = _manifest()
    data = manifest.to_dict()
    data["shards"] = {"files": ["s-1"]}  # written by a newer release
    back = Manifest.from_dict(data)
    assert back.model == manifest.model and back.counts == manifest.counts and back.sources == manifest.sources
    assert back.to_dict() == data
    assert json.loads(back.to_json()) == data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("model"), "'model' is missing or malformed"),
        (lambda d: d["counts"].pop("vectors"), "'counts' is missing or malformed"),
        (lambda d: d["counts"].update(vectors="7"), "not a count"),
        (lambda d: d.update(sources={}), "'sources' is missing or malformed"),
        (lambda d: d.update(format="other"), "not a semsearch manifest"),
        (lambda d: d.pop("format_version"), "no format_version"),
    ],
)
def test_manifest_problems_are_named(change: object, message: str) -> None:
    data = _manifest().to_dict()
    change(data)  # type: ignore[operator]
    with pytest.raises(IndexCorruptError, match=message):
        Manifest.from_dict(data)


def test_a_newer_format_asks_for_an_upgrade() -> None:
    data = _manifest().to_dict()
    data["format_version"] = READABLE_FORMAT_VERSION + 1
    with pytest.raises(IndexFormatError, match="upgrade semsearch"):
        Manifest.from_dict(data)


def test_model_info_decides_encoder_reuse() -> None:
    info = _manifest().model
    assert info.matches("fake0001", 4) and not info.matches("fake0001", 8)
    assert info.same_encoder(ModelInfo("fake-bow", "fake0001", 4, "fake", "fp32"))
    assert not info.same_encoder(ModelInfo("fake-bow", "fake0001", 4, "fake", "int8"))


# ---------------------------------------------------------------- document store


@pytest.fixture
def store(tmp_path: Path) -> DocumentStore:
    path = tmp_path / "docs.sqlite"
    write_documents(
        path,
        [
            _doc("2bcdef0000000001", "first abstract", title="First", external=["paper-1"]),
            _doc("2bcdef0000000002", "second abstract"),
            _doc("1234560000000003", "third abstract", external=["paper-3", "doi:10/3"]),
        ],
    )
    return DocumentStore(path)


def test_store_finds_by_id_prefix_and_external_id(store: DocumentStore) -> None:
    assert store.count() == 3
    assert store.find("2bcdef0000000001").title == "First"  # type: ignore[union-attr]
    assert store.find("2BCDEF0000000001 ").id == "2bcdef0000000001"  # type: ignore[union-attr]
    assert store.find("doi:10/3").id == "1234560000000003"  # type: ignore[union-attr]
    assert store.find("123456").id == "1234560000000003"  # type: ignore[union-attr]
    assert store.find("2bcdef") is None  # two documents share the prefix: ambiguous
    assert store.find("abc") is None  # too short to be a prefix
    assert store.find("nothing") is None


def test_store_returns_documents_whole(store: DocumentStore) -> None:
    doc = store.find("paper-1")
    assert doc is not None
    assert doc.sources == [Provenance("a.txt", "paragraph", 1), Provenance("b.txt", "line", 3)]
    assert doc.metadata == {"year": 2025} and doc.external_ids == ["paper-1"] and doc.text_hash == "h2bcdef0000000001"
    assert doc.to_dict()["label"] == "First"
    assert [d.id for d in store.iter_documents(batch=2)] == sorted(store.ids(), key=lambda i: int(i, 16))


def test_store_that_is_not_sqlite_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "docs.sqlite"
    path.write_bytes(b"this is not a database" * 10)
    with pytest.raises(IndexCorruptError, match="not a readable document store"):
        DocumentStore(path)


def test_store_opens_read_only(store: DocumentStore) -> None:
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        store.conn.execute("DELETE FROM documents")


# ---------------------------------------------------------------- a pointer that cannot be trusted


def _three_versions(index: Path) -> list[Path]:
    return [_publish(index, [_doc(f"00000000000000a{i}", f"text {i}")]) for i in range(3)]


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        (lambda p: p.write_text("v-00001"), "points to a missing version 'v-00001'"),
        (lambda p: p.unlink(), "is missing"),
        (lambda p: p.write_bytes(b"\xff\xfe garbage"), "is unreadable"),
    ],
)
def test_a_bad_pointer_stops_writers_and_deletes_nothing(tmp_path: Path, damage: object, problem: str) -> None:
    index = tmp_path / "idx"
    published = _three_versions(index)
    (index / f"{BUILD_PREFIX}999999-deadbeef").mkdir()  # a dead writer's leftover: harmless to keep here
    damage(index / CURRENT)  # type: ignore[operator]
    newest = published[-1].name
    expected = f"{problem}.*newest sound version is {newest}.*--recover"
    with pytest.raises(IndexPointerError, match=expected), new_version(index):
        pass
    with pytest.raises(IndexPointerError, match=f"printf {newest} >"):
        current_version(index)  # readers say the same
    assert sorted(index.glob("v-*")) == published
    prune_versions(index, grace_s=0.0)  # nor does pruning touch anything while the pointer is bad
    assert sorted(index.glob("v-*")) == published


def test_recover_points_at_the_newest_sound_version_and_deletes_nothing(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    published = _three_versions(index)
    (published[-1] / "docs.sqlite").write_bytes(b"short")  # the newest is damaged: its size is wrong
    (index / CURRENT).write_text("v-gone\n")
    assert newest_sound_version(index) == published[1]
    done = recover(index)
    assert done.recovered and done.version == published[1].name and "v-gone" in done.problem
    assert read_pointer(index) == published[1].name and sorted(index.glob("v-*")) == published
    again = recover(index)  # a sound pointer is left as it is, even when it names an older version
    assert not again.recovered and again.version == published[1].name
    for version in published[:2]:
        (version / MANIFEST).write_text("{not json", encoding="utf-8")
    (index / CURRENT).unlink()
    with pytest.raises(IndexPointerError, match="no version in .* is sound.*--full"):
        recover(index)
    with pytest.raises(IndexNotFoundError, match="no index at"):
        recover(tmp_path / "nowhere")


def test_a_pointer_rolled_back_by_hand_keeps_the_newer_versions(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    published = _three_versions(index)
    (index / CURRENT).write_text(published[0].name + "\n")  # printf OLDER > CURRENT
    fourth = _publish(index, [_doc("00000000000000b1", "beta")])
    assert set(published) | {fourth} == set(index.glob("v-*"))  # within the grace period nothing goes


def test_a_version_a_killed_writer_renamed_but_never_published_is_removed(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    first = _publish(index, [_doc("00000000000000a1", "alpha")])
    # Killed between the rename and the CURRENT swap: the journal names the folder, CURRENT the old one.
    orphan = index / "v-000002-20990101T000000"
    orphan.mkdir()
    (orphan / MANIFEST).write_text("{}", encoding="utf-8")
    (index / PUBLISHING).write_text(orphan.name + "\n")
    second = _publish(index, [_doc("00000000000000a3", "gamma")])
    assert not orphan.exists() and not (index / PUBLISHING).exists()
    assert {first, second} == set(index.glob("v-*"))


def test_a_dead_writers_build_folder_is_removed_before_the_next_build_starts(tmp_path: Path) -> None:
    index = tmp_path / "idx"
    _publish(index, [_doc("00000000000000a1", "alpha")])
    dead = index / f"{BUILD_PREFIX}{os.getpid()}-0badf00d"  # even one with this pid: the lock says it is dead
    dead.mkdir()
    (dead / "vectors.npy").write_bytes(b"\0" * 4096)
    with new_version(index) as writer:
        assert not dead.exists()  # freed before this build writes anything
        assert [p.name for p in index.glob(f"{BUILD_PREFIX}*")] == [writer.path.name]


def test_reader_commands_name_the_newest_sound_version(tmp_path: Path) -> None:
    from tests.helpers import FakeEmbedder, assert_one_line_error, run

    index = tmp_path / "idx"
    published = _three_versions(index)
    (index / CURRENT).write_text("v-00001")
    for args in (["query", "privacy"], ["info"], ["export"], ["tag", "add", "liked", "00000000000000a1"]):
        result = run([*args, "--index", str(index)], FakeEmbedder())
        assert_one_line_error(result, published[-1].name, "semsearch index --recover")
    checked = run(["verify", "--index", str(index)], FakeEmbedder())
    assert checked.exit_code == 1 and published[-1].name in checked.output and "--recover" in checked.output


def test_index_recover_says_what_it_did(tmp_path: Path) -> None:
    from tests.helpers import FakeEmbedder, assert_one_line_error, run

    index = tmp_path / "idx"
    published = _three_versions(index)
    (index / CURRENT).unlink()
    result = run(["index", "--recover", "--index", str(index)], FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        f"recovered: CURRENT is missing; CURRENT now names {published[-1].name} (nothing was deleted)"
    )
    again = run(["index", "--recover", "--index", str(index), "--json"], FakeEmbedder())
    assert json.loads(again.output) == {
        "index": str(index),
        "version": published[-1].name,
        "problem": "",
        "recovered": False,
    }
    assert_one_line_error(run(["index", "seeds", "--recover", "--index", str(index)]), "--recover takes no SOURCES")
    assert_one_line_error(run(["index", "--recover", "--index", str(tmp_path / "none")]), "no index at")


def test_the_version_a_publish_replaced_is_kept_after_a_recover(tmp_path: Path) -> None:
    """recover points CURRENT back at v2 (v3 is damaged); the next publish must keep v2, which was live until
    its swap (a reader may still be on it), rather than delete it at once and keep the damaged v3."""
    index = tmp_path / "idx"
    published = _three_versions(index)
    (published[-1] / "docs.sqlite").write_bytes(b"short")
    (index / CURRENT).write_text("v-gone\n")
    assert recover(index).version == published[1].name
    hour_ago = os.stat(published[0]).st_mtime - 3600
    for version in published:  # built long ago: no grace period protects them
        os.utime(version, (hour_ago, hour_ago))
    fourth = _publish(index, [_doc("00000000000000b1", "beta")])
    assert published[1].is_dir() and read_pointer(index) == fourth.name
