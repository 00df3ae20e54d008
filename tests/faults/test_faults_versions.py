"""The index folder owns only what it wrote: the fault matrix's classes of foreign folders and stale journals,
version numbers that are never given twice, and pointing back past a damaged live version (issue #37).

Each writer that publishes a version (a refresh that rewrites, one that appends, ``remove``, ``--optimize``)
runs beside a user's ``v-draft/`` and ``v-1.0-release/`` folders, and after a writer killed between its CURRENT
swap and the journal's removal whose CURRENT was then rolled back by hand. After each, every version published
before and every foreign folder is intact byte for byte, no number is reused and ``verify`` is clean.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import semsearch.store.versions
from semsearch.store.layout import CURRENT, PUBLISHING, sequence_of
from semsearch.store.versions import recover
from tests.helpers import (
    PAPERS,
    FakeEmbedder,
    ForkServer,
    Scene,
    Writer,
    _seed,
    assert_effect,
    assert_one_line_error,
    assert_sound,
    assert_versions_intact,
    no_leftovers,
    run,
    snapshot,
    synthetic_abstracts,
    versions_snapshot,
    writer_args,
)

VERSION_WRITERS = ("build", "append", "remove", "optimize")
VERSIONS_RECORD = "versions.json"  # the record of the versions an index wrote (version_record.py)
LATE = "Spiking neural networks learn event camera streams with surrogate gradients at low power."


def scenes(request: pytest.FixtureRequest) -> Callable[[bool], Scene]:
    """The fault matrix's scenes (the module fixture ``matrix_scenes`` of conftest)."""
    fresh: Callable[[bool], Scene] = request.getfixturevalue("matrix_scenes")
    return fresh


def _age(index: Path, *names: str) -> None:
    """Make every version (and the named folders) look an hour old: no grace period protects them."""
    hour_ago = time.time() - 3600
    for folder in [*index.glob("v-*"), *(index / n for n in names)]:
        if folder.exists():
            os.utime(folder, (hour_ago, hour_ago))


def _live(index: Path) -> str:
    return (index / CURRENT).read_text(encoding="utf-8").strip()


def _foreign(index: Path) -> dict[str, dict[str, str]]:
    """A user's folders in the index folder: a draft, and a release kept as a copy of the live version."""
    (index / "v-draft").mkdir()
    (index / "v-draft" / "notes.md").write_text("# my draft of the reading list\n", encoding="utf-8")
    shutil.copytree(index / _live(index), index / "v-1.0-release")
    return {name: snapshot(index / name) for name in ("v-draft", "v-1.0-release")}


def _assert_foreign_intact(index: Path, foreign: dict[str, dict[str, str]]) -> None:
    for name, files in foreign.items():
        assert (index / name).is_dir(), f"the user's {name}/ was deleted"
        assert snapshot(index / name) == files, f"the user's {name}/ changed"


# ---------------------------------------------------------------- foreign folders (the fault matrix's class)


@pytest.mark.parametrize("kind", VERSION_WRITERS)
def test_a_writer_never_deletes_folders_the_index_did_not_write(request: pytest.FixtureRequest, kind: str) -> None:
    scene = scenes(request)(kind != "append")
    foreign = _foreign(scene.index)
    _age(scene.index, *foreign)
    before = versions_snapshot(scene.index)
    first = run(writer_args(kind, scene), FakeEmbedder())
    assert first.exit_code == 0, first.output
    _age(scene.index, *foreign)
    _seed(scene.corpus / "e.txt", [LATE])  # a second publish, so the replaced versions are pruned for sure
    second = run(["index", "--index", str(scene.index), "-q"], FakeEmbedder())
    assert second.exit_code == 0, second.output
    _assert_foreign_intact(scene.index, foreign)
    assert_sound(scene)
    assert_effect(kind, scene)
    no_leftovers_but(scene.index, foreign)
    # The index's own replaced versions are still pruned (all but the live one and the one below it).
    mine = sorted(p.name for p in scene.index.glob("v-*") if p.name not in foreign)
    assert len(mine) == 2 and _live(scene.index) == mine[-1], mine
    assert not set(mine) & {n for n in before if n not in foreign and sequence_of(n) < sequence_of(mine[0])}


