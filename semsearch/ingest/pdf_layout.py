"""The geometry of a PDF page: its text lines in reading order (one or two columns) and page 1's glyphs.

PDFium gives a page's text in drawing order, which is reading order for most producers but not all (a page may
draw its right column first). Each line gets the box of its glyphs, and ``column_order`` puts the lines in
reading order from where they sit. ``page_glyphs`` and ``segments`` give the head heuristic (``pdf.py``) the
glyphs of page 1 with their size and weight, grouped into lines and blocks.
"""

from __future__ import annotations

import ctypes
import math
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import Any

# PDFium's marks for a hyphen at a line end that it joined (U+FFFE) or left as a control character (U+0002).
LINE_END_HYPHENS = (0xFFFE, 0x02)
_SPACES = (0x20, 0x0D, 0x0A)
_LEVEL = 0.05  # radians: a glyph turned less than this is level


@dataclass(frozen=True)
class Line:
    """One line of a page's text with the box of its glyphs (top-down coordinates)."""

    x0: float
    top: float
    x1: float
    bottom: float
    text: str


@dataclass(frozen=True)
class Glyph:
    """One glyph of a page (top-down coordinates), with its font size and whether its font is bold."""

    text: str
    x0: float
    top: float
    x1: float
    bottom: float
    size: float
    bold: bool


@dataclass(frozen=True)
class Segment:
    """A run of glyphs on one line, apart from its neighbours by a wide gap (a column, an author block)."""

    text: str
    x0: float
    top: float
    bottom: float
    size: float
    bold: bool


def page_lines(textpage: Any, height: float) -> list[Line]:
    """PDFium's text lines of a page, each with the box of its drawn (not generated) glyphs."""
    import pypdfium2.raw as raw

    text = textpage.get_text_range()
    turn = turned(textpage, text)
    lines: list[Line] = []
    current: list[str] = []
    box = [1e9, 1e9, -1e9, -1e9]
    for k in range(min(textpage.count_chars(), len(text))):
        ch = text[k]
        if ch in "\r\n":
            if current and box[0] < 1e9:
                lines.append(Line(box[0], box[1], box[2], box[3], "".join(current)))
            current, box = [], [1e9, 1e9, -1e9, -1e9]
            continue
        current.append(ch)
        if not ch.isspace() and not turn[k] and not raw.FPDFText_IsGenerated(textpage.raw, k):
            left, bottom, right, top = textpage.get_charbox(k)
            box = [min(box[0], left), min(box[1], height - top), max(box[2], right), max(box[3], height - bottom)]
    if current and box[0] < 1e9:
        lines.append(Line(box[0], box[1], box[2], box[3], "".join(current)))
    return lines


def turned(textpage: Any, text: str) -> list[bool]:
    """Per character of a page's text: whether its line is rotated (an arXiv stamp up the margin), not level.

    Rotated text is no line of the page's reading (nor its title, however large). PDFium starts a new line where
    the writing turns, so each line's first drawn glyph speaks for the line: one look per line, not per glyph. A
    page whose every line is turned (a landscape page drawn sideways) is read as it is: none counts as turned.
    """
    import pypdfium2.raw as raw

    out = [False] * len(text)
    start, look, level = 0, True, False
    for k, ch in enumerate(text):
        if ch in "\r\n":
            start, look = k + 1, True
        elif look and not ch.isspace():
            look = False
            angle = raw.FPDFText_GetCharAngle(textpage.raw, k)
            angle = angle % (2 * math.pi) if angle >= 0 else 0.0  # -1: PDFium cannot say
            if _LEVEL < angle < 2 * math.pi - _LEVEL:
                end = min([len(text), *(stop for stop in (text.find("\r", k), text.find("\n", k)) if stop >= 0)])
                out[start:end] = [True] * (end - start)
            else:
                level = True
    return out if level else [False] * len(text)


