"""Seed text: blank-line-separated paragraphs, one abstract each, under an optional collection header.

The first non-empty line is the collection header only when it is a single line of at most ``HEADER_MAX_CHARS``
characters followed by a blank line (or the end of the file); otherwise the file has no header. Every other
paragraph is one abstract, its lines joined with single spaces. Seed text is what a file is when no other
format claims it.
"""

from __future__ import annotations

from semsearch.core.records import Provenance, Record
from semsearch.ingest.formats import TextFormat

HEADER_MAX_CHARS = 120


class SeedText(TextFormat):
    """``.txt`` and ``.md`` files, and any text no other format claims."""

    name = "seed"
    extensions = (".txt", ".md")
    name_decides = False  # a .txt file holding JSON or CSV is read as what it holds

    def records(self, text: str, display: str, skip_bad: bool) -> tuple[list[Record], list[str]]:
        """One record per abstract paragraph, tagged with the header; seed text has no bad records."""
        paragraphs = _paragraphs(text)
        header = None
        if paragraphs and len(paragraphs[0]) == 1 and len(paragraphs[0][0]) <= HEADER_MAX_CHARS:
            header = paragraphs.pop(0)[0]
        records = [
            Record(text=" ".join(lines), provenance=Provenance(display, "paragraph", number), collection=header)
            for number, lines in enumerate(paragraphs, 1)
        ]
        return records, []


def _paragraphs(text: str) -> list[list[str]]:
    """Blank-line-separated paragraphs as lists of stripped lines; whitespace-only lines are blank."""
    paragraphs: list[list[str]] = []
    current: list[str] = []
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped:
            current.append(stripped)
        elif current:
            paragraphs.append(current)
            current = []
    if current:
        paragraphs.append(current)
    return paragraphs
