#!/usr/bin/env bash
# Create .venv (if needed) and install semsearch with its test tools, Ray, the web server and the MCP server, offline-model ready.
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
python -m pip install -q -e ".[dev,ray,serve,bibtex,mcp]"
echo "semsearch $(python -c 'import semsearch; print(semsearch.__version__)') installed in .venv" >&2
