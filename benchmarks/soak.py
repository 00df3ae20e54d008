"""Soak: a server answers mixed requests while another process keeps publishing and a third verifies each version.

    python -m benchmarks.soak                  # 10 minutes with the real model (all-MiniLM-L6-v2, ONNX int8)
    python -m benchmarks.soak --seconds 60 --fake   # the CI run: a hashed bag-of-words encoder, no model needed
    python -m benchmarks.soak --seconds 60 --fake --workers 2   # the same against `serve --workers 2`

Three processes besides this one's client threads:
  server    `semsearch serve` (uvicorn) over the index, following new versions live;
  writer    in a loop: drop an arrival file into the source folder and refresh, remove a file
            (`remove --source`), re-add it (index the folder again), ... each step publishes a version;
  verifier  runs `verify` on every version it sees published.
The clients send search (modes, filters, diverse), related, documents, info, health and map requests.

Prints one JSON line: requests, errors (anything but the expected status; must be 0), p50/p99 latency, versions
published, verify runs and problems, and the server's RSS and open file descriptors at the start and the end
(with --workers N: the largest of the workers'), and whether every worker answers from the last version published
(asked on new connections to /api/health, which names the worker's process id).
Exit status 1 when any request failed or any verify found a problem.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks.harness import REPO, HashedWords, arguments, build, emit
from semsearch import BuildOptions, build_index

QUERIES = [
    "federated learning with differential privacy",
    "graph neural networks oversmoothing",
    "diffusion models for images",
    "reinforcement learning exploration",
    "quantization of large language models",
    "sparse attention long documents",
    "robust optimization under distribution shift",
]
WHERE = [[], [], ["year>=2023"], ["venue=soak"], ["collection~papers"], ["year>=2999"]]


def _embedder(fake: bool) -> HashedWords | None:
    return HashedWords(dimension=64) if fake else None


def _arrival(folder: Path, n: int) -> Path:
    """An arrival file of 3 new abstracts with year/venue metadata."""
    rng = random.Random(n)
    words = [
        "model",
        "data",
        "learning",
        "privacy",
        "graph",
        "attention",
        "policy",
        "gradient",
        "kernel",
        "sparse",
        "robust",
        "transfer",
    ]
    rows = [
        {
            "id": f"arrival-{n}-{i}",
            "title": f"Arrival {n}.{i}",
            "abstract": f"Arrival {n} paper {i} studies " + " ".join(rng.choices(words, k=40)) + ".",
            "year": 2020 + (n + i) % 6,
            "venue": "soak",
        }
        for i in range(3)
    ]
    path = folder / f"arrival-{n:05d}.jsonl"
    tmp = folder / f".{path.name}.tmp"  # hidden while written: a refresh never reads half a file
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------ roles (separate processes)


def role_server(args: argparse.Namespace) -> None:
    from semsearch.faces.serve import run_server

    run_server(args.index, host="127.0.0.1", port=args.port, embedder=_embedder(args.fake), workers=args.workers)


def role_writer(args: argparse.Namespace) -> None:
    """Refresh with an arrival, remove a file, re-add it, ... until the deadline; counts publications."""
    from semsearch.write.remove import remove_documents

    src, index = Path(args.sources), Path(args.index)
    options = BuildOptions(progress=False, wait=True)
    counts: Counter[str] = Counter()
    step = 0
    removed: Path | None = None
    while time.time() < args.until:
        step += 1
        try:
            if removed is not None:
                build_index([str(src)], index, options, embedder=_embedder(args.fake))  # names it again
                counts["readd"] += 1
                removed = None
            elif step % 3 == 0:
                arrivals = sorted(src.glob("arrival-*.jsonl"))
                if arrivals:
                    removed = random.Random(step).choice(arrivals)
                    remove_documents(index, sources=[str(removed)], wait=True)
                    counts["remove"] += 1
            else:
                _arrival(src, step)
                build_index(None, index, options, embedder=_embedder(args.fake))
                counts["refresh"] += 1
        except Exception as exc:  # report, never stop the soak silently
            counts["writer_errors"] += 1
            print(f"writer: {type(exc).__name__}: {exc}", file=sys.stderr)
        time.sleep(args.pause)
    Path(args.report).write_text(json.dumps(dict(counts)))


def role_verifier(args: argparse.Namespace) -> None:
    """Verify every version seen published (polling CURRENT)."""
    from semsearch.write.verify import verify_index

    pointer = Path(args.index) / "CURRENT"
    seen: set[str] = set()
    runs, problems = 0, []
    while time.time() < args.until:
        try:
            current = pointer.read_text(encoding="utf-8").strip()
        except OSError:
            current = ""
        if current and current not in seen:
            seen.add(current)
            found = verify_index(args.index)
            runs += 1
            problems += [f"{current}: {p}" for p in found]
        time.sleep(0.05)
    Path(args.report).write_text(json.dumps({"verify_runs": runs, "verify_problems": problems, "seen": len(seen)}))


# ------------------------------------------------------------------ the coordinator and its clients


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str, timeout: float = 30.0) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()
        return exc.code, json.loads(body) if body.startswith(b"{") else {"error": body[:200].decode(errors="replace")}


def _process_stats(pid: int) -> dict[str, int]:
    """Resident memory (bytes) and open file descriptors of a process (Linux /proc)."""
    rss = 0
    with open(f"/proc/{pid}/status", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return {"rss": rss, "fds": len(os.listdir(f"/proc/{pid}/fd"))}


def _server_stats(pid: int, workers: int) -> dict[str, int]:
    """The server's RSS and descriptors: of the process itself, or with workers the largest of its workers'."""
    if workers == 1:
        return _process_stats(pid)
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    # multiprocessing's resource tracker is a child too: a worker is a child holding the index open
    stats = [_process_stats(int(c)) for c in children]
    return {key: max(s[key] for s in stats) for key in ("rss", "fds")}


def _versions_by_worker(base: str, workers: int, want: str, tries: int = 400) -> dict[str, str]:
    """The version each worker answers /api/health with, on new connections, until all answer ``want``."""
    seen: dict[str, str] = {}
    for _ in range(tries):
        status, body = _get(f"{base}/api/health")
        if status == 200:
            seen[str(body.get("worker"))] = body["version"]
        if len(seen) >= workers and all(v == want for v in seen.values()):
            break
    return seen


def _client(base: str, until: float, seed: int, stable_ids: list[str], out: dict, lock: threading.Lock) -> None:
    rng = random.Random(seed)
    latencies: list[float] = []
    kinds: Counter[str] = Counter()
    errors: list[str] = []
    while time.time() < until:
        kind = rng.choices(["search", "related", "document", "info", "health", "map"], [6, 2, 2, 1, 1, 1])[0]
        expect = {200}
        if kind == "search":
            params: list[tuple[str, str]] = [("q", rng.choice(QUERIES)), ("k", str(rng.choice([1, 5, 10, 50])))]
            params += [("mode", rng.choice(["hybrid", "dense", "lexical"]))]
            params += [("where", w) for w in rng.choice(WHERE)]
            if rng.random() < 0.2:
                params.append(("diverse", "true"))
            url = f"{base}/api/search?{urllib.parse.urlencode(params)}"
        elif kind == "related":
            url = f"{base}/api/related/{rng.choice(stable_ids)}?k={rng.choice([3, 10])}"
        elif kind == "document":
            url = f"{base}/api/documents/{rng.choice(stable_ids)}"
        elif kind == "map":
            url, expect = f"{base}/api/map", {200, 404}
        else:
            url = f"{base}/api/{kind}"
        started = time.perf_counter()
        try:
            status, body = _get(url)
        except Exception as exc:  # a dropped connection is an error too
            status, body = -1, {"error": f"{type(exc).__name__}: {exc}"}
        latencies.append(time.perf_counter() - started)
        kinds[kind] += 1
        if status not in expect:
            errors.append(f"{kind} {status} {str(body.get('error', ''))[:160]}")
    with lock:
        out["latencies"] += latencies
        out["kinds"].update(kinds)
        out["errors"] += errors


def soak(seconds: float, clients: int, fake: bool, workdir: Path, pause: float, workers: int = 1) -> dict:
    src, index = workdir / "sources", workdir / "index"
    src.mkdir(parents=True)
    shutil.copytree(REPO / "seeds", src / "seeds")  # never removed: the ids the clients ask for stay
    _arrival(src, 0)
    started = time.perf_counter()
    build([src], index, _embedder(fake))
    first_build = time.perf_counter() - started
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    me = [sys.executable, "-m", "benchmarks.soak"]
    common = ["--index", str(index)] + (["--fake"] if fake else [])
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"}
    serving = ["--role", "server", "--port", str(port), "--workers", str(workers)]
    server = subprocess.Popen([*me, *serving, *common], env=env, cwd=REPO)
    try:
        deadline = time.time() + 120
        while True:
            try:
                if _get(f"{base}/api/health", timeout=2)[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or server.poll() is not None:
                raise SystemExit("soak: the server did not start")
            time.sleep(0.2)
        status, hits = _get(f"{base}/api/search?q=learning&k=20&mode=lexical&where=file%3D*seeds*")
        stable_ids = [h["id"] for h in hits["hits"]]
        assert status == 200 and stable_ids, hits
        # Warm the server (first query loads the encoder), then take the baseline.
        for q in QUERIES:
            _get(f"{base}/api/search?{urllib.parse.urlencode({'q': q})}")
        start_stats = _server_stats(server.pid, workers)
        until = time.time() + seconds
        reports = {name: workdir / f"{name}.json" for name in ("writer", "verifier")}
        roles = [
            subprocess.Popen(
                [
                    *me,
                    "--role",
                    name,
                    "--until",
                    str(until),
                    "--report",
                    str(reports[name]),
                    "--sources",
                    str(src),
                    "--pause",
                    str(pause),
                    *common,
                ],
                env=env,
            )
            for name in ("writer", "verifier")
        ]
        out: dict = {"latencies": [], "kinds": Counter(), "errors": []}
        lock = threading.Lock()
        threads = [
            threading.Thread(target=_client, args=(base, until, i, stable_ids, out, lock)) for i in range(clients)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for p in roles:
            p.wait(timeout=600)  # a writer mid-build finishes its step
        time.sleep(1.0)  # let the server close the versions its last requests held
        # A request after the last publication swaps the final version in, in every worker.
        last = (index / "CURRENT").read_text().strip()
        by_worker = _versions_by_worker(base, workers, last)
        end_stats = _server_stats(server.pid, workers)
    finally:
        server.send_signal(signal.SIGTERM)  # uvicorn shuts down gracefully
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
    writer = json.loads(reports["writer"].read_text())
    verifier = json.loads(reports["verifier"].read_text())
    lat = np.array(out["latencies"]) * 1000
    published = len(list((index).glob("v-*")))  # kept versions; the sequence number counts all of them
    return {
        "seconds": seconds,
        "encoder": "hashed-bow (fake)" if fake else "all-MiniLM-L6-v2 onnx int8",
        "clients": clients,
        "workers": workers,
        "version_by_worker": by_worker,
        "picked_up_by_every_worker": len(by_worker) == workers and set(by_worker.values()) == {last},
        "requests": int(len(lat)),
        "errors": len(out["errors"]),
        "error_samples": out["errors"][:5],
        "requests_by_kind": dict(out["kinds"]),
        "requests_per_s": round(len(lat) / seconds, 1),
        "p50_ms": round(float(np.percentile(lat, 50)), 2) if len(lat) else None,
        "p99_ms": round(float(np.percentile(lat, 99)), 2) if len(lat) else None,
        "max_ms": round(float(lat.max()), 2) if len(lat) else None,
        "versions_published": int(last.split("-")[1]) - 1,
        "versions_on_disk": published,
        "writer": writer,
        "verify_runs": verifier["verify_runs"],
        "verify_problems": verifier["verify_problems"],
        "server_rss_mb_start": round(start_stats["rss"] / 2**20, 1),
        "server_rss_mb_end": round(end_stats["rss"] / 2**20, 1),
        "server_fds_start": start_stats["fds"],
        "server_fds_end": end_stats["fds"],
        # Each segment of the served version holds its own open files (docs.sqlite, memory-mapped arrays).
        "live_segments": len(json.loads((index / last / "manifest.json").read_text()).get("segments", [])),
        "first_build_s": round(first_build, 1),
    }


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=600.0, help="How long the load runs (default 600).")
    parser.add_argument("--clients", type=int, default=4, help="Client threads sending requests (default 4).")
    parser.add_argument("--fake", action="store_true", help="A hashed bag-of-words encoder instead of the model.")
    parser.add_argument("--pause", type=float, default=0.5, help="Seconds between the writer's steps (default 0.5).")
    parser.add_argument("--workdir", type=Path, help="Where the sources and the index go (default: a temp folder).")
    parser.add_argument("--workers", type=int, default=1, help="Server processes (serve --workers; default 1).")
    parser.add_argument("--role", choices=["server", "writer", "verifier"], help=argparse.SUPPRESS)
    for hidden in ("--index", "--report", "--sources"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        {"server": role_server, "writer": role_writer, "verifier": role_verifier}[args.role](args)
        return
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(dir=args.workdir))
        result = soak(args.seconds, args.clients, args.fake, folder, args.pause, args.workers)
    else:
        with tempfile.TemporaryDirectory(prefix="semsearch-soak-") as tmp:
            result = soak(args.seconds, args.clients, args.fake, Path(tmp), args.pause, args.workers)
    emit(result, out=args.out)
    failed = result["errors"] or result["verify_problems"] or result["writer"].get("writer_errors")
    failed = failed or not result["picked_up_by_every_worker"]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
