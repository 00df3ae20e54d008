"""Query an index: nearest abstracts to a text, or to a paper already in the index."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .dedup import is_near_duplicate, text_hash
from .embed import Embedder
from .encoders import check_embedder, check_requested_model, open_query_encoder
from .errors import IndexCorruptError, QueryError, UnknownDocumentError
from .records import Document, Hit, SourceFile
from .store import (
    DOCS,
    VECTORS,
    DocumentStore,
    check_file_sizes,
    current_version,
    doc_id_from_num,
    doc_num,
    read_faiss,
    read_manifest,
)

DEFAULT_INDEX = Path("indexes") / "default"
MAX_K = 10_000


def default_index_path() -> Path:
    """The index used when none is named: $SEMSEARCH_INDEX, else indexes/default."""
    env = os.environ.get("SEMSEARCH_INDEX", "").strip()
    return Path(env) if env else DEFAULT_INDEX


@dataclass
class IndexInfo:
    """What ``semsearch info`` shows: the manifest plus what is measured on disk."""

    path: str
    version: str
    format_version: int
    model: str
    fingerprint: str
    dimension: int
    backend: str
    precision: str
    documents: int
    read: int
    exact_duplicates: int
    near_duplicates: int
    faiss: str
    built_at: str
    build_seconds: float
    size_bytes: int
    sources: list[SourceFile] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["sources"] = [s.to_dict() for s in self.sources]
        return out


def _check_k(k: int) -> None:
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise QueryError(f"k must be a positive integer, got {k!r}")
    if k > MAX_K:
        raise QueryError(f"k must be at most {MAX_K}, got {k}")


def _check_text(text: str, what: str = "query") -> str:
    if not isinstance(text, str) or not text.strip():
        raise QueryError(f"the {what} is empty")
    return text.strip()


class Index:
    """An opened index version: search it by text or by document.

    The encoder is loaded on first use, so opening an index for ``info`` or ``related ID`` is cheap.
    """

    def __init__(
        self,
        path: Path,
        version: Path,
        manifest: dict[str, Any],
        *,
        embedder: Embedder | None = None,
        model: str | None = None,
    ) -> None:
        self.path = path
        self.version = version
        self.manifest = manifest
        self._embedder = embedder
        check_file_sizes(version, manifest)
        self.vectors = read_faiss(version / VECTORS)
        self.store = DocumentStore(version / DOCS)
        model_info = manifest["model"]
        expected = int(manifest["counts"]["vectors"])
        if self.vectors.d != int(model_info["dimension"]):
            raise IndexCorruptError(
                f"{version / VECTORS} holds {self.vectors.d}-d vectors but the manifest says "
                f"{model_info['dimension']}; rebuild with: semsearch index --full"
            )
        if self.vectors.ntotal != expected or self.store.count() != expected:
            raise IndexCorruptError(
                f"{version} holds {self.vectors.ntotal} vectors and {self.store.count()} documents, "
                f"expected {expected}; rebuild with: semsearch index --full"
            )
        # Fail at open, not at the first query, when the caller asked for another model.
        if model is not None:
            check_requested_model(manifest, model)
        if embedder is not None:
            check_embedder(manifest, embedder)

    @classmethod
    def open(
        cls, path: str | Path | None = None, *, embedder: Embedder | None = None, model: str | None = None
    ) -> Index:
        """Open the live version of the index at ``path`` (default: $SEMSEARCH_INDEX or indexes/default)."""
        index_path = Path(path) if path is not None else default_index_path()
        version = current_version(index_path)
        return cls(index_path, version, read_manifest(version), embedder=embedder, model=model)

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.store.close()

    def __len__(self) -> int:
        return int(self.vectors.ntotal)

    @property
    def embedder(self) -> Embedder:
        """The query encoder (loaded on first use)."""
        if self._embedder is None:
            self._embedder = open_query_encoder(self.manifest, self.version)
        return self._embedder

    def info(self) -> IndexInfo:
        """The manifest's facts plus the version's size on disk."""
        m = self.manifest
        size = sum(p.stat().st_size for p in self.version.rglob("*") if p.is_file())
        return IndexInfo(
            path=str(self.path),
            version=self.version.name,
            format_version=int(m["format_version"]),
            model=str(m["model"]["name"]),
            fingerprint=str(m["model"]["fingerprint"]),
            dimension=int(m["model"]["dimension"]),
            backend=str(m["model"].get("backend", "")),
            precision=str(m["model"].get("precision", "")),
            documents=int(m["counts"]["documents"]),
            read=int(m["counts"]["read"]),
            exact_duplicates=int(m["counts"]["exact_duplicates"]),
            near_duplicates=int(m["counts"]["near_duplicates"]),
            faiss=str(m.get("faiss", {}).get("type", "")),
            built_at=str(m.get("built_at", "")),
            build_seconds=float(m.get("build_seconds", 0.0)),
            size_bytes=size,
            sources=[SourceFile.from_dict(s) for s in m["sources"]],
        )

    def stale_sources(self) -> dict[str, list[str]]:
        """Source files that are new, changed or missing since the build (empty lists when fresh)."""
        from .freshness import stale_sources

        return stale_sources(self.manifest)

    def get(self, doc_id: str) -> Document:
        """A document by id, unambiguous id prefix, or external id (e.g. a BEIR ``_id``)."""
        doc = self.store.find(doc_id)
        if doc is None:
            raise UnknownDocumentError(
                f"no document {doc_id!r} in {self.path} (ids appear in the output of semsearch query)"
            )
        return doc

    def encode_query(self, text: str) -> np.ndarray:
        """The unit-length query vector of a text, shape (1, dimension)."""
        return self.embedder.encode([_check_text(text)])[:1]

    def search(self, text: str, k: int = 10) -> list[Hit]:
        """The k documents nearest to a text, best first; the score is the cosine similarity."""
        _check_k(k)
        return self.search_vector(self.encode_query(text), k)

    def search_vector(self, vector: np.ndarray, k: int, *, exclude: set[int] | None = None) -> list[Hit]:
        """The k documents nearest to a unit vector, skipping excluded FAISS ids."""
        _check_k(k)
        skip = exclude or set()
        depth = min(len(self), k + len(skip))
        if depth == 0:
            return []
        scores, nums = self.vectors.search(np.ascontiguousarray(vector.reshape(1, -1), dtype=np.float32), depth)
        picked = [(float(s), int(n)) for s, n in zip(scores[0], nums[0], strict=True) if n >= 0 and int(n) not in skip][
            :k
        ]
        docs = self.store.get_many([n for _, n in picked])
        hits = []
        for rank, (score, num) in enumerate(picked, start=1):
            doc = docs.get(num)
            if doc is None:
                raise IndexCorruptError(
                    f"{self.version / VECTORS} has id {doc_id_from_num(num)} that the document store lacks; "
                    "rebuild with: semsearch index --full"
                )
            hits.append(_hit(rank, score, doc))
        return hits

    def related(self, doc_id: str, k: int = 10) -> list[Hit]:
        """The k papers nearest to one in the index, never the paper itself (its duplicates are merged into it)."""
        _check_k(k)
        doc = self.get(doc_id)
        num = doc_num(doc.id)
        vector = self.vectors.reconstruct(num)
        return self.search_vector(vector, k, exclude={num})

    def related_to_text(self, text: str, k: int = 10) -> list[Hit]:
        """The k papers nearest to an abstract given as text, leaving out copies of that abstract."""
        _check_k(k)
        text = _check_text(text, "text")
        vector = self.encode_query(text)
        own = text_hash(text)
        # Copies of the given abstract rank first; look a little deeper so k others remain.
        hits = self.search_vector(vector, min(len(self), k + 5) or 1) if len(self) else []
        kept = [h for h in hits if not _same_paper(h, own, text)]
        if len(kept) < k and len(hits) < len(self):
            more = self.search_vector(vector, len(self))
            kept = [h for h in more if not _same_paper(h, own, text)]
        return [
            Hit(i, h.score, h.id, h.title, h.label, h.text, h.sources, h.metadata) for i, h in enumerate(kept[:k], 1)
        ]


def _same_paper(hit: Hit, own_hash: str, text: str) -> bool:
    return text_hash(hit.text) == own_hash or is_near_duplicate(hit.text, text)


def _hit(rank: int, score: float, doc: Document) -> Hit:
    return Hit(
        rank=rank,
        score=score,
        id=doc.id,
        title=doc.title,
        label=doc.label(),
        text=doc.text,
        sources=doc.sources,
        metadata=doc.metadata,
    )
