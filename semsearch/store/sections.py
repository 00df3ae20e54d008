"""Typed manifest sections: what each index part records about itself, read and written as the same JSON keys.

``manifest.json`` keeps these as plain objects (``Manifest.vectors``, ``.faiss``/``.ann``, ``.lexical``,
``.map``), so older and newer releases read each other's manifests; a section reads one, keeps the keys this
release does not know in ``extra``, and writes back exactly the keys it read, in their order (a version
written before a key existed does not gain it on the way through).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, ClassVar, TypeVar

from semsearch.core.errors import IndexCorruptError
from semsearch.store.analyzer import ANALYZER_NAME
from semsearch.store.ann_kinds import AnnSpec
from semsearch.store.lexical import BM25Params
from semsearch.store.manifest import REBUILD

S = TypeVar("S", bound="Section")

_BOOKKEEPING = ("extra", "written")


@dataclass
class Section:
    """One manifest entry of an index part, typed; ``to_dict``/``from_dict`` keep its JSON as it was."""

    KEY: ClassVar[str] = ""

    extra: dict[str, Any] = field(default_factory=dict, kw_only=True)  # keys this release does not know
    written: tuple[str, ...] = field(default=(), kw_only=True)  # the keys the JSON holds, in order; () = all

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The keys this release knows, in the order a fresh section writes them."""
        return tuple(f.name for f in fields(cls) if f.name not in _BOOKKEEPING)

    def to_dict(self) -> dict[str, Any]:
        """The manifest entry."""
        known = set(self.names())
        order = self.written or (*self.names(), *self.extra)
        return {name: self._dump(name) if name in known else self.extra[name] for name in order}

    def entries(self) -> dict[str, Any]:
        """The manifest keys this section fills (most fill one)."""
        return {self.KEY: self.to_dict()}

    @classmethod
    def from_dict(cls: type[S], data: Any) -> S:
        """Read a manifest entry; raises IndexCorruptError when it is not an object of the expected values."""
        if not isinstance(data, dict):
            raise IndexCorruptError(f"the manifest's {cls.KEY!r} entry is not an object; {REBUILD}")
        known = set(cls.names())
        try:
            values = {k: cls._load(k, v) for k, v in data.items() if k in known}
            return cls(**values, extra={k: v for k, v in data.items() if k not in known}, written=tuple(data))
        except (TypeError, ValueError) as exc:
            raise IndexCorruptError(f"the manifest's {cls.KEY!r} entry is malformed ({exc}); {REBUILD}") from None

    def _dump(self, name: str) -> Any:
        return getattr(self, name)

    @classmethod
    def _load(cls, name: str, value: Any) -> Any:
        return value


@dataclass
class VectorsSection(Section):
    """The exact vectors of the base: their files and row count (``vectors``)."""

    KEY: ClassVar[str] = "vectors"

    file: str = ""
    ids: str = ""
    rows: int = 0


@dataclass
class FaissSection(Section):
    """The FAISS index file's structure and metric (``faiss``)."""

    KEY: ClassVar[str] = "faiss"

    type: str = ""
    metric: str = "inner_product"
    normalized: bool = True


@dataclass
class AnnSection:
    """The ANN part's two entries: the FAISS description and the spec it was built and tuned with."""

    faiss: FaissSection
    spec: AnnSpec

    def entries(self) -> dict[str, Any]:
        return {"faiss": self.faiss.to_dict(), "ann": self.spec.to_dict()}


@dataclass
class LexicalSection(Section):
    """The BM25 part: its variant and parameters, the analyzer, and what a build analysed (``lexical``)."""

    KEY: ClassVar[str] = "lexical"

    bm25: BM25Params = field(default_factory=BM25Params)
    terms: int = 0
    analysed: int = 0
    analyzer: str = ANALYZER_NAME  # the tokenizer and stemmer; absent in versions written before it was kept

    def _dump(self, name: str) -> Any:
        return asdict(self.bm25) if name == "bm25" else getattr(self, name)

    @classmethod
    def _load(cls, name: str, value: Any) -> Any:
        return BM25Params(**value) if name == "bm25" else value


@dataclass
class MapSection(Section):
    """The corpus map: its method, clusters and how it was laid out (``map``); ``method`` "off" when none."""

    KEY: ClassVar[str] = "map"

    file: str | None = None
    method: str = "off"
    clusters: int = 0
    seconds: float = 0.0
    reused: bool = False
    layout: str = ""
    laid_out_at: str = ""
    laid_out_documents: int = 0
    changed_since_layout: int = 0
