#!/usr/bin/env bash
# Set up, then run ruff, mypy, the documentation build and the whole test suite (slow end-to-end tests included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/chromium.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1
ruff check semsearch tests scripts
mypy
bash scripts/docs.sh
python -m pytest -q "$@"
