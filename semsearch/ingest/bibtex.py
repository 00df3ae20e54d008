"""BibTeX in: ``.bib`` entries as records, parsed with bibtexparser 2 (``pip install 'semsearch[bibtex]'``).

Each entry becomes one object for ingest's field rules: ``title``, ``abstract``, the citation key as ``_id``
(an external id, so ``semsearch related <citekey>`` works), and as metadata ``authors`` (a list of
"First Last" names), ``year``, ``venue`` (booktitle, else journal), ``doi``, ``url``, ``eprint``, the
entry type and every other field. LaTeX in values (accents, ``\\emph{}``, ``\\%``, protective braces) is
decoded to Unicode text; ``@string`` macros, the month macros (``jan`` is "January") and ``#`` concatenation
(``nips # " 32"``, also inside ``@string``) are resolved as BibTeX resolves them. An entry bibtexparser cannot
parse, or one whose key repeats, is a bad record (listed and skipped with ``--skip-bad``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from typing import Any

from semsearch.core.errors import ExtraNotInstalledError
from semsearch.core.records import Provenance
from semsearch.ingest.fields import Item
from semsearch.ingest.formats import TextFormat

PERSON_FIELDS = ("author", "editor")
VENUE_FIELDS = ("booktitle", "journal")  # the first one present is also the entry's "venue"
# Read as written, as BibTeX styles print them ("10.5555/x_y", "https://e.org/~me/a%20b"), unless escaped.
VERBATIM_FIELDS = ("doi", "url", "eprint")
_ESCAPED = re.compile(r"\\")
# The macros every BibTeX style defines (plain.bst): jan is "January", ...
MONTHS = "January February March April May June July August September October November December"
MONTH_MACROS = {name[:3].lower(): name for name in MONTHS.split()}
_DELIMITERS = re.compile(r'[{}"]')
# Escapes of characters that are markup themselves, and the ligature breaks of "--" and ``x'' (see _decode).
_KEPT = re.compile(r"\\[{}$]|\\textbackslash\{\}|(?<=-)\{\}(?=-)|(?<=`)\{\}(?=`)|(?<=')\{\}(?=')")
_KEPT_MARK = "\ue000"  # a private-use character holds each kept escape's place while the rest is decoded


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
        from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db
    except ImportError as exc:
        raise ExtraNotInstalledError("bibtex", f"{display}: reading BibTeX", exc.name) from None

    context = get_default_latex_context_db()
    # pylatexenc shows \textasciicircum as U+02C6, a modifier letter; the character meant (and exported) is "^".
    # How export spells "^" and an unmatched brace; a brace stays escaped, as _KEPT keeps "\{".
    shown = {"textasciicircum": "^", "textbraceleft": r"\{", "textbraceright": r"\}"}
    macros = [MacroTextSpec(name, simplify_repl=char) for name, char in shown.items()]
    context.add_context_category("export", prepend=True, macros=macros)
    decoder = LatexNodes2Text(latex_context=context, math_mode="verbatim", strict_latex_spaces=True)
    # bibtexparser logs a warning per unreadable block; each is reported as a bad record instead.
    logger = logging.getLogger("bibtexparser")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        library = bibtexparser.parse_string(text, parse_stack=[])
    finally:
        logger.setLevel(level)
    # bibtexparser resolves a value that is one macro, not a concatenation ("nips # { 32}" stays that text):
    # those are resolved first, then its own middleware does the rest as its default stack would. Names are
    # split while their braces still protect "{Google Research}"; decoding comes after.
    resolve_concatenations(library)
    for middleware in (
        mw.ResolveStringReferencesMiddleware(),
        mw.RemoveEnclosingMiddleware(),
        mw.SeparateCoAuthors(),
        mw.SplitNameParts(),
    ):
        library = middleware.transform(library)
    blocks: list[tuple[int, dict[str, Any] | str]] = []
    for entry in library.entries:
        blocks.append((entry.start_line or 0, _entry_object(entry, decoder)))
    for failed in library.failed_blocks:
        blocks.append((failed.start_line or 0, _failure(failed)))
    for start_line, item in sorted(blocks, key=lambda b: b[0]):
        yield Provenance(display, "line", start_line + 1), item


def resolve_concatenations(library: Any) -> None:
    """Resolve ``#`` concatenations and month macros in @string and field values, in place (the text braced).

    Macros are the month names and every ``@string`` (a later definition wins, as bibtexparser reads a lone
    one; names ignore case); a macro nobody defined stands for its own name, as bibtexparser keeps a lone one.
    A field value of one piece (braced or quoted text, a number, a lone ``@string`` macro) is left to
    bibtexparser's own middleware (``ResolveStringReferencesMiddleware``, ``RemoveEnclosingMiddleware``).
    """
    macros = dict(MONTH_MACROS)
    for string in library.strings:  # in file order: a @string may use the ones before it
        resolved = _resolve(str(string.value), macros)
        if resolved is not None:
            string.value = "{" + resolved + "}"
            macros[str(string.key).lower()] = resolved
    defined = {str(s.key).lower() for s in library.strings}
    for entry in library.entries:
        for fld in entry.fields:
            if not isinstance(fld.value, str):
                continue
            if "#" not in fld.value and fld.value.strip().lower() not in MONTH_MACROS:
                continue  # most values: one text or number, bibtexparser's to read (no scan per character)
            pieces = _pieces(fld.value)
            if pieces is None or (len(pieces) == 1 and not _month_macro(pieces[0], defined)):
                continue
            fld.value = "{" + _joined(pieces, macros) + "}"


def _month_macro(piece: tuple[str, str], defined: set[str]) -> bool:
    """Whether a lone piece is a month macro no @string redefines (bibtexparser resolves those)."""
    kind, text = piece
    return kind == "macro" and text.lower() in MONTH_MACROS and text.lower() not in defined


def _resolve(value: str, macros: dict[str, str]) -> str | None:
    """The text a BibTeX value expression stands for; None when it is malformed."""
    pieces = _pieces(value)
    return None if pieces is None else _joined(pieces, macros)


def _joined(pieces: list[tuple[str, str]], macros: dict[str, str]) -> str:
    """Pieces as one text, each macro replaced by its text (an undefined one by its name)."""
    return "".join(macros.get(text.lower(), text) if kind == "macro" else text for kind, text in pieces)


def _pieces(value: str) -> list[tuple[str, str]] | None:
    """A value expression split at its top-level ``#``: ("text", inner text) or ("macro", name) each; None:
    malformed (an unclosed brace or quote, two pieces without ``#`` between them, a dangling ``#``)."""
    pieces: list[tuple[str, str]] = []
    i, end = 0, len(value)
    want_piece = True
    while True:
        while i < end and value[i].isspace():
            i += 1
        if i == end:
            return pieces if pieces and not want_piece else None
        if not want_piece:
            if value[i] != "#":
                return None
            want_piece = True
            i += 1
            continue
        if value[i] in '{"':
            close = _closing(value, i)
            if close < 0:
                return None
            pieces.append(("text", value[i + 1 : close]))
            i = close + 1
        else:
            start = i
            while i < end and not value[i].isspace() and value[i] not in '#{"':
                i += 1
            word = value[start:i]
            pieces.append(("text", word) if word.isdigit() else ("macro", word))
        want_piece = False


def _closing(value: str, start: int) -> int:
    """The index of the brace or quote closing the one at ``start`` (braces nest inside both); -1 if none."""
    depth = 0
    quoted = value[start] == '"'
    for match in _DELIMITERS.finditer(value, start + 1):
        char = match.group()
        if char == "{":
            depth += 1
        elif char == "}":
            if depth == 0:
                return -1 if quoted else match.start()
            depth -= 1
        elif depth == 0 and quoted:
            return match.start()
    return -1


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
            value = str(fld.value)
            obj[key] = (
                " ".join(value.split())
                if key in VERBATIM_FIELDS and not _ESCAPED.search(value)
                else _decode(value, decoder)
            )
    obj["entry_type"] = str(entry.entry_type).lower()
    venue = next((obj[f] for f in VENUE_FIELDS if obj.get(f)), None)
    if venue and "venue" not in obj:
        obj["venue"] = venue
    return obj


def _name(parts: Any, decoder: Any) -> str:
    """bibtexparser's NameParts as "First von Last Jr" (``Hal Daumé III``, as records and CSL write it), decoded."""
    words = [*parts.first, *parts.von, *parts.last, *parts.jr]
    return " ".join(_decode(w, decoder) for w in words if w)


def _decode(value: str, decoder: Any) -> str:
    """LaTeX to Unicode text with whitespace runs collapsed; the raw value when it cannot be decoded.

    Escapes of characters that are markup themselves (``\\{``, ``\\$``, ``-{}-``) stay as written: what is shown
    is decoded again (``core.latex``), and a bare ``{`` or ``$`` there would be taken for a group or math.
    """
    if "\\" not in value and "{" not in value and "~" not in value:
        return " ".join(value.split())
    kept = _KEPT.findall(value) if _KEPT_MARK not in value else []  # a value holding the mark decodes them all
    marked = _KEPT.sub(_KEPT_MARK, value) if kept else value
    try:
        decoded = decoder.latex_to_text(marked)
    except Exception:  # pylatexenc raises assorted errors on odd input; the raw text is still useful
        return " ".join(value.split())
    if kept:
        escapes = iter(kept)
        decoded = re.sub(_KEPT_MARK, lambda _: next(escapes), decoded)
    return " ".join(decoded.split())
