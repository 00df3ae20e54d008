#!/usr/bin/env bash
# tests/test_citations_roundtrip.py reads the exports back with citation-js under Node: installs Debian's nodejs and
# npm when node is missing and this runs as root (or with sudo), then the pinned packages of tests/node (`npm ci`,
# from tests/node/package-lock.json). Without Node the citation-js tests skip and say why; the others do not need it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    SUDO=""
    if [ "$(id -u)" != 0 ]; then
        if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
            echo "node: node or npm is missing and this is not root: the citation-js tests will skip (apt-get install nodejs npm)" >&2
            exit 0
        fi
        SUDO="sudo -n"
    fi
    echo "node: installing Debian's nodejs and npm for the citation-js tests (apt-get)" >&2
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q nodejs npm >&2
fi
# citation-js 0.7 needs Node 16 or newer (Debian 12 ships 18).
(cd tests/node && npm ci --no-audit --no-fund --loglevel=error) >&2
