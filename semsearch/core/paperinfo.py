"""What a person reads about a paper: its authors, a short author line, a link, and markup-free text.

Everything here reads a document's title, metadata and external ids as stored (catalogue join, BibTeX,
JSON fields) and never changes them: readable text is for display only. Pure functions, no imports
beyond the standard library and ``safe_text``, so the query path stays fast. ``web/app.js`` mirrors
``plain_text`` (function ``readable``) for the page. Links are only ever http(s) (``safe_text.safe_url``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from semsearch.core.safe_text import clean_text, doi_url, safe_url

MAX_AUTHORS_SHOWN = 2  # "Hao Wang, Licheng Pan, … · NeurIPS 2025"; three authors are all shown

# Venue codes as the ML Anthology and similar dumps write them (lowercase), as people write them.
VENUE_NAMES = {
    "neurips": "NeurIPS",
    "nips": "NeurIPS",
    "icml": "ICML",
    "iclr": "ICLR",
    "cvpr": "CVPR",
    "iccv": "ICCV",
    "eccv": "ECCV",
    "wacv": "WACV",
    "aistats": "AISTATS",
    "uai": "UAI",
    "colt": "COLT",
    "alt": "ALT",
    "acml": "ACML",
    "corl": "CoRL",
    "l4dc": "L4DC",
    "jmlr": "JMLR",
    "tmlr": "TMLR",
    "mlj": "Machine Learning",
    "jair": "JAIR",
    "neco": "Neural Computation",
    "ecml": "ECML",
    "ecmlpkdd": "ECML PKDD",
    "mlhc": "MLHC",
    "midl": "MIDL",
    "chil": "CHIL",
    "pgm": "PGM",
    "clear": "CLeaR",
    "collas": "CoLLAs",
    "isipta": "ISIPTA",
    "log": "LoG",
    "automl": "AutoML",
    "cpal": "CPAL",
    "dmlr": "DMLR",
    "mloss": "MLOSS",
    "acl": "ACL",
    "emnlp": "EMNLP",
    "naacl": "NAACL",
    "aaai": "AAAI",
    "ijcai": "IJCAI",
    "kdd": "KDD",
    "sigir": "SIGIR",
    "colm": "COLM",
}
_WORKSHOP_SUFFIX = "w"  # cvprw, iclrw, ...: the venue's workshops

AUTHOR_KEYS = ("authors", "author", "creators")
VENUE_KEYS = ("venue", "booktitle", "journal", "container-title", "publication")
YEAR_KEYS = ("year", "date", "issued")
# Where a person would go to read the paper, best first.
LINK_KEYS = ("openreview_url", "url", "venue_url", "doi", "pdf_url", "eprint")
_EPRINT = re.compile(r"[\w.\-/]+")


def field(metadata: Mapping[str, Any], names: Sequence[str]) -> Any:
    """The first non-empty value among keys named (any case) in ``names``."""
    lowered = {str(k).strip().lower(): v for k, v in metadata.items()}
    for name in names:
        value = lowered.get(name)
        if value not in (None, "", [], {}):
            return value
    return None


def authors_of(metadata: Mapping[str, Any]) -> list[str]:
    """Author names as a list: from a list of names (or of {given, family}/{name}), or a BibTeX-style string."""
    value = field(metadata, AUTHOR_KEYS)
    if value is None:
        return []
    if isinstance(value, str):
        parts = re.split(r"\s+and\s+|;", value) if re.search(r"\s+and\s+|;", value) else [value]
        return [_first_last(p.strip()) for p in parts if p.strip()]
    if isinstance(value, list):
        names = []
        for item in value:
            if isinstance(item, str) and item.strip():
                names.append(item.strip())
            elif isinstance(item, dict):
                name = (
                    item.get("name")
                    or item.get("literal")
                    or " ".join(str(item[k]) for k in ("given", "firstName", "family", "lastName") if item.get(k))
                )
                if name:
                    names.append(str(name))
        return names
    return []


def _first_last(name: str) -> str:
    """``Doe, Jane`` (BibTeX's order) as ``Jane Doe``; other forms as they are."""
    last, comma, first = name.partition(",")
    return f"{first.strip()} {last.strip()}" if comma and first.strip() and "," not in first else name


def year_of(metadata: Mapping[str, Any]) -> str | None:
    """The publication year as four digits, from ``year`` or the start of a date."""
    value = field(metadata, YEAR_KEYS)
    match = re.search(r"\b(1[5-9]\d\d|2\d\d\d)\b", str(value)) if value is not None else None
    return match.group(1) if match else None


def venue_of(metadata: Mapping[str, Any]) -> str | None:
    """The venue as people write it: ``neurips`` -> ``NeurIPS``, ``iclrw`` -> ``ICLR Workshop``."""
    value = field(metadata, VENUE_KEYS)
    if not isinstance(value, str):
        return None
    venue = plain_text(value).strip()
    code = venue.lower()
    if code in VENUE_NAMES:
        return VENUE_NAMES[code]
    if code.endswith(_WORKSHOP_SUFFIX) and code[:-1] in VENUE_NAMES:
        return f"{VENUE_NAMES[code[:-1]]} Workshop"
    return venue or None


def byline(metadata: Mapping[str, Any]) -> str | None:
    """``Hao Wang, Licheng Pan, … · NeurIPS 2025``: a few authors, then venue and year; None when none known."""
    authors = authors_of(metadata)
    shown = authors if len(authors) <= MAX_AUTHORS_SHOWN + 1 else [*authors[:MAX_AUTHORS_SHOWN], "…"]
    where = " ".join(x for x in (venue_of(metadata), year_of(metadata)) if x)
    parts = [", ".join(plain_text(a) for a in shown), where]
    line = " · ".join(p for p in parts if p)
    return line or None


def link_of(metadata: Mapping[str, Any]) -> str | None:
    """The paper's page: OpenReview, its URL, the venue page, the DOI, the PDF or arXiv; None when unknown.

    Only http(s) links are given (``javascript:`` and the like are passed over); a DOI becomes its doi.org link.
    """
    lowered = {str(k).strip().lower(): v for k, v in metadata.items()}
    for key in LINK_KEYS:
        value = lowered.get(key)
        if not isinstance(value, str) or not value.strip():
            continue
        value = value.strip()
        if key == "doi":
            found = doi_url(value) or safe_url(value)
        elif key == "eprint":
            prefix = str(lowered.get("archiveprefix") or "arxiv").lower()
            found = (
                safe_url(f"https://arxiv.org/abs/{value}") if prefix == "arxiv" and _EPRINT.fullmatch(value) else None
            )
        else:
            found = safe_url(value)
        if found:
            return found
    return None


def paper_fields(title: str | None, metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The fields hits and documents add for people: readable title, authors, author line and link."""
    return {
        "display_title": plain_text(title) if title else None,
        "authors": authors_of(metadata),
        "byline": byline(metadata),
        "link": link_of(metadata),
    }


# ------------------------------------------------------------------------------------------- markup

_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ", "pi": "π",
    "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ", "omega": "ω",
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    "times": "×", "cdot": "·", "leq": "≤", "le": "≤", "geq": "≥", "ge": "≥", "neq": "≠", "approx": "≈",
    "sim": "~", "gtrsim": "≳", "lesssim": "≲", "ll": "≪", "gg": "≫", "in": "∈", "notin": "∉", "subset": "⊂",
    "subseteq": "⊆", "infty": "∞", "pm": "±", "to": "→", "rightarrow": "→", "leftarrow": "←", "mapsto": "↦",
    "sum": "∑", "prod": "∏", "int": "∫", "partial": "∂", "nabla": "∇", "forall": "∀", "exists": "∃",
    "ell": "ℓ", "cdots": "⋯", "ldots": "…", "dots": "…", "|": "‖", "mid": "|", "star": "⋆", "circ": "∘",
    "log": "log", "exp": "exp", "min": "min", "max": "max", "sup": "sup", "inf": "inf", "lim": "lim",
    "uparrow": "↑", "downarrow": "↓",
    "cup": "∪", "cap": "∩", "propto": "∝", "top": "⊤", "prime": "′", "%": "%", "&": "&", "_": "_", "#": "#",
    "$": "$", "{": "{", "}": "}", ",": " ", ";": " ", "quad": " ", "qquad": " ", "!": "", " ": " ",
}  # fmt: skip
# Accent commands (text and math) and the combining mark each puts on its letter.
_ACCENTS = {
    "'": "\u0301", "`": "\u0300", "^": "\u0302", '"': "\u0308", "~": "\u0303", "=": "\u0304", ".": "\u0307",
    "c": "\u0327", "v": "\u030c", "u": "\u0306", "H": "\u030b", "k": "\u0328", "r": "\u030a",
    "tilde": "\u0303", "widetilde": "\u0303", "hat": "\u0302", "widehat": "\u0302", "bar": "\u0304",
    "overline": "\u0305", "dot": "\u0307", "vec": "\u20d7",
}  # fmt: skip
_LETTER_ACCENT = re.compile(r"\\(['`^\"~=.]|[cvuHkr](?=[\s{]))\s*(?:\{\s*([A-Za-z])\s*\}|([A-Za-z]))")
_MATH_ACCENT = re.compile(r"\\(tilde|widetilde|hat|widehat|bar|overline|dot|vec)\s*(?:\{([^{}]*)\}|([A-Za-z]))")
# Commands whose one braced argument is the text to show: \textbf{x}, \emph{x}, \mathcal{O}, \text{th}, ...
_WRAPPER = re.compile(
    r"\\(?:text(?:bf|it|tt|sc|sf|rm|normal|up|sl)?|emph|underline|mathrm|mathbf|mathit|mathcal|mathbb|mathsf|"
    r"mathtt|mathfrak|boldsymbol|bm|operatorname|mbox|textsuperscript|textsubscript|url)\s*\{([^{}]*)\}"
)
_ARG = r"(?:\{([^{}]*)\}|\s([\w.]))"  # a braced argument, or a single character after a space
_FRAC = re.compile(r"\\[dt]?frac\s*" + _ARG + r"\s*" + _ARG.replace("\\s(", "\\s?("))
_SQRT = re.compile(r"\\sqrt\s*" + _ARG)
_HREF = re.compile(r"\\href\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_SYMBOL = re.compile(r"\\([A-Za-z]+|[|%&_#${},;! ])")
_SIZING = re.compile(r"\\(?:left|right|big|Big|bigg|Bigg)[lr]?\s*(?=[()\[\]|.\\])\.?")
_MATH = re.compile(r"(?<!\\)\$([^$]+)(?<!\\)\$")
_SCRIPT_GROUP = re.compile(r"([_^])\{([^{}]*)\}")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*")
_EMPHASIS = re.compile(r"(?<![\w*])\*(?=[^\s*])([^*]+?)(?<=[^\s*])\*(?![\w*])")
_CODE = re.compile(r"`([^`\n]+)`")
_BRACES = re.compile(r"(?<!\\)[{}]")


def plain_text(text: str) -> str:
    """Text a person reads: Markdown emphasis and LaTeX markup resolved (``$\\texttt{Mozart}$`` -> ``Mozart``).

    ``*emphasis*`` and ``**bold**`` lose their asterisks, ``\\textbf{x}``/``\\emph{x}`` their commands,
    accents become letters (``R\\'{e}nyi`` -> ``Rényi``), and inline math keeps its content with common
    commands as symbols (``$\\tilde{\\mathcal{O}}(1/N)$`` -> ``Õ(1/N)``, ``$\\geq$`` -> ``≥``).
    Terminal escapes, control characters and bidi overrides are dropped (``safe_text.clean_text``).
    """
    text = clean_text(text)
    if "*" not in text and "\\" not in text and "$" not in text and "`" not in text and "{" not in text:
        return text
    out = _MATH.sub(lambda m: _latex(m.group(1), math=True), text)
    out = _latex(out, math=False)
    out = _BOLD.sub(r"\1", out)
    out = _EMPHASIS.sub(r"\1", out)
    if "``" in out:
        out = out.replace("``", "“").replace("''", "”")
    out = _CODE.sub(r"\1", out)
    return unicodedata.normalize("NFC", out)


def _latex(text: str, *, math: bool) -> str:
    """LaTeX commands of one stretch of text (or of inline math) turned into what they show."""
    if "\\" not in text and "{" not in text and not math:
        return text
    out = _LETTER_ACCENT.sub(lambda m: (m.group(2) or m.group(3)) + _ACCENTS[m.group(1)], text)
    for _ in range(4):  # nested wrappers: \tilde{\mathcal{O}}, \textbf{\emph{x}}
        before = out
        out = _WRAPPER.sub(r"\1", out)
        out = _HREF.sub(lambda m: m.group(2).strip() or m.group(1), out)
        out = _MATH_ACCENT.sub(lambda m: _accent_each(_arg(m, 2), _ACCENTS[m.group(1)]), out)
        out = _FRAC.sub(lambda m: f"{_group(_arg(m, 1))}/{_group(_arg(m, 3))}", out)
        out = _SQRT.sub(lambda m: "√" + _group(_arg(m, 1)), out)
        if out == before:
            break
    out = _SIZING.sub("", out)
    out = _SYMBOL.sub(lambda m: _SYMBOLS.get(m.group(1), m.group(0)), out)
    if math:
        out = _SCRIPT_GROUP.sub(lambda m: m.group(1) + _group(m.group(2)), out)
        out = out.replace("~", " ")
    out = _BRACES.sub("", out)
    return out


def _arg(match: re.Match[str], group: int) -> str:
    """The argument that matched: braced (group, possibly empty) or a bare character (group + 1)."""
    braced = match.group(group)
    return braced if braced is not None else match.group(group + 1) or ""


def _group(inner: str) -> str:
    """A fraction part or script: bare when one token, else parenthesized."""
    inner = inner.strip()
    if not inner:
        return ""
    return inner if re.fullmatch(r"√?[\w.]+|.", inner) else f"({inner})"


def _accent_each(inner: str, mark: str) -> str:
    """An accent over a group: on its one letter, or after the group when it is longer."""
    return inner + mark if len(inner) == 1 else inner
