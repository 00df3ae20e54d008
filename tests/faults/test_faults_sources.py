"""Sources that vanish silently (issue #37): the fault matrix of vanishing sources and foreign folders.

A source never vanishes silently. A folder read last time that cannot be read now (its permissions, an I/O error
on a network mount, a link to a disk that is gone) stops the refresh with one line and the index keeps its
papers and their tags; ``--drop-unreadable`` or ``remove --source FOLDER`` drop them, saying so. A folder
replaced by a link is walked like the folder (with loop protection); a linked file that leads outside the source
folders is read only with ``--follow-links``. An index inside its own sources (``cd papers && semsearch index
.``) or another index there is never walked; a file name that is not UTF-8 is one line, never a traceback.

Root reads through any permission, so unreadable folders are also made in process: ``os.scandir`` raises for one
folder (EACCES or EIO), as a network mount does; the chmod test runs where permissions hold.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from semsearch import Index
from semsearch.curate.tags import TagStore
from tests.helpers import PAPERS, FakeEmbedder, run, synthetic_abstracts

SUB_TEXTS = synthetic_abstracts(10, seed=37)


def _seed(path: Path, texts: list[str]) -> None:
    path.write_text("Papers\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")


@dataclass
class Library:
    """papers/a.txt (2 papers) and papers/sub/s.txt (10), indexed at idx, one paper of sub tagged."""

    root: Path
    papers: Path
    index: Path
    tagged: str  # the id of a paper of papers/sub, tagged "liked"

    @property
    def sub(self) -> Path:
        return self.papers / "sub"

    def refresh(self, *extra: str) -> tuple[int, str, dict[str, object] | None]:
        """``semsearch index --index IDX --json EXTRA``: exit status, stderr lines, the summary (if any)."""
        result = run(["index", "--index", str(self.index), "--json", *extra], FakeEmbedder())
        assert "Traceback" not in result.output
        summary = json.loads(result.stdout) if result.exit_code == 0 else None
        return result.exit_code, result.stderr, summary

    def texts(self) -> set[str]:
        with Index.open(self.index) as idx:
            return {d.text for d in idx.store.iter_documents()}

    def arrive(self) -> None:
        """A new file: a refresh then has something to write (an append), whatever else it finds."""
        _seed(self.papers / "c.txt", [PAPERS["rl"]])

    def assert_kept(self) -> None:
        """The sub folder's papers are all in the live version, their tag resolves, verify is clean."""
        assert set(SUB_TEXTS) <= self.texts()
        assert self.tagged in TagStore(self.index).tagged_ids(["liked"])
        with Index.open(self.index) as idx:
            assert idx.store.find(self.tagged) is not None, "a tag dangles"
        checked = run(["verify", "--index", str(self.index), "--json"], FakeEmbedder())
        assert checked.exit_code == 0, checked.output


def make_library(root: Path, *, sub_elsewhere: bool = False) -> Library:
    papers = root / "papers"
    papers.mkdir(parents=True)
    _seed(papers / "a.txt", [PAPERS["fed"], PAPERS["vision"]])
    if sub_elsewhere:  # papers/sub is a link to a folder on another disk from the start
        other = root / "disk2" / "sub"
        other.mkdir(parents=True)
        os.symlink(other, papers / "sub")
    else:
        (papers / "sub").mkdir()
    _seed(papers / "sub" / "s.txt", SUB_TEXTS)
    index = root / "idx"
    built = run(["index", str(papers), "--index", str(index), "--json"], FakeEmbedder())
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)["documents"] == 12
    with Index.open(index) as idx:
        tagged = next(d.id for d in idx.store.iter_documents() if d.text == SUB_TEXTS[3])
    assert run(["tag", "add", "liked", tagged, "--index", str(index)], FakeEmbedder()).exit_code == 0
    return Library(root, papers, index, tagged)


@pytest.fixture
def library(tmp_path: Path) -> Library:
    return make_library(tmp_path)


