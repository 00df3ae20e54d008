"""Hostile ``--out`` targets, and the other outputs a user trusts: saved queries, the SMTP password file, a full disk.

The fault matrix's "hostile --out targets": every command with ``--out`` (``export``, ``digest``, ``map``) against
a symlink (a ``refs.bib`` linked into a LaTeX project), a dangling symlink, a FIFO, a character device (a twin
of ``/dev/null`` and of ``/dev/full``, made with mknod where allowed), a block device, a socket, a file with
private permissions, a missing folder and ``/dev/fd/1`` behind a shell's ``>>``. Each time: what the path pointed
at is still there and still what it was (a link stays a link, a FIFO a FIFO, a device a device), the output
reached it or one line said why not, and no temporary file is left behind.
"""

from __future__ import annotations

import errno
import json
import os
import resource
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import semsearch.core.fileio
import semsearch.store.vectors
from semsearch import BuildOptions, build_index
from semsearch.core.errors import MailError
from semsearch.curate.mail import resolve_settings
from semsearch.faces.cli import cli
from tests.helpers import PAPERS, FakeEmbedder, run

pytestmark = pytest.mark.skipif(os.name != "posix", reason="FIFOs, device nodes, modes and rlimits are POSIX")
COMMANDS = ("export", "digest", "map")


