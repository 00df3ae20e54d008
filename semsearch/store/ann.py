"""Searching a version's ANN index: one structure, or a base structure beside appended segments.

Scores are exact inner products whatever the structure: an approximate kind's candidates are re-scored from the
exact vectors where its kind says so. The kind named in the manifest (``ann_kinds.py``, or a plugin's, through
the extension registry) gives the FAISS search parameters; ``ann_build.py`` plans, trains, tunes and writes
the structure this module opens.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError
from semsearch.core.idrows import RowIndex
from semsearch.store.ann_kinds import AnnKind, AnnSpec
from semsearch.store.manifest import Manifest
from semsearch.store.vectors import SegmentedVectorStore, VectorStore

VECTORS = "vectors.faiss"  # the ANN index file of a version (none for the flat kind since format 4)
TUNING_QUERIES = "tuning_queries.npy"  # encoded sample queries the search was tuned on
# IVF files at least this big are memory-mapped when opened (see AnnSearcher.open).
MMAP_MIN_BYTES = 512 << 20
# Exact search over a filter's documents beats an IVF scan that would mostly skip non-matching ids.
EXACT_FILTER_MAX = 20_000


class _TopK:
    """What both searchers answer: ``search`` as pairs, from their ``top`` arrays."""

    def top(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def search(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """Up to k (document number, cosine) pairs, best first; ``allowed`` restricts to those numbers."""
        nums, scores = self.top(query, k, allowed)
        return list(zip(nums.tolist(), scores.tolist(), strict=True))


class AnnSearcher(_TopK):
    """Search one version's ANN index; scores are exact inner products whatever the structure."""

    def __init__(self, index: Any, spec: AnnSpec, store: VectorStore, *, hidden: np.ndarray | None = None) -> None:
        self.index = index
        self.spec = spec
        self.kind = spec.structure
        self.store = store
        # Numbers the index holds that are no longer live (a segmented version's base, segments.py): every
        # search leaves them out. FAISS's IDSelectorNot keeps a bare pointer to the batch, so both are kept.
        self.hidden = hidden if hidden is not None and len(hidden) else None
        self._not_hidden: tuple[Any, Any] | None = None
        if self.hidden is not None:
            import faiss

            batch = faiss.IDSelectorBatch(self.hidden)
            self._not_hidden = (batch, faiss.IDSelectorNot(batch))

    @classmethod
    def open(
        cls,
        path: Path,
        spec: AnnSpec,
        store: VectorStore,
        *,
        mmap: bool | None = None,
        hidden: np.ndarray | None = None,
    ) -> AnnSearcher:
        """Open an ANN index file; IVF inverted lists of a big index are memory-mapped, not read into RAM.

        ``mmap=None`` maps IVF files of MMAP_MIN_BYTES or more: mapped lists cost a little more a query than
        lists in RAM, which only pays off when the file is big.
        """
        import faiss

        if mmap is None:
            mmap = path.is_file() and path.stat().st_size >= MMAP_MIN_BYTES
        flags = faiss.IO_FLAG_MMAP if mmap and spec.structure.mappable else 0
        return cls(read_faiss(path, flags), spec, store, hidden=hidden)

    @property
    def ntotal(self) -> int:
        """Live vectors: the index's, less the hidden ones."""
        return int(self.index.ntotal) - (len(self.hidden) if self.hidden is not None else 0)

    @property
    def dimension(self) -> int:
        return int(self.index.d)

    def top(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``search`` as arrays: (int64 document numbers, float32 cosines), best first, ties to the smaller number."""
        import faiss

        k = min(k, self.ntotal)
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        query = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        kind = self.kind
        if allowed is not None and not kind.exact and len(allowed) <= EXACT_FILTER_MAX:
            return self._exact_subset(query, k, allowed)
        sel = faiss.IDSelectorBatch(allowed) if allowed is not None else None
        # A filter keeps a fraction of each probed list (or graph neighbourhood): look wider in proportion.
        widen = self.ntotal / max(1, len(allowed)) if allowed is not None else 1.0
        if allowed is None and self._not_hidden is not None:
            # ``allowed`` never holds a hidden number (SegmentedSearcher removes them): only an open search
            # needs the selector, and it skips hidden rows in the lists it probes.
            sel = self._not_hidden[1]
            widen = self.index.ntotal / max(1, self.ntotal)
        fetch = kind.fetch(self.spec, k)
        params = kind.search_params(self.spec, sel, widen, self.ntotal, k)
        # One query gains nothing from OpenMP threads, and on a busy machine it would wait for a second core to be
        # scheduled. The setting is the calling thread's; it is restored so a build's training keeps every core.
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)
        try:
            scores, nums = self.index.search(query, fetch, params=params)
        finally:
            faiss.omp_set_num_threads(threads)
        keep = nums[0] >= 0
        found, approx = nums[0][keep], scores[0][keep]
        if allowed is not None and not kind.exact and len(found) < min(k, len(allowed)):
            return self._exact_subset(query, k, allowed)  # the widened search still came up short
        if type(kind).rescore is not AnnKind.rescore:  # the exact vectors are read only for kinds that ask
            approx = kind.rescore(self.store.get(found), approx, query[0])
        order = np.lexsort((found, -approx))[:k]
        return found[order].astype(np.int64, copy=False), approx[order].astype(np.float32, copy=False)

    def _exact_subset(self, query: np.ndarray, k: int, allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rows = self.store.rows_of(allowed)
        nums = np.asarray(allowed, dtype=np.int64)[rows >= 0]
        if not len(nums):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self.store.get(nums) @ query[0]
        order = np.lexsort((nums, -scores))[:k]
        return nums[order], scores[order].astype(np.float32, copy=False)


def flat_index(matrix: np.ndarray, ids: np.ndarray) -> Any:
    """The exact FAISS index (``IDMap2,Flat`` over inner product) of these rows, built in memory."""
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(int(matrix.shape[1])))
    if len(ids):
        index.add_with_ids(np.ascontiguousarray(matrix, dtype=np.float32), np.ascontiguousarray(ids, dtype=np.int64))
    return index


def writes_ann_file(spec: AnnSpec) -> bool:
    """Whether a version keeps its ANN structure in ``vectors.faiss``: all but the flat kind, whose exact index
    would only repeat ``vectors.npy`` float for float (it is built from that file when a version is opened)."""
    return spec.kind != "flat"


def _flat_from_vectors(version: Path, spec: AnnSpec) -> bool:
    """Whether a version's exact index is to be built from its vectors: a flat one without the file (format 4
    writes none; a version written before keeps and reads its own, and ``verify`` names it if it went missing)."""
    return not writes_ann_file(spec) and not (version / VECTORS).exists()


def read_faiss(path: Path, flags: int = 0) -> Any:
    """Load a FAISS index file (``flags``: FAISS IO flags), turning FAISS's errors into IndexCorruptError."""
    import faiss

    try:
        return faiss.read_index(str(path), flags)
    except Exception as exc:  # faiss raises RuntimeError with a C++ trace
        raise IndexCorruptError(f"{path} is not a readable FAISS index; rebuild with: semsearch index --full") from exc


