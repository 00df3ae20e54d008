#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (Playwright never downloads a browser here).
# Installs the `chromium` package when it is missing and this runs as root (or with sudo); otherwise says why not.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
        echo "chromium: /usr/bin/chromium is missing and this is not root: the browser tests will skip (apt-get install chromium)" >&2
        exit 0
    fi
    SUDO="sudo -n"
fi
echo "chromium: installing Debian's chromium package for the browser tests (apt-get)" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2
