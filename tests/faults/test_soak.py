"""The 60-second soak (python -m benchmarks.soak --seconds 60 --fake): zero failed requests, every version verified."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.helpers import REPO

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

SECONDS = int(os.environ.get("SEMSEARCH_SOAK_SECONDS", "60"))


@pytest.mark.slow
@pytest.mark.parametrize("workers", [1, 2])
def test_soak_serves_while_versions_publish(workers: int) -> None:
    script = [sys.executable, "-m", "benchmarks.soak", "--seconds", str(SECONDS), "--fake"]
    done = subprocess.run(
        [*script, "--workers", str(workers)],
        capture_output=True,
        text=True,
        timeout=SECONDS + 300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO,
    )
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert done.returncode == 0, (report, done.stderr[-3000:])
    assert report["errors"] == 0, report["error_samples"]
    assert report["requests"] > 10 * SECONDS
    assert set(report["requests_by_kind"]) == {"search", "related", "document", "info", "health", "map"}
    assert report["versions_published"] >= 3
    assert report["writer"].get("refresh") and report["writer"].get("remove") and report["writer"].get("readd")
    assert report["verify_runs"] >= 1 and report["verify_problems"] == []
    # Every worker answers from the last version published (each follows CURRENT on its own).
    assert report["picked_up_by_every_worker"] and len(report["version_by_worker"]) == workers, report
    # No leaked versions or handles (of each worker): descriptors back to where they were, memory within noise.
    # No descriptor leaks: beyond the start's, only the live version's segments hold files (about 5 each).
    assert report["server_fds_end"] <= report["server_fds_start"] + 2 + 6 * report["live_segments"], report
    assert report["server_rss_mb_end"] - report["server_rss_mb_start"] < 64, report
