"""The corpus map on disk as a base layout plus one point file per appended segment, and reading it back whole.

A full layout writes the base (``atlas.compute.write_map``): ``map.json`` (the format every reader knows) and,
beside it, what an append needs without reading ``map.json``:

    map-base-nums.npy      the base's document numbers, sorted (int64)
    map-base-clusters.npy  the cluster of each of them (int16), to take a removed document out of its cluster
    map-fitted.json        {"ids": [...], "xy": [[x, y], ...]}: the points the layout was fitted on
    map-centroids.npy      per cluster, the sum of its members' vectors (float64, k x d), kept up to date
    map-state.json         {"format": 1, "segments": [...], "sizes": [...], "fitted_gone": [...], the layout record}

An appended version hard-links the base and the earlier point files, writes its own ``map-seg-<n>.json``
({"dropped": [ids], "points": [[id, x, y, cluster], ...], "labels": [...]}, clusters numbered as in the base) and
rewrites only the state and the centroids (a few kB): what it adds, not the map. ``assemble`` puts the base and
the segments together into the map ``atlas.compute.update_map`` would have written (see ``atlas.append``).
A version without ``map-state.json`` (written before layered maps) is read from ``map.json`` alone.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError

MAP_FILE = "map.json"
STATE_FILE = "map-state.json"
CENTROIDS_FILE = "map-centroids.npy"
FITTED_FILE = "map-fitted.json"
BASE_NUMS = "map-base-nums.npy"
BASE_CLUSTERS = "map-base-clusters.npy"
SEGMENT_PREFIX = "map-seg-"
STATE_FORMAT = 1
# Every map file starts with this: the segment writer leaves them to the map (a version with the map off has none).
MAP_PREFIX = "map"
BASE_FILES = (MAP_FILE, BASE_NUMS, BASE_CLUSTERS, FITTED_FILE)
DECIMALS = 4  # 1e-4 of the map's width is far below a pixel; fewer digits keep map.json small
REBUILD = "rebuild with: semsearch index --full"


def centre(member_xy: np.ndarray) -> dict[str, float]:
    """Where a cluster's label goes: its members' median position (the middle of the map when it has none)."""
    # The median, unlike the mean, is not dragged off the cluster by a few far-flung members.
    cx, cy = np.median(member_xy, axis=0) if len(member_xy) else (0.5, 0.5)
    return {"x": round(float(cx), DECIMALS), "y": round(float(cy), DECIMALS)}


@dataclass
class MapState:
    """What an append needs of a version's map, read without its points (``read_state``)."""

    folder: Path
    method: str
    seed: int
    algorithm: int
    laid_out_at: str
    laid_out_documents: int
    changed_since_layout: int
    documents: int
    sizes: list[int]
    segments: list[str] = field(default_factory=list)
    fitted_gone: list[str] = field(default_factory=list)
    legacy: dict[str, Any] | None = None  # the whole map of a version written before layered maps
    _centroids: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": STATE_FORMAT,
            "method": self.method,
            "seed": self.seed,
            "algorithm": self.algorithm,
            "laid_out_at": self.laid_out_at,
            "laid_out_documents": self.laid_out_documents,
            "changed_since_layout": self.changed_since_layout,
            "documents": self.documents,
            "sizes": self.sizes,
            "segments": self.segments,
            "fitted_gone": self.fitted_gone,
        }

    def centroids(self) -> np.ndarray:
        """The per-cluster vector sums (k x d, float64)."""
        if self._centroids is None:
            path = self.folder / CENTROIDS_FILE
            try:
                sums = np.load(path, allow_pickle=False)
            except (OSError, ValueError, EOFError) as exc:
                raise IndexCorruptError(f"{path} is unreadable ({exc}); {REBUILD}") from exc
            if sums.ndim != 2 or sums.shape[0] != len(self.sizes):
                raise IndexCorruptError(f"{path}: {sums.shape} sums for {len(self.sizes)} clusters; {REBUILD}")
            self._centroids = sums
        return self._centroids

    def fitted(self) -> tuple[list[str], np.ndarray]:
        """The ids and positions of the fitted points still on the map."""
        data = _read_json(self.folder / FITTED_FILE)
        ids, xy = data.get("ids"), data.get("xy")
        if not isinstance(ids, list) or not isinstance(xy, list) or len(ids) != len(xy):
            raise IndexCorruptError(f"{self.folder / FITTED_FILE}: malformed; {REBUILD}")
        gone = set(self.fitted_gone)
        keep = [i for i, doc_id in enumerate(ids) if doc_id not in gone]
        return [ids[i] for i in keep], np.asarray([xy[i] for i in keep], dtype=np.float64).reshape(-1, 2)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexCorruptError(f"{path} is unreadable ({exc}); {REBUILD}") from exc


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")


