"""Approximate nearest-neighbour indexes chosen by corpus size: exact, IVF, IVF-PQ with re-rank, HNSW.

Measured on this 2-core machine (``python scripts/bench_scale.py``): exact search costs ~0.45 ms per 1,000
vectors a query (memory bandwidth bound), so below ``FLAT_MAX_DOCS`` it answers within a few ms and stays
exact. Above it an inverted file (IVF) probes a few lists; its ``nprobe`` is tuned at build time until
recall@10 against exact search on a sample of the corpus reaches ``RECALL_TARGET`` (counted tie-aware,
``tie_aware_recall``; IVF-PQ and HNSW aim no higher than ``CEILING_MARGIN`` below what their most search
effort reaches). When the raw vectors
would exceed the memory budget, IVF-PQ keeps 48-byte codes and re-ranks the best candidates exactly from the
memory-mapped vector file. HNSW is offered on request; it cannot remove ids, so a build that removes
documents rebuilds its graph. What differs between the kinds (their parameters, FAISS spelling, tuning knob
and search parameters) is each kind's class in ``ann_kinds.py``: this module names kinds only where "auto"
chooses among the built-in ones (``choose_kind``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import IndexCorruptError, InputError, SemsearchError
from semsearch.core.idrows import RowIndex
from semsearch.store.ann_kinds import (
    AnnKind,
    AnnSpec,
    ann_kind,
    ann_kind_names,
)
from semsearch.store.manifest import Manifest
from semsearch.store.vectors import SegmentedVectorStore, VectorStore, first_non_finite

VECTORS = "vectors.faiss"  # the ANN index file of a version
TUNING_QUERIES = "tuning_queries.npy"  # encoded sample queries the search was tuned on

FLAT_MAX_DOCS = 20_000
DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes of raw float32 vectors an index may keep in RAM
# Tuned on 200 sample queries; aiming a little above 0.95 keeps other queries at 0.95 or more (measured:
# 0.951 on the tuning titles gave 0.944 on 300 other titles).
RECALL_TARGET = 0.96
RECALL_SAMPLE = 200
RECALL_K = 10
# Trained structures (IVF centroids, PQ codebooks) are reused until the corpus has doubled or halved, or
# until the arrivals have drifted from what they were trained on: recall on the kept tuning queries more than
# DRIFT_RECALL below RECALL_TARGET (or below what training reached), or an nprobe DRIFT_NPROBE times the one
# tuned right after training (each query pays it).
RETRAIN_GROWTH = 2.0
DRIFT_NPROBE = 2.0
DRIFT_RECALL = 0.01  # recall lost against the target (or what training reached, when that was less)
# Tuning aims no higher than this below the recall its most search effort reaches, where that effort is not
# exact search (PQ codes ranked before the re-rank, an HNSW walk): a target above it is out of reach, and the
# last points below it cost the most lists.
CEILING_MARGIN = 0.01
# Cosines that differ by less than this are one score: float rounding between kernels (BLAS, FAISS's SIMD
# levels) on the same pair of vectors stays well below it.
TIE_TOLERANCE = 1e-5
# IVF files at least this big are memory-mapped when opened (see AnnSearcher.open).
MMAP_MIN_BYTES = 512 << 20
# Exact search over a filter's documents beats an IVF scan that would mostly skip non-matching ids.
EXACT_FILTER_MAX = 20_000


def parse_size(text: str) -> int:
    """Bytes from '512MB', '1.5GB', '800M', '1073741824'."""
    units = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "G": 1 << 30, "GB": 1 << 30}
    s = text.strip().upper().replace("IB", "B")
    number = s.rstrip("KMGB")
    unit = s[len(number) :]
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if unit not in units or value <= 0:
        raise InputError(f"not a size: {text!r} (use e.g. 512MB or 2GB)")
    return int(value * units[unit])


def choose_kind(n: int, dimension: int, requested: str = "auto", memory_budget: int = DEFAULT_MEMORY_BUDGET) -> str:
    """The ANN kind for n vectors: as requested, else exact when small, IVF-PQ over budget, else IVF."""
    choices = ("auto", *ann_kind_names())
    if requested not in choices:
        raise InputError(f"unknown ANN type {requested!r}; choose one of: {', '.join(choices)}")
    if n < 2:
        return "flat"  # nothing to cluster or to build a graph over
    if requested != "auto":
        return requested
    if n <= FLAT_MAX_DOCS:
        return "flat"
    return "ivfpq" if n * dimension * 4 > memory_budget else "ivf"


def plan(n: int, dimension: int, kind: str, requested: str) -> AnnSpec:
    """Fresh parameters for a kind at this corpus size."""
    spec = AnnSpec(kind=kind, requested=requested, trained_on=n)
    ann_kind(kind).plan(spec, n, dimension)
    return spec


def factory_string(spec: AnnSpec) -> str:
    return spec.structure.factory(spec)


QuerySource = np.ndarray | Callable[[], np.ndarray]


@dataclass
class PreviousAnn:
    """The live version's ANN index, so the next build can update it instead of training again."""

    path: Path
    spec: AnnSpec
    vectors: VectorStore


