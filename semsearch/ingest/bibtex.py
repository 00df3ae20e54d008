"""BibTeX in: ``.bib`` entries as records, parsed with bibtexparser 2 (``pip install 'semsearch[bibtex]'``).

Each entry becomes one object for ingest's field rules: ``title``, ``abstract``, the citation key as ``_id``
(an external id, so ``semsearch related <citekey>`` works), and as metadata ``authors`` (a list of
"First Last" names), ``year``, ``venue`` (booktitle, else journal), ``doi``, ``url``, ``eprint``, the
entry type and every other field. LaTeX in values (accents, ``\\emph{}``, ``\\%``, protective braces) is
decoded to Unicode text; ``@string`` macros are resolved. An entry bibtexparser cannot parse, or one whose
key repeats, is a bad record (listed and skipped with ``--skip-bad``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from semsearch.core.errors import ExtraNotInstalledError
from semsearch.core.records import Provenance
from semsearch.ingest.fields import Item
from semsearch.ingest.formats import TextFormat

PERSON_FIELDS = ("author", "editor")
VENUE_FIELDS = ("booktitle", "journal")  # the first one present is also the entry's "venue"


class BibTeX(TextFormat):
    """``.bib`` files (never sniffed: BibTeX is read when the name says so)."""

    name = "bibtex"
    extensions = (".bib",)

    def items(self, text: str, display: str) -> Iterator[Item]:
        """One item per entry."""
        return bibtex_items(text, display)


def bibtex_items(text: str, display: str) -> Iterator[Item]:
    """One item per entry, in file order, numbered by the line the entry starts on."""
    try:
        import bibtexparser
        from bibtexparser import middlewares as mw
        from pylatexenc.latex2text import LatexNodes2Text
    except ImportError as exc:
        raise ExtraNotInstalledError("bibtex", f"{display}: reading BibTeX", exc.name) from None

    decoder = LatexNodes2Text(math_mode="verbatim", strict_latex_spaces=True)
    # bibtexparser logs a warning per unreadable block; each is reported as a bad record instead.
    logger = logging.getLogger("bibtexparser")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        library = bibtexparser.parse_string(
            text,
            # Names are split while their braces still protect "{Google Research}"; decoding comes after.
            append_middleware=[mw.SeparateCoAuthors(), mw.SplitNameParts()],
        )
    finally:
        logger.setLevel(level)
    blocks: list[tuple[int, dict[str, Any] | str]] = []
    for entry in library.entries:
        blocks.append((entry.start_line or 0, _entry_object(entry, decoder)))
    for failed in library.failed_blocks:
        blocks.append((failed.start_line or 0, _failure(failed)))
    for start_line, item in sorted(blocks, key=lambda b: b[0]):
        yield Provenance(display, "line", start_line + 1), item


def _failure(block: Any) -> str:
    """Why bibtexparser could not read a block."""
    key = getattr(block, "key", None)
    if type(block).__name__ == "DuplicateBlockKeyBlock":
        return f"duplicate citation key {key!r}"
    error = getattr(block, "error", None)
    reason = getattr(error, "abort_reason", None) or str(error or "") or type(error).__name__
    return f"malformed BibTeX ({reason.strip().splitlines()[0]})"


def _entry_object(entry: Any, decoder: Any) -> dict[str, Any]:
    """An entry as a flat object: decoded fields, names as "First Last", the key as ``_id``."""
    obj: dict[str, Any] = {"_id": entry.key}
    for fld in entry.fields:
        key = str(fld.key).strip().lower()
        if key in PERSON_FIELDS and isinstance(fld.value, list):
            names = [_name(parts, decoder) for parts in fld.value]
            obj["authors" if key == "author" else key] = [n for n in names if n]
        else:
            obj[key] = _decode(str(fld.value), decoder)
    obj["entry_type"] = str(entry.entry_type).lower()
    venue = next((obj[f] for f in VENUE_FIELDS if obj.get(f)), None)
    if venue and "venue" not in obj:
        obj["venue"] = venue
    return obj


def _name(parts: Any, decoder: Any) -> str:
    """bibtexparser's NameParts as "First von Last, Jr", decoded."""
    words = [*parts.first, *parts.von, *parts.last]
    name = " ".join(_decode(w, decoder) for w in words if w)
    jr = " ".join(_decode(w, decoder) for w in parts.jr if w)
    return f"{name}, {jr}" if jr else name


def _decode(value: str, decoder: Any) -> str:
    """LaTeX to Unicode text with whitespace runs collapsed; the raw value when it cannot be decoded."""
    if "\\" not in value and "{" not in value and "~" not in value:
        return " ".join(value.split())
    try:
        return " ".join(decoder.latex_to_text(value).split())
    except Exception:  # pylatexenc raises assorted errors on odd input; the raw text is still useful
        return " ".join(value.split())
