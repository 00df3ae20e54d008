#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (Playwright never downloads a browser here).
# Installs the `chromium` package when it is missing and this runs as root (or with sudo); otherwise says why not.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    exit 0
fi
bash "$(dirname "$0")/apt_install.sh" "the browser tests" chromium