def build_ann(
    vectors: np.ndarray,
    ids: np.ndarray,
    *,
    requested: str = "auto",
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    previous: PreviousAnn | None = None,
    tuning_queries: QuerySource | None = None,
) -> tuple[Any, AnnSpec]:
    """Build (or update from ``previous``) the ANN index over vectors keyed by ids, tuned on a sample.

    ``tuning_queries`` (an array, or a function that encodes them, called only when something needs tuning)
    are query vectors to tune on; without them the corpus's own vectors stand in, which overstates recall for
    short queries (measured: 0.958 on documents vs 0.899 on titles at the same nprobe).
    """
    import faiss

    started = time.perf_counter()
    n, dimension = vectors.shape
    kind = choose_kind(n, dimension, requested, memory_budget)
    spec = plan(n, dimension, kind, requested)
    spec.memory_budget = memory_budget
    fresh = spec
    index = None
    if previous is not None and _can_update(previous.spec, spec, n):
        index = _update(previous, vectors, ids)
        if index is not None:
            kept = {
                k: getattr(previous.spec, k)
                for k in ("nlist", "pq_m", "pq_bits", "hnsw_m", "trained_on", "trained_nprobe", "trained_recall")
            }
            spec = AnnSpec(
                kind=kind,
                requested=requested,
                memory_budget=memory_budget,
                reused_training=True,
                rerank=spec.rerank,
                **kept,
            )
    queries = None
    if not ann_kind(kind).exact and n and tuning_queries is not None:  # encoded once, for whichever structure is tuned
        queries = tuning_queries() if callable(tuning_queries) else tuning_queries
    store = VectorStore(vectors, ids)
    if index is not None:
        _tune(index, spec, store, queries)
        why = drift(spec, previous.spec if previous is not None else None)
        if why:
            index, spec = None, fresh
            spec.retrained = why
    if index is None:
        index = faiss.index_factory(dimension, factory_string(spec), faiss.METRIC_INNER_PRODUCT)
        if not index.is_trained:
            sample = _training_sample(vectors, spec)
            if first_non_finite(sample) is not None:  # FAISS k-means would die with a traceback on it
                raise SemsearchError("a vector to train the ANN index on is not finite (NaN or inf)")
            index.train(sample)
        if n:
            index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), ids)
        _tune(index, spec, store, queries)
        spec.trained_nprobe, spec.trained_recall = spec.nprobe, spec.recall_at_10
    spec.build_seconds = round(time.perf_counter() - started, 3)
    return index, spec


def drift(updated: AnnSpec, before: AnnSpec | None) -> str:
    """Why an updated IVF no longer serves as trained ("" when it does): recall or nprobe past their limits."""
    if not updated.structure.drifts or not updated.reused_training:
        return ""
    # Versions from before these were recorded measure from what they were last tuned to.
    reached = updated.trained_recall
    if reached is None and before is not None:
        reached = before.recall_at_10
    floor = min(RECALL_TARGET, reached or RECALL_TARGET) - DRIFT_RECALL
    if updated.recall_at_10 is not None and updated.recall_at_10 < floor:
        return f"recall@10 {updated.recall_at_10:.3f} below {floor:.3f} on the kept queries after the update"
    base = updated.trained_nprobe or (before.nprobe if before is not None else 0)
    if base and updated.nprobe > DRIFT_NPROBE * base:
        return f"nprobe grew from {base} to {updated.nprobe} to keep recall@10 at {RECALL_TARGET}"
    return ""