def one_line_error(result: Result, *fragments: str) -> str:
    assert result.exit_code == 2, result.output
    # export's notice about untitled entries may come first; the error is one line, the last.
    lines = [line for line in result.output.strip().splitlines() if line]
    errors = [line for line in lines if line.startswith("Error: ")]
    assert errors == lines[-1:], result.output
    assert "Traceback" not in result.output and ".tmp" not in errors[0]
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    return errors[0]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small index for the module (the commands here only read it; digest runs with --no-bookmark)."""
    root = tmp_path_factory.mktemp("outputs")
    corpus = root / "papers.txt"
    corpus.write_text("Papers\n\n" + "\n\n".join(PAPERS.values()) + "\n", encoding="utf-8")
    build_index([str(corpus)], root / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    return root / "idx"


def args_of(command: str, index: Path, out: str | Path) -> list[str]:
    tail = ["--index", str(index), "--out", str(out)]
    if command == "export":
        return ["export", "--format", "bibtex", *tail]
    if command == "digest":
        return ["digest", "--no-bookmark", *tail]
    return ["map", *tail]


@pytest.fixture(scope="module")
def expected(index: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """What each command writes to a plain new file: the content every hostile target must get (or refuse)."""
    folder = tmp_path_factory.mktemp("plain")
    out: dict[str, bytes] = {}
    for command in COMMANDS:
        result = run(args_of(command, index, folder / command), FakeEmbedder())
        assert result.exit_code == 0, result.output
        out[command] = (folder / command).read_bytes()
        assert out[command]
    return out


def no_temporaries(*folders: Path) -> None:
    for folder in folders:
        assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def mknod_or_skip(path: Path, mode: int, major: int, minor: int) -> None:
    try:
        os.mknod(path, mode | 0o666, os.makedev(major, minor))
    except (PermissionError, AttributeError, OSError) as exc:
        pytest.skip(f"cannot make a device node here: {exc}")


class Drain:
    """A reader on a FIFO, opened before the writer so neither blocks; collects what the writer sent."""

    def __init__(self, fifo: Path) -> None:
        self.fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        self.data = bytearray()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                time.sleep(0.005)
                continue
            if chunk:
                self.data += chunk
            elif self.done.is_set():  # EOF once the command has finished: the writer (if any) has closed
                break
            else:
                time.sleep(0.005)

    def finish(self) -> bytes:
        self.done.set()
        self.thread.join(timeout=30)
        os.close(self.fd)
        return bytes(self.data)


# ---------------------------------------------------------------- the matrix: command x hostile target


@pytest.mark.parametrize("command", COMMANDS)
def test_a_symlink_is_written_through_and_stays_a_link(
    command: str, index: Path, expected: dict[str, bytes], tmp_path: Path
) -> None:
    # A LaTeX project links refs.bib to the bibliography kept elsewhere.
    (tmp_path / "bib").mkdir()
    (tmp_path / "paper").mkdir()
    real = tmp_path / "bib" / "refs.bib"
    real.write_text("% old\n", encoding="utf-8")
    link = tmp_path / "paper" / "refs.bib"
    link.symlink_to(Path("..") / "bib" / "refs.bib")
    result = run(args_of(command, index, link), FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == os.path.join("..", "bib", "refs.bib")
    assert real.read_bytes() == expected[command]
    no_temporaries(tmp_path / "bib", tmp_path / "paper")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_dangling_symlink_gets_its_target_made(
    command: str, index: Path, expected: dict[str, bytes], tmp_path: Path
) -> None:
    link = tmp_path / "out"
    link.symlink_to(tmp_path / "made-here")
    result = run(args_of(command, index, link), FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and (tmp_path / "made-here").read_bytes() == expected[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fifo_is_written_as_a_stream(command: str, index: Path, expected: dict[str, bytes], tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    drain = Drain(fifo)
    result = run(args_of(command, index, fifo), FakeEmbedder())
    received = drain.finish()
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # not replaced by a regular file
    assert received == expected[command]
    no_temporaries(tmp_path)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_character_device_is_written_not_replaced(command: str, index: Path, tmp_path: Path) -> None:
    null = tmp_path / "null"
    mknod_or_skip(null, stat.S_IFCHR, 1, 3)  # a twin of /dev/null (as root, --out /dev/null once replaced it)
    result = run(args_of(command, index, null), FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat(null).st_mode) and os.lstat(null).st_rdev == os.makedev(1, 3)
    no_temporaries(tmp_path)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_full_device_says_so_and_stays_a_device(command: str, index: Path, tmp_path: Path) -> None:
    full = tmp_path / "full"
    mknod_or_skip(full, stat.S_IFCHR, 1, 7)  # a twin of /dev/full: every write fails with ENOSPC
    result = run(args_of(command, index, full), FakeEmbedder())
    one_line_error(result, f"cannot write {full}", os.strerror(errno.ENOSPC))
    assert stat.S_ISCHR(os.lstat(full).st_mode) and os.lstat(full).st_rdev == os.makedev(1, 7)
    no_temporaries(tmp_path)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_block_device_is_refused(command: str, index: Path, tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    mknod_or_skip(disk, stat.S_IFBLK, 7, 250)  # a loop device number nothing uses: no disk is ever at risk
    result = run(args_of(command, index, disk), FakeEmbedder())
    one_line_error(result, f"cannot write {disk}", "block device")
    assert stat.S_ISBLK(os.lstat(disk).st_mode)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_socket_is_refused(command: str, index: Path, tmp_path: Path) -> None:
    path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
        result = run(args_of(command, index, path), FakeEmbedder())
    finally:
        server.close()
    one_line_error(result, f"cannot write {path}", "a socket")
    assert stat.S_ISSOCK(os.lstat(path).st_mode)


@pytest.mark.parametrize("command", COMMANDS)
def test_a_private_file_stays_private(command: str, index: Path, expected: dict[str, bytes], tmp_path: Path) -> None:
    out = tmp_path / "private.out"
    out.write_text("old\n", encoding="utf-8")
    out.chmod(0o600)
    result = run(args_of(command, index, out), FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600  # the replacement keeps the permissions it replaced
    assert out.read_bytes() == expected[command]


@pytest.mark.parametrize("command", COMMANDS)
def test_a_missing_folder_is_one_line(command: str, index: Path, tmp_path: Path) -> None:
    out = tmp_path / "nowhere" / "out.txt"
    one_line_error(run(args_of(command, index, out), FakeEmbedder()), f"no folder {tmp_path / 'nowhere'}")
    assert not (tmp_path / "nowhere").exists()


def test_an_owner_is_kept_where_allowed(index: Path, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root may give a file away")
    out = tmp_path / "theirs.bib"
    out.write_text("old\n", encoding="utf-8")
    os.chown(out, 4321, 4321)
    assert run(args_of("export", index, out)).exit_code == 0
    assert (out.stat().st_uid, out.stat().st_gid) == (4321, 4321)


def _cli_process(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "semsearch", *args], env=env, timeout=120, check=False, **kwargs)


def test_dev_fd_behind_a_shells_append_is_appended_to(index: Path, expected: dict[str, bytes], tmp_path: Path) -> None:
    log = tmp_path / "log.bib"
    log.write_text("% kept\n", encoding="utf-8")
    with log.open("ab") as stdout:  # semsearch export --out /dev/fd/1 >> log.bib
        done = _cli_process(args_of("export", index, "/dev/fd/1"), stdout=stdout, stderr=subprocess.PIPE)
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == b"% kept\n" + expected["export"]


def test_a_map_that_cannot_be_finished_leaves_the_old_one(index: Path, tmp_path: Path) -> None:
    """The map was written in place: a write that failed part-way (here a file size limit) truncated it."""
    out = tmp_path / "map.html"
    out.write_text("<p>the old map</p>\n", encoding="utf-8")

    def limited() -> None:  # in the child: writes past 4 kB fail with EFBIG (SIGXFSZ ignored, not fatal)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    done = _cli_process(args_of("map", index, out), capture_output=True, preexec_fn=limited)
    assert out.read_text(encoding="utf-8") == "<p>the old map</p>\n"
    assert done.returncode == 2 and f"cannot write {out}: File too large" in done.stderr.decode(), done.stderr
    no_temporaries(tmp_path)


def test_a_full_disk_under_an_out_file_says_how_much_and_keeps_the_old(
    index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "refs.bib"
    out.write_text("% old\n", encoding="utf-8")
    real = Path.write_bytes

    def full(self: Path, data: Any) -> int:
        if self.name.endswith(".tmp"):
            real(self, bytes(data)[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data)

    with monkeypatch.context() as patch:
        patch.setattr(semsearch.core.fileio.Path, "write_bytes", full)
        result = run(args_of("export", index, out))
    line = one_line_error(result, f"cannot write {out}: disk full", "free on ", "needed", f"{out} is unchanged")
    assert "bytes needed" in line or "kB needed" in line
    assert out.read_text(encoding="utf-8") == "% old\n"
    no_temporaries(tmp_path)


def test_every_out_goes_through_the_one_writer() -> None:
    """The faces write no file themselves: every --out reaches ``write_output`` (the matrix above checks each)."""
    import re

    faces = Path(semsearch.core.fileio.__file__).parents[1] / "faces"
    direct = re.compile(r"\.write_(?:text|bytes)\(|write_(?:text|bytes)_atomic\(|open\([^)]*[\"'][wax]b?[\"']")
    found = [f"{p.name}: {m.group(0)}" for p in sorted(faces.glob("*.py")) for m in direct.finditer(p.read_text())]
    assert found == []


def test_write_output_refuses_a_folder_behind_a_link(tmp_path: Path) -> None:
    from semsearch.core.errors import OutputError
    from semsearch.core.fileio import write_output

    (tmp_path / "folder").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "folder")
    with pytest.raises(OutputError, match="it is a folder"):
        write_output(tmp_path / "link", "x")
    assert (tmp_path / "link").is_symlink() and (tmp_path / "folder").is_dir()


def test_write_output_follows_a_chain_of_links(tmp_path: Path) -> None:
    from semsearch.core.fileio import write_output

    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("c")
    (tmp_path / "c").write_text("old", encoding="utf-8")
    write_output(tmp_path / "a", "new")
    assert [os.readlink(tmp_path / n) for n in "ab"] == ["b", "c"]
    assert (tmp_path / "c").read_text(encoding="utf-8") == "new"


def test_write_output_reports_a_link_loop(tmp_path: Path) -> None:
    from semsearch.core.errors import OutputError
    from semsearch.core.fileio import write_output

    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    with pytest.raises(OutputError, match=f"cannot write {tmp_path / 'a'}"):
        write_output(tmp_path / "a", "x")


# ---------------------------------------------------------------- a full disk under the index


@pytest.fixture
def own_index(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("Papers\n\n" + "\n\n".join(PAPERS.values()) + "\n", encoding="utf-8")
    assert run(["index", str(corpus), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder()).exit_code == 0
    return tmp_path / "idx", corpus


def test_a_short_numpy_write_says_disk_full_where_and_how_much(
    own_index: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """np.save to a full disk raises OSError('38784 requested and 34784 written'): no errno, no path."""
    index, corpus = own_index
    current = (index / "CURRENT").read_text()
    (corpus / "b.txt").write_text("More\n\nSparse attention cuts the cost of long documents.\n", encoding="utf-8")

    def short(path: Any, array: Any, *args: Any, **kwargs: Any) -> None:
        Path(path).write_bytes(b"\x93NUMPY" + b"\0" * 100)
        raise OSError("38784 requested and 34784 written")

    with monkeypatch.context() as patch:
        patch.setattr(semsearch.store.vectors.np, "save", short)
        result = run(["index", "--index", str(index), "-q"], FakeEmbedder())
    one_line_error(
        result, "disk full", "38,784 bytes", "34,784", " free on ", f"{index} is unchanged", "free space, run again"
    )
    assert (index / "CURRENT").read_text() == current
    assert run(["verify", "--index", str(index)], FakeEmbedder()).exit_code == 0


def test_disk_room_names_the_mount_and_the_free_space(tmp_path: Path) -> None:
    from semsearch.core.writefail import disk_room, human_bytes

    room = disk_room(tmp_path / "not" / "made", 40_000)  # a first build's folder is gone by then
    assert " free on /" in room and room.endswith(", 40.0 kB needed")
    assert [human_bytes(n) for n in (0, 999, 38_784, 1_200_000, 3 * 10**12)] == [
        "0 bytes",
        "999 bytes",
        "38.8 kB",
        "1.2 MB",
        "3.0 TB",
    ]


# ---------------------------------------------------------------- saved queries shown on a terminal


def test_a_saved_query_never_carries_controls_to_the_terminal(own_index: tuple[Path, Path]) -> None:
    index, _ = own_index
    hostile = "federated\rlearning \x1b[2J\x1b]8;;http://x\x07privacy\u202e\x9b31m"
    added = run(["watch", "add", "fl", hostile, "--index", str(index)])
    assert added.exit_code == 0, added.output
    stored = json.loads((index / "watches.json").read_text(encoding="utf-8"))["fl"]["query"]
    assert stored == "federated learning privacy"
    assert added.output == "saved query fl: federated learning privacy\n"
    # A file written by hand (or by an older version) is shown clean too; --json stays faithful to it.
    (index / "watches.json").write_text(json.dumps({"old": {"query": "a\rb\x1b[31mc\x85"}}), encoding="utf-8")
    listed = run(["watch", "list", "--index", str(index)])
    assert listed.exit_code == 0 and listed.output == "old: a bc\n"
    as_json = run(["watch", "list", "--json", "--index", str(index)])
    assert "\r" not in as_json.output and "\x1b" not in as_json.output and "\x85" not in as_json.output
    assert json.loads(as_json.output)[0]["query"] == "a\rb\x1b[31mc\x85"


# ---------------------------------------------------------------- the SMTP password file


def secret_file(tmp_path: Path, mode: int) -> Path:
    path = tmp_path / "smtp-password"
    path.write_text("hunter2\n", encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_password_file_others_can_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = secret_file(tmp_path, mode)
    options = {"host": "smtp.example.org", "user": "me", "password_file": str(path)}
    with pytest.raises(MailError) as caught:
        resolve_settings(options, env={"XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert str(caught.value) == (
        f"permissions {mode:04o} for the SMTP password file {path} are too open: it must be readable only by you "
        f"(chmod 600 {path})"
    )


def test_a_private_password_file_is_read(tmp_path: Path) -> None:
    path = secret_file(tmp_path, 0o600)
    options = {"host": "smtp.example.org", "user": "me", "password_file": str(path)}
    settings = resolve_settings(options, env={"XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert settings.password == "hunter2"


def test_digest_refuses_an_open_password_file_before_any_work(own_index: tuple[Path, Path], tmp_path: Path) -> None:
    index, _ = own_index
    path = secret_file(tmp_path, 0o644)
    args = ["digest", "--index", str(index), "--mail-to", "me@example.org", "--smtp-host", "smtp.example.org"]
    result = CliRunner(env={"XDG_CONFIG_HOME": str(tmp_path / "none"), "SEMSEARCH_SMTP_PASSWORD": ""}).invoke(
        cli, [*args, "--smtp-user", "me", "--smtp-password-file", str(path)]
    )
    one_line_error(result, "permissions 0644", "too open", f"chmod 600 {path}")
    assert not (index / "bookmarks.json").exists()
