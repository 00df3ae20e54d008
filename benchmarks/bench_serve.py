"""Load-test `semsearch serve` on loopback: throughput, latency, errors, and a rebuild published mid-run.

For each index (the seed index, and NeurIPS 2025 + seeds unless --skip-neurips) it starts `semsearch serve` as a
process on a free loopback port and fires --requests requests from --concurrency threads, each on a keep-alive
connection: /api/search with several queries, modes and k (some diverse), and /api/related for known papers.
Then the same load again while `semsearch index` publishes a new version with one seed file left out: every
request must still succeed, and the server must answer from the new version before the run ends. The indexes
are built under --workdir when missing (NeurIPS 2025: ~3-4 min of encoding on 2 cores) and reset to their
full sources before each run. Prints one JSON line; progress goes to stderr.

With ``--workers 1,2`` each index is served once per worker count (``semsearch serve --workers N``), in the same
run, ``--repeat`` times alternating: the line gives requests/s per count (each run, and the range), the ratio of
the largest count to 1 worker, errors, and whether every worker answered from the version published mid-run
(asked on new connections to /api/health, which names the worker's process id). The steady load comes from
wrk (C, ``apt-get install wrk``) when it is on PATH, for --seconds per run: it takes ~0.1 ms of CPU per request,
where Python clients take several times that from the cores the workers share. Without wrk (or with
--client asyncio) it is one asyncio loop on raw keep-alive sockets, for --requests. The run with the rebuild
always uses that loop, since it reads which version answered each request.

    python -m benchmarks.bench_serve [--requests 10000] [--concurrency 32] [--skip-neurips] [--workdir indexes]
        [--workers 1,2] [--repeat 2] [--client wrk|asyncio] [--seconds 20] [--split]

``--split`` also serves each index from one process that times, in thread CPU, the sections that run mostly
outside the GIL (the query encoder, SQLite): the rest of a request's CPU holds the GIL at most, so one process
reaches at least 1/rest requests/s, and 2 cores at most 2/(all CPU per request, client's included). Their quotient
bounds what a second worker can add on 2 idle cores.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.harness import NEURIPS, REPO, SEEDS, arguments, emit, log

ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}
QUERIES = [
    "federated privacy",
    "diffusion models for image generation",
    "graph neural networks oversmoothing",
    "reinforcement learning from human feedback",
    "efficient attention for long sequences",
    "quantization of large language models",
    "3d scene reconstruction",
    "watermarking ai-generated images",
    "bandit algorithms with regret bounds",
    "time series forecasting",
    "contrastive self-supervised learning",
    "robustness to adversarial examples",
]
MODES = ("hybrid", "dense", "lexical")


def semsearch_index(index: Path, sources: list[str]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "semsearch", "index", *sources, "--index", str(index), "--json", "-q"],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=REPO,
    )
    if proc.returncode != 0:
        sys.exit(f"semsearch index failed: {proc.stderr.strip()}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`semsearch serve` as a child process, ready once /api/health answers."""

    def __init__(self, index: Path, workers: int = 1, split_file: Path | None = None) -> None:
        self.port = free_port()
        self.workers = workers
        command = ["-m", "semsearch", "serve", "--index", str(index), "--port", str(self.port)]
        command += ["--workers", str(workers)]
        if split_file is not None:  # one process, timing its sections (SPLIT_SERVER)
            command = ["-c", SPLIT_SERVER, str(index), str(self.port), str(split_file)]
        self.proc = subprocess.Popen(
            [sys.executable, *command],
            env=ENV,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                sys.exit(f"semsearch serve exited: {self.proc.stderr.read() if self.proc.stderr else ''}")
            try:
                status, _ = self.get("/api/health")
                if status == 200:
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.stop()
                sys.exit("semsearch serve did not answer /api/health within 120 s")
            time.sleep(0.2)

    def get(self, path: str) -> tuple[int, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def server_cpu_s(server: Server) -> float:
    """CPU seconds (user + system) the server and its workers have used so far (Linux /proc)."""
    pid = server.proc.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    total = 0
    for p in [pid, *map(int, children)]:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def request_paths(server: Server, n: int, dropped: Path) -> list[str]:
    """n request paths: 80% searches (queries × modes × k, one in ten diverse), 20% related.

    Related asks only for papers that the rebuild keeps: one that only ``dropped`` provides is rightly a 404 after it.
    """
    ids: list[str] = []
    for q in QUERIES[:6]:
        _, data = server.get("/api/search?" + urllib.parse.urlencode({"q": q, "k": 4}))
        ids += [h["id"] for h in data["hits"] if any(Path(s["file"]).name != dropped.name for s in h["sources"])]
    paths = []
    for i in range(n):
        if i % 5 == 4:
            paths.append(f"/api/related/{ids[i % len(ids)]}?k=10")
            continue
        params: dict[str, Any] = {"q": QUERIES[i % len(QUERIES)], "mode": MODES[i % 3], "k": (10, 20)[i % 2]}
        if i % 10 == 3:
            params["diverse"] = "true"
        paths.append("/api/search?" + urllib.parse.urlencode(params))
    return paths


VERSION = re.compile(rb'"version":"([^"]*)"')


def load(server: Server, paths: list[str], concurrency: int, until: threading.Event | None = None) -> dict[str, Any]:
    """Send the paths from ``concurrency`` keep-alive connections (cycling past the end until ``until`` is set).

    One asyncio loop on raw sockets: a request is one prebuilt write, a response is read by its Content-Length,
    and only its "version" is looked at, so the client costs the shared cores little.
    """
    requests = [f"GET {p} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode() for p in paths]
    cursor = [0]
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    versions: Counter[str] = Counter()

    def take() -> bytes | None:
        i = cursor[0]
        if i >= len(requests) and (until is None or until.is_set()):
            return None
        cursor[0] += 1
        return requests[i % len(requests)]

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> str:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        status = head[9:12].decode()
        length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
        body = await reader.readexactly(length)
        if status == "200" and (match := VERSION.search(body[:400] if b'"query"' in body[:20] else body)):
            versions[match.group(1).decode()] += 1
        return status

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        try:
            while (request := take()) is not None:
                started = time.perf_counter()
                try:
                    status = await one(reader, writer, request)
                except (OSError, asyncio.IncompleteReadError, ValueError, AttributeError) as exc:
                    status = type(exc).__name__
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                latencies.append(time.perf_counter() - started)
                statuses[status] += 1
        finally:
            writer.close()

    async def run() -> None:
        await asyncio.gather(*(connection() for _ in range(concurrency)))

    started = time.perf_counter()
    asyncio.run(run())
    seconds = time.perf_counter() - started
    ordered = sorted(latencies)
    total = sum(statuses.values())
    return {
        "requests": total,
        "errors": total - statuses.get("200", 0),
        "statuses": dict(statuses),
        "seconds": round(seconds, 2),
        "throughput_rps": round(total / seconds, 1),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] * 1000, 1),
        "versions": dict(versions),
    }


WRK_SCRIPT = """
local paths = {}
for line in io.lines(os.getenv("BENCH_PATHS")) do paths[#paths + 1] = line end
local i = 0
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('{"requests":%d,"seconds":%.3f,"socket_errors":%d,"non_2xx":%d,"p50_ms":%.2f,'
    .. '"p99_ms":%.2f}\\n', summary.requests, summary.duration / 1e6, e.connect + e.read + e.write + e.timeout,
    e.status, latency:percentile(50) / 1000, latency:percentile(99) / 1000))
end
"""


def wrk_load(server: Server, paths: list[str], concurrency: int, seconds: int) -> dict[str, Any]:
    """Send the paths (cycling) from ``concurrency`` keep-alive connections of one wrk thread for ``seconds``."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "paths.txt").write_text("\n".join(paths) + "\n", encoding="utf-8")
        (Path(tmp) / "paths.lua").write_text(WRK_SCRIPT, encoding="utf-8")
        command = ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "--latency", "-s", str(Path(tmp) / "paths.lua")]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = subprocess.run(
            [*command, f"http://127.0.0.1:{server.port}"],
            capture_output=True,
            text=True,
            env={**os.environ, "BENCH_PATHS": str(Path(tmp) / "paths.txt")},
        )
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"wrk failed: {proc.stderr.strip() or proc.stdout.strip()}")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    errors = summary["socket_errors"] + summary["non_2xx"]
    return {
        "requests": summary["requests"],
        "errors": errors,
        "statuses": {"200": summary["requests"] - summary["non_2xx"], "non_2xx": summary["non_2xx"]},
        "seconds": round(summary["seconds"], 2),
        "throughput_rps": round(summary["requests"] / summary["seconds"], 1),
        "p50_ms": summary["p50_ms"],
        "p99_ms": summary["p99_ms"],
        "client_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
    }


# One server process (run_server, as `semsearch serve`) that adds up the thread CPU spent in the sections that run
# mostly outside the GIL (the query encoder: tokenizer and ONNX Runtime; SQLite) and writes the sums to a file.
SPLIT_SERVER = """
import json, sys, threading, time
from semsearch.encode.onnx_backend import OnnxEmbedder
from semsearch.store.documents import DocumentStore
from semsearch.faces.serve import run_server

sums = {"encode_s": 0.0, "sqlite_s": 0.0}
lock = threading.Lock()

def timed(key, fn):
    def wrapper(*args, **kwargs):
        started = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            with lock:
                sums[key] += time.thread_time() - started
    return wrapper

OnnxEmbedder.encode = timed("encode_s", OnnxEmbedder.encode)
DocumentStore._query = timed("sqlite_s", DocumentStore._query)

def report():
    while True:
        with lock:
            line = json.dumps({**sums, "process_cpu_s": time.process_time()})
        with open(sys.argv[3] + ".tmp", "w") as fh:
            fh.write(line)
        import os
        os.replace(sys.argv[3] + ".tmp", sys.argv[3])
        time.sleep(0.2)

threading.Thread(target=report, daemon=True).start()
run_server(sys.argv[1], host="127.0.0.1", port=int(sys.argv[2]))
"""


def split_cpu(name: str, index: Path, concurrency: int, seconds: int) -> dict[str, Any]:
    """One worker under wrk: its CPU per request, the part outside the GIL (encoder, SQLite) and the rest, which
    holds the GIL at most; so what one process can reach (1 / the rest) and what two cores can (2 / all CPU)."""
    with tempfile.TemporaryDirectory() as tmp:
        sums = Path(tmp) / "sums.json"
        server = Server(index, 1, split_file=sums)
        try:
            paths = request_paths(server, 2000, sorted(SEEDS.glob("*.txt"))[0])
            load(server, paths[: 20 * concurrency], concurrency)
            time.sleep(0.5)
            before = json.loads(sums.read_text())
            run = wrk_load(server, paths, concurrency, seconds)
            time.sleep(0.5)
            after = json.loads(sums.read_text())
        finally:
            server.stop()
    n = run["requests"]
    per = {key: (after[key] - before[key]) / n * 1000 for key in ("process_cpu_s", "encode_s", "sqlite_s")}
    rest = per["process_cpu_s"] - per["encode_s"] - per["sqlite_s"]
    client = run["client_cpu_s"] / n * 1000
    out = {
        "requests": n,
        "throughput_rps": run["throughput_rps"],
        "cpu_ms_per_request": round(per["process_cpu_s"], 2),
        "encoder_ms_per_request": round(per["encode_s"], 2),
        "sqlite_ms_per_request": round(per["sqlite_s"], 2),
        "gil_held_ms_per_request_at_most": round(rest, 2),
        "client_cpu_ms_per_request": round(client, 3),
        "one_process_rps_at_least": round(1000 / rest, 1),
        "two_cores_rps_at_most": round(2000 / (per["process_cpu_s"] + client), 1),
    }
    # What --workers 2 can give over one process on 2 cores, whatever else the machine runs: the cores' bound
    # over one process's GIL bound (or the cores' bound, when one process alone would fill them).
    out["ratio_on_two_idle_cores_at_most"] = round(
        out["two_cores_rps_at_most"] / min(out["one_process_rps_at_least"], out["two_cores_rps_at_most"]), 2
    )
    log(f"[{name}] split: {json.dumps(out)}")
    return out


def versions_by_worker(server: Server, want: str, tries: int = 400) -> dict[str, str]:
    """The version each worker answers /api/health with, asked on new connections (the kernel spreads them)
    until every one of ``server.workers`` answered with ``want`` (or ``tries`` ran out)."""
    seen: dict[str, str] = {}
    for _ in range(tries):
        status, body = server.get("/api/health")
        if status == 200:
            seen[str(body.get("worker"))] = body["version"]
        if len(seen) >= server.workers and all(v == want for v in seen.values()):
            break
    return seen


def bench_index(
    name: str,
    index: Path,
    sources: list[str],
    requests: int,
    concurrency: int,
    workers: int = 1,
    client: str = "asyncio",
    seconds: int = 20,
) -> dict[str, Any]:
    """Steady load, then the same load with a rebuild (one seed file left out) published mid-run."""
    log(f"[{name}] resetting {index} to its full sources")
    summary = semsearch_index(index, sources)
    log(f"[{name}] {summary['documents']} documents; starting semsearch serve --workers {workers}")
    server = Server(index, workers)
    try:
        dropped = sorted(SEEDS.glob("*.txt"))[0]
        paths = request_paths(server, requests, dropped)
        load(server, paths[: 20 * concurrency], concurrency)  # warm every worker's encoder before timing
        amount = f"{seconds:g} s (wrk)" if client == "wrk" else f"{requests} requests"
        log(f"[{name}] steady: {amount} at concurrency {concurrency}, {workers} worker(s)")
        cpu, client_cpu = server_cpu_s(server), time.process_time()
        if client == "wrk":
            steady = wrk_load(server, paths, concurrency, seconds)
            client_cpu = steady.pop("client_cpu_s")
        else:
            steady = load(server, paths, concurrency)
            client_cpu = time.process_time() - client_cpu
        cpu = server_cpu_s(server) - cpu
        # What the ratio can be on a shared machine: the cores the server got, and its CPU per request.
        steady["server_cores_used"] = round(cpu / steady["seconds"], 2)
        steady["server_cpu_ms_per_request"] = round(cpu / steady["requests"] * 1000, 2)
        steady["client_cpu_ms_per_request"] = round(client_cpu / steady["requests"] * 1000, 3)
        steady["load_average"] = round(os.getloadavg()[0], 2)
        log(f"[{name}] steady: {json.dumps(steady)}")

        fewer = [s for s in sources if s != str(SEEDS)] + [str(p) for p in sorted(SEEDS.glob("*.txt")) if p != dropped]
        published = threading.Event()
        rebuild: dict[str, Any] = {}

        def rebuild_midway() -> None:
            time.sleep(steady["seconds"] / 4)  # a quarter into the run
            started = time.perf_counter()
            result = semsearch_index(index, fewer)
            rebuild.update(
                version=result["version"], removed=result["removed"], seconds=round(time.perf_counter() - started, 2)
            )
            time.sleep(1.0)  # let requests run on the new version too
            published.set()

        log(f"[{name}] with a rebuild published mid-run (one seed file left out)")
        builder = threading.Thread(target=rebuild_midway)
        builder.start()
        during = load(server, paths, concurrency, until=published)
        builder.join()
        during["rebuild"] = rebuild
        during["served_new_version"] = rebuild.get("version") in during["versions"]
        by_worker = versions_by_worker(server, rebuild.get("version", ""))
        during["version_by_worker"] = by_worker
        during["picked_up_by_every_worker"] = len(by_worker) == workers and set(by_worker.values()) == {
            rebuild.get("version")
        }
        log(f"[{name}] rebuild: {json.dumps(during)}")
    finally:
        server.stop()
    return {"documents": summary["documents"], "workers": workers, "steady": steady, "with_rebuild": during}


def compare_workers(
    name: str, index: Path, sources: list[str], args: argparse.Namespace, counts: list[int]
) -> dict[str, Any]:
    """Each worker count ``args.repeat`` times, alternating; requests/s per count, the ratio, errors, pick-up."""
    runs: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    for _ in range(args.repeat):
        for n in counts:
            runs[n].append(
                bench_index(name, index, sources, args.requests, args.concurrency, n, args.client, args.seconds)
            )
    rps = {n: [r["steady"]["throughput_rps"] for r in runs[n]] for n in counts}
    out: dict[str, Any] = {
        "documents": runs[counts[0]][0]["documents"],
        "requests_per_s": {str(n): rps[n] for n in counts},
        "requests_per_s_range": {str(n): [min(rps[n]), max(rps[n])] for n in counts},
        "p50_ms": {str(n): [r["steady"]["p50_ms"] for r in runs[n]] for n in counts},
        "server_cores_used": {str(n): [r["steady"]["server_cores_used"] for r in runs[n]] for n in counts},
        "server_cpu_ms_per_request": {
            str(n): [r["steady"]["server_cpu_ms_per_request"] for r in runs[n]] for n in counts
        },
        "client_cpu_ms_per_request": {
            str(n): [r["steady"]["client_cpu_ms_per_request"] for r in runs[n]] for n in counts
        },
        "load_average": {str(n): [r["steady"]["load_average"] for r in runs[n]] for n in counts},
        "errors": sum(r["steady"]["errors"] + r["with_rebuild"]["errors"] for rs in runs.values() for r in rs),
        "picked_up_by_every_worker": all(
            r["with_rebuild"]["picked_up_by_every_worker"] for rs in runs.values() for r in rs
        ),
        "version_by_worker": {str(n): runs[n][-1]["with_rebuild"]["version_by_worker"] for n in counts},
    }
    if 1 in counts and len(counts) > 1:
        top = max(counts)
        out["ratio"] = round(statistics.median(rps[top]) / statistics.median(rps[1]), 2)
        # Each repeat's pair ran back to back: their ratios show how much the shared machine moved the figure.
        out["ratio_range"] = [
            round(min(a / b for a, b in zip(rps[top], rps[1], strict=True)), 2),
            round(max(a / b for a, b in zip(rps[top], rps[1], strict=True)), 2),
        ]
    return out


def main() -> None:
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000, help="Requests per run (default 10000).")
    parser.add_argument("--concurrency", type=int, default=32, help="Client connections (default 32).")
    parser.add_argument("--skip-neurips", action="store_true", help="Only the seed index.")
    parser.add_argument("--workdir", type=Path, default=REPO / "indexes", help="Where the bench indexes live.")
    parser.add_argument("--workers", default="1", help="Worker counts to compare, e.g. 1,2 (default 1).")
    parser.add_argument("--repeat", type=int, default=1, help="Runs per worker count, alternating (default 1).")
    parser.add_argument(
        "--client",
        choices=("wrk", "asyncio"),
        default="wrk" if shutil.which("wrk") else "asyncio",
        help="The steady load's client (default: wrk when on PATH).",
    )
    parser.add_argument("--seconds", type=int, default=20, help="Seconds per steady run with wrk (default 20).")
    parser.add_argument(
        "--split",
        action="store_true",
        help="Also time one worker's CPU per request inside and outside the GIL (needs wrk).",
    )
    args = parser.parse_args()
    if args.split and args.client != "wrk":
        sys.exit("--split needs the wrk client (apt-get install wrk)")
    if args.requests < 1 or args.concurrency < 1 or args.repeat < 1 or args.seconds <= 0:
        sys.exit("--requests, --concurrency, --repeat and --seconds must be positive")
    if args.client == "wrk" and not shutil.which("wrk"):
        sys.exit("--client wrk: wrk is not on PATH (apt-get install wrk), or use --client asyncio")
    try:
        counts = sorted({int(part) for part in args.workers.split(",") if part.strip()})
    except ValueError:
        sys.exit(f"--workers takes counts separated by commas, e.g. 1,2; got {args.workers!r}")
    if not counts or counts[0] < 1:
        sys.exit("--workers counts must be 1 or more")
    out: dict[str, Any] = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "cores": os.cpu_count(),
        "workers": counts,
        "repeat": args.repeat,
        "client": {
            "wrk": f"steady: wrk -t1 for {args.seconds:g} s; rebuild run: asyncio raw sockets",
            "asyncio": "asyncio raw sockets, one process",
        }[args.client],
    }
    indexes = [("seeds", args.workdir / "bench-seeds", [str(SEEDS)])]
    if not args.skip_neurips:
        if not NEURIPS.exists():
            sys.exit(f"{NEURIPS} is missing (or pass --skip-neurips)")
        indexes.append(("neurips", args.workdir / "bench-neurips", [str(NEURIPS), str(SEEDS)]))
    for name, index, sources in indexes:
        out[name] = compare_workers(name, index, sources, args, counts)
        if args.split:
            out[name]["split"] = split_cpu(name, index, args.concurrency, args.seconds)
    emit(out, out=args.out)
    benched = [out[name] for name, _, _ in indexes]
    if any(b["errors"] or not b["picked_up_by_every_worker"] for b in benched):
        sys.exit(1)  # a failed request, or a publication some worker never picked up


if __name__ == "__main__":
    main()
