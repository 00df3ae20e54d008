#!/usr/bin/env bash
# apt_install.sh WHAT PACKAGE...: installs Debian packages for the tests named WHAT when this runs as root (or with
# sudo); otherwise says which tests will skip and exits 0. Used by chromium.sh and node.sh.
set -euo pipefail
what="$1"
shift
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null || ! sudo -n true 2>/dev/null; then
        echo "$what: $* missing and this is not root: those tests will skip (apt-get install $*)" >&2
        exit 0
    fi
    SUDO="sudo -n"
fi
echo "$what: installing Debian's $* (apt-get)" >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2