class SegmentedSearcher(_TopK):
    """Search a version with extra segments: the base's ANN index less its hidden rows, plus each extra
    segment's live rows exactly, merged as one version holding only the live vectors would rank them."""

    def __init__(self, base: AnnSearcher, store: SegmentedVectorStore) -> None:
        self.base = base  # its store is ``store``, whose first rows are the base's live ones
        self.store = store
        self.spec = base.spec
        extra = store.parts[1:]
        # A filter's numbers are sorted into segments by binary search over these small arrays, not over the
        # whole corpus, which a large filter would pay for on every query.
        self._not_base = np.unique(np.concatenate([store.parts[0].hidden, *(p.ids for p in extra)]))
        self._extra_rows = [RowIndex(p.ids) for p in extra]
        self._extra_live: list[np.ndarray | None] = []
        for part in extra:
            mask = None
            if part.live is not None:
                mask = np.zeros(len(part.ids), dtype=bool)
                mask[part.live] = True
            self._extra_live.append(mask)

    @property
    def index(self) -> Any:
        """The base's FAISS index (Index.close sets None to release it)."""
        return self.base.index

    @index.setter
    def index(self, value: Any) -> None:
        self.base.index = value

    @property
    def ntotal(self) -> int:
        return len(self.store)

    @property
    def dimension(self) -> int:
        return self.base.dimension

    def top(self, query: np.ndarray, k: int, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``search`` as arrays: (int64 document numbers, float32 cosines), best first, ties to the smaller number."""
        k = min(k, self.ntotal)
        if k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        query = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        base_allowed = None
        if allowed is not None:
            allowed = np.asarray(allowed, dtype=np.int64)
            base_allowed = allowed[~_in_sorted(allowed, self._not_base)]
        found_nums, found_scores = [], []
        if self.base.ntotal and (base_allowed is None or len(base_allowed)):
            nums, scores = self.base.top(query, min(k, self.base.ntotal), base_allowed)
            found_nums.append(nums)
            found_scores.append(scores)
        for part, row_index, live in zip(self.store.parts[1:], self._extra_rows, self._extra_live, strict=True):
            picked = part.live
            if allowed is not None:
                picked = row_index.rows_of(allowed)
                picked = np.unique(picked[picked >= 0])
                if live is not None:
                    picked = picked[live[picked]]
            if picked is not None and not len(picked):
                continue
            if picked is None or 4 * len(picked) > len(part.ids):
                # Most rows wanted: one product over the mapped segment beats gathering rows first.
                scores = np.asarray(part.matrix @ query[0], dtype=np.float32)
                nums = part.ids
                if picked is not None:
                    nums, scores = nums[picked], scores[picked]
            else:
                nums, scores = part.ids[picked], np.asarray(part.matrix[picked] @ query[0], dtype=np.float32)
            nums, scores = best_scores(nums, scores, k)
            found_nums.append(nums)
            found_scores.append(scores)
        if not found_nums:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        nums, scores = np.concatenate(found_nums), np.concatenate(found_scores).astype(np.float32, copy=False)
        order = np.lexsort((nums, -scores))[:k]
        return nums[order].astype(np.int64, copy=False), scores[order]


def _in_sorted(values: np.ndarray, sorted_values: np.ndarray) -> np.ndarray:
    """Boolean mask: True where a value is in the sorted array."""
    if not len(sorted_values):
        return np.zeros(len(values), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_values, values), len(sorted_values) - 1)
    return np.asarray(sorted_values[pos] == values)


def best_scores(nums: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (number, score) pairs, best first, ties to the smaller number (all ties at the k-th kept)."""
    if len(nums) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]
        keep = scores >= kth
        nums, scores = nums[keep], scores[keep]
    order = np.lexsort((nums, -scores))[:k]
    return nums[order], scores[order]


