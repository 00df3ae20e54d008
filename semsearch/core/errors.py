"""Typed errors: the library raises these, the CLI turns each into one line on stderr and exit status 2."""

from __future__ import annotations

from collections.abc import Callable


class SemsearchError(Exception):
    """Base class for every error semsearch reports to a user.

    A message about one field of a request names it as ``{field}`` and passes ``field=``: each face words it for
    its users (``worded``: the CLI says ``--where``, the API and MCP ``where``), so the library never quotes a flag.
    """

    exit_code = 2

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        self.template = message
        self.field = field
        super().__init__(self.worded())

    def worded(self, name: Callable[[str], str] | None = None) -> str:
        """The message with its field named as a face calls it (default: the request field's own name)."""
        if self.field is None:
            return self.template
        return self.template.replace("{field}", name(self.field) if name else self.field)


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
