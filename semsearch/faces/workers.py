"""``semsearch serve --workers N``: N server processes on one port, each following CURRENT on its own.

One process answers on one core (the GIL); N processes answer on N. The parent reserves the port (bound, not
listening, with SO_REUSEPORT) and starts N worker processes (spawned, not forked: the encoder's and FAISS's
threads do not survive a fork). Each worker binds its own listening socket to that port with SO_REUSEPORT, so
the kernel spreads new connections across them, builds the same app as a single process (``create_app``: the
Host/Origin screen, the same uvicorn settings) and opens the index itself. The versions' files are memory-mapped,
so the workers share one copy in the page cache; each follows CURRENT per request, as one process does.
A worker that dies is started again; SIGINT or SIGTERM stops them all (each finishes its requests).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semsearch.core.errors import InputError, SemsearchError

MAX_WORKERS = 64
START_TIMEOUT_S = 300.0  # a worker opens the index and loads the query encoder before it says it is ready
RESTART_PAUSE_S = 1.0  # a worker that keeps dying is not restarted in a tight loop


@dataclass(frozen=True)
class WorkerSpec:
    """What every worker needs to build its app: sent to the spawned process."""

    index_dir: str
    host: str
    port: int
    embedder: Any
    access_log: bool
    allow_tags: bool
    allow_hosts: tuple[str, ...]


def check_workers(workers: int) -> None:
    """Raise a one-line error unless ``workers`` is 1..MAX_WORKERS and the platform can share a port."""
    if not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"--workers must be 1..{MAX_WORKERS}, got {workers}")
    if workers > 1 and not hasattr(socket, "SO_REUSEPORT"):
        raise InputError("--workers above 1 needs SO_REUSEPORT (Linux, macOS, BSD); this platform has none")


def _socket(host: str, port: int, *, listen: bool) -> socket.socket:
    """A TCP socket bound to (host, port) with SO_REUSEPORT; listening when ``listen``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        if listen:
            sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def listening_socket(host: str, port: int) -> socket.socket:
    """A worker's own listening socket on the shared port (SO_REUSEPORT: the kernel spreads connections)."""
    return _socket(host, port, listen=True)


def run_workers(
    index_dir: str | Path,
    workers: int,
    target: Callable[[WorkerSpec, Any], None],
    *,
    host: str,
    port: int,
    embedder: Any = None,
    access_log: bool = False,
    ready: Any = None,
    allow_tags: bool = False,
    allow_hosts: Sequence[str] = (),
) -> None:
    """Serve with ``workers`` processes on one port until SIGINT or SIGTERM; ``ready(url)`` once all listen.

    ``target(spec, queue)`` runs in each spawned worker (``serve.serve_worker``): it puts ``(pid, problem)`` on
    the queue once it listens (``problem`` empty) or could not start, then serves until SIGTERM.
    """
    from semsearch.store.layout import current_version

    check_workers(workers)
    current_version(Path(index_dir))  # no index: the same one-line error as one process, before any worker starts
    reserved = _socket(host, port, listen=False)  # holds the port (port 0: picks it) but takes no connections
    bound = reserved.getsockname()[1]
    spec = WorkerSpec(str(index_dir), host, bound, embedder, access_log, allow_tags, tuple(allow_hosts))
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    procs: list[Any] = []
    stopping = False

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}

    def start() -> Any:
        proc = context.Process(target=target, args=(spec, queue), name="semsearch-serve-worker", daemon=True)
        proc.start()
        return proc

    try:
        procs = [start() for _ in range(workers)]
        _await_ready(queue, procs, lambda: stopping)
        if ready is not None and not stopping:
            shown = f"[{host}]" if ":" in host else host
            ready(f"http://{shown}:{bound}/")
        while not stopping:
            time.sleep(0.2)
            for i, proc in enumerate(procs):
                if not proc.is_alive() and not stopping:
                    time.sleep(RESTART_PAUSE_S)
                    procs[i] = start()
            with contextlib.suppress(Exception):
                while True:
                    queue.get_nowait()  # restarted workers' ready notes
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()  # SIGTERM: uvicorn finishes the requests it holds
        for proc in procs:
            proc.join(timeout=15)
            if proc.is_alive():
                proc.kill()
                proc.join()
        reserved.close()
        for s, handler in previous.items():
            signal.signal(s, handler)


def _await_ready(queue: Any, procs: list[Any], stopping: Any) -> None:
    """Wait until every worker listens; a worker's error becomes this one-line error."""
    import queue as queue_module

    waiting = len(procs)
    deadline = time.monotonic() + START_TIMEOUT_S
    while waiting and not stopping():
        try:
            _pid, problem = queue.get(timeout=0.5)
        except queue_module.Empty:
            if any(not p.is_alive() for p in procs):
                raise SemsearchError("a server worker stopped while starting (see the log above)") from None
            if time.monotonic() > deadline:
                raise SemsearchError(f"the server workers did not start within {START_TIMEOUT_S:.0f} s") from None
            continue
        if problem:
            raise SemsearchError(problem)
        waiting -= 1
