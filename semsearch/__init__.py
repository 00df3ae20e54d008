"""semsearch: semantic search over research-paper abstracts.

from semsearch import Index, build_index
build_index(["seeds"], "indexes/default")
with Index.open("indexes/default") as index:
    for hit in index.search("federated privacy", k=5):
        print(hit.rank, round(hit.score, 3), hit.label)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .version import __version__

# Names are imported on first use (PEP 562) so that `semsearch --help` and the query path
# do not pay for the build pipeline's imports.
_EXPORTS = {
    "BuildOptions": "build",
    "BuildSummary": "build",
    "build_index": "build",
    "IndexCorruptError": "errors",
    "IndexFormatError": "errors",
    "IndexLockedError": "errors",
    "IndexNotFoundError": "errors",
    "InputError": "errors",
    "ModelLoadError": "errors",
    "ModelMismatchError": "errors",
    "QueryError": "errors",
    "SemsearchError": "errors",
    "TagError": "errors",
    "UnknownDocumentError": "errors",
    "Document": "records",
    "Hit": "records",
    "Provenance": "records",
    "Index": "search",
    "IndexInfo": "search",
    "default_index_path": "search",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'semsearch' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f".{module}", __name__), name)


if TYPE_CHECKING:
    from .build import BuildOptions, BuildSummary, build_index
    from .errors import (
        IndexCorruptError,
        IndexFormatError,
        IndexLockedError,
        IndexNotFoundError,
        InputError,
        ModelLoadError,
        ModelMismatchError,
        QueryError,
        SemsearchError,
        TagError,
        UnknownDocumentError,
    )
    from .records import Document, Hit, Provenance
    from .search import Index, IndexInfo, default_index_path

__all__ = [
    "BuildOptions",
    "BuildSummary",
    "Document",
    "Hit",
    "Index",
    "IndexCorruptError",
    "IndexFormatError",
    "IndexInfo",
    "IndexLockedError",
    "IndexNotFoundError",
    "InputError",
    "ModelLoadError",
    "ModelMismatchError",
    "Provenance",
    "QueryError",
    "SemsearchError",
    "TagError",
    "UnknownDocumentError",
    "__version__",
    "build_index",
    "default_index_path",
]
