"""Hostile load on `semsearch serve` (or `mcp --http`), loopback only: do answers stay fast and memory flat?

Builds a six-paper index with the stand-in encoder (``semsearch.encode.hashed.HashedWords``), starts the server as
a process on a free 127.0.0.1 port (``--workers N`` as ``serve --workers N``, ``--allow-tags`` on, so a POST body
is read),
and runs four phases, each bounded in time, while a probe opens a fresh connection to /api/health every 0.1 s:

- ``baseline``: nothing else (the figures the others are compared with, in the same run);
- ``slowloris``: ``--slow`` connections sending a request head one header line a second, never finishing,
  each reconnecting when the server closes it (``--seconds``, longer than the 10 s head deadline);
- ``unfinished_heads``: ``--heads`` connections each sending ``--head-bytes`` of headers at once, never
  finishing (the issue's 300 x 3.7 MB);
- ``chunked_body``: one POST of ``--body-mib`` MiB sent chunked (no Content-Length), until the server answers.

``--mcp`` loads `semsearch mcp --http` the same way: the probe is a bare GET /mcp (any non-5xx answer counts),
the chunked body goes to /mcp (the SDK's own 413).

For each phase: the probe's worst and median latency and its failures, the server's RSS growth (all its
processes, peak over the phase and after it, against the baseline) and its open file descriptors (peak).
Prints one JSON line; progress goes to stderr. Everything stops by itself within ``--deadline`` seconds.

    python -m benchmarks.load_serve [--slow 1000] [--heads 300] [--head-bytes 3700000] [--body-mib 1024]
        [--seconds 15] [--workers 1] [--mcp]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, HashedWords, arguments, build, emit, log

LOOPBACK = "127.0.0.1"  # the only address this script talks to
PROBE_EVERY_S = 0.1
PROBE_TIMEOUT_S = 5.0
PHASE_LIMIT_S = 180.0  # an attack that has not finished by then is killed


# ---------------------------------------------------------------- the server (a child process of this script)


def six_papers(folder: Path) -> Path:
    """A six-paper index in ``folder`` with the stand-in encoder."""
    src = folder / "papers.jsonl"
    rows = [
        {"id": f"p{i}", "title": f"Paper {i}", "abstract": f"Abstract {i} on federated privacy and graphs {i}."}
        for i in range(6)
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    index = folder / "index"
    build([src], index, HashedWords())
    return index


def serve(index: str, url_file: str, workers: int, mcp: bool) -> None:
    def ready(url: str) -> None:
        Path(url_file).write_text(url, encoding="utf-8")

    if mcp:
        from semsearch.faces import mcp_server

        mcp_server.run_server(index, http=True, port=0, embedder=HashedWords(), ready=ready)
        return
    from semsearch.faces.serve import run_server

    run_server(index, host=LOOPBACK, port=0, embedder=HashedWords(), ready=ready, allow_tags=True, workers=workers)


def tree(pid: int) -> list[int]:
    """The process and its descendants (the workers of ``--workers N``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{p}/task"):
                with contextlib.suppress(OSError):
                    todo += [int(c) for c in Path(f"/proc/{p}/task/{task}/children").read_text().split()]
    return out


def rss_mb(pid: int) -> float:
    total = 0
    for p in tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
    return total / 1024


def fds(pid: int) -> int:
    count = 0
    for p in tree(pid):
        with contextlib.suppress(OSError):
            count += len(os.listdir(f"/proc/{p}/fd"))
    return count


# ---------------------------------------------------------------- watching


class Watch:
    """Probes /api/health and samples the server's RSS and fds on a thread, until stopped."""

    def __init__(self, port: int, pid: int, path: str) -> None:
        self.port, self.pid, self.path = port, pid, path
        self.latencies: list[float] = []
        self.failures = 0
        self.peak_rss = 0.0
        self.peak_fds = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def probe(self) -> float | None:
        start = time.perf_counter()
        try:
            with socket.create_connection((LOOPBACK, self.port), timeout=PROBE_TIMEOUT_S) as conn:
                conn.sendall(f"GET {self.path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
                data = b""
                while chunk := conn.recv(65536):
                    data += chunk
        except OSError:
            return None
        # /api/health answers 200; MCP's endpoint answers a bare GET with a 4xx, which is an answer all the same.
        return time.perf_counter() - start if data.startswith(b"HTTP/1.1 ") and b" 5" not in data[8:10] else None

    def run(self) -> None:
        while not self.stop.is_set():
            took = self.probe()
            if took is None:
                self.failures += 1
            else:
                self.latencies.append(took)
            self.peak_rss = max(self.peak_rss, rss_mb(self.pid))
            self.peak_fds = max(self.peak_fds, fds(self.pid))
            self.stop.wait(PROBE_EVERY_S)

    def __enter__(self) -> Watch:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(PROBE_TIMEOUT_S + 1)

    def figures(self, base_rss: float) -> dict[str, Any]:
        lat = sorted(self.latencies) or [float("nan")]
        return {
            "health_max_ms": round(lat[-1] * 1000, 1),
            "health_p50_ms": round(statistics.median(lat) * 1000, 1),
            "health_probes": len(self.latencies),
            "health_failures": self.failures,
            "rss_growth_peak_mb": round(self.peak_rss - base_rss, 1),
            "fds_peak": self.peak_fds,
        }


# ---------------------------------------------------------------- attacks (loopback only, bounded)


async def slowloris(port: int, count: int, seconds: float) -> dict[str, int]:
    """``count`` connections trickling a head one line a second for ``seconds``, reconnecting when closed."""
    end = time.monotonic() + seconds
    closed = [0]

    async def one(i: int) -> None:
        await asyncio.sleep(i / count)  # spread the connects over a second
        while time.monotonic() < end:
            try:
                reader, writer = await asyncio.open_connection(LOOPBACK, port)
            except OSError:
                await asyncio.sleep(0.5)
                continue
            try:
                writer.write(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n")
                while time.monotonic() < end:
                    await asyncio.sleep(1.0)
                    if reader.at_eof():
                        break
                    writer.write(b"X-Slow: 1\r\n")
                    await writer.drain()
            except OSError:
                pass
            finally:
                if time.monotonic() < end:
                    closed[0] += 1
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()

    await asyncio.gather(*(one(i) for i in range(count)))
    return {"connections": count, "closed_by_server": closed[0]}


async def unfinished_heads(port: int, count: int, head_bytes: int, seconds: float) -> dict[str, int]:
    """``count`` connections each sending ``head_bytes`` of headers at once, never the blank line."""
    closed, sent = [0], [0]
    line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
    piece = line * 64  # 64 KB a write, drained: this side holds little
    end = time.monotonic() + seconds

    async def one() -> None:
        try:
            reader, writer = await asyncio.open_connection(LOOPBACK, port)
        except OSError:
            return
        try:
            writer.write(b"GET /api/health HTTP/1.1\r\nHost: localhost\r\n")
            done = 0
            while done < head_bytes and not reader.at_eof() and time.monotonic() < end:
                writer.write(piece)
                await asyncio.wait_for(writer.drain(), max(0.1, end - time.monotonic()))
                done += len(piece)
                sent[0] += len(piece)
            await asyncio.wait_for(reader.read(64), max(0.1, end - time.monotonic()))
            closed[0] += 1  # the server answered (400, 503) and closed
        except (OSError, asyncio.TimeoutError) as exc:
            closed[0] += isinstance(exc, OSError)  # reset by the server
        finally:
            writer.close()

    await asyncio.gather(*(one() for _ in range(count)))
    return {"connections": count, "head_bytes": head_bytes, "sent_mb": round(sent[0] / 1e6, 1), "closed": closed[0]}


def chunked_body(port: int, path: str, mib: int, seconds: float) -> dict[str, Any]:
    """One chunked POST of ``mib`` MiB, sent until the server answers (or ``seconds`` pass)."""
    import select

    chunk = b" " * 65536
    sent, status = 0, 0
    end = time.monotonic() + seconds
    with socket.create_connection((LOOPBACK, port), timeout=seconds) as conn:
        conn.sendall(
            f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n".encode()
            + b"Accept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        with contextlib.suppress(OSError):
            while sent < mib * 2**20 and time.monotonic() < end and not select.select([conn], [], [], 0)[0]:
                conn.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
        with contextlib.suppress(OSError):
            answer = conn.recv(200)
            status = int(answer.split(b" ")[1]) if answer.startswith(b"HTTP/1.1 ") else 0
    return {"body_mib": mib, "sent_before_answer_mib": round(sent / 2**20, 1), "status": status}


# ---------------------------------------------------------------- the run


def main() -> None:
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--slow", type=int, default=1000)
    parser.add_argument("--heads", type=int, default=300)
    parser.add_argument("--head-bytes", type=int, default=3_700_000)
    parser.add_argument("--body-mib", type=int, default=1024)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--mcp", action="store_true", help="load `semsearch mcp --http` instead (probe: GET /mcp)")
    parser.add_argument("--fd-limit", type=int, default=0, help="the server's hard open-file limit (0: as inherited)")
    parser.add_argument("--deadline", type=float, default=300.0, help="stop everything after this many seconds")
    parser.add_argument("--serve", nargs=2, metavar=("INDEX", "URL_FILE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        if args.fd_limit:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (args.fd_limit, args.fd_limit))
        serve(args.serve[0], args.serve[1], args.workers, args.mcp)
        return
    limits = (args.slow, args.heads, args.body_mib)
    if not (0 <= args.slow <= 5000 and 0 <= args.heads <= 1000 and 0 <= args.body_mib <= 4096):
        raise SystemExit(f"load_serve: bounds are --slow <= 5000, --heads <= 1000, --body-mib <= 4096, got {limits}")
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("load_serve: --deadline passed")))
    signal.alarm(int(args.deadline))
    with tempfile.TemporaryDirectory(prefix="load-serve-") as tmp:
        index = six_papers(Path(tmp))
        url_file = Path(tmp) / "url"
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        cmd = [sys.executable, "-m", "benchmarks.load_serve", "--serve", str(index), str(url_file)]
        cmd += ["--workers", str(args.workers)]
        cmd += (["--mcp"] if args.mcp else []) + ["--fd-limit", str(args.fd_limit)]
        # The server's own log (a warning per refused head) would drown the progress lines.
        server = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL, cwd=REPO)
        try:
            while not url_file.exists():
                if server.poll() is not None:
                    raise SystemExit("load_serve: the server did not start")
                time.sleep(0.1)
            port = int(url_file.read_text().split("/")[2].rsplit(":", 1)[1])
            emit(run_phases(args, port, server.pid), out=args.out)
        finally:
            server.terminate()
            try:
                server.wait(20)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()


def in_child(attack: Any) -> dict[str, Any]:
    """Run an attack in a forked process: its event loop must not hold this process's GIL from the probe."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    results = context.Queue()
    proc = context.Process(target=lambda: results.put(attack()), daemon=True)
    proc.start()
    try:
        detail: dict[str, Any] = results.get(timeout=PHASE_LIMIT_S)
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
    return detail


def run_phases(args: argparse.Namespace, port: int, pid: int) -> dict[str, Any]:
    time.sleep(1.0)
    base_rss, base_fds = rss_mb(pid), fds(pid)
    probe, post = ("/mcp", "/mcp") if args.mcp else ("/api/health", "/api/tags/liked")
    out: dict[str, Any] = {
        "server": "mcp --http" if args.mcp else "serve",
        "workers": 1 if args.mcp else args.workers,
        "baseline_rss_mb": round(base_rss, 1),
        "baseline_fds": base_fds,
        "fd_limit": args.fd_limit or None,
    }
    log(f"server on {LOOPBACK}:{port}, RSS {base_rss:.0f} MB, {base_fds} fds")
    phases: list[tuple[str, Any]] = [
        ("baseline", lambda: time.sleep(2.0) or {}),
        ("slowloris", lambda: asyncio.run(slowloris(port, args.slow, args.seconds))),
        ("unfinished_heads", lambda: asyncio.run(unfinished_heads(port, args.heads, args.head_bytes, args.seconds))),
        ("chunked_body", lambda: chunked_body(port, post, args.body_mib, args.seconds * 4)),
    ]
    skipped = {"slowloris": not args.slow, "unfinished_heads": not args.heads, "chunked_body": not args.body_mib}
    for name, attack in phases:
        if skipped.get(name):
            continue
        log(f"{name} ...")
        with Watch(port, pid, probe) as watch:
            detail = in_child(attack)
            time.sleep(1.0)
        figures = {**detail, **watch.figures(base_rss), "rss_growth_after_mb": round(rss_mb(pid) - base_rss, 1)}
        log(f"  {figures}")
        out[name] = figures
    return out


if __name__ == "__main__":
    main()