Searcher = AnnSearcher | SegmentedSearcher


def open_version_vectors(version: Path, manifest: Manifest) -> tuple[Searcher, VectorStore]:
    """The ANN searcher and exact vectors of a version (format 1 versions hold one exact FAISS index).

    A version with extra segments (segments.py) gets a ``SegmentedSearcher`` over its live vectors.
    """
    dimension = manifest.model.dimension
    count = manifest.counts.vectors
    searcher: Searcher
    if manifest.ann is None:
        index = read_faiss(version / VECTORS)
        store = VectorStore.from_flat_faiss(index)
        searcher = AnnSearcher(index, AnnSpec(kind="flat", recall_at_10=1.0), store)
    elif not isinstance(manifest.ann, dict):
        raise IndexCorruptError(f"{version}: 'ann' is malformed in the manifest; rebuild with: semsearch index --full")
    else:
        spec = AnnSpec.from_dict(manifest.ann)
        segments = manifest.version_segments(version) if manifest.segmented else []
        if segments:
            store = VectorStore.open_segments(segments, dimension=dimension, count=count)
        else:
            store = VectorStore.open(version, dimension=dimension, count=count)
        in_memory = _flat_from_vectors(version, spec)
        if isinstance(store, SegmentedVectorStore):
            if in_memory:  # the base's index holds all the base's rows, hidden ones too, as its file would
                first = store.parts[0]
                index = flat_index(first.matrix, first.ids)
                base = AnnSearcher(index, spec, store, hidden=segments[0].hidden)
            else:
                base = AnnSearcher.open(version / VECTORS, spec, store, hidden=segments[0].hidden)
            if base.index.ntotal != segments[0].rows:
                raise IndexCorruptError(
                    f"{version / VECTORS} holds {base.index.ntotal} vectors, the base segment {segments[0].rows}; "
                    "rebuild with: semsearch index --full"
                )
            searcher = SegmentedSearcher(base, store)
        elif in_memory:
            searcher = AnnSearcher(flat_index(store.matrix, store.ids), spec, store)
        else:
            searcher = AnnSearcher.open(version / VECTORS, spec, store)
    if searcher.dimension != dimension:
        raise IndexCorruptError(
            f"{version / VECTORS} holds {searcher.dimension}-d vectors but the manifest says {dimension}; "
            "rebuild with: semsearch index --full"
        )
    return searcher, store