def _can_update(old: AnnSpec, new: AnnSpec, n: int) -> bool:
    if old.kind != new.kind or new.structure.exact:
        return False  # an exact index costs no training: rebuilding it is as cheap as updating it
    return old.trained_on / RETRAIN_GROWTH <= n <= old.trained_on * RETRAIN_GROWTH


def _update(previous: PreviousAnn, vectors: np.ndarray, ids: np.ndarray) -> Any | None:
    """Remove what left or changed, add what arrived; None when the structure cannot do it (HNSW removals)."""
    import faiss

    old = previous.vectors
    rows_in_old = old.rows_of(ids)
    common = rows_in_old >= 0
    changed = np.zeros(len(ids), dtype=bool)
    # An id whose vector differs (another title, say) is replaced, not kept stale; compared in chunks so
    # that a 1M-vector corpus does not need a second copy of its vectors.
    for start in range(0, len(ids), 65_536):
        part = slice(start, start + 65_536)
        rows = rows_in_old[part]
        hit = rows >= 0
        if hit.any():
            changed[start : start + 65_536][hit] = np.any(old.matrix[rows[hit]] != vectors[part][hit], axis=1)
    gone = np.setdiff1d(old.ids, ids[common & ~changed], assume_unique=True)
    if not previous.spec.structure.removes_ids and len(gone):
        return None
    try:
        index = faiss.read_index(str(previous.path))
    except Exception:  # a damaged previous index is just not reused
        return None
    if index.ntotal != len(old):
        return None
    if len(gone):
        index.remove_ids(np.ascontiguousarray(gone, dtype=np.int64))  # type: ignore[arg-type]
    add = ~common | changed
    if add.any():
        index.add_with_ids(np.ascontiguousarray(vectors[add], dtype=np.float32), ids[add])
    return index


def _training_sample(vectors: np.ndarray, spec: AnnSpec) -> np.ndarray:
    """Enough points for k-means without reading every vector: 64 per centroid (FAISS wants 39 to 256).

    Training cost grows with points x centroids; at 1M vectors (nlist 4000) 256 per centroid would mean
    clustering the whole corpus.
    """
    want = max(64 * spec.nlist, 256 * (1 << spec.pq_bits) if spec.pq_bits else 0, 1)
    if len(vectors) <= want:
        return np.ascontiguousarray(vectors, dtype=np.float32)
    rows = np.sort(np.random.default_rng(0).choice(len(vectors), want, replace=False))
    return np.ascontiguousarray(vectors[rows], dtype=np.float32)


def query_like_texts(documents: Sequence[Any], size: int = RECALL_SAMPLE) -> list[str]:
    """Short texts that look like what people type: titles of a seeded sample, else a first sentence."""
    if not documents:
        return []
    rows = np.sort(np.random.default_rng(0).choice(len(documents), min(size, len(documents)), replace=False))
    texts = []
    for row in rows:
        doc = documents[int(row)]
        title = (doc.title or "").strip()
        first = doc.text.strip().split(". ")[0][:200]
        texts.append(title if len(title) >= 10 else first)
    return [t for t in texts if t]


def _tune(index: Any, spec: AnnSpec, store: VectorStore, queries: np.ndarray | None = None) -> None:
    """Pick the cheapest nprobe / efSearch whose recall@10 on sample queries reaches RECALL_TARGET, or
    CEILING_MARGIN below what the most effort reaches when that is less."""
    n = len(store)
    if n == 0:
        return
    kind = spec.structure
    if kind.exact:
        spec.recall_at_10 = 1.0
        spec.recall_sample = 0
        return
    if queries is not None and len(queries):
        vectors = np.ascontiguousarray(queries, dtype=np.float32)
        ids, scores = exact_top(store, vectors, RECALL_K)
        probe = RecallProbe(vectors, np.full(len(vectors), -1, dtype=np.int64), list(ids), list(scores))
        spec.recall_on = "queries"
    else:
        probe = exact_sample(store, RECALL_SAMPLE, RECALL_K)
        spec.recall_on = "documents"
    steps = list(kind.steps(spec))
    target = RECALL_TARGET
    if steps and not kind.exact_at_last_step:
        # Compressed codes (or a graph walk) may cap recall near or below the target even at the most effort;
        # aiming at the cap itself would buy its last points with every list.
        kind.set_effort(spec, steps[-1])
        target = min(target, recall_at(AnnSearcher(index, spec, store), probe) - CEILING_MARGIN)
    recall = 0.0
    for step in steps:
        kind.set_effort(spec, step)
        recall = recall_at(AnnSearcher(index, spec, store), probe)
        if recall >= target:
            break
    spec.recall_at_10 = round(recall, 4)
    spec.recall_sample = len(probe.vectors)


