"""Time `semsearch mcp` as an agent meets it: launch over stdio with the SDK's client, then tool calls.

Builds the seed index under --workdir when missing, launches `python -m semsearch mcp` over stdio (what a
desktop client does), and measures the launch and handshake, the first search, the median of --calls searches
(k=10, distinct queries) and of get_paper, how many characters of JSON a k=10 page costs, and the same searches
through the library in this process (the protocol's share is the difference). Prints one JSON
line; progress goes to stderr.

    python -m benchmarks.bench_mcp [--calls 20] [--workdir indexes]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from benchmarks.harness import REPO, arguments, emit

SEEDS = REPO / "seeds"
ENV = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
QUERIES = [
    "federated privacy",
    "diffusion models for image generation",
    "graph neural networks oversmoothing",
    "reinforcement learning from human feedback",
    "quantization of large language models",
]


def ensure_index(path: Path) -> None:
    if (path / "CURRENT").is_file():
        return
    print(f"building {path} from {SEEDS}", file=sys.stderr)
    cmd = [sys.executable, "-m", "semsearch", "index", str(SEEDS), "--index", str(path), "-q"]
    subprocess.run(cmd, cwd=REPO, env={**os.environ, **ENV}, check=True)


async def measure(index: Path, calls: int) -> dict[str, Any]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "semsearch", "mcp", "--index", str(index)], env=ENV, cwd=str(REPO)
    )
    start = time.perf_counter()
    with open(os.devnull, "w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            ready = time.perf_counter()
            first = await client.call_tool("search", {"query": "federated privacy", "k": 10})
            first_ms = (time.perf_counter() - ready) * 1000
            searches, papers = [], []
            page = first
            for i in range(calls):
                t = time.perf_counter()
                page = await client.call_tool("search", {"query": f"{QUERIES[i % len(QUERIES)]} {i}", "k": 10})
                searches.append((time.perf_counter() - t) * 1000)
            paper_id = page.structured_content["items"][0]["id"]
            documents = (await client.call_tool("info", {})).structured_content["documents"]
            for _ in range(calls):
                t = time.perf_counter()
                await client.call_tool("get_paper", {"id": paper_id})
                papers.append((time.perf_counter() - t) * 1000)
    return {
        "documents": documents,
        "launch_and_handshake_s": round(ready - start, 2),
        "first_search_ms": round(first_ms, 1),
        "search_k10_median_ms": round(statistics.median(searches), 1),
        "get_paper_median_ms": round(statistics.median(papers), 1),
        "search_k10_page_chars": len(first.content[0].text),
        "library_search_k10_median_ms": round(library_median(index, calls), 1),
        "calls": calls,
    }


def library_median(index: Path, calls: int) -> float:
    """The same searches through the library in this process: what the protocol adds is the difference."""
    from semsearch import Index

    times = []
    with Index.open(index) as idx:
        idx.search("federated privacy", 10)  # warm, as the server is after its first call
        for i in range(calls):
            t = time.perf_counter()
            idx.search(f"{QUERIES[i % len(QUERIES)]} {i}", 10)
            times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--workdir", type=Path, default=REPO / "indexes")
    args = parser.parse_args()
    index = args.workdir.resolve() / "bench-mcp-seeds"
    ensure_index(index)
    emit(anyio.run(measure, index, args.calls), out=args.out)


if __name__ == "__main__":
    main()
