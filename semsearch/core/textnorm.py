"""Text normalisation and hashing: the exact-duplicate key, content ids and the near-duplicate canonical form.

A leaf (standard library only), so readers, the cache and the query path can hash a text without the dedup stage.
"""

from __future__ import annotations

import hashlib
import html
import re
import unicodedata

_MASK63 = (1 << 63) - 1
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_LATEX_ESCAPE = re.compile(r"\\([%&#$_{}])")
# \'{e}, \'e, \"o, \^{o}, \c{c}, \v{s} ...: keep the base letter (its accent is dropped below anyway).
_LATEX_ACCENT = re.compile(r"\\(?:['\"^`~=.]|[cvuHkrdbt](?=\s*\{))\s*\{?\s*([A-Za-z])\s*\}?")
# Any other command name; its braced argument survives as plain words once braces become spaces.
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+\*?")
_COMBINING = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
# Everything that is not a letter or digit: markup (* _ ` $ { }), quotes and punctuation.
_NON_WORD = re.compile(r"[\W_]+")
_ASCII_NON_WORD = str.maketrans({chr(c): " " for c in range(128) if not chr(c).isalnum()})


def normalize_text(text: str) -> str:
    """Unicode NFKC, whitespace runs collapsed to one space, ends stripped: the exact-duplicate key."""
    # str.split() breaks on exactly the characters regex \s matches, and is three times faster.
    return " ".join(unicodedata.normalize("NFKC", text).split())


def text_hash(text: str) -> str:
    """The sha256 hex digest of normalize_text(text)."""
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()


def doc_id_for(text_hash: str) -> str:
    """16 hex digits from a text hash, masked below 2**63 so the id fits a FAISS int64 label."""
    return format(int(text_hash[:16], 16) & _MASK63, "016x")


def canonical_for_near(text: str) -> str:
    """Lowercase words of the text with markup, accents and punctuation removed, for near-dup comparison."""
    return canonical_normalized(normalize_text(text))


def canonical_normalized(normalized: str) -> str:
    """canonical_for_near of a text that is already normalize_text'ed (saves a second NFKC pass)."""
    s = html.unescape(normalized) if "&" in normalized else normalized
    if "<" in s:
        s = _HTML_TAG.sub(" ", s)
    if "\\" in s:
        s = _LATEX_ESCAPE.sub(r" \1 ", s)
        s = _LATEX_ACCENT.sub(r"\1", s)
        s = _LATEX_COMMAND.sub(" ", s)
    s = s.lower()
    # *x*, **x**, _x_, `x`, $x$, {x}, ``x'' and all other punctuation become word breaks.
    if s.isascii():
        return " ".join(s.translate(_ASCII_NON_WORD).split())  # same result as the regex, twice as fast
    # Decompose and drop combining marks so "Rényi" and R\'{e}nyi meet at "renyi".
    s = _COMBINING.sub("", unicodedata.normalize("NFKD", s))
    return " ".join(_NON_WORD.sub(" ", s).split())
