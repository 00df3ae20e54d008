"""Which layout a map uses (PCA or UMAP, by corpus size or SEMSEARCH_MAP), and when a refresh lays it out again."""

from __future__ import annotations

import math
import os

from semsearch.core.errors import SemsearchError
from semsearch.core.options import MAP_RELAYOUT_SHARE

MAP_ALGORITHM = 2  # bump when a change to the atlas changes the maps it computes (stops reuse of old ones)
# Below this many documents the layout is PCA: on a few hundred points it shows the topics well enough, while
# UMAP's numba JIT warm-up (seconds in every process) would dominate small builds and every test that builds one.
UMAP_MIN_DOCS = 1000
UMAP_NEIGHBORS = 15
# A refresh places arrivals on the last layout until the documents added plus removed since it exceed this share
# of the documents it laid out; then the whole map is laid out again. Placed documents never move the fitted
# ones, so the layout drifts from what a fresh one would show only as far as the corpus has changed. The value
# lives in options.py, where `semsearch index --help` reads it without importing numpy.
RELAYOUT_SHARE = MAP_RELAYOUT_SHARE
# SEMSEARCH_MAP=pca|umap|off overrides the choice at build time ("off": no map.json, for builds where UMAP on a
# slow machine is not worth its time); unset or "auto" picks by corpus size.
MAP_ENV = "SEMSEARCH_MAP"


def requested_method() -> str:
    """The map method SEMSEARCH_MAP asks for: auto (unset), pca, umap or off."""
    method = os.environ.get(MAP_ENV, "").strip().lower() or "auto"
    if method not in ("auto", "pca", "umap", "off"):
        raise SemsearchError(f"{MAP_ENV}={method!r} is not a map method; choose auto, pca, umap or off")
    return method


def choose_method(n: int, method: str = "auto") -> str:
    """The layout method for n documents: 'auto' picks PCA below UMAP_MIN_DOCS, else UMAP."""
    if method not in ("auto", "pca", "umap"):
        raise SemsearchError(f"unknown map method {method!r}; choose auto, pca or umap")
    if method == "auto":
        return "umap" if n >= UMAP_MIN_DOCS else "pca"
    if method == "umap" and n <= UMAP_NEIGHBORS:
        return "pca"  # UMAP needs more points than neighbours per point to build its graph
    return method


def within_share(laid_out_documents: int, changed: int) -> bool:
    """Whether this many documents added and removed since a layout leave it standing (RELAYOUT_SHARE)."""
    return changed <= math.floor(RELAYOUT_SHARE * laid_out_documents + 1e-9)
