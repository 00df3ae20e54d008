"""Building a version's ANN index, chosen by corpus size: exact, IVF, IVF-PQ with re-rank, HNSW.

Exact search reads every vector a query (its cost grows with the corpus, bound by memory bandwidth), so below
``FLAT_MAX_DOCS`` it answers within a few milliseconds and stays exact (docs/explanation/scale.md has the
figures). Above it an inverted file (IVF) probes a few lists; its ``nprobe`` is tuned at build time until
recall@10 against exact search on a sample of the corpus reaches ``RECALL_TARGET`` (counted tie-aware,
``tie_aware_recall``; IVF-PQ and HNSW aim no higher than ``CEILING_MARGIN`` below what their most search
effort reaches). When the raw vectors would exceed the memory budget, IVF-PQ keeps 48-byte codes and re-ranks
the best candidates exactly from the memory-mapped vector file. HNSW is offered on request; it cannot remove
ids, so a build that removes documents rebuilds its graph. What differs between the kinds (their parameters,
FAISS spelling, tuning knob and search parameters) is each kind's class (``ann_kinds.py``, or a plugin's, named
in the extension registry): this module names kinds only where "auto" chooses among the built-in ones
(``choose_kind``). ``ann.py`` searches what this module writes.
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
from semsearch.store.ann import TUNING_QUERIES, VECTORS, AnnSearcher, Searcher, writes_ann_file
from semsearch.store.ann_kinds import AnnSpec, ann_kind, ann_kind_names
from semsearch.store.manifest import Manifest
from semsearch.store.vectors import VectorStore, first_non_finite

FLAT_MAX_DOCS = 20_000
DEFAULT_MEMORY_BUDGET = 1 << 30  # bytes of raw float32 vectors an index may keep in RAM
# Tuned on a sample of queries; aiming a little above 0.95 keeps queries outside the sample at 0.95 or more
# (tuning on a sample slightly overstates what other queries reach).
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
    short queries (a document finds its neighbours more easily than a title does).
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
    kernel's rounding and visiting order, and differs between CPUs. Every recall of an ANN is computed here.
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
    if writes_ann_file(spec):
        faiss.write_index(index, str(folder / VECTORS))
    return {
        "faiss": {"type": factory_string(spec), "metric": "inner_product", "normalized": True},
        "ann": spec.to_dict(),
    }