def column_order(lines: list[Line], width: float) -> list[Line]:
    """Reading order for one or two columns: bands split by full-width lines; in a band, the left column first.

    The gutter is the vertical line near the middle of the page that the fewest lines cross (at most 15% of them,
    with text on both sides); the lines that cross it (title, authors, wide figures, running headers) and blank
    strips across the page cut it into bands. A page with no gutter is read top-down, left to right.
    """
    ordered = sorted(lines, key=lambda r: (round(r.top / 2), r.x0))
    gutter = _gutter(lines, width)
    if gutter is None:
        return ordered
    out: list[Line] = []
    band: list[Line] = []

    def flush() -> None:
        out.extend(r for r in band if r.x1 <= gutter)
        out.extend(r for r in band if r.x1 > gutter)
        band.clear()

    line_height = statistics.median(r.bottom - r.top for r in lines)
    low = -1e9
    for line in ordered:
        if line.x0 < gutter < line.x1:  # spans the gutter: a title, a wide figure, a running header
            flush()
            out.append(line)
        else:
            if line.top > low + 1.2 * line_height:  # a blank strip across both columns ends a band too
                flush()
            band.append(line)
        low = max(low, line.bottom)
    flush()
    return out


def _gutter(lines: list[Line], width: float) -> float | None:
    """The x of the gap between two columns, None when the page has one column."""
    best: tuple[int, float] | None = None
    gutter = None
    for k in range(41):
        x = width * (0.3 + 0.01 * k)
        cross = sum(r.x0 < x < r.x1 for r in lines)
        left = sum(r.x1 <= x for r in lines)
        right = sum(r.x0 >= x for r in lines)
        if left > 5 and right > 5 and cross <= 0.15 * len(lines):
            key = (cross, abs(x - width / 2))
            if best is None or key < best:
                best, gutter = key, x
    return gutter


def page_glyphs(textpage: Any, height: float) -> list[Glyph]:
    """Every drawn glyph of a page but spaces, with its box, font size and weight."""
    import pypdfium2.raw as raw

    out: list[Glyph] = []
    name = ctypes.create_string_buffer(256)
    flags = ctypes.c_int()
    turn = turned(textpage, textpage.get_text_range())
    for i in range(textpage.count_chars()):
        code = raw.FPDFText_GetUnicode(textpage.raw, i)
        if raw.FPDFText_IsGenerated(textpage.raw, i) or code in _SPACES or (i < len(turn) and turn[i]):
            continue
        if code in LINE_END_HYPHENS:
            code = 0x2D
        left, bottom, right, top = textpage.get_charbox(i)
        size = raw.FPDFText_GetFontSize(textpage.raw, i)
        weight = raw.FPDFText_GetFontWeight(textpage.raw, i)
        raw.FPDFText_GetFontInfo(textpage.raw, i, name, 256, ctypes.byref(flags))
        bold = weight >= 600 or "Bold" in name.value.decode("latin-1", "replace")
        out.append(Glyph(chr(code), left, height - top, right, height - bottom, size, bold))
    return out


def segments(glyphs: list[Glyph]) -> list[Segment]:
    """Glyphs grouped into lines, and lines split at gaps wider than the type (blocks side by side)."""
    lines: list[list[Glyph]] = []
    mids: list[float] = []
    for glyph in sorted(glyphs, key=lambda g: (g.top + g.bottom) / 2):
        mid = (glyph.top + glyph.bottom) / 2
        # An apostrophe or a superscript sits higher than its line's letters: within half a size it still belongs.
        if lines and abs(mid - mids[-1]) < 0.5 * max(glyph.size, 1.0):
            lines[-1].append(glyph)
            mids[-1] = statistics.median((g.top + g.bottom) / 2 for g in lines[-1])
            continue
        lines.append([glyph])
        mids.append(mid)
    out: list[Segment] = []
    for line in lines:
        line.sort(key=lambda g: g.x0)
        size = statistics.median(g.size for g in line) or 10.0
        run: list[Glyph] = []
        text: list[str] = []
        for glyph in line:
            gap = glyph.x0 - run[-1].x1 if run else 0.0
            if run and gap > size:
                out.append(_segment(run, text))
                run, text = [], []
            text.append((" " if run and gap > 0.15 * size else "") + glyph.text)
            run.append(glyph)
        if run:
            out.append(_segment(run, text))
    return out


def _segment(run: list[Glyph], text: list[str]) -> Segment:
    sizes = Counter(round(g.size, 1) for g in run)
    return Segment(
        "".join(text),
        run[0].x0,
        min(g.top for g in run),
        max(g.bottom for g in run),
        sizes.most_common(1)[0][0],
        sum(g.bold for g in run) * 2 > len(run),
    )
