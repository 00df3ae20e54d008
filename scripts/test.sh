#!/usr/bin/env bash
# Set up, then run ruff, mypy, the documentation build and the tests: the fast job (every test but the slow ones,
# on every core), then the slow ones (real model, Ray, browser, kill storms, API fuzzing, ../shared data sets) in
# one process. Together they are the whole suite. `--fast` stops after the fast job; other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
fast_only=0
args=()
for arg in "$@"; do
  if [[ "$arg" == "--fast" ]]; then fast_only=1; else args+=("$arg"); fi
done
bash scripts/setup.sh
bash scripts/chromium.sh
. .venv/bin/activate
export HF_HUB_OFFLINE=1
ruff check semsearch tests scripts benchmarks
mypy
bash scripts/docs.sh
python -m pytest -q -m "not slow" -n auto --dist loadfile ${args[@]+"${args[@]}"}
if [[ "$fast_only" == 0 ]]; then
  python -m pytest -q -m slow ${args[@]+"${args[@]}"}
fi
