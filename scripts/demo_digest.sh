#!/usr/bin/env bash
# The daily digest end to end: index the seeds, like two papers, save a query, take a first digest;
# then an arrival file lands (3 new abstracts + 1 reformatted copy of a seed abstract), the cron line runs
# (refresh, then digest --since last), and a second run of the cron line reports nothing.
#   bash scripts/demo_digest.sh [WORKDIR]      (uses .venv when present, else python on PATH)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
WORK="${1:-$(mktemp -d)}"
export HF_HUB_OFFLINE=1 SEMSEARCH_INDEX="$WORK/index"
ss() { PYTHONPATH="$PWD" "$PY" -m semsearch "$@"; }
rm -rf "$WORK/seeds" "$SEMSEARCH_INDEX"
mkdir -p "$WORK" && cp -r seeds "$WORK/seeds"
ss index "$WORK/seeds" -q
ss tag add liked $(ss query "federated learning differential privacy" -k 2 --json | "$PY" -c 'import json,sys; print(" ".join(h["id"] for h in json.load(sys.stdin)))')
ss watch add molecules "molecular dynamics protein conformations"
ss digest --name daily --format md --out "$WORK/digest-1.md"
cp tests/fixtures/arrival.txt "$WORK/seeds/arrival.txt"
cron() { ss index -q >/dev/null && ss digest --name daily --format md; }   # the cron line
echo "=== cron run after the arrival file ==="; cron
echo "=== cron run again ==="; cron
ss new --json | "$PY" -c 'import json,sys; rows=json.load(sys.stdin); print(f"new: {len(rows)} papers:", [r["for"] for r in rows])'
