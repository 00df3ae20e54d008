"""Typed errors: the library raises these, the CLI turns each into one line on stderr and exit status 2."""

from __future__ import annotations


class SemsearchError(Exception):
    """Base class for every error semsearch reports to a user."""

    exit_code = 2


class InputError(SemsearchError):
    """A source path, file or record cannot be read as abstracts."""


class QueryError(SemsearchError):
    """A query or its options are invalid (empty text, k < 1, ...)."""


class IndexNotFoundError(SemsearchError):
    """No index exists at the given directory."""


class IndexCorruptError(SemsearchError):
    """An index file is missing, truncated or inconsistent."""


class IndexPointerError(IndexCorruptError):
    """CURRENT is unreadable, missing or names no version: writers stop, nothing is deleted (``--recover``)."""


class IndexFormatError(SemsearchError):
    """The index was written by a newer, unknown format version."""


class ModelMismatchError(SemsearchError):
    """The index was built with another model or dimension than the one requested."""


class UnknownDocumentError(SemsearchError):
    """No document with that id exists in the index."""


class ModelLoadError(SemsearchError):
    """An embedding model cannot be found or loaded."""


class ExportUnsupportedError(ModelLoadError):
    """A model that loads but cannot be exported to ONNX (the build then encodes with torch)."""


class IndexLockedError(SemsearchError):
    """Another process is writing this index."""


class TagError(SemsearchError):
    """A tag name is invalid, a tag is unknown, or the tags file cannot be read."""
