"""A build in its own process, with a slow fake encoder, for kill and concurrency tests.

usage: python tests/workers/build_worker.py INDEX SOURCE... [--wait] [--delay SECONDS_PER_TEXT] [--chunk N] [--optimize]
Prints the build summary as JSON, or the error on stderr with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout: its semsearch and tests

import semsearch.encode.encoding  # noqa: E402
from semsearch import BuildOptions, SemsearchError, build_index  # noqa: E402
from tests.helpers import FakeEmbedder  # noqa: E402


class SlowFake(FakeEmbedder):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        time.sleep(self.delay * len(texts))
        return super().encode(texts)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("index")
    parser.add_argument("sources", nargs="+")
    parser.add_argument("--wait", action="store_true")
    parser.add_argument("--delay", type=float, default=0.01)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--optimize", action="store_true", help="rewrite (merge segments) even if unchanged")
    args = parser.parse_args()
    semsearch.encode.encoding.ENCODE_CHUNK = args.chunk
    try:
        opts = BuildOptions(progress=False, wait=args.wait, rewrite=args.optimize)
        summary = build_index(args.sources, args.index, opts, embedder=SlowFake(args.delay))
    except SemsearchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
