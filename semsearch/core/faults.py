"""A test hook that stops a writer at a named point, so a test can force one interleaving of writers.

``SEMSEARCH_TEST_BARRIER=POINT:FOLDER`` (set by a test in a writer's environment; never otherwise) makes the
writer, on reaching ``POINT``, create ``FOLDER/POINT.reached`` holding its pid and wait until
``FOLDER/POINT.go`` exists. Meanwhile the test runs another writer, or kills this one, at exactly that point.
The points: ``read`` (the live version and the sources are read), ``plan`` (what to write is decided),
``publish`` (the new version is complete, not yet in place), ``swap`` (in place, CURRENT not yet swapped) and
``swapped`` (CURRENT swapped, the ``.publishing`` journal not yet removed); tag writes pass ``read`` and
``publish``. Nothing is kept between calls: the environment is the only state.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

ENV = "SEMSEARCH_TEST_BARRIER"
POINTS = ("read", "plan", "publish", "swap", "swapped")
# A test that died leaves its writer waiting; it gives up (and fails) after this long instead of hanging.
TIMEOUT_S = 120.0


def barrier(point: str) -> None:
    """Wait at ``point`` when the environment names it (see the module's docstring); else return at once."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    name, _, folder = spec.partition(":")
    if name != point or not folder:
        return
    where = Path(folder)
    tmp = where / f".{point}.reached.{os.getpid()}"
    tmp.write_text(str(os.getpid()), encoding="utf-8")
    os.replace(tmp, where / f"{point}.reached")  # whole, so the test always reads a pid
    go = where / f"{point}.go"
    deadline = time.monotonic() + TIMEOUT_S
    while not go.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{ENV}: nobody released {go}")
        time.sleep(0.002)
