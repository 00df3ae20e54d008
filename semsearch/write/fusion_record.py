"""Record a new hybrid weighting in an index: a version whose only change is the manifest's "fusion" entry.

Every data file of the live version is hard-linked (copied where links fail) into the new one, so recording a
weight costs a manifest, and it is published as any version is: atomically, under the writer lock, the
previous version untouched until the swap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from semsearch.core.errors import SemsearchError
from semsearch.core.fileio import utc_now
from semsearch.store.versions import PreviousVersion, new_version
from semsearch.write.segment_writer import link_version


def record_fusion(index_dir: str | Path, entry: dict[str, Any], *, expected: str, wait: bool = False) -> Path:
    """Publish the live version again with ``entry`` as its "fusion"; the new version's folder.

    ``expected`` is the version folder the weight was measured on: when another writer published since, the
    measurement no longer describes the index and nothing is written.
    """
    index_path = Path(index_dir)
    with new_version(index_path, wait=wait) as writer:
        previous = PreviousVersion.load(index_path)
        if previous is None or previous.path.name != expected:
            now = previous.path.name if previous is not None else "no version"
            raise SemsearchError(
                f"{index_path} changed while its fusion was measured ({expected} is now {now}); measure again"
            )
        link_version(previous.path, writer.path, every=True)
        manifest = previous.manifest.updated(built_at=utc_now(), fusion=dict(entry), files={})
        return writer.publish(manifest, linked_from=previous.path, linked_files=previous.manifest.files)
