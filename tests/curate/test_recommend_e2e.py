"""End to end with the real model: the seeds, a liked tag, an arrival file, `new` and a cron-style digest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.helpers import SEEDS

pytestmark = pytest.mark.slow
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}

ARRIVALS = [
    # New: on federated privacy (what the liked tag is about) and on something else.
    "We study user-level differential privacy for federated fine-tuning of language models and show that "
    "clipping per-client LoRA updates with adaptive noise keeps utility within two points of non-private "
    "training while bounding leakage across rounds.",
    "A hydrological model couples snowpack physics with a neural emulator of river routing and forecasts "
    "spring floods a week ahead more accurately than operational systems in three alpine basins.",
]


def semsearch(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "semsearch", *args], env=ENV, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_seeds_then_arrivals_with_the_real_model(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    shutil.copytree(SEEDS, seeds)
    index = str(tmp_path / "index")
    semsearch("index", str(seeds), "--index", index, "--json")
    hits = json.loads(
        semsearch("query", "federated learning differential privacy", "-k", "2", "--index", index, "--json")
    )
    semsearch("tag", "add", "liked", *[h["id"] for h in hits], "--index", index)
    recs = json.loads(semsearch("recommend", "--like", "liked", "-k", "5", "--index", index, "--json"))
    assert len(recs) == 5 and {r["because"]["id"] for r in recs} <= {h["id"] for h in hits}
    assert "privacy" in (recs[0]["title"] or recs[0]["text"]).lower() or "federated" in recs[0]["text"].lower()
    first = json.loads(semsearch("digest", "--name", "daily", "--format", "json", "--index", index))
    assert first["arrived"] == 91

    # Abstracts arrive: two new ones and a re-wrapped, marked-up copy of a known one.
    known = hits[0]["text"]
    words = known.split()
    words[2] = f"*{words[2]}*"  # markup, as a copy pasted from another listing might have
    rewrapped = textwrap.fill(" ".join(words), 70)
    (seeds / "arrival.txt").write_text("Arrivals\n\n" + "\n\n".join([*ARRIVALS, rewrapped]) + "\n", encoding="utf-8")
    semsearch("index", "--index", index, "--json")
    new = json.loads(semsearch("new", "--index", index, "--json"))
    assert sorted(r["text"] for r in new) == sorted(ARRIVALS)
    assert new[0]["text"] == ARRIVALS[0] and "tag:liked" in new[0]["for"]  # the privacy paper first, for the tag
    second = json.loads(semsearch("digest", "--name", "daily", "--format", "json", "--index", index))
    assert second["arrived"] == 2
    listed = [p["text"] for s in second["sections"] for p in s["papers"]]
    assert ARRIVALS[0] in listed and set(listed) <= set(ARRIVALS)
    third = json.loads(semsearch("digest", "--name", "daily", "--format", "json", "--index", index))
    assert third["arrived"] == 0 and third["sections"] == []
