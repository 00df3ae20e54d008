"""Helpers of the fault tests: writers in their own processes stopped at barriers, and what must survive."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from semsearch.core.faults import ENV

SERVER = Path(__file__).resolve().parent / "fork_server.py"
WAIT_S = 60.0


class ForkServer:
    """A warm process that forks ``semsearch`` commands (``fork_server.py``): a start costs milliseconds."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env.pop(ENV, None)
        self.proc = subprocess.Popen(
            [sys.executable, str(SERVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def start(self, args: list[str], env: dict[str, str], out: Path) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"args": args, "env": env, "out": str(out)}) + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@dataclass
class Writer:
    """A ``semsearch`` command in its own process, stopped at ``point`` (when given) until released."""

    server: ForkServer
    args: list[str]
    point: str | None
    folder: Path
    pid: int = field(init=False)

    def __post_init__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        env = {ENV: f"{self.point}:{self.folder}"} if self.point is not None else {}
        self.pid = self.server.start(self.args, env, self.folder / "run")

    def _output(self) -> str:
        run = self.folder / "run"
        return "".join((run / n).read_text() for n in ("stdout", "stderr") if (run / n).exists())

    def reached(self) -> int:
        """Wait until the writer stops at its point; its pid. Fails if it ends first."""
        mark = self.folder / f"{self.point}.reached"
        deadline = time.monotonic() + WAIT_S
        while not mark.exists():
            if not _alive(self.pid):
                raise AssertionError(f"{self.args} ended before {self.point}: {self._output()}")
            assert time.monotonic() < deadline, f"{self.args} never reached {self.point}"
            time.sleep(0.002)
        return int(mark.read_text(encoding="utf-8"))

    def release(self) -> None:
        (self.folder / f"{self.point}.go").write_text("go", encoding="utf-8")

    def kill(self) -> None:
        os.kill(self.pid, signal.SIGKILL)
        self.finish()

    def finish(self) -> tuple[int | None, str]:
        """Wait for the end: (exit status, None when killed; its output)."""
        deadline = time.monotonic() + WAIT_S
        while _alive(self.pid):
            assert time.monotonic() < deadline, f"{self.args} did not end"
            time.sleep(0.002)
        status = self.folder / "run" / "status"
        return (int(status.read_text()) if status.exists() else None), self._output()


def lock_held(lock: Path) -> bool:
    """Whether some writer holds this lock file (flock) now."""
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def versions_snapshot(index: Path) -> dict[str, dict[str, str]]:
    """Every published version folder with the sha256 of each of its files."""
    out: dict[str, dict[str, str]] = {}
    for version in sorted(index.glob("v-*")):
        out[version.name] = {
            p.relative_to(version).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(version.rglob("*"))
            if p.is_file()
        }
    return out


def assert_versions_intact(index: Path, before: dict[str, dict[str, str]]) -> None:
    """Every version published before is still there, byte for byte."""
    now = versions_snapshot(index)
    for name, files in before.items():
        assert name in now, f"{name} was deleted"
        assert now[name] == files, f"{name} changed"
