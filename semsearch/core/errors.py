"""Typed errors, every one semsearch raises: the CLI turns each into one line on stderr and exit status 2.

Modules that defined an error before it moved here import it from here, so the old names still work
(``semsearch.reader.mail.MailError``, ``semsearch.faces.serve.ServeUnavailableError``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

REBUILD_HINT = "rebuild with: semsearch index --full"


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
    """An index file is missing, truncated or inconsistent; the message ends with what repairs it.

    ``problem`` is what is wrong, ``hint`` what to do (left out: the class's ``default_hint``; None: no hint). A message
    that already ends with its hint keeps one copy, so an error rebuilt from its text reads the same.
    """

    default_hint: ClassVar[str | None] = REBUILD_HINT

    def __init__(self, problem: str = "", *, field: str | None = None, hint: str | None = "") -> None:
        self.hint = self.default_hint if hint == "" else hint
        suffix = f"; {self.hint}"
        self.problem = problem.removesuffix(suffix) if self.hint else problem
        super().__init__(f"{self.problem}{suffix}" if self.hint else problem, field=field)


class IndexPointerError(IndexCorruptError):
    """CURRENT is unreadable, missing or names no version: writers stop, nothing is deleted (``--recover``)."""

    default_hint = None  # its messages say how to recover, which is not a rebuild


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


class NotTaggedError(TagError, UnknownDocumentError):
    """A key to untag names no entry of the tag."""


class MailError(SemsearchError):
    """The digest could not be sent (settings, connection, TLS, login or refusal)."""


class ModelInstallError(SemsearchError):
    """A model cannot be installed: a part is missing or altered, pip failed, no room on disk."""


class UnknownModelError(SemsearchError):
    """A name the catalogue does not know (semsearch models lists the known ones)."""


class RayEngineError(SemsearchError):
    """Ray could not be reached, or encoding on it failed."""


class DiskFullError(SemsearchError):
    """The disk filled up while a new version was written; the published one is unchanged."""


class IndexReadOnlyError(SemsearchError):
    """The index directory cannot be written (read-only filesystem, permissions); queries still work."""


class WriteIOError(SemsearchError):
    """An I/O error (EIO) while a new version was written; the published one is unchanged."""


class ExtraNotInstalledError(SemsearchError):
    """A feature needs an optional extra that is not installed; the message says how to install it.

    Worded once for every extra: ``semsearch serve needs the 'serve' extra (fastapi is missing): pip install
    'semsearch[serve]'``; ``feature`` names what was asked for, ``missing`` the module that is not there.
    """

    def __init__(self, extra: str, feature: str, missing: str | None = None) -> None:
        self.extra = extra
        self.feature = feature
        self.missing = missing
        what = f" ({missing} is missing)" if missing else ""
        super().__init__(f"{feature} needs the '{extra}' extra{what}: pip install 'semsearch[{extra}]'")


# The names each extra's error had before there was one class for them all.
ServeUnavailableError = ExtraNotInstalledError
McpUnavailableError = ExtraNotInstalledError
RayUnavailableError = ExtraNotInstalledError
