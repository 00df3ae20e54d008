"""``semsearch ...`` in its own process with the fake encoder, so MCP transport tests need no model.

usage: python tests/workers/mcp_worker.py mcp --index DIR [--http --port 0]   (any semsearch command line)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout: its semsearch and tests

from semsearch.faces.cli import cli  # noqa: E402
from tests.helpers import FakeEmbedder  # noqa: E402

if __name__ == "__main__":
    cli(args=sys.argv[1:], obj={"embedder": FakeEmbedder()}, prog_name="semsearch")