def read_state(version: Path) -> MapState | None:
    """The version's map state, or None when it has none (no map, or a map written before layered maps)."""
    path = Path(version) / STATE_FILE
    if not path.is_file():
        return None
    data = _read_json(path)
    try:
        if data.get("format") != STATE_FORMAT:
            raise ValueError(f"format {data.get('format')!r}")
        state = MapState(
            folder=Path(version),
            method=str(data["method"]),
            seed=int(data["seed"]),
            algorithm=int(data["algorithm"]),
            laid_out_at=str(data["laid_out_at"]),
            laid_out_documents=int(data["laid_out_documents"]),
            changed_since_layout=int(data["changed_since_layout"]),
            documents=int(data["documents"]),
            sizes=[int(s) for s in data["sizes"]],
            segments=[str(s) for s in data["segments"]],
            fitted_gone=[str(s) for s in data["fitted_gone"]],
        )
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise IndexCorruptError(f"{path}: malformed ({exc}); {REBUILD}") from None
    if any(not s.startswith(SEGMENT_PREFIX) or "/" in s for s in state.segments):
        raise IndexCorruptError(f"{path}: a segment file name outside the map's; {REBUILD}")
    return state


def write_state(folder: Path, state: MapState, sums: np.ndarray) -> None:
    """Write the state and the centroid sums (the two map files every appended version writes afresh)."""
    np.save(folder / CENTROIDS_FILE, np.ascontiguousarray(sums, dtype=np.float64), allow_pickle=False)
    _write_json(folder / STATE_FILE, state.to_dict())


def point_clusters(points: Sequence[list[Any]]) -> np.ndarray:
    """The cluster of each of a map's points, as int64."""
    return np.fromiter((p[3] for p in points), dtype=np.int64, count=len(points))


def write_base(folder: Path, data: dict[str, Any], sums: np.ndarray) -> None:
    """Beside a fully written map.json: the files an append reads instead of it (``sums``: per cluster, the sum
    of its members' vectors)."""
    points = data["points"]
    k = len(data["clusters"])
    assignment = point_clusters(points)
    nums = np.fromiter((int(p[0], 16) for p in points), dtype=np.int64, count=len(points))
    order = np.argsort(nums, kind="stable")
    np.save(folder / BASE_NUMS, nums[order], allow_pickle=False)
    np.save(folder / BASE_CLUSTERS, assignment[order].astype(np.int16), allow_pickle=False)
    fitted = data["fitted"]
    _write_json(folder / FITTED_FILE, {"ids": [points[i][0] for i in fitted], "xy": [points[i][1:3] for i in fitted]})
    state = MapState(
        folder=folder,
        method=data["method"],
        seed=int(data.get("seed", 0)),
        algorithm=int(data["algorithm"]),
        laid_out_at=data["laid_out_at"],
        laid_out_documents=int(data["laid_out_documents"]),
        changed_since_layout=int(data["changed_since_layout"]),
        documents=len(points),
        sizes=np.bincount(assignment, minlength=k).astype(int).tolist(),
    )
    write_state(folder, state, sums)


def write_segment(folder: Path, number: int, dropped: list[str], points: list[list[Any]], labels: list[str]) -> str:
    """Write an appended segment's point file (its ``number``, from 1); returns its name."""
    name = f"{SEGMENT_PREFIX}{number:06d}.json"
    _write_json(folder / name, {"dropped": dropped, "points": points, "labels": labels})
    return name


def link_files(source: Path, target: Path, names: Sequence[str]) -> None:
    """Hard-link ``names`` from ``source`` into ``target`` (copying where links fail); present ones are kept."""
    for name in names:
        dst = target / name
        if dst.exists() or source == target:
            continue
        try:
            os.link(source / name, dst)
        except OSError:
            shutil.copy2(source / name, dst)


