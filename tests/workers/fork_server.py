"""Start ``semsearch`` commands by forking this warm process (imports done once), for barrier and kill tests.

Reads one JSON request a line on stdin, ``{"args": [...], "env": {...}, "out": DIR}``; forks a child that runs
the command with the fake encoder, writes its stdout, stderr and exit status into ``DIR`` and exits; answers
the child's pid on stdout. Children are reaped by the kernel (SIGCHLD ignored). Nothing ran in this process
before the fork but imports, so no thread pool or open database is inherited.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout: its semsearch and tests

import semsearch.curate.tags  # noqa: E402, F401
import semsearch.query.search  # noqa: E402, F401
import semsearch.write.build  # noqa: E402, F401
import semsearch.write.remove  # noqa: E402, F401
from semsearch.faces.cli import cli  # noqa: E402
from tests.helpers import FakeEmbedder  # noqa: E402


def child(args: list[str], env: dict[str, str], out: Path) -> None:
    os.environ.update(env)
    code = 1
    with open(out / "stdout", "w") as so, open(out / "stderr", "w") as se:
        os.dup2(so.fileno(), 1)
        os.dup2(se.fileno(), 2)
        sys.stdout, sys.stderr = so, se
        try:
            cli.main(args, obj={"embedder": FakeEmbedder()}, prog_name="semsearch", standalone_mode=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
    (out / "status").write_text(str(code))
    os._exit(code)


def main() -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    for line in sys.stdin:
        request = json.loads(line)
        out = Path(request["out"])
        out.mkdir(parents=True, exist_ok=True)
        pid = os.fork()
        if pid == 0:
            child(request["args"], request["env"], out)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
