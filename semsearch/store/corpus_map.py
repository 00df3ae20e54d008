"""The corpus map on disk: ``map.json``, and a version's whole map read back (its layered files put together).

The map is computed at build time (``semsearch/atlas``) from the documents' vectors and stored in the version
folder as ``map.json``::

    {"method": "pca" | "umap", "documents": N, "seed": 0,
     "points": [[doc_id, x, y, cluster], ...],          # x, y in [0, 1]; cluster indexes "clusters"
     "labels": ["title or opening words", ...],          # one per point, at most LABEL_CHARS characters
     "clusters": [{"id": 0, "label": "federated · privacy · clients", "terms": [...],
                   "x": 0.41, "y": 0.73, "size": 12}, ...],
     "fitted": [0, 1, ...],                              # points the layout was fitted on (the anchors)
     "algorithm": 2, "laid_out_at": "2025-12-01T10:40:00+00:00", "laid_out_documents": N,
     "changed_since_layout": 0,                          # documents added + removed since that full layout
     "fingerprint": "<sha256 of the inputs>"}           # a refresh with the same inputs copies the map

A version appended as a segment keeps the last layout's map.json as its base, beside point files of what each
segment placed and removed (``map_layers``); ``load_map`` puts them together. ``faces/map_page.map_html`` turns a
map into one self-contained HTML page; the server's page draws it with ``web/map.js``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from semsearch.core.errors import IndexCorruptError
from semsearch.store.map_layers import MAP_FILE, MapState, assemble, read_state

__all__ = ["MAP_FILE", "MapState", "load_map", "write_map_file"]


def write_map_file(folder: Path, data: dict[str, Any]) -> None:
    """Write a version's whole map as ``map.json`` (compact JSON, UTF-8)."""
    (folder / MAP_FILE).write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


def load_map(version: Path) -> dict[str, Any] | None:
    """A version's map, or None when the version has none (built before maps existed).

    An appended version's map is its base map.json with its segments' point files applied (``map_layers``);
    a version written before layered maps is its map.json alone.
    """
    path = Path(version) / MAP_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexCorruptError(f"{path} is unreadable ({exc}); rebuild with: semsearch index --full") from exc
    problem = _schema_problem(data)
    if problem:
        raise IndexCorruptError(f"{path}: {problem}; rebuild with: semsearch index --full")
    state = read_state(Path(version))
    if state is not None and state.segments:
        data = assemble(Path(version), state, data)  # checks each point file as it reads it
    return data


def _schema_problem(data: Any) -> str | None:
    """What is wrong with a loaded map.json, or None."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, kind in (("method", str), ("documents", int), ("points", list), ("labels", list), ("clusters", list)):
        if not isinstance(data.get(key), kind):
            return f"{key!r} is missing or malformed"
    if len(data["points"]) != data["documents"] or len(data["labels"]) != data["documents"]:
        return f"{len(data['points'])} points and {len(data['labels'])} labels for {data['documents']} documents"
    bad = next((p for p in data["points"] if not (isinstance(p, list) and len(p) == 4)), None)
    if bad is not None:
        return f"malformed point {str(bad)[:40]}"
    return None
