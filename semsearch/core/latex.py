"""LaTeX in titles and abstracts as Unicode text, and Unicode text as BibTeX, with pylatexenc.

Sources write titles and abstracts with LaTeX markup (accents, ``\\emph{}``, inline math, ``--``, ``\\string^``).
``latex_to_text`` gives what they show (``R\\'{e}nyi`` -> ``Rényi``, ``$\\omega \\cdot n$`` -> ``ω · n``) for
display, search and export; the stored text is never changed (it is what ids are derived from). A text with
no LaTeX markup is returned as it is without being parsed (``has_latex``), which is most abstracts.
``text_to_bibtex`` spells Unicode text back for a BibTeX value: specials escaped, accented letters as LaTeX
(``é`` -> ``{\\'e}``), other characters (``ω``, CJK) as UTF-8, which every BibTeX reader takes as it is.

Abstracts are not whole LaTeX documents: a bare ``%`` is a percent sign (not a comment), a bare ``&`` an
ampersand, and ``~`` before a number ("~5x faster") means "about", so those are read as the words they are.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Any

# What makes a text worth parsing: a command, math, a group, or TeX's ligatures for dashes and quotes.
_MARKUP = re.compile(r"[\\${}]|--|``|''")
_BARE_PERCENT = re.compile(r"(?<!\\)((?:\\\\)*)([%&])")
# "\\%" is "\%" escaped once more (JSON written from a string that was already escaped), not a line break.
_DOUBLED_ESCAPE = re.compile(r"(?<!\\)\\\\(?=[%&$#_])")
# "~" at the start of a word is "about" (~5%), not TeX's unbreakable space (Fig.~3).
_ABOUT = re.compile(r"(?:(?<=^)|(?<=[\s(\[]))~")
_ONE_TOKEN = re.compile(r"√?[A-Za-z0-9_.]+|.")
# "\~" or "\^" before no letter ("lDDT \~ $0.7$") is the character itself, not an accent on what follows.
_BARE_ACCENT = re.compile(r"\\([~^])(?!\s*[A-Za-z{\\])")
_CHARACTER = {"~": r"\textasciitilde{}", "^": r"{\string^}"}
_WORD = re.compile(r"\S+")
# A word with markup; "~" too: in a text with markup, an "about" tilde is spelled out by now.
# Inline math: "$" opens before a non-space and closes after one (pandoc's rule, less its "not before a digit",
# which abstracts break: "$\sim$30%"); so "$5 and $10" is money, "$x$" math. A "$" outside every span is itself.
_MATH_SPAN = re.compile(r"\$\$.+?\$\$|(?<!\\)\$(?=[^\s$])(?:[^$\\]|\\.)*?(?<=[^\s\\])\$|\\\$")
_WORD_MARKUP = re.compile(r"[\\${}~]|--|``|''")
_ESCAPED = re.compile(r"\\[\\{}$]")  # \{ \} \$ and \\ open and close nothing
# A word ending in a command ("\tilde O", "\'{} e") or in "\" (a control space, "\ ") goes on to the next.
_OPEN_SPACE = re.compile(r"(?<!\\)(?:\\\\)*\\(?:[A-Za-z]+|[^A-Za-z\s])?$")

# Commands whose argument is shown as it is. pylatexenc drops some (\texttt, \mbox) and spells math
# alphabets as Unicode math letters (𝐱, 𝒪), which no query typed on a keyboard matches.
_SHOW_ARGUMENT = (
    "texttt", "textsf", "textup", "textmd", "mbox", "url", "underline", "mathbf", "mathit", "mathsf", "mathtt",
    "mathfrak", "mathcal", "mathscr", "boldsymbol", "bm", "pmb",
)  # fmt: skip
# References to a paper's own labels and bibliography show nothing a user reading the abstract can use; pylatexenc
# writes "<cit.>" and "<ref>", which BM25 would index.
_DROPPED = ("cite", "citep", "citet", "ref", "eqref", "label")
_SYMBOLS = {
    "S": "§", "P": "¶", "LaTeX": "LaTeX", "TeX": "TeX", "checkmark": "✓", "xmark": "✗", "sharp": "♯", "|": "‖",
    "textasciicircum": "^",  # pylatexenc shows U+02C6, a modifier letter; the character typed is "^"
    "textbraceleft": "{", "textbraceright": "}",
}  # fmt: skip
# Math accents: on a single letter its combining mark, over more (or over a command pylatexenc cannot put an
# accent on, "\hat\pi") the accent is left out.
_MATH_ACCENTS = {
    "widetilde": "\u0303", "widehat": "\u0302", "overline": "\u0305", "tilde": "\u0303", "hat": "\u0302",
    "bar": "\u0304", "vec": "\u20d7", "dot": "\u0307", "ddot": "\u0308", "check": "\u030c", "breve": "\u0306",
    "acute": "\u0301", "grave": "\u0300",
}  # fmt: skip
# BibTeX's special characters and how a value spells them; latex_to_text (and bibtexparser) read them back.
_BIBTEX_ESCAPES = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "%": r"\%",
    "&": r"\&",
    "#": r"\#",
    "_": r"\_",
    "$": r"\$",
    "~": r"\textasciitilde{}",
    # A bare "^" stops LaTeX outside math ("Missing $ inserted"); citation-js decodes this spelling, pybtex's
    # plain-text renderer leaves it as written (its LaTeX output is right).
    "^": r"\textasciicircum{}",
}
_DOTLESS = re.compile(r"(?<=[^\\])\\([ij])\b")
_BIBTEX_SPECIAL = re.compile("|".join(re.escape(c) for c in _BIBTEX_ESCAPES))
# TeX ligatures ("--" is an en dash, ``x'' are curly quotes, !` is ¡): "{}" between the characters keeps them.
_LIGATURE = re.compile(r"(?<=-)(?=-)|(?<=[`!?])(?=`)|(?<=')(?=')")
# How BibTeX files usually spell these, where pylatexenc's defaults would write text-mode commands.
_BIBTEX_SPELLING = {"\u2013": "--", "\u2014": "---", "\u201c": "``", "\u201d": "''", "\u00a0": "~"}
# What BibTeX readers (bibtexparser with pylatexenc, pybtex, citation-js) all decode: accented letters and the
# special letters of European languages, and TeX's dashes and quotes. Anything else (Greek, math symbols, CJK)
# is written as UTF-8, which they all read as it is; "$\omega$" or "{\string^}" some of them would not.
_READ_BY_ALL = re.compile(
    r"\{?(?:\\(?:['`^\"~=.]|[uvHckdbrt](?![A-Za-z]))\s*\{?\\?[A-Za-z]\}?|\\(?:o|O|l|L|ss|ae|AE|oe|OE|aa|AA|i|j)"
    r"|---?|``|''|~)\}?"
)


def has_latex(text: str) -> bool:
    """Whether a text has LaTeX markup to decode (commands, math, groups, ``--``, ````quotes''``)."""
    return _MARKUP.search(text) is not None


def latex_to_text(text: str) -> str:
    """The text LaTeX markup shows, as Unicode (NFC); a text without markup is returned unchanged.

    Accents become letters, text commands their argument, math its symbols (``\\alpha`` -> ``α``,
    ``\\frac{a}{b}`` -> ``a/b``), ``--`` a dash and ````x''`` curly quotes. Unknown commands are dropped and
    their braced argument kept. A piece of markup pylatexenc cannot read is left as written.
    """
    if not has_latex(text):
        return text
    prepared = _DOUBLED_ESCAPE.sub(r"\\", text) if "\\\\" in text else text
    prepared = _ABOUT.sub(r"\\textasciitilde{}", _BARE_PERCENT.sub(r"\1\\\2", prepared))
    if "$" in prepared:
        prepared = _literal_dollars(prepared)
    if "\\~" in prepared or "\\^" in prepared:
        prepared = _BARE_ACCENT.sub(lambda m: _CHARACTER[m.group(1)], prepared)
    decoder = _decoder()
    out: list[str] = []
    for piece, markup in _pieces(prepared):
        if not markup:
            out.append(piece)
            continue
        try:
            out.append(" ".join(str(decoder.latex_to_text(piece)).split()))
        except Exception:  # pylatexenc raises assorted errors on odd input; that piece is shown as written
            out.append(piece)
    return unicodedata.normalize("NFC", "".join(out))


def _literal_dollars(text: str) -> str:
    """The text with each "$" that opens or closes no math escaped (``\\$``), so that it shows as itself."""
    out, pos = [], 0
    for span in _MATH_SPAN.finditer(text):
        out.append(text[pos : span.start()].replace("$", r"\$"))
        out.append(span.group())
        pos = span.end()
    out.append(text[pos:].replace("$", r"\$"))
    return "".join(out)


def _pieces(text: str) -> list[tuple[str, bool]]:
    """The text cut at whitespace into plain runs and pieces with markup that are whole in LaTeX terms.

    pylatexenc reads a text character by character; most of an abstract is plain words, so only the pieces
    with markup are given to it. A piece starts at a word with markup and ends where no group, math or
    command is open, so that ``\\emph{two words}`` or ``$a \\cdot b$`` is read whole; the rest is kept as it is.
    """
    out: list[tuple[str, bool]] = []
    pos = 0
    # Words, then a search inside each: one pattern "\S*markup\S*" over the text backtracks quadratically on a
    # long unbroken run.
    for marked in (w for w in _WORD.finditer(text) if _WORD_MARKUP.search(w.group())):
        if marked.start() < pos:
            continue  # read already, inside the piece before
        if marked.start() > pos:
            out.append((text[pos : marked.start()], False))
        depth, math, word = 0, False, marked
        while True:
            bare = _ESCAPED.sub("", word.group())
            depth += bare.count("{") - bare.count("}") + bare.count("\\(") + bare.count("\\[")
            depth -= bare.count("\\)") + bare.count("\\]")
            math ^= bare.count("$") % 2 == 1
            following = _WORD.search(text, word.end())
            if following is None or not (depth > 0 or math or _OPEN_SPACE.search(word.group())):
                break
            word = following
        out.append((text[marked.start() : word.end()], True))
        pos = word.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def text_to_bibtex(text: str) -> str:
    """Unicode text as a BibTeX value: specials escaped, accented letters as ``{\\'e}``, dashes as ``--``.

    ASCII letters, digits and plain punctuation are left as they are, and so are characters BibTeX
    readers do not all decode from LaTeX (``ω``, ``♯``, CJK): written as UTF-8. What reads back through
    ``latex_to_text`` is the same text.
    """
    escaped = _BIBTEX_SPECIAL.sub(lambda m: _BIBTEX_ESCAPES[m.group(0)], text)
    if ("{" in text or "}" in text) and not _balanced(text):
        # BibTeX counts "\{" as a brace too: an unmatched one would end (or never end) the value.
        escaped = escaped.replace(r"\{", r"\textbraceleft{}").replace(r"\}", r"\textbraceright{}")
    escaped = _LIGATURE.sub("{}", escaped)
    if escaped.isascii():
        return escaped
    return "".join(char if char.isascii() else _char_to_bibtex(char) for char in escaped)


def _balanced(text: str) -> bool:
    """Whether every brace in a text closes one opened before it."""
    depth = 0
    for char in text:
        depth += (char == "{") - (char == "}")
        if depth < 0:
            return False
    return depth == 0


@cache
def _char_to_bibtex(char: str) -> str:
    """One non-ASCII character as LaTeX every BibTeX reader decodes (pylatexenc's spelling); else itself."""
    if unicodedata.combining(char):
        return char
    # pylatexenc puts accents on a dotless \i ({\'\i}); citation-js then reads "ı" + accent, not "í".
    latex = _DOTLESS.sub(r"\1", str(_encoder().unicode_to_latex(char)))
    return latex if _READ_BY_ALL.fullmatch(latex) and latex_to_text(latex) == char else char


# ------------------------------------------------------------------------------------------- pylatexenc


@cache
def _decoder() -> Any:
    """The pylatexenc converter, configured once per process (building its macro tables takes milliseconds)."""
    from pylatexenc import latexwalker, macrospec
    from pylatexenc.latex2text import LatexNodes2Text, MacroTextSpec, get_default_latex_context_db

    parse = latexwalker.get_default_latex_context_db()
    parse.add_context_category(
        "semsearch",
        prepend=True,
        macros=[
            macrospec.std_macro("href", False, 2),
            macrospec.std_macro("dfrac", False, 2),
            macrospec.std_macro("tfrac", False, 2),
            *(macrospec.std_macro(name, False, 1) for name in _SHOW_ARGUMENT),
            *(macrospec.std_macro(name, True, 1) for name in _DROPPED),
            *(macrospec.std_macro(name, False, 0) for name in _SYMBOLS),
            *(macrospec.std_macro(name, False, 1) for name in _MATH_ACCENTS),
        ],
    )
    show = get_default_latex_context_db()
    show.add_context_category(
        "semsearch",
        prepend=True,
        macros=[
            MacroTextSpec("href", simplify_repl=_href),
            *(MacroTextSpec(name, simplify_repl=_fraction) for name in ("frac", "dfrac", "tfrac")),
            MacroTextSpec("sqrt", simplify_repl=_root),
            *(MacroTextSpec(name, simplify_repl=_math_accent) for name in _MATH_ACCENTS),
            *(MacroTextSpec(name, simplify_repl=_argument) for name in _SHOW_ARGUMENT),
            *(MacroTextSpec(name, simplify_repl="") for name in _DROPPED),
            *(MacroTextSpec(name, simplify_repl=symbol) for name, symbol in _SYMBOLS.items()),
        ],
    )

    class Decoder(LatexNodes2Text):
        """pylatexenc's converter, reading with the parse context above and keeping the space after a symbol."""

        def latex_to_text(self, latex: str, **flags: Any) -> str:
            walker = latexwalker.LatexWalker(latex, latex_context=parse, tolerant_parsing=True)
            return str(self.nodelist_to_text(walker.get_latex_nodes()[0]))

        def nodelist_to_text(self, nodelist: Any) -> str:
            # LaTeX swallows the space after a command word; "$\\omega \\cdot n$" still reads "ω · n". A command
            # that shows nothing (\\it, \\bf) adds no space. A script of several tokens keeps them together:
            # "k^{1+1/p}" reads "k^(1 + 1/p)", not "k^1 + 1/p".
            out = ""
            spaced = False
            for node in nodelist:
                text = self.node_to_text(node)
                script = out.endswith(("^", "_")) and node.isNodeType(latexwalker.LatexGroupNode)
                if script and text.strip() and getattr(node.parsing_state, "in_math_mode", False):
                    text = _group(text.strip())
                if spaced and text and not text[0].isspace() and out and not out[-1].isspace():
                    out += " "
                out += text
                spaced = bool(text) and _bare_command(node)
            return out

    return Decoder(
        latex_context=show,
        math_mode="text",
        strict_latex_spaces={"between-macro-and-chars": True, "between-latex-constructs": True},
    )


def _bare_command(node: Any) -> bool:
    """Whether a node is a command without arguments followed by a space (``\\omega ``)."""
    if getattr(node, "macroname", None) is None or not node.macro_post_space:
        return False
    args = node.nodeargd.argnlist if node.nodeargd is not None else None
    return not args or all(a is None for a in args)


def _arguments(node: Any, l2tobj: Any) -> list[str]:
    """The text of each argument of a command node ("" for an optional one not given)."""
    args = node.nodeargd.argnlist if node.nodeargd else []
    return [l2tobj.nodelist_to_text([a]).strip() if a is not None else "" for a in args]


def _argument(node: Any, l2tobj: Any) -> str:
    """The text of a command's last argument ("" when it has none: ``\\underline`` at the end of a math group)."""
    parts = _arguments(node, l2tobj)
    return parts[-1] if parts else ""


def _math_accent(node: Any, l2tobj: Any) -> str:
    """``\\widetilde{O}`` shows ``Õ``, ``\\hat\\pi`` ``π̂``; over more than one letter the accent is left out."""
    inner = _argument(node, l2tobj)
    return inner + _MATH_ACCENTS[node.macroname] if len(inner) == 1 else inner


def _group(inner: str) -> str:
    """A fraction's part, a root's radicand or a script: bare when one character or ASCII word, else parenthesized."""
    return inner if not inner or _ONE_TOKEN.fullmatch(inner) else f"({inner})"


def _fraction(node: Any, l2tobj: Any) -> str:
    """``\\frac{a}{b+c}`` shows ``a/(b+c)``."""
    parts = _arguments(node, l2tobj)
    return "/".join(_group(p) for p in parts[-2:])


def _root(node: Any, l2tobj: Any) -> str:
    """``\\sqrt{d}`` shows ``√d``, ``\\sqrt[3]{x+1}`` ``∛(x+1)``-like ``3√(x+1)``."""
    parts = _arguments(node, l2tobj)
    index, radicand = (parts[0], parts[1]) if len(parts) > 1 else ("", parts[0] if parts else "")
    return f"{index}√{_group(radicand)}" if radicand else f"{index}√"


def _href(node: Any, l2tobj: Any) -> str:
    """``\\href{url}{label}`` shows its label (its URL when the label is empty)."""
    parts = _arguments(node, l2tobj)
    label = parts[1] if len(parts) > 1 else ""
    return label or (parts[0] if parts else "")


@cache
def _encoder() -> Any:
    """pylatexenc's encoder for the non-ASCII characters of a value whose ASCII specials are escaped already."""
    from pylatexenc.latexencode import RULE_DICT, UnicodeToLatexConversionRule, UnicodeToLatexEncoder

    spelling = {ord(char): latex for char, latex in _BIBTEX_SPELLING.items()}
    return UnicodeToLatexEncoder(
        conversion_rules=[UnicodeToLatexConversionRule(rule_type=RULE_DICT, rule=spelling), "defaults"],
        non_ascii_only=True,
        replacement_latex_protection="braces-all",
        unknown_char_policy="keep",
        unknown_char_warning=False,
    )
