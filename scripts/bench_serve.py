"""Load-test `semsearch serve` on loopback: throughput, latency, errors, and a rebuild published mid-run.

For each index (the seed index, and NeurIPS 2025 + seeds unless --skip-neurips) it starts `semsearch serve` as a
process on a free loopback port and fires --requests requests from --concurrency threads, each on a keep-alive
connection: /api/search with several queries, modes and k (some diverse), and /api/related for known papers.
Then the same load again while `semsearch index` publishes a new version with one seed file left out: every
request must still succeed, and the server must answer from the new version before the run ends. The indexes
are built under --workdir when missing (NeurIPS 2025: ~3-4 min of encoding on 2 cores) and reset to their
full sources before each run. Prints one JSON line; progress goes to stderr.

    python scripts/bench_serve.py [--requests 10000] [--concurrency 32] [--skip-neurips] [--workdir indexes]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SEEDS = REPO / "seeds"
NEURIPS = REPO.parent / "shared" / "data" / "mlanthology" / "neurips2025.jsonl.gz"
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


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


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

    def __init__(self, index: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "semsearch", "serve", "--index", str(index), "--port", str(self.port)],
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


def load(server: Server, paths: list[str], concurrency: int, until: threading.Event | None = None) -> dict[str, Any]:
    """Send the paths from `concurrency` keep-alive threads (cycling past the end until `until` is set)."""
    lock = threading.Lock()
    cursor = [0]
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    versions: Counter[str] = Counter()

    def take() -> str | None:
        with lock:
            i = cursor[0]
            if i >= len(paths) and (until is None or until.is_set()):
                return None
            cursor[0] += 1
            return paths[i % len(paths)]

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        mine: list[float] = []
        seen: Counter[str] = Counter()
        try:
            while (path := take()) is not None:
                started = time.perf_counter()
                try:
                    conn.request("GET", path)
                    response = conn.getresponse()
                    body = response.read()
                    status = str(response.status)
                    if response.status == 200:
                        seen[json.loads(body).get("version", "?")] += 1
                except (OSError, http.client.HTTPException) as exc:
                    status = type(exc).__name__
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
                mine.append(time.perf_counter() - started)
                with lock:
                    statuses[status] += 1
        finally:
            conn.close()
            with lock:
                latencies.extend(mine)
                versions.update(seen)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
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


def bench_index(name: str, index: Path, sources: list[str], requests: int, concurrency: int) -> dict[str, Any]:
    """Steady load, then the same load with a rebuild (one seed file left out) published mid-run."""
    log(f"[{name}] resetting {index} to its full sources")
    summary = semsearch_index(index, sources)
    log(f"[{name}] {summary['documents']} documents; starting semsearch serve")
    server = Server(index)
    try:
        dropped = sorted(SEEDS.glob("*.txt"))[0]
        paths = request_paths(server, requests, dropped)
        log(f"[{name}] steady: {requests} requests at concurrency {concurrency}")
        steady = load(server, paths, concurrency)
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
        log(f"[{name}] rebuild: {json.dumps(during)}")
    finally:
        server.stop()
    return {"documents": summary["documents"], "steady": steady, "with_rebuild": during}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10_000, help="Requests per run (default 10000).")
    parser.add_argument("--concurrency", type=int, default=32, help="Client threads (default 32).")
    parser.add_argument("--skip-neurips", action="store_true", help="Only the seed index.")
    parser.add_argument("--workdir", type=Path, default=REPO / "indexes", help="Where the bench indexes live.")
    args = parser.parse_args()
    if args.requests < 1 or args.concurrency < 1:
        sys.exit("--requests and --concurrency must be positive")
    out: dict[str, Any] = {"requests": args.requests, "concurrency": args.concurrency, "cores": os.cpu_count()}
    out["seeds"] = bench_index("seeds", args.workdir / "bench-seeds", [str(SEEDS)], args.requests, args.concurrency)
    if not args.skip_neurips:
        if not NEURIPS.exists():
            sys.exit(f"{NEURIPS} is missing (or pass --skip-neurips)")
        out["neurips"] = bench_index(
            "neurips", args.workdir / "bench-neurips", [str(NEURIPS), str(SEEDS)], args.requests, args.concurrency
        )
    print(json.dumps(out))
    benched = [out[key] for key in ("seeds", "neurips") if key in out]
    if any(b["steady"]["errors"] or b["with_rebuild"]["errors"] for b in benched) or not all(
        b["with_rebuild"]["served_new_version"] for b in benched
    ):
        sys.exit(1)  # a failed request, or a publication the server never picked up


if __name__ == "__main__":
    main()