def no_leftovers_but(index: Path, foreign: dict[str, dict[str, str]]) -> None:
    """``no_leftovers`` of the matrix, with the user's folders set aside for the check."""
    aside = index.parent / "aside"
    aside.mkdir()
    for name in foreign:
        (index / name).rename(aside / name)
    try:
        no_leftovers(index)
    finally:
        for name in foreign:
            (aside / name).rename(index / name)
        aside.rmdir()


def test_an_index_built_into_a_folder_of_user_folders_leaves_them_alone(tmp_path: Path) -> None:
    """``--index`` at a folder that holds only a user's ``v-draft/`` and ``v-1.0-release/``: once the tool's own
    advice is followed (today: "Rebuild with … --full"), pruning must never ``rm -rf`` either."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"]])
    elsewhere = tmp_path / "other"
    assert run(["index", str(corpus), "--index", str(elsewhere), "-q"], FakeEmbedder()).exit_code == 0
    folder = tmp_path / "folder"
    (folder / "v-draft").mkdir(parents=True)
    (folder / "v-draft" / "notes.md").write_text("my notes\n", encoding="utf-8")
    shutil.copytree(elsewhere / _live(elsewhere), folder / "v-1.0-release")  # a sound version, but not this index's
    foreign = {name: snapshot(folder / name) for name in ("v-draft", "v-1.0-release")}
    args = ["index", str(corpus), "--index", str(folder), "-q"]
    built = run(args, FakeEmbedder())
    if built.exit_code != 0:  # follow whatever the tool advised
        assert "--recover" not in built.output, "it offered to point CURRENT at a user's folder"
        built = run([*args, "--full"], FakeEmbedder())
    assert built.exit_code == 0, built.output
    for name in ("b.txt", "c.txt", "d.txt"):  # three more publishes, each after the grace period
        _age(folder, *foreign)
        _seed(corpus / name, [f"{LATE} Variant {name}."])
        assert run(["index", "--index", str(folder), "-q"], FakeEmbedder()).exit_code == 0
    _assert_foreign_intact(folder, foreign)
    assert run(["verify", "--index", str(folder)], FakeEmbedder()).exit_code == 0
    # A missing CURRENT names the index's own newest version, never the user's copy.
    live = _live(folder)
    (folder / CURRENT).unlink()
    assert_one_line_error(run(["query", "privacy", "--index", str(folder)], FakeEmbedder()), live, "--recover")
    assert recover(folder).version == live
    _assert_foreign_intact(folder, foreign)


# ---------------------------------------------------------------- stale journals (the fault matrix's class)


def _killed_after_the_swap(patch: pytest.MonkeyPatch, index: Path, args: list[str]) -> str:
    """Run a writer that dies between its CURRENT swap and the journal's removal: the journal it wrote before
    the swap is left behind, naming the version that is now published. Returns that version."""
    journal: list[bytes] = []
    real = semsearch.store.versions.barrier

    def at(point: str) -> None:
        if point == "swap":  # in place, CURRENT not yet swapped: the journal is written
            journal.append((index / PUBLISHING).read_bytes())
        real(point)

    with patch.context() as p:
        p.setattr(semsearch.store.versions, "barrier", at)
        result = run(args, FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert len(journal) == 1
    (index / PUBLISHING).write_bytes(journal[0])  # as the killed writer left it
    return _live(index)


def _roll_back_by_hand_then_refresh(scene: Scene, older: str, published: str) -> None:
    """``printf OLDER > IDX/CURRENT`` after a writer published and left its journal; then the next refresh must keep
    both versions intact, give a new number and take the arrival."""
    assert published != older and (scene.index / PUBLISHING).is_file()
    (scene.index / CURRENT).write_text(older, encoding="utf-8")  # printf OLDER > IDX/CURRENT
    _age(scene.index)
    before = {n: f for n, f in versions_snapshot(scene.index).items() if n in (older, published)}
    _seed(scene.corpus / "e.txt", [LATE])
    again = run(["index", "--index", str(scene.index), "-q"], FakeEmbedder())
    assert again.exit_code == 0, again.output
    assert_versions_intact(scene.index, before)  # the published version above all (older ones are pruned)
    assert sequence_of(_live(scene.index)) > sequence_of(published), "a version number was given twice"
    assert_sound(scene)
    assert LATE in _texts(scene.index)


@pytest.mark.parametrize("kind", VERSION_WRITERS)
def test_a_stale_journal_never_deletes_a_published_version(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """Killed after the swap, then the documented rollback ``printf OLDER > IDX/CURRENT``: the next writer must
    keep the version that was published, and give the next version a number never used."""
    scene = scenes(request)(kind != "append")
    older = _live(scene.index)
    published = _killed_after_the_swap(monkeypatch, scene.index, writer_args(kind, scene))
    _roll_back_by_hand_then_refresh(scene, older, published)
    assert not (scene.index / PUBLISHING).exists()


@pytest.mark.parametrize("kind", VERSION_WRITERS)
def test_sigkill_after_the_swap_then_a_rollback_by_hand(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> None:
    """The same, with a real SIGKILL at the ``swapped`` barrier (CURRENT swapped, the journal not yet removed)."""
    scene = scenes(request)(kind != "append")
    forks: ForkServer = request.getfixturevalue("matrix_forks")
    older = _live(scene.index)
    stopped = Writer(forks, writer_args(kind, scene), "swapped", tmp_path / "barrier")
    stopped.reached()
    stopped.kill()
    published = _live(scene.index)
    _roll_back_by_hand_then_refresh(scene, older, published)
    no_leftovers_above(scene.index, published)


def no_leftovers_above(index: Path, published: str) -> None:
    """No journal, build folder or temporary pointer is left; the one version above the live one is ``published``."""
    left = [p.name for p in index.iterdir() if p.name.startswith((".build-", ".CURRENT.")) or p.name == PUBLISHING]
    assert left == []
    live = sequence_of(_live(index))
    assert {v.name for v in index.glob("v-*") if sequence_of(v.name) > live} <= {published}


def test_a_journal_of_an_older_release_is_stale_once_current_was_rewritten_after_it(tmp_path: Path) -> None:
    """A one-line journal (no stamp) left by a release before this one, then a rollback by hand: kept."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"]])
    index = tmp_path / "idx"
    assert run(["index", str(corpus), "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    older = _live(index)
    _seed(corpus / "b.txt", [LATE])
    assert run(["index", "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    published = _live(index)
    (index / PUBLISHING).write_text(published + "\n", encoding="utf-8")  # killed after its swap
    then = time.time() - 60
    os.utime(index / PUBLISHING, (then, then))
    (index / CURRENT).write_text(older, encoding="utf-8")  # printf OLDER > IDX/CURRENT, a minute later
    _seed(corpus / "c.txt", [f"{LATE} Again."])
    assert run(["index", "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    assert (index / published).is_dir() and not (index / PUBLISHING).exists()
    assert sequence_of(_live(index)) > sequence_of(published)


def _texts(index: Path) -> set[str]:
    from semsearch import Index

    with Index.open(index) as idx:
        return {d.text for d in idx.store.iter_documents()}


@pytest.mark.parametrize("kind", VERSION_WRITERS)
def test_a_journal_of_a_writer_killed_before_its_swap_is_still_trusted(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """The other side of the rule: CURRENT untouched since the journal, so the version it names was never
    published and the next writer removes it."""
    scene = scenes(request)(kind != "append")
    live = _live(scene.index)
    before = versions_snapshot(scene.index)

    def killed(point: str) -> None:
        if point == "swap":
            raise KeyboardInterrupt  # dies in place, CURRENT not yet swapped (abandon() has nothing to remove)

    with monkeypatch.context() as p:
        p.setattr(semsearch.store.versions, "barrier", killed)
        result = run(writer_args(kind, scene), FakeEmbedder())
    assert result.exit_code != 0
    orphan = set(versions_snapshot(scene.index)) - set(before)
    assert _live(scene.index) == live and len(orphan) == 1 and (scene.index / PUBLISHING).is_file()
    again = run(writer_args(kind, scene), FakeEmbedder())
    assert again.exit_code == 0, again.output
    never_published = orphan.pop()
    assert never_published not in {p.name for p in scene.index.glob("v-*")} - {_live(scene.index)}
    no_leftovers(scene.index)
    assert_versions_intact(scene.index, before)
    assert_sound(scene)
    assert_effect(kind, scene)


# ---------------------------------------------------------------- numbers never given twice


def test_numbers_are_never_reused_so_bookmarks_see_later_arrivals(tmp_path: Path) -> None:
    """The newest version deleted by hand and CURRENT pointed back: the next version must not take its number,
    or ``new --since last`` (and every digest bookmark) silently skips what arrives next."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"], PAPERS["graph"]])
    index = tmp_path / "idx"
    fake = FakeEmbedder()
    assert run(["index", str(corpus), "--index", str(index), "-q"], fake).exit_code == 0
    first = _live(index)
    _seed(corpus / "b.txt", [PAPERS["llm"]])
    assert run(["index", "--index", str(index), "-q"], fake).exit_code == 0
    second = _live(index)
    seen = run(["new", "--since", "last", "--index", str(index), "--json"], fake)  # the bookmark moves to `second`
    assert seen.exit_code == 0 and PAPERS["llm"][:40] in seen.output, seen.output
    shutil.rmtree(index / second)  # the user throws the newest version away
    (index / CURRENT).write_text(first, encoding="utf-8")
    _seed(corpus / "c.txt", [LATE])
    assert run(["index", "--index", str(index), "-q"], fake).exit_code == 0
    third = _live(index)
    assert sequence_of(third) > sequence_of(second), f"{third} reuses the number of {second}"
    later = run(["new", "--since", "last", "--index", str(index), "--json"], fake)
    assert later.exit_code == 0 and LATE[:40] in later.output, "the bookmark skipped a later arrival"


def test_an_unreadable_record_stops_writers_and_changes_nothing(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"]])
    index = tmp_path / "idx"
    assert run(["index", str(corpus), "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"]])
    assert run(["index", "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    (index / VERSIONS_RECORD).write_text("{not json", encoding="utf-8")
    before = snapshot(index)
    _seed(corpus / "b.txt", [LATE])
    result = run(["index", "--index", str(index), "-q"], FakeEmbedder())
    assert_one_line_error(result, str(index / VERSIONS_RECORD), "unreadable", "delete it")
    assert "--recover-to" not in result.output  # the live version is sound: nothing to point back from
    assert snapshot(index) == before
    assert run(["query", "privacy", "--index", str(index)], FakeEmbedder()).exit_code == 0  # readers do not care
    (index / VERSIONS_RECORD).unlink()  # what the line says: the next writer adopts the versions again
    assert run(["index", "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    record = json.loads((index / VERSIONS_RECORD).read_text(encoding="utf-8"))
    assert sorted(record["written"]) == sorted(p.name for p in index.glob("v-*"))


def test_an_index_from_before_the_record_adopts_its_own_versions_only(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"]])
    index = tmp_path / "idx"
    for n in range(3):
        _seed(corpus / f"x{n}.txt", [f"{LATE} Number {n}."])
        assert run(["index", str(corpus), "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    (index / VERSIONS_RECORD).unlink()  # as an older release left it
    (index / "v-draft").mkdir()
    _age(index, "v-draft")
    assert run(["index", "--index", str(index), "-q", "--optimize"], FakeEmbedder()).exit_code == 0
    mine = sorted(p.name for p in index.glob("v-*") if p.name != "v-draft")
    assert len(mine) == 2 and (index / "v-draft").is_dir()  # its old versions pruned as before; the draft kept


# ---------------------------------------------------------------- a damaged live version behind a sound CURRENT


def _two_versions(tmp_path: Path) -> tuple[Path, str, str]:
    """An index with two versions written whole (a changed source rewrites it), the newer one live."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"]])
    index = tmp_path / "idx"
    assert run(["index", str(corpus), "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    first = _live(index)
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["graph"]])
    assert run(["index", "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    return index, first, _live(index)


def test_a_damaged_live_version_names_the_older_sound_one_and_recover_to_points_back(tmp_path: Path) -> None:
    index, first, second = _two_versions(tmp_path)
    docs = index / second / "docs.sqlite"
    assert docs.stat().st_ino != (index / first / "docs.sqlite").stat().st_ino  # not shared: only the live one breaks
    docs.write_bytes(docs.read_bytes()[:-4096])  # truncated
    point_back = f"semsearch index --recover-to {first} --index {index}"
    assert_one_line_error(run(["query", "privacy", "--index", str(index)], FakeEmbedder()), first, point_back)
    _seed(tmp_path / "corpus" / "b.txt", [LATE])
    assert_one_line_error(run(["index", "--index", str(index), "-q"], FakeEmbedder()), first, point_back)
    checked = run(["verify", "--index", str(index)], FakeEmbedder())
    assert checked.exit_code == 1 and point_back in checked.output, checked.output
    before = versions_snapshot(index)
    done = run(["index", "--recover-to", first, "--index", str(index)], FakeEmbedder())
    assert done.exit_code == 0, done.output
    assert done.output.strip() == f"recovered: CURRENT named {second}; CURRENT now names {first} (nothing was deleted)"
    assert _live(index) == first and versions_snapshot(index) == before
    assert run(["verify", "--index", str(index)], FakeEmbedder()).exit_code == 0
    assert run(["query", "privacy", "--index", str(index)], FakeEmbedder()).exit_code == 0
    again = run(["index", "--recover-to", first, "--index", str(index), "--json"], FakeEmbedder())
    assert json.loads(again.output) == {"index": str(index), "version": first, "problem": "", "recovered": False}
    # The next refresh builds on the version pointed back to and keeps the damaged one (numbered above it).
    assert run(["index", "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    assert sequence_of(_live(index)) > sequence_of(second) and (index / second).is_dir()


def test_a_checksum_damage_verify_finds_names_the_older_version(tmp_path: Path) -> None:
    index, first, second = _two_versions(tmp_path)
    docs = index / second / "docs.sqlite"
    data = bytearray(docs.read_bytes())
    data[-100] ^= 0xFF  # same size: only a checksum tells
    docs.write_bytes(bytes(data))
    checked = run(["verify", "--index", str(index), "--json"], FakeEmbedder())
    problems = json.loads(checked.output)["problems"]
    assert checked.exit_code == 1 and any(f"--recover-to {first}" in p for p in problems), problems


def test_a_file_the_older_version_shares_is_no_way_back(tmp_path: Path) -> None:
    """A damaged file hard-linked into the older version damages both: no version is named to point back to."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    _seed(corpus / "a.txt", [PAPERS["fed"], PAPERS["vision"], PAPERS["rl"], PAPERS["graph"]])
    _seed(corpus / "bulk.txt", synthetic_abstracts(20, seed=22))  # enough that one arrival is a small change
    index = tmp_path / "idx"
    assert run(["index", str(corpus), "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    first = _live(index)
    _seed(corpus / "b.txt", [LATE])  # appended as a segment: the base files are hard links to the first's
    assert run(["index", "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    vectors = index / _live(index) / "vectors.npy"
    assert vectors.stat().st_ino == (index / first / "vectors.npy").stat().st_ino
    data = bytearray(vectors.read_bytes())
    data[-3] ^= 0xFF  # same size: the older version's size check cannot tell
    vectors.write_bytes(bytes(data))
    checked = run(["verify", "--index", str(index), "--json"], FakeEmbedder())
    assert checked.exit_code == 1 and "--recover-to" not in checked.output, checked.output


def test_recover_to_refuses_what_is_not_a_sound_version_of_the_index(tmp_path: Path) -> None:
    index, first, second = _two_versions(tmp_path)
    (index / "v-draft").mkdir()
    docs = index / first / "docs.sqlite"
    docs.write_bytes(docs.read_bytes()[:-4096])
    for name, fragment in (
        ("v-draft", "holds no version 'v-draft'"),
        ("v-000099-20990101T000000", "holds no version"),
        ("../idx", "holds no version"),
        (first, "incomplete"),
    ):
        before = snapshot(index)
        result = run(["index", "--recover-to", name, "--index", str(index)], FakeEmbedder())
        assert_one_line_error(result, fragment, "CURRENT is unchanged")
        assert snapshot(index) == before and _live(index) == second
    assert_one_line_error(
        run(["index", "--recover", "--recover-to", second, "--index", str(index)]), "choose one of --recover"
    )
    assert_one_line_error(run(["index", "seeds", "--recover-to", second, "--index", str(index)]), "takes no SOURCES")
    (index / CURRENT).write_text("v-gone", encoding="utf-8")  # a bad pointer can be sent to a named version too
    assert recover(index, to=second).version == second and _live(index) == second
