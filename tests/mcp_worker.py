"""``semsearch ...`` in its own process with the fake encoder, so MCP transport tests need no model.

usage: python mcp_worker.py mcp --index DIR [--http --port 0]   (any semsearch command line)
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]  # this checkout's semsearch, then conftest

from conftest import FakeEmbedder  # noqa: E402

from semsearch.faces.cli import cli  # noqa: E402

if __name__ == "__main__":
    cli(args=sys.argv[1:], obj={"embedder": FakeEmbedder()}, prog_name="semsearch")