@dataclass
class RecallProbe:
    """Queries to measure recall on, with each one's exact neighbours (best first) and their exact scores."""

    vectors: np.ndarray
    own: np.ndarray  # the number each query leaves out of its neighbours (its own document), -1 for none
    ids: list[np.ndarray]
    scores: list[np.ndarray]


def exact_sample(store: VectorStore, size: int, k: int) -> RecallProbe:
    """A seeded sample of the corpus's own vectors as queries, with each one's exact top-k.

    A query's own document is left out of its neighbours, as ``related`` does, so recall is not inflated by
    the one hit every structure finds.
    """
    n = len(store)
    rows = np.sort(np.random.default_rng(0).choice(n, min(size, n), replace=False))
    queries = np.ascontiguousarray(store.matrix[rows], dtype=np.float32)
    own = store.ids[rows]
    ids, scores = exact_top(store, queries, k + 1)
    keep = [i != own[q] for q, i in enumerate(ids)]
    return RecallProbe(
        queries,
        own,
        [i[m][:k] for i, m in zip(ids, keep, strict=True)],
        [s[m][:k] for s, m in zip(scores, keep, strict=True)],
    )


def exact_top(store: VectorStore, queries: np.ndarray, k: int, chunk: int = 131_072) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-k (ids, scores) per query by brute force, best first, reading the vectors in chunks (bounded
    memory at 1M+)."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for start in range(0, len(store), chunk):
        block = np.asarray(store.matrix[start : start + chunk], dtype=np.float32)
        scores = queries @ block.T
        ids = np.broadcast_to(store.ids[start : start + chunk], scores.shape)
        scores = np.concatenate([best_s, scores], axis=1)
        ids = np.concatenate([best_i, ids], axis=1)
        take = min(k, scores.shape[1])
        part = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        best_s = np.take_along_axis(scores, part, axis=1)
        best_i = np.take_along_axis(ids, part, axis=1)
    order = np.argsort(-best_s, axis=1, kind="stable")
    return np.take_along_axis(best_i, order, axis=1), np.take_along_axis(best_s, order, axis=1)


def tie_aware_recall(
    store: VectorStore, queries: np.ndarray, found: Sequence[np.ndarray], exact_scores: Sequence[np.ndarray]
) -> float:
    """Mean recall@k of found ids, k the length of each query's exact top-k scores: a found id is a hit when
    its exact score reaches the k-th exact score.

    Counting the ids of the exact top-k instead would score an exact search below 1 wherever documents tie at
    the k-th place (duplicates, hashed stand-in vectors): which of them fill the last places follows each
    kernel's rounding and visiting order, and differs between CPUs. Every recall of an ANN is measured here.
    """
    total = 0.0
    for query, got, best in zip(queries, found, exact_scores, strict=True):
        if not len(best):
            total += 1.0  # no neighbour to find
            continue
        got = np.asarray(got, dtype=np.int64)[: len(best)]
        scores = store.get(got) @ np.asarray(query, dtype=np.float32) if len(got) else np.zeros(0)
        total += int(np.count_nonzero(scores >= best[-1] - TIE_TOLERANCE)) / len(best)
    return total / max(1, len(found))


