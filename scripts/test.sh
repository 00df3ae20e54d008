#!/usr/bin/env bash
# Set up, then run the whole test suite (slow end-to-end tests included), ruff and mypy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1
ruff check semsearch tests scripts
mypy
python -m pytest -q "$@"
