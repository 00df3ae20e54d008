"""The ANN kinds a version can hold, one class each, named in the extension registry (``core/registry.py``).

A kind says how its FAISS structure is planned for a corpus size, spelled for ``faiss.index_factory``,
tuned (which search-effort knob, over which steps), searched (FAISS search parameters, candidates fetched,
re-scored) and described. ``ann.py`` builds, updates, tunes and searches through these methods alone, so a
new kind is one subclass of ``AnnKind``, registered by ``register_ann_kind`` or by a package's
``semsearch.ann_kinds`` entry point (see docs/explanation/extending.md); the built-in ones below are registry
entries too. ``AnnSpec`` lives here, beside the kinds its ``kind`` names, so the two never import each other in
a circle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar

import numpy as np

from semsearch.core import registry
from semsearch.core.errors import IndexCorruptError, InputError

RERANK_DEPTH = 100
HNSW_M = 32
NPROBE_STEPS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096)
EF_STEPS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


@dataclass
class AnnSpec:
    """What ANN structure a version holds and how it is searched (stored in the manifest as ``ann``)."""

    kind: str
    requested: str = "auto"
    memory_budget: int = 0
    nlist: int = 0
    nprobe: int = 0
    pq_m: int = 0
    pq_bits: int = 0
    hnsw_m: int = 0
    ef_search: int = 0
    rerank: int = 0
    trained_on: int = 0
    recall_at_10: float | None = None
    recall_sample: int = 0
    recall_on: str = ""  # "queries" (titles / first sentences, encoded) or "documents" (their own vectors)
    build_seconds: float = 0.0
    reused_training: bool = False
    trained_nprobe: int = 0  # the nprobe tuned right after the structure was trained (drift is measured from it)
    trained_recall: float | None = None  # the recall@10 reached right after training
    retrained: str = ""  # why this build trained afresh though the old structure could have been updated

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnnSpec:
        known = {f.name for f in fields(cls)}
        try:
            spec = cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise IndexCorruptError(
                f"the manifest's 'ann' entry is malformed ({exc}); rebuild with: semsearch index --full"
            ) from None
        if not registry.has("ann", spec.kind):
            raise IndexCorruptError(
                f"unknown ANN kind {spec.kind!r} in the manifest; rebuild with: semsearch index --full"
            )
        return spec

    @property
    def structure(self) -> AnnKind:
        """The kind class behind ``kind``."""
        return ann_kind(self.kind)

    def describe(self) -> str:
        """One line for ``semsearch info``: ``ivf (nlist 304, nprobe 16), recall@10 0.97``."""
        recall = f", recall@10 {self.recall_at_10:.3f}" if self.recall_at_10 is not None else ""
        retrained = f"; trained again: {self.retrained}" if self.retrained else ""
        return f"{self.kind} ({self.structure.describe(self)}){recall}{retrained}"


class AnnKind:
    """One ANN structure: how it is planned, spelled for FAISS, tuned and searched. Subclass to add a kind."""

    name: ClassVar[str] = ""
    exact: ClassVar[bool] = False  # answers the exact top-k: never tuned, never updated (rebuilding costs as much)
    removes_ids: ClassVar[bool] = True  # whether an update can drop ids in place (an HNSW graph cannot)
    mappable: ClassVar[bool] = False  # whether FAISS can memory-map the file (IO_FLAG_MMAP: inverted lists)
    drifts: ClassVar[bool] = False  # a trained structure whose recall drifts as arrivals come (retrain then)
    # Whether its last tuning step is an exact search (every IVF list probed, exact scores): recall 1 there,
    # so tuning need not measure what the most effort reaches before aiming below it.
    exact_at_last_step: ClassVar[bool] = False

    def plan(self, spec: AnnSpec, n: int, dimension: int) -> None:
        """Fill in the fresh parameters of this kind for n vectors of a dimension."""

    def factory(self, spec: AnnSpec) -> str:
        """The ``faiss.index_factory`` description of the structure."""
        raise NotImplementedError

    def describe(self, spec: AnnSpec) -> str:
        """Its parameters in words, for ``semsearch info`` (``nlist 304, nprobe 16``)."""
        raise NotImplementedError

    def steps(self, spec: AnnSpec) -> Sequence[int]:
        """The search efforts tuning tries, cheapest first (none for an exact kind)."""
        return ()

    def effort(self, spec: AnnSpec) -> int:
        """The search effort the spec holds (nprobe, efSearch)."""
        return 0

    def set_effort(self, spec: AnnSpec, value: int) -> None:
        """Record a search effort in the spec."""

    def search_params(self, spec: AnnSpec, sel: Any, widen: float, ntotal: int, k: int) -> Any:
        """FAISS search parameters for one query: ``sel`` restricts ids, ``widen`` scales the effort up for it."""
        import faiss

        return faiss.SearchParameters(sel=sel) if sel is not None else None  # type: ignore[call-arg]

    def fetch(self, spec: AnnSpec, k: int) -> int:
        """How many candidates to ask FAISS for to answer k."""
        return k

    def rescore(self, exact_vectors: np.ndarray, approx: np.ndarray, query: np.ndarray) -> np.ndarray:
        """The scores to rank candidates by (``exact_vectors``: theirs, exact); approximate ones as found."""
        return approx


class Flat(AnnKind):
    """Exact search over every vector (with ids): no training, recall 1."""

    name = "flat"
    exact = True

    def factory(self, spec: AnnSpec) -> str:
        return "IDMap2,Flat"

    def describe(self, spec: AnnSpec) -> str:
        return "exact"


class Ivf(AnnKind):
    """An inverted file: k-means lists, of which a query probes ``nprobe``."""

    name = "ivf"
    mappable = True
    drifts = True
    exact_at_last_step = True

    def plan(self, spec: AnnSpec, n: int, dimension: int) -> None:
        # ~4·sqrt(n) lists, but never fewer than ~39 training points per centroid (FAISS warns below that).
        spec.nlist = max(1, min(round(4 * math.sqrt(n)), n // 39 or 1))
        spec.nprobe = min(16, spec.nlist)

    def factory(self, spec: AnnSpec) -> str:
        return f"IVF{spec.nlist},Flat"

    def describe(self, spec: AnnSpec) -> str:
        return f"nlist {spec.nlist}, nprobe {spec.nprobe}"

    def steps(self, spec: AnnSpec) -> Sequence[int]:
        return [*(p for p in NPROBE_STEPS if p < spec.nlist), spec.nlist]

    def effort(self, spec: AnnSpec) -> int:
        return spec.nprobe

    def set_effort(self, spec: AnnSpec, value: int) -> None:
        spec.nprobe = value

    def search_params(self, spec: AnnSpec, sel: Any, widen: float, ntotal: int, k: int) -> Any:
        import faiss

        nprobe = min(spec.nlist, math.ceil(spec.nprobe * widen))
        return faiss.SearchParametersIVF(sel=sel, nprobe=nprobe)  # type: ignore[call-arg]


class IvfPq(Ivf):
    """An inverted file of product-quantized codes; candidates are re-ranked by their exact cosines."""

    name = "ivfpq"
    exact_at_last_step = False  # probing every list still ranks by the codes: the re-rank depth caps recall

    def plan(self, spec: AnnSpec, n: int, dimension: int) -> None:
        super().plan(spec, n, dimension)
        spec.pq_m = _pq_m(dimension)
        # 8-bit codebooks want ~39 training points per code (FAISS warns below); small corpora get fewer bits.
        spec.pq_bits = max(1, min(8, int(math.log2(max(2, n / 39)))))
        spec.rerank = RERANK_DEPTH

    def factory(self, spec: AnnSpec) -> str:
        # "np": no polysemous training, a simulated annealing far slower than the rest of the build.
        return f"IVF{spec.nlist},PQ{spec.pq_m}x{spec.pq_bits}np"

    def describe(self, spec: AnnSpec) -> str:
        return f"nlist {spec.nlist}, nprobe {spec.nprobe}, PQ{spec.pq_m}x{spec.pq_bits}, re-rank {spec.rerank}"

    def fetch(self, spec: AnnSpec, k: int) -> int:
        return max(k, spec.rerank)

    def rescore(self, exact_vectors: np.ndarray, approx: np.ndarray, query: np.ndarray) -> np.ndarray:
        # PQ scores are approximations: rank the candidates by their exact cosine.
        return np.asarray(exact_vectors @ query)


class Hnsw(AnnKind):
    """A navigable small-world graph; a query walks ``efSearch`` candidates. It cannot remove ids."""

    name = "hnsw"
    removes_ids = False

    def plan(self, spec: AnnSpec, n: int, dimension: int) -> None:
        spec.hnsw_m = HNSW_M
        spec.ef_search = 64

    def factory(self, spec: AnnSpec) -> str:
        return f"IDMap2,HNSW{spec.hnsw_m}"

    def describe(self, spec: AnnSpec) -> str:
        return f"M {spec.hnsw_m}, efSearch {spec.ef_search}"

    def steps(self, spec: AnnSpec) -> Sequence[int]:
        return EF_STEPS

    def effort(self, spec: AnnSpec) -> int:
        return spec.ef_search

    def set_effort(self, spec: AnnSpec, value: int) -> None:
        spec.ef_search = value

    def search_params(self, spec: AnnSpec, sel: Any, widen: float, ntotal: int, k: int) -> Any:
        import faiss

        ef = min(max(ntotal, k), math.ceil(max(spec.ef_search, k) * widen))
        return faiss.SearchParametersHNSW(sel=sel, efSearch=ef)  # type: ignore[attr-defined]


def _pq_m(dimension: int) -> int:
    """Sub-quantizers: 8 dimensions each (48 for MiniLM's 384), a divisor of the dimension."""
    for m in range(max(1, dimension // 8), 0, -1):
        if dimension % m == 0:
            return m
    return 1


# One instance per kind class: a kind holds no state, and the registry hands out the class.
_instances: dict[type[AnnKind], AnnKind] = {}


def register_ann_kind(kind: type[AnnKind]) -> type[AnnKind]:
    """Make a kind available to builds (``BuildOptions(ann=kind.name)``, ``--ann``) and searches; a decorator too."""
    if not kind.name or kind.name == "auto":
        raise ValueError(f"an ANN kind needs a name other than 'auto', not {kind.name!r}")
    known = registry.entry("ann", kind.name)
    if known is not None:
        same = (registry.load("ann", kind.name) if known.built_in else known.target) is kind
        if not same:
            raise ValueError(f"an ANN kind named {kind.name!r} is already registered")
        if known.built_in:
            return kind
    registry.register("ann", kind.name, kind)
    return kind


def unregister_ann_kind(name: str) -> None:
    """Withdraw a registered kind that is not built in (an extension's tests put things back this way)."""
    registry.unregister("ann", name)


def ann_kind(name: str) -> AnnKind:
    """The kind registered under a name (KeyError when none is; a broken plugin is an InputError)."""
    loaded = registry.load("ann", name)
    if not (isinstance(loaded, type) and issubclass(loaded, AnnKind)):
        found = registry.entry("ann", name)
        raise InputError(f"{found.describe() if found else name} is not an AnnKind subclass")
    kind = _instances.get(loaded)
    if kind is None:
        kind = _instances[loaded] = loaded()
    return kind


def ann_kind_names() -> tuple[str, ...]:
    """Every registered kind's name, built-in ones first."""
    return registry.names("ann")