def base_clusters_of(state: MapState, nums: np.ndarray) -> np.ndarray:
    """The base cluster of each document number (-1 for one not in the base), from the memory-mapped arrays."""
    base = np.load(state.folder / BASE_NUMS, allow_pickle=False, mmap_mode="r")
    clusters = np.load(state.folder / BASE_CLUSTERS, allow_pickle=False, mmap_mode="r")
    out = np.full(len(nums), -1, dtype=np.int64)
    if not len(base) or not len(nums):
        return out
    pos = np.minimum(np.searchsorted(base, nums), len(base) - 1)
    found = np.asarray(base[pos]) == nums
    out[found] = np.asarray(clusters[pos[found]], dtype=np.int64)
    return out


def read_segment(version: Path, name: str) -> dict[str, Any]:
    """One appended segment's map file, checked: dropped ids, points and their labels."""
    path = Path(version) / name
    data = _read_json(path)
    ok = (
        isinstance(data, dict)
        and isinstance(data.get("dropped"), list)
        and isinstance(data.get("points"), list)
        and isinstance(data.get("labels"), list)
        and len(data["points"]) == len(data["labels"])
        and all(isinstance(p, list) and len(p) == 4 for p in data["points"])
    )
    if not ok:
        raise IndexCorruptError(f"{path}: malformed; {REBUILD}")
    return data


def segment_clusters(state: MapState) -> dict[str, int]:
    """The (base-numbered) cluster of every document the segments placed and still hold."""
    held: dict[str, int] = {}
    for name in state.segments:
        seg = read_segment(state.folder, name)
        for doc_id in seg["dropped"]:
            held.pop(doc_id, None)
        held.update((p[0], int(p[3])) for p in seg["points"])
    return held


def assemble(version: Path, state: MapState, base: dict[str, Any]) -> dict[str, Any]:
    """The whole map of a layered version: ``base`` (its map.json, loaded) with every segment applied in order.

    Each segment's dropped documents leave the map and its points join at the end, as ``update_map`` orders
    them; cluster sizes and label centres are counted on the result, empty clusters dropped and the rest
    renumbered in order; the fitted points are the base's still on the map.
    """
    points: list[Any] = base["points"]
    labels: list[Any] = base["labels"]
    fitted: list[int] = base.get("fitted") or []
    if state.segments:
        segments = [read_segment(version, name) for name in state.segments]
        if any(seg["dropped"] for seg in segments):
            fitted_ids = {points[i][0] for i in fitted}
            placed = {p[0]: (p, label) for p, label in zip(points, labels, strict=True)}
            for seg in segments:
                for doc_id in seg["dropped"]:
                    placed.pop(doc_id, None)
                for p, label in zip(seg["points"], seg["labels"], strict=True):
                    placed.pop(p[0], None)  # a document back under its old id joins at the end
                    placed[p[0]] = (p, label)
            points = [p for p, _ in placed.values()]
            labels = [label for _, label in placed.values()]
            gone = set(state.fitted_gone)
            fitted = [r for r, p in enumerate(points) if p[0] in fitted_ids and p[0] not in gone]
        else:
            points = points + [p for seg in segments for p in seg["points"]]
            labels = labels + [label for seg in segments for label in seg["labels"]]
    k = len(base["clusters"])
    assignment = point_clusters(points)
    if len(assignment) and (assignment.min() < 0 or assignment.max() >= k):
        raise IndexCorruptError(f"{version / STATE_FILE}: a point in a cluster the map lacks; {REBUILD}")
    xy = np.array([p[1:3] for p in points], dtype=np.float64).reshape(-1, 2)
    sizes = np.bincount(assignment, minlength=k)
    remaining = [c for c in range(k) if sizes[c] > 0]
    renumber = np.full(k, -1, dtype=np.int64)
    renumber[remaining] = np.arange(len(remaining))
    if len(remaining) < k:
        points = [[p[0], p[1], p[2], int(renumber[p[3]])] for p in points]
    clusters = [
        {**base["clusters"][c], "id": new_id, **centre(xy[assignment == c]), "size": int(sizes[c])}
        for new_id, c in enumerate(remaining)
    ]
    return {
        **base,
        "documents": len(points),
        "points": points,
        "labels": labels,
        "clusters": clusters,
        "fitted": fitted,
        "changed_since_layout": state.changed_since_layout,
        "fingerprint": base.get("fingerprint") if not state.segments else None,
    }
