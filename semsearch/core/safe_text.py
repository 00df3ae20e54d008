"""What may be shown: links that only open web pages, text without controls, CSV cells no spreadsheet runs.

Records come from files and catalogues anyone can write, so every output that a person's terminal, browser,
mail client, feed reader or spreadsheet interprets passes through here: one rule per concern, no imports from
the rest of semsearch. ``web/app.js`` keeps a twin of ``safe_url`` and ``clean_text`` for the page.
"""

from __future__ import annotations

import re
from urllib.parse import quote, urlsplit

LINK_SCHEMES = ("http", "https")
DOI_RESOLVER = "https://doi.org/"

# Terminal escape sequences are dropped whole (CSI "\x1b[31m", OSC "\x1b]8;;url\x07" hyperlinks, two-byte
# escapes), so no "[31m" residue is left; any control left after that is dropped on its own.
_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?|\x9b[0-?]*[ -/]*[@-~]?|[\x1b\x9d]\][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?|\x1b[@-_]?"
)
# C0 controls but tab and newline, DEL, C1 controls, bidi embeddings/overrides (U+202A-202E) and isolates
# (U+2066-2069), lone surrogates and U+FFFE/U+FFFF (not allowed in XML 1.0).
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff\ufffe\uffff"
_UNSAFE_CHAR = re.compile(f"[{_UNSAFE}]")
_UNSAFE_LINE = re.compile(f"[{_UNSAFE}\t\n]")
# What JSON keeps raw that a terminal or an editor would act on: C1 controls, bidi controls, line separators.
_JSON_RAW = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
# RFC 3986 reserved and unreserved characters (and "%" of escapes already made); anything else is escaped.
_URL_SAFE = ":/?#[]@!$&'()*+,;=-._~%"
_DOI = re.compile(r"10\.\d{3,}(?:\.\d+)*/\S+")
_DOI_PREFIX = re.compile(r"(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", re.IGNORECASE)
_DOI_SAFE = "/:;()._-~!$&'*+,=@"  # "?", "#", "%" and the rest are escaped, as the DOI handbook asks
CSV_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def clean_text(text: str, *, one_line: bool = False) -> str:
    """Text without terminal escapes, control characters (tab and newline kept) or bidi overrides.

    ``one_line`` also turns tabs and newlines into spaces.
    """
    if text.isprintable():
        return text  # the usual case: no control, format or separator character at all
    out = _ESCAPE_SEQUENCE.sub("", text)
    out = out.replace("\r\n", "\n").replace("\r", "\n")
    return _UNSAFE_LINE.sub(" ", _UNSAFE_CHAR.sub("", out)) if one_line else _UNSAFE_CHAR.sub("", out)


def json_text(serialized: str) -> str:
    """JSON text with C1 controls, bidi controls and line separators written as ``\\uXXXX`` (same data).

    ``json.dumps(..., ensure_ascii=False)`` escapes C0 controls but writes these raw; they can only occur
    inside strings, where the escape means the same character.
    """
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group(0)):04x}", serialized)


def safe_url(value: object) -> str | None:
    """An http(s) URL fit for an ``href``, with characters outside RFC 3986 percent-escaped; None otherwise.

    ``javascript:``, ``data:``, ``file:`` and relative links are refused, as are URLs with control
    characters inside (browsers drop tabs and newlines, so ``java\\tscript:`` must not slip through).
    """
    if not isinstance(value, str):
        return None
    url = value.strip()
    if not url or _UNSAFE_LINE.search(url):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:  # an unbalanced "[" in the host
        return None
    if parts.scheme.lower() not in LINK_SCHEMES or not parts.netloc or not parts.hostname:
        return None
    return quote(url, safe=_URL_SAFE)


def bare_doi(value: object) -> str | None:
    """A DOI as ``10.prefix/suffix`` (from ``doi:…``, ``https://doi.org/…`` or bare); None when it is not one."""
    if not isinstance(value, str):
        return None
    doi = _DOI_PREFIX.sub("", value.strip(), count=1).strip()
    return doi if _DOI.fullmatch(doi) and not _UNSAFE_CHAR.search(doi) else None


def doi_url(value: object) -> str | None:
    """The https://doi.org/ link of a DOI (bare, ``doi:`` or a doi.org URL); None when it is not a DOI."""
    doi = bare_doi(value)
    return DOI_RESOLVER + quote(doi, safe=_DOI_SAFE) if doi else None


def csv_cell(value: object) -> object:
    """A CSV cell no spreadsheet reads as a formula: text starting ``= + - @``, tab or CR gets a leading ``'``.

    OWASP's advice for CSV injection; numbers pass as they are.
    """
    if isinstance(value, str) and value.startswith(CSV_FORMULA_START):
        return "'" + value
    return value


# What can start markup mid-line: emphasis, code, links and images ("[" — "(" and "!" mean nothing without
# it), raw HTML and autolinks ("<"). Other punctuation stays as written, so the raw file still reads well.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>~])")


def markdown_text(text: str) -> str:
    """Text that Markdown shows as written: one line, characters that could start markup backslash-escaped.

    So a title like ``[x](javascript:…)`` or ``<img onerror=…>`` stays text in any CommonMark renderer.
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", clean_text(text, one_line=True))


def markdown_url(url: str) -> str:
    """A safe URL as a Markdown link destination: parentheses escaped so they cannot close it."""
    return url.replace("(", "%28").replace(")", "%29")
