#!/usr/bin/env bash
# Build the documentation site into site/ with warnings as errors (offline: no web fonts, no CDN).
# The reference pages are generated from the code at build time (scripts/docs_hooks.py).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/mkdocs ]; then
    bash scripts/setup.sh
fi
. .venv/bin/activate
export HF_HUB_OFFLINE=1 NO_MKDOCS_2_WARNING=1
mkdocs build --strict --clean "$@"
echo "docs: site/index.html" >&2