def recall_at(searcher: Searcher, probe: RecallProbe) -> float:
    """Tie-aware recall@k of the searcher on a probe (k = its neighbours per query), own ids left out."""
    found = []
    for q, self_id, expected in zip(probe.vectors, probe.own, probe.ids, strict=True):
        # One more only when the query's own document is to be left out: a search for k is what is measured.
        nums, _ = searcher.top(q.reshape(1, -1), len(expected) + int(self_id >= 0))
        found.append(nums[nums != self_id][: len(expected)])
    return tie_aware_recall(searcher.store, probe.vectors, found, probe.scores)


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

        ``mmap=None`` maps IVF files of MMAP_MIN_BYTES or more: measured here, mapped lists cost ~0.3 ms more a
        query (0.37 vs 0.10 ms p50 at 26k vectors), which only pays off when the file is big.
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
        # One query gains nothing from OpenMP threads, and on a busy machine waiting for a second core to be
        # scheduled cost ~5 ms a query here (91-vector index: 25 vs 16 ms per `search` under load). The
        # setting is the calling thread's; it is restored so a build's training keeps every core.
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
        # whole corpus (measured: rows_of on a 51k-number filter cost ~3 ms a query at 154k).
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
        if isinstance(store, SegmentedVectorStore):
            base = AnnSearcher.open(version / VECTORS, spec, store, hidden=segments[0].hidden)
            if base.index.ntotal != segments[0].rows:
                raise IndexCorruptError(
                    f"{version / VECTORS} holds {base.index.ntotal} vectors, the base segment {segments[0].rows}; "
                    "rebuild with: semsearch index --full"
                )
            searcher = SegmentedSearcher(base, store)
        else:
            searcher = AnnSearcher.open(version / VECTORS, spec, store)
    if searcher.dimension != dimension:
        raise IndexCorruptError(
            f"{version / VECTORS} holds {searcher.dimension}-d vectors but the manifest says {dimension}; "
            "rebuild with: semsearch index --full"
        )
    return searcher, store


def previous_ann(version: Path, manifest: Manifest) -> PreviousAnn | None:
    """The live version's ANN index and exact vectors, when they can seed an incremental update."""
    if not isinstance(manifest.ann, dict) or manifest.segmented:
        # A segmented version's FAISS index holds the base's rows only, hidden ones included: updating it
        # for the whole corpus would be wrong, so the next full build trains afresh.
        return None
    try:
        spec = AnnSpec.from_dict(manifest.ann)
        store = VectorStore.open(version, dimension=manifest.model.dimension, count=manifest.counts.vectors)
    except (IndexCorruptError, KeyError, TypeError, ValueError, EOFError):
        return None  # a damaged previous version is simply not reused
    return PreviousAnn(version / VECTORS, spec, store)


def write_ann(
    folder: Path,
    vectors: np.ndarray,
    ids: np.ndarray,
    *,
    requested: str = "auto",
    memory_budget: int | None = None,
    previous: PreviousAnn | None = None,
    tuning_queries: QuerySource | None = None,
    fallback_queries: Path | None = None,
) -> dict[str, Any]:
    """Build the version's ANN index and write its files; returns the manifest's "faiss" and "ann" entries.

    ``tuning_queries`` (vectors, or a function encoding them) tune the search; without them the ones kept in
    ``fallback_queries`` (the previous version's folder) are used, so ``remove``, which loads no encoder,
    tunes on the same queries. They are kept in this version for the same reason.
    """
    import faiss

    used: list[np.ndarray] = []

    def queries() -> np.ndarray:
        found = tuning_queries() if callable(tuning_queries) else tuning_queries
        kept = fallback_queries / TUNING_QUERIES if fallback_queries is not None else None
        if found is None and kept is not None and kept.is_file():
            with contextlib.suppress(OSError, ValueError):
                found = np.load(kept, allow_pickle=False)
        if found is None:
            found = np.zeros((0, vectors.shape[1]), dtype=np.float32)
        used.append(np.ascontiguousarray(found, dtype=np.float32))
        return used[-1]

    index, spec = build_ann(
        vectors,
        ids,
        requested=requested,
        memory_budget=memory_budget or DEFAULT_MEMORY_BUDGET,
        previous=previous,
        tuning_queries=queries,
    )
    if used and len(used[-1]) and used[-1].shape[1:] == vectors.shape[1:]:
        np.save(folder / TUNING_QUERIES, used[-1], allow_pickle=False)
    faiss.write_index(index, str(folder / VECTORS))
    return {
        "faiss": {"type": factory_string(spec), "metric": "inner_product", "normalized": True},
        "ann": spec.to_dict(),
    }
