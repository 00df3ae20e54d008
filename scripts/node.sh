#!/usr/bin/env bash
# tests/curate/test_citations_roundtrip.py reads the exports back with citation-js under Node: installs Debian's nodejs and
# npm when node is missing and this runs as root (or with sudo), then the pinned packages of tests/node (`npm ci`,
# from tests/node/package-lock.json). Without Node the citation-js tests skip and say why; the others do not need it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    bash scripts/apt_install.sh "the citation-js tests" nodejs npm
    command -v npm >/dev/null || exit 0
fi
# citation-js 0.7 needs Node 16 or newer (Debian 12 ships 18).
(cd tests/node && npm ci --no-audit --no-fund --loglevel=error) >&2