def fail_listing(monkeypatch: pytest.MonkeyPatch, folder: Path, code: int) -> None:
    """``os.scandir(folder)`` raises ``code`` (EACCES, EIO) in this process: root cannot be kept out by chmod."""
    real = os.scandir
    target = os.path.realpath(folder)

    def scandir(path: str | int = ".") -> object:
        if not isinstance(path, int) and os.path.realpath(path) == target:
            raise OSError(code, os.strerror(code), str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def one_line(stderr: str, *fragments: str) -> str:
    lines = [line for line in stderr.strip().splitlines() if line]
    assert len(lines) == 1, stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# ------------------------------------------------------------------ a folder replaced by a link


def test_a_folder_moved_to_another_disk_and_linked_keeps_its_papers(library: Library) -> None:
    elsewhere = library.root / "disk2" / "sub"
    elsewhere.parent.mkdir()
    shutil.move(str(library.sub), str(elsewhere))
    os.symlink(elsewhere, library.sub)
    status, _, summary = library.refresh()
    assert status == 0 and summary is not None and summary["unchanged"] is True
    library.arrive()
    status, _, summary = library.refresh()  # today: "removed: 10", no warning
    assert status == 0 and summary is not None
    assert summary["removed"] == 0 and summary["added"] == 1
    library.assert_kept()


def test_a_linked_folder_is_walked_like_a_folder(tmp_path: Path) -> None:
    library = make_library(tmp_path, sub_elsewhere=True)  # today: only a.txt's 2 papers are read
    library.assert_kept()
    status, _, summary = library.refresh()
    assert status == 0 and summary is not None and summary["unchanged"] is True


def test_a_linked_folder_loop_is_named_and_walked_once(library: Library) -> None:
    os.symlink(library.papers, library.sub / "up")  # a walk that followed it round would never end
    os.symlink(library.sub, library.papers / "again")  # another name of a folder walked already: read once
    library.arrive()
    status, stderr, summary = library.refresh()
    assert status == 0 and summary is not None
    assert summary["added"] == 1 and summary["removed"] == 0
    one_line(stderr, "sub/up: a symbolic link loop", "not followed")
    assert summary["documents"] == 13


def test_a_link_to_a_moved_folder_that_is_gone_stops_the_refresh(tmp_path: Path) -> None:
    library = make_library(tmp_path, sub_elsewhere=True)
    shutil.rmtree(tmp_path / "disk2")  # the other disk is not mounted
    library.arrive()
    status, stderr, _ = library.refresh()
    assert status == 2
    one_line(stderr, "papers/sub: cannot read this folder (broken symbolic link", "keeps the papers of its 1 file")
    library.assert_kept()


# ------------------------------------------------------------------ a folder that cannot be read


@pytest.mark.parametrize("code", [errno.EACCES, errno.EIO])
def test_an_unreadable_folder_stops_the_refresh_and_keeps_its_papers(
    library: Library, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    library.arrive()
    fail_listing(monkeypatch, library.sub, code)
    for extra in ([], ["--full"], [str(library.papers)]):
        status, stderr, _ = library.refresh(*extra)  # today: exit 0, "removed: 10", the tag dangles
        assert status == 2, (extra, stderr)
        line = one_line(stderr, f"sub: cannot read this folder ({os.strerror(code)})", "--drop-unreadable")
        assert "remove --source" in line
    library.assert_kept()
    assert PAPERS["rl"] not in library.texts()  # nothing was written


def test_drop_unreadable_drops_the_folder_and_says_so(library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    fail_listing(monkeypatch, library.sub, errno.EIO)
    status, stderr, summary = library.refresh("--drop-unreadable")
    assert status == 0 and summary is not None
    assert summary["removed"] == 10
    one_line(stderr, "sub: cannot read this folder", "the papers of its 1 file are dropped")
    assert not set(SUB_TEXTS) & library.texts()


def test_remove_source_takes_an_unreadable_folder_out(library: Library, monkeypatch: pytest.MonkeyPatch) -> None:
    fail_listing(monkeypatch, library.sub, errno.EACCES)
    removed = run(["remove", "--source", str(library.sub), "--index", str(library.index), "--json"], FakeEmbedder())
    assert removed.exit_code == 0, removed.output  # today: "no document in the index comes from .../sub"
    assert json.loads(removed.stdout)["removed"] == 10
    library.arrive()
    status, stderr, summary = library.refresh()  # the folder holds nothing the index keeps: a note, not a stop
    assert status == 0 and summary is not None and summary["added"] == 1
    one_line(stderr, "sub: cannot read this folder")
    assert not set(SUB_TEXTS) & library.texts()


def test_a_new_unreadable_folder_is_named_on_a_first_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    papers = tmp_path / "papers"
    (papers / "locked").mkdir(parents=True)
    _seed(papers / "a.txt", [PAPERS["fed"]])
    _seed(papers / "locked" / "l.txt", [PAPERS["llm"]])
    fail_listing(monkeypatch, papers / "locked", errno.EACCES)
    result = run(["index", str(papers), "--index", str(tmp_path / "idx"), "--json"], FakeEmbedder())
    assert result.exit_code == 0, result.output
    one_line(result.stderr, "locked: cannot read this folder (Permission denied)")  # today: nothing said


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists any folder whatever its permissions")
def test_a_folder_chmod_000_stops_the_refresh(library: Library) -> None:
    library.sub.chmod(0)
    try:
        status, stderr, _ = library.refresh()
    finally:
        library.sub.chmod(0o755)
    assert status == 2
    one_line(stderr, "sub: cannot read this folder (Permission denied)")
    library.assert_kept()


# ------------------------------------------------------------------ foreign folders


def test_an_index_inside_its_source_folder_is_never_walked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    _seed(papers / "a.txt", [PAPERS["fed"], PAPERS["vision"]])
    monkeypatch.chdir(papers)
    monkeypatch.delenv("SEMSEARCH_INDEX", raising=False)
    assert run(["index", ".", "--json"], FakeEmbedder()).exit_code == 0  # the default index: ./indexes/default
    assert (papers / "indexes").is_dir()
    os.symlink(next((papers / "indexes" / "default").glob("v-*")), papers / "snapshot")  # a link into it: not walked
    _seed(papers / "c.txt", [PAPERS["rl"]])
    result = run(["index", "--json"], FakeEmbedder())  # today: stops on the index's own JSON files
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["added"] == 1
    again = run(["index", "--json"], FakeEmbedder())
    assert again.exit_code == 0 and json.loads(again.stdout)["unchanged"] is True
    query = run(["query", "federated learning", "--json"], FakeEmbedder())
    assert query.exit_code == 0, query.output
    assert "stale" not in query.stderr  # the staleness check does not walk the index either


def test_another_index_inside_the_sources_is_not_read(library: Library) -> None:
    other = library.papers / "old-index"
    assert run(["index", str(library.sub), "--index", str(other), "--json"], FakeEmbedder()).exit_code == 0
    library.arrive()
    status, stderr, summary = library.refresh()  # today: its manifest.json is read as a source and refused
    assert status == 0 and summary is not None, stderr
    assert summary["added"] == 1 and summary["removed"] == 0


# ------------------------------------------------------------------ names and links


def _bad_name(folder: Path, name: bytes, text: str) -> None:
    fd = os.open(os.fsencode(str(folder)) + b"/" + name, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, ("Papers\n\n" + text + "\n").encode())
    os.close(fd)


@pytest.mark.parametrize("extra", [[], ["--skip-bad"], ["--full"]])
def test_a_file_name_that_is_not_utf8_is_one_line(library: Library, extra: list[str]) -> None:
    _bad_name(library.papers, b"\xff.txt", PAPERS["rl"])
    os.mkdir(os.fsencode(str(library.papers)) + b"/dir\xfe")
    _bad_name(library.papers / os.fsdecode(b"dir\xfe"), b"x.txt", PAPERS["graph"])
    status, stderr, summary = library.refresh(*extra)  # today: a UnicodeEncodeError traceback
    assert status == 0 and summary is not None
    lines = stderr.strip().splitlines()
    assert len(lines) == 2, stderr
    assert any("papers/\\xff.txt: its name is not valid UTF-8" in line for line in lines)
    assert any("papers/dir\\xfe: its name is not valid UTF-8" in line for line in lines)
    library.assert_kept()


def test_a_new_index_over_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    papers = tmp_path / "papers"
    papers.mkdir()
    _seed(papers / "a.txt", [PAPERS["fed"]])
    _bad_name(papers, b"caf\xe9.txt", PAPERS["rl"])
    for extra in ([], ["--skip-bad"]):
        result = run(["index", str(papers), "--index", str(tmp_path / "idx"), "--json", *extra], FakeEmbedder())
        assert result.exit_code == 0, result.output
        one_line(result.stderr, "caf\\xe9.txt: its name is not valid UTF-8")


def test_a_link_to_a_file_outside_the_sources_is_read_only_when_asked(library: Library) -> None:
    outside = library.root / "downloads" / "x.txt"
    outside.parent.mkdir()
    _seed(outside, [PAPERS["llm"]])
    os.symlink(outside, library.papers / "x.txt")
    os.symlink(library.papers / "a.txt", library.sub / "inside.txt")  # inside: read, nothing said
    status, stderr, summary = library.refresh()  # today: read silently
    assert status == 0 and summary is not None
    one_line(stderr, "papers/x.txt: a symbolic link to a file outside the source folders", "--follow-links")
    assert PAPERS["llm"] not in library.texts()
    status, stderr, summary = library.refresh("--follow-links")
    assert status == 0 and stderr == "" and PAPERS["llm"] in library.texts()
    status, stderr, summary = library.refresh()  # remembered by the index
    assert status == 0 and summary is not None and summary["unchanged"] is True and stderr == ""
    status, stderr, summary = library.refresh("--no-follow-links")
    assert status == 0 and summary is not None and summary["removed"] == 1
    one_line(stderr, "papers/x.txt: a symbolic link to a file outside the source folders")
    library.assert_kept()


# ------------------------------------------------------------------ the matrix: every fault, every refresh


def _linked(lib: Library, mp: pytest.MonkeyPatch) -> None:
    elsewhere = lib.root / "disk2" / "sub"
    elsewhere.parent.mkdir()
    shutil.move(str(lib.sub), str(elsewhere))
    os.symlink(elsewhere, lib.sub)


def _gone_link(lib: Library, mp: pytest.MonkeyPatch) -> None:
    shutil.move(str(lib.sub), str(lib.root / "parked"))
    os.symlink(lib.root / "unmounted" / "sub", lib.sub)


def _eacces(lib: Library, mp: pytest.MonkeyPatch) -> None:
    fail_listing(mp, lib.sub, errno.EACCES)


def _eio(lib: Library, mp: pytest.MonkeyPatch) -> None:
    fail_listing(mp, lib.sub, errno.EIO)


def _index_inside(lib: Library, mp: pytest.MonkeyPatch) -> None:
    inside = lib.papers / "indexes" / "default"
    shutil.copytree(lib.index, inside)
    shutil.rmtree(lib.index)
    lib.index = inside


def _foreign_index(lib: Library, mp: pytest.MonkeyPatch) -> None:
    assert run(["index", str(lib.sub), "--index", str(lib.papers / "other"), "-q"], FakeEmbedder()).exit_code == 0


def _undecodable(lib: Library, mp: pytest.MonkeyPatch) -> None:
    _bad_name(lib.sub, b"\xff.txt", PAPERS["graph"])


def _outside_link(lib: Library, mp: pytest.MonkeyPatch) -> None:
    outside = lib.root / "downloads.txt"
    _seed(outside, [PAPERS["graph"]])
    os.symlink(outside, lib.sub / "downloads.txt")


# fault -> (what it does, the exit status every refresh ends with, a fragment of its one stderr line or "")
FAULTS: dict[str, tuple[Callable[[Library, pytest.MonkeyPatch], None], int, str]] = {
    "folder-now-a-link": (_linked, 0, ""),
    "link-to-a-gone-disk": (_gone_link, 2, "cannot read this folder (broken symbolic link"),
    "unreadable-eacces": (_eacces, 2, "cannot read this folder (Permission denied)"),
    "unreadable-eio": (_eio, 2, "cannot read this folder (Input/output error)"),
    "index-inside-its-sources": (_index_inside, 0, ""),
    "foreign-index-inside": (_foreign_index, 0, ""),
    "undecodable-name": (_undecodable, 0, "\\xff.txt: its name is not valid UTF-8"),
    "link-to-a-file-outside": (_outside_link, 0, "a symbolic link to a file outside the source folders"),
}
# How the refresh is asked for: as recorded, naming the sources again, with an arrival (an append), from scratch.
REFRESHES = ("recorded", "named", "arrival", "full")


@pytest.fixture(scope="module")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Library]]:
    """A library built once, restored for each case into the same folder (the paths recorded in it stay true)."""
    base = tmp_path_factory.mktemp("sources-matrix")
    work, saved = base / "work", base / "saved"
    make_library(work)
    shutil.copytree(work, saved, symlinks=True)

    def fresh() -> Library:
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(saved, work, symlinks=True)
        with Index.open(work / "idx") as idx:
            tagged = next(d.id for d in idx.store.iter_documents() if d.text == SUB_TEXTS[3])
        return Library(work, work / "papers", work / "idx", tagged)

    yield fresh


@pytest.mark.parametrize("refresh", REFRESHES)
@pytest.mark.parametrize("fault", list(FAULTS))
def test_the_source_fault_matrix(
    fault: str, refresh: str, built_once: Callable[[], Library], monkeypatch: pytest.MonkeyPatch
) -> None:
    library = built_once()
    do, expected, said = FAULTS[fault]
    monkeypatch.chdir(library.root)
    do(library, monkeypatch)
    extra = {"recorded": [], "named": [str(library.papers)], "arrival": [], "full": ["--full"]}[refresh]
    if refresh == "arrival":
        library.arrive()
    status, stderr, summary = library.refresh(*extra)
    assert status == expected, stderr
    if said:
        one_line(stderr, said)
    else:
        assert stderr == ""
    if summary is not None:
        assert summary["removed"] == 0
    assert library.refresh()[0] == expected  # a rerun ends the same way
    library.assert_kept()  # a source never vanishes silently; its tag resolves; verify is clean
