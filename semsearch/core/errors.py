"""Typed errors, every one semsearch raises: the CLI turns each into one line on stderr and exit status 2.

Modules that defined an error before it moved here import it from here, so the old names still work
(``semsearch.curate.mail.MailError``, ``semsearch.faces.serve.ServeUnavailableError``, ...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

REBUILD_HINT = "rebuild with: semsearch index --full"


class SemsearchError(Exception):
    """Base class for every error semsearch reports to a user.

    A message about one field of a request names it as ``{field}`` and passes ``field=``: each face names the
    field for its users (``message_for``: the CLI says ``--where``, the API and MCP ``where``), so the library never
    quotes a flag.
    """

    exit_code = 2

    def __init__(self, message: str = "", *, field: str | None = None) -> None:
        self.template = message
        self.field = field
        super().__init__(self.message_for())

    def message_for(self, name: Callable[[str], str] | None = None) -> str:
        """The message with its field named as a face calls it (default: the request field's own name)."""
        if self.field is None:
            return self.template
        return self.template.replace("{field}", name(self.field) if name else self.field)


class InputError(SemsearchError):
    """A source path, file or record cannot be read as abstracts."""


class SkippedInputError(InputError):
    """A strict build skipped inputs (each one line in ``skipped``, as a build summary gives it): nothing written."""

    def __init__(self, skipped: list[str]) -> None:
        self.skipped = list(skipped)
        many = "input was" if len(self.skipped) == 1 else "inputs were"
        super().__init__(f"{{field}}: {len(self.skipped)} {many} skipped; nothing was written", field="strict")


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


class NoMatchWarning(UserWarning):
    """A search's filters match no document, so it found nothing; the message says why (a field no document has,
    naming the fields that exist; a clause that matches nothing; clauses that exclude each other).

    Not an error: an empty answer is a true answer, as on the command line, which says the same on stderr.
    """


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


class OutputError(SemsearchError):
    """A command's ``--out`` cannot be written (or is a folder, a disk, a socket); what it pointed at is unchanged."""


class IndexReadError(SemsearchError):
    """An index file could not be read for a reason that is not damage (an I/O error, a lock): no rebuild offered."""


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


# SQLite's primary result codes that mean the file is not what was written: the only ones that say "rebuild".
_DAMAGE_CODES = {11, 24, 26}  # SQLITE_CORRUPT, SQLITE_FORMAT, SQLITE_NOTADB
_REQUEST_CODES = {18, 25}  # SQLITE_TOOBIG, SQLITE_RANGE: a value or a statement past SQLite's limits
# SQLITE_ERROR (1) is both a missing table (damage) and a limit a request hit ("LIKE or GLOB pattern too complex").
_DAMAGE_WORDS = ("no such table", "no such column", "no table ", "malformed", "not a database")
_REQUEST_WORDS = ("too complex", "too many", "too big", "too large", "too long", "stack overflow", "too deep")


def sqlite_failure(where: str, exc: Exception) -> SemsearchError:
    """The error for a failed read of an index's SQLite file, worded by its cause.

    Only damage (a corrupt or foreign file, a table or column missing) is an ``IndexCorruptError`` that says
    rebuild; a request past SQLite's limits (an over-long pattern, too many terms) is a ``QueryError``, since
    the index is sound; anything else (an I/O error) is said as SQLite says it, with no rebuild offered.
    """
    text = " ".join(str(exc).split())
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    lowered = text.lower()
    if primary in _REQUEST_CODES or (primary in (None, 1) and any(w in lowered for w in _REQUEST_WORDS)):
        return QueryError(f"the request is beyond what the index's database can answer ({text}): ask for less")
    # No code: semsearch's own check of the file ("no table x"), unless it is sqlite3 refusing a misuse (a bug).
    misuse = type(exc).__name__ in ("ProgrammingError", "InterfaceError")
    if (primary is None and not misuse) or primary in _DAMAGE_CODES or any(w in lowered for w in _DAMAGE_WORDS):
        return IndexCorruptError(f"{where}: {text}")
    return IndexReadError(f"{where}: cannot be read ({text})")


# The names each extra's error had before there was one class for them all.
ServeUnavailableError = ExtraNotInstalledError
McpUnavailableError = ExtraNotInstalledError
RayUnavailableError = ExtraNotInstalledError
