"""CSV and TSV rows read so that none is lost silently: an unterminated quote or an oversized field is one bad row.

Python's csv module reads a quote that is never closed on to the end of the file, or to the next quote in it,
folding every row in between into one field without a word. So rows are read one record at a time from a
feeder that knows the line each record began on, and a record that spans several lines is bad when

- its quoted field runs to the end of the file (the last record is checked even on one line),
- the quote is closed by what can only be a later field's opening quote (a quote followed by other text),
- it runs past ``MAX_RECORD_LINES`` lines (an abstract is a few paragraphs), or
- it has another number of cells than the header (a merged run of rows rarely has the right number).

A bad record is reported by the line it began on (InputError, or listed and skipped with ``--skip-bad``), and
reading resumes on the line after that one: a stray quote opens its field on the line its record starts, so
the lines after it are read as the rows they are. Each row parses on its own, so a resumed read is what a
read of the file without the bad line would give.

A field may be as long as ``MAX_FIELD_CHARS`` (csv's default limit, 131,072 characters, failed the whole
file); a field past that bound is a bad row of its own, and the rows around it are read.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

from semsearch.core.errors import InputError
from semsearch.core.records import Provenance
from semsearch.ingest.fields import Item, header_names_known_field
from semsearch.ingest.formats import TextFormat

MAX_FIELD_CHARS = 2**22  # a thousand long abstracts; the whole text of a long paper is ~150k characters
MAX_RECORD_LINES = 1000  # lines one record may span: a backstop (abstracts take a few; the quote rules catch the rest)
# csv's own limit is process-wide; it is raised (never lowered) past every bound checked here, once per read.
_CSV_LIMIT = 2**31 - 1


class Csv(TextFormat):
    """``.csv``: comma-separated rows under a header row."""

    name = "csv"
    extensions = (".csv",)
    sniff_order = 40
    delimiter = ","

    def sniff(self, text: str) -> bool:
        """A first line that names a known field when split by the delimiter."""
        return header_names_known_field(text, self.delimiter)

    def items(self, text: str, display: str) -> Iterator[Item]:
        """One item per data row."""
        return csv_items(text, display, self.delimiter)


class Tsv(Csv):
    """``.tsv``: tab-separated rows under a header row (sniffed before CSV: a tab header may hold commas)."""

    name = "tsv"
    extensions = (".tsv",)
    sniff_order = 30
    delimiter = "\t"


class _RunawayRecord(Exception):
    """A record ran past MAX_RECORD_LINES lines (raised from the feeder, through the csv reader)."""


class _Lines:
    """The lines of a text, handed to csv.reader one at a time, remembering those of the current record."""

    def __init__(self, text: str) -> None:
        self._buf = io.StringIO(text, newline="")
        self._size = len(text)
        self.line = 0  # lines handed out so far
        self.start = 1  # the line the current record begins on
        self.record: list[str] = []
        self._start_pos = 0

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self._buf.readline()
        if not line:
            raise StopIteration
        self.line += 1
        self.record.append(line)
        if len(self.record) > MAX_RECORD_LINES:
            raise _RunawayRecord
        return line

    def begin(self) -> None:
        """Mark the next line as the first of a record."""
        self.start = self.line + 1
        self.record = []
        self._start_pos = self._buf.tell()

    def resume_after_start(self) -> None:
        """Go back to the line after the current record's first line (after a bad record)."""
        self._buf.seek(self._start_pos)
        self._buf.readline()
        self.line = self.start
        self.record = []

    def at_end(self) -> bool:
        """Whether every line has been handed out."""
        return self._buf.tell() >= self._size


def csv_items(text: str, display: str, delimiter: str) -> Iterator[Item]:
    """One item per data row (header not counted), or the reason the row is bad; quoted fields may span lines."""
    if csv.field_size_limit() < _CSV_LIMIT:
        csv.field_size_limit(_CSV_LIMIT)
    feed = _Lines(text)
    header = _header(feed, display, delimiter)
    reader = csv.reader(feed, delimiter=delimiter)
    number = 0
    while True:
        feed.begin()
        problem: str | None = None
        try:
            row = next(reader)
        except StopIteration:
            return
        except _RunawayRecord:
            problem = _runaway(feed)
        except csv.Error as exc:
            problem = f"malformed CSV ({exc})"
        else:
            if not row:
                continue  # a blank line, as csv.DictReader skips it
            problem = _unterminated(feed, row, len(header), delimiter)
        number += 1
        if problem is not None:
            yield Provenance(display, "line", feed.start), f"{problem} (row {number})"
            feed.resume_after_start()
            reader = csv.reader(feed, delimiter=delimiter)
            continue
        long = next((i for i, cell in enumerate(row) if len(cell) > MAX_FIELD_CHARS), None)
        if long is not None:
            name = header[long] if long < len(header) else f"cell {long + 1}"
            yield (
                Provenance(display, "row", number),
                f"field {name!r} holds {len(row[long]):,} characters, more than {MAX_FIELD_CHARS:,} (the limit)",
            )
            continue
        # Short rows stop at their last cell; surplus cells and unnamed columns are dropped (as DictReader did).
        yield Provenance(display, "row", number), {k: v for k, v in zip(header, row, strict=False) if k}


def _header(feed: _Lines, display: str, delimiter: str) -> list[str]:
    """The header row (the first non-blank record); a header that cannot be read fails the file."""
    reader = csv.reader(feed, delimiter=delimiter)
    while True:
        feed.begin()
        try:
            row = next(reader)
        except StopIteration:
            return []
        except _RunawayRecord:
            raise InputError(f"{display}:line {feed.start}: {_runaway(feed)} in the header") from None
        except csv.Error as exc:
            raise InputError(f"{display}:line {feed.start}: malformed CSV header ({exc})") from None
        if row:
            problem = _unterminated(feed, row, len(row), delimiter)
            if problem is not None:
                raise InputError(f"{display}:line {feed.start}: {problem} in the header")
            return row


def _runaway(feed: _Lines) -> str:
    return f"unterminated quote? the record runs past {MAX_RECORD_LINES} lines"


def _unterminated(feed: _Lines, row: list[str], cells: int, delimiter: str) -> str | None:
    """Why a record read without complaint must hold an unterminated quote, or None when it is sound."""
    spans = len(feed.record)
    if spans == 1 and not feed.at_end():
        return None  # one line, and more follow: no quoted field ran on past it
    strict = csv.reader(io.StringIO("".join(feed.record), newline=""), delimiter=delimiter, strict=True)
    try:
        rows = list(strict)
    except csv.Error as exc:
        if "unexpected end of data" in str(exc):
            return "unterminated quote: its field runs to the end of the file"
        if spans == 1:
            return None  # sloppy quoting within one line ("a" b), which csv reads as it always has
        end = feed.start + strict.line_num - 1
        return f"unterminated quote: the record runs on to a quote on line {end}"
    if spans > 1 and (len(rows) != 1 or len(row) != cells):
        last = feed.start + spans - 1
        return (
            f"unterminated quote? the record spans lines {feed.start}-{last} "
            f"and has {len(row)} cells where the header has {cells}"
        )
    return None
