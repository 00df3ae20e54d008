"""The live index: the version CURRENT names, followed as new versions are published, for long-running faces.

``semsearch serve`` and ``semsearch mcp`` answer every request from a ``LiveIndex``: each request reads CURRENT
(a few bytes); when it names a new version, that request opens it beside the live one (reusing the loaded
query encoder when the model is the same) and swaps it in atomically; requests already running finish on the
old version, which is closed when its last one ends.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semsearch.core.errors import SemsearchError
from semsearch.encode.embedder import Embedder
from semsearch.query.search import Index
from semsearch.store.layout import current_version, read_pointer
from semsearch.store.manifest import Manifest

RETRY_FAILED_S = 5.0  # a version that failed to open is tried again after this long, not on every request

log = logging.getLogger("semsearch.query.live")


@dataclass
class LoadedVersion:
    """One opened index version with the requests now using it."""

    index: Index
    name: str
    info: dict[str, Any]
    refs: int = 0
    retired: bool = False
    _map: dict[str, Any] | None = field(default=None, repr=False)
    _map_loaded: bool = False

    def corpus_map(self) -> dict[str, Any] | None:
        """The version's corpus map, read once; None when it has none."""
        if not self._map_loaded:
            from semsearch.store.corpus_map import load_map

            self._map = load_map(self.index.version)
            self._map_loaded = True
        return self._map


def _reusable_encoder(previous: LoadedVersion | None, manifest: Manifest) -> Embedder | None:
    """The previous version's query encoder when the new version was built with the same model and runtime."""
    if previous is None or not previous.index.manifest.model.same_encoder(manifest.model):
        return None
    return previous.index.embedder  # loaded when that version was opened


class LiveIndex:
    """The index a server answers from: follows CURRENT, swaps in new versions, closes old ones when idle.

    Every request reads CURRENT (a few bytes). When it names a new version, that request opens it (reusing
    the loaded query encoder when the model is the same) while the others keep answering from the old one;
    the swap is atomic, and the old version is closed once its last request has finished.
    """

    def __init__(self, path: str | Path, *, embedder: Embedder | None = None, query_threads: int | None = None) -> None:
        """``query_threads``: the ONNX threads of the query encoder each version opens (None: every core)."""
        self.path = Path(path)
        self._embedder = embedder
        self._query_threads = query_threads
        self._lock = threading.Lock()  # guards _live and the reference counts
        self._opening = threading.Lock()  # one thread opens a new version; the rest keep serving
        self._failed: tuple[str, float] | None = None
        version = current_version(self.path)
        self._live = self._open(version)

    @property
    def version(self) -> str:
        """The name of the version requests are answered from."""
        return self._live.name

    def _open(self, version: Path, previous: LoadedVersion | None = None) -> LoadedVersion:
        manifest = Manifest.read(version)
        embedder = self._embedder or _reusable_encoder(previous, manifest)
        index = Index(self.path, version, manifest, embedder=embedder, query_threads=self._query_threads)
        try:
            # Load everything now: no request pays for it, and the files may be pruned while this version serves.
            _ = index.lexical
            _ = index.embedder
            info = index.info().to_dict()
        except BaseException:
            index.close()
            raise
        return LoadedVersion(index=index, name=version.name, info=info)

    def refresh(self) -> None:
        """Swap in the version CURRENT names, if it is new and opens; otherwise keep the live one."""
        name = read_pointer(self.path)
        if not name or name == self._live.name:
            return
        if self._failed and self._failed[0] == name and time.monotonic() - self._failed[1] < RETRY_FAILED_S:
            return
        if not self._opening.acquire(blocking=False):
            return  # another request is opening it; answer from the live version meanwhile
        try:
            if name == self._live.name:
                return
            try:
                loaded = self._open(self.path / name, self._live)
            except (SemsearchError, OSError) as exc:
                # A version pruned or replaced mid-open, or a damaged one: keep serving the live version.
                log.warning("cannot open %s (%s); still serving %s", name, exc, self._live.name)
                self._failed = (name, time.monotonic())
                return
            with self._lock:
                old, self._live = self._live, loaded
                old.retired = True
                idle = old.refs == 0
            if idle:
                old.index.close()
            log.info("now serving %s (was %s)", loaded.name, old.name)
        finally:
            self._opening.release()

    @contextlib.contextmanager
    def use(self) -> Iterator[LoadedVersion]:
        """The live version, held open until the block ends."""
        self.refresh()
        with self._lock:
            loaded = self._live
            loaded.refs += 1
        try:
            yield loaded
        finally:
            with self._lock:
                loaded.refs -= 1
                idle = loaded.retired and loaded.refs == 0
            if idle:
                loaded.index.close()

    def close(self) -> None:
        """Close the live version (server shutdown)."""
        with self._lock:
            self._live.retired = True
            idle = self._live.refs == 0
        if idle:
            self._live.index.close()
