"""The corpus map of an index version (``map.json`` and its layered files), behind ``parts.IndexPart``.

The map's files are the store's (``store/corpus_map.py``, ``store/map_layers.py``); writing them means computing
the map, which is this package's job, so the part lives here as the near-duplicate keys' lives in ``dedup``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from semsearch.atlas.method import choose_method, requested_method
from semsearch.core.errors import SemsearchError
from semsearch.store.ann import open_version_vectors
from semsearch.store.corpus_map import load_map
from semsearch.store.manifest import Manifest
from semsearch.store.parts import BaseJob, PartSettings, SegmentJob
from semsearch.store.sections import MapSection


class MapPart:
    """The corpus map (``map.json`` and its layered files): a 2-d layout of the documents and their clusters."""

    name = "map"

    def write_base(self, job: BaseJob) -> MapSection:
        from semsearch.atlas.compute import write_map

        previous = None if job.previous is None else job.previous.path
        entry = write_map(
            job.folder, job.documents, job.vectors, previous=previous, relayout=job.relayout, method=job.map_method
        )
        return MapSection.from_dict(entry)

    def write_segment(self, job: SegmentJob) -> MapSection:
        from semsearch.atlas.append import append_map

        entry = append_map(
            job.version,
            job.previous_map,
            job.dropped_ids,
            job.added,
            job.added_vectors,
            job.previous_vectors_of,
            method=job.map_method,
        )
        return MapSection.from_dict(entry)

    def open(self, version: Path, manifest: Manifest) -> dict[str, Any] | None:
        return load_map(version)

    def verify(self, version: Path, manifest: Manifest) -> list[str]:
        """The map (base plus segments) assembles, and places exactly the version's documents."""
        try:
            data = self.open(version, manifest)
            if data is None:
                return []
            live = {int(i) for i in open_version_vectors(version, manifest)[1].ids}
        except SemsearchError as exc:
            return [str(exc)]
        try:
            placed = {int(p[0], 16) for p in data["points"]}
        except (TypeError, ValueError):
            return [f"{version}: the map holds a point whose id is no document id"]
        if placed != live or len(data["points"]) != len(live):
            return [
                f"{version}: the map places {len(data['points'])} documents, {len(placed ^ live)} differ from the index"
            ]
        return []

    def describe(self, manifest: Manifest) -> MapSection:
        return MapSection.from_dict(manifest.map)

    def stale(self, manifest: Manifest, settings: PartSettings | None = None) -> str:
        """Why the map is not the kind a build would draw now (the resolved method or SEMSEARCH_MAP, the size)."""
        try:
            wish = settings.map_method if settings and settings.map_method else requested_method()
            wanted = "off" if wish == "off" else choose_method(manifest.counts.documents, wish)
        except SemsearchError as exc:
            return str(exc)  # the full path reports the bad setting
        recorded = manifest.map.get("method")
        return "" if recorded == wanted else f"the map method is {wanted}, the version's {recorded}"
