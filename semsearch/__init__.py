"""semsearch: semantic search over research-paper abstracts.

from semsearch import Index, build_index
build_index(["seeds"], "indexes/default")
with Index.open("indexes/default") as index:
    for hit in index.search("federated privacy", k=5):
        print(hit.rank, round(hit.score, 3), hit.label)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from semsearch.core.version import __version__

# Names are imported on first use (PEP 562) so that `semsearch --help` and the query path
# do not pay for the build pipeline's imports.
_EXPORTS = {
    "BuildOptions": "write.build",
    "BuildSummary": "write.build",
    "build_index": "write.build",
    "IndexCorruptError": "core.errors",
    "IndexFormatError": "core.errors",
    "IndexLockedError": "core.errors",
    "IndexNotFoundError": "core.errors",
    "IndexReadError": "core.errors",
    "InputError": "core.errors",
    "ModelLoadError": "core.errors",
    "ModelMismatchError": "core.errors",
    "NoMatchWarning": "core.errors",
    "OutputError": "core.errors",
    "QueryError": "core.errors",
    "SemsearchError": "core.errors",
    "TagError": "core.errors",
    "UnknownDocumentError": "core.errors",
    "Document": "core.records",
    "Hit": "core.records",
    "Provenance": "core.records",
    "Index": "query.search",
    "IndexInfo": "query.index_info",
    "default_index_path": "query.search",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'semsearch' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"semsearch.{module}", __name__), name)


if TYPE_CHECKING:
    from semsearch.core.errors import (
        IndexCorruptError,
        IndexFormatError,
        IndexLockedError,
        IndexNotFoundError,
        IndexReadError,
        InputError,
        ModelLoadError,
        ModelMismatchError,
        NoMatchWarning,
        OutputError,
        QueryError,
        SemsearchError,
        TagError,
        UnknownDocumentError,
    )
    from semsearch.core.records import Document, Hit, Provenance
    from semsearch.query.index_info import IndexInfo
    from semsearch.query.search import Index, default_index_path
    from semsearch.write.build import BuildOptions, BuildSummary, build_index

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
    "IndexReadError",
    "InputError",
    "ModelLoadError",
    "ModelMismatchError",
    "NoMatchWarning",
    "OutputError",
    "Provenance",
    "QueryError",
    "SemsearchError",
    "TagError",
    "UnknownDocumentError",
    "__version__",
    "build_index",
    "default_index_path",
]
