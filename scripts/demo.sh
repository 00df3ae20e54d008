#!/usr/bin/env bash
# The main job: set up, build indexes/default from seeds/, answer one query.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
.venv/bin/semsearch index seeds --index indexes/default
.venv/bin/semsearch query "${1:-federated privacy}" --index indexes/default -k 5
