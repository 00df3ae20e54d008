"""The input-format registry: detection as before, and a format added by a plugin without editing the package."""

from __future__ import annotations

from pathlib import Path

import pytest

from semsearch.core.errors import InputError
from semsearch.ingest.formats import FormatRegistry, built_in_formats, installed_formats
from semsearch.ingest.seed import SeedText
from semsearch.ingest.sources import read_sources
from tests.helpers import TOY_MODULE, FakeEmbedder, _install_plugin, assert_one_line_error, run


def test_a_plugin_format_is_walked_read_indexed_and_refreshed(tmp_path: Path, plugin_site: Path) -> None:
    _install_plugin(plugin_site, "toyfmt:Lines")
    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "reading.lines").write_text(
        "Graph Networks | Message passing neural networks learn on molecular graphs.\n"
        "Private Federated Learning | Differential privacy bounds leakage in federated training.\n",
        encoding="utf-8",
    )
    (papers / "ignored.xyz").write_text("not an abstract file", encoding="utf-8")
    index = tmp_path / "idx"
    fake = FakeEmbedder()

    built = run(["index", str(papers), "--index", str(index), "-q"], fake)
    assert built.exit_code == 0, built.output
    hits = run(["query", "federated privacy", "--index", str(index), "--json", "-k", "1"], fake)
    assert hits.exit_code == 0, hits.output
    assert "Private Federated Learning" in hits.stdout
    info = run(["info", "--index", str(index), "--json"], fake)
    assert '"lines"' in info.stdout  # the manifest records the plugin's format name

    with (papers / "reading.lines").open("a", encoding="utf-8") as fh:
        fh.write("Sparse Attention | Sparse attention patterns make long-context transformers cheaper.\n")
    stale = run(["query", "attention", "--index", str(index)], fake)
    assert "the index is stale: 1 changed" in stale.stderr
    refreshed = run(["index", str(papers), "--index", str(index), "-q"], fake)
    assert refreshed.exit_code == 0, refreshed.output
    assert "Sparse Attention" in run(["query", "sparse attention", "--index", str(index), "-k", "1"], fake).stdout


def test_a_plugin_format_reports_bad_records_like_the_built_in_ones(tmp_path: Path, plugin_site: Path) -> None:
    _install_plugin(plugin_site, "toyfmt:Lines")
    source = tmp_path / "a.lines"
    source.write_text("Good | An abstract.\nno bar here\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"a\.lines:line 2: no '\|' between title and abstract$"):
        read_sources([str(source)])
    result = read_sources([str(source)], skip_bad=True)
    assert [r.title for r in result.records] == ["Good"]
    assert result.files[0].format == "lines"


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("toyfmt:Missing", "cannot be loaded (AttributeError: "),
        ("no_such_module_xyz:Lines", "cannot be loaded (ModuleNotFoundError: "),
        ("toyfmt:NOT_A_FORMAT", "is not a TextFormat or FileFormat"),
    ],
)
def test_a_broken_plugin_is_one_error_line(tmp_path: Path, plugin_site: Path, target: str, reason: str) -> None:
    _install_plugin(plugin_site, target)
    source = tmp_path / "a.txt"
    source.write_text("An abstract about graphs.\n", encoding="utf-8")
    result = run(["index", str(source), "--index", str(tmp_path / "idx"), "-q"], FakeEmbedder())
    assert_one_line_error(result, "input format plugin 'lines' ", reason)
    assert not (tmp_path / "idx").exists()


def test_a_plugin_cannot_take_a_built_in_name(tmp_path: Path, plugin_site: Path) -> None:
    _install_plugin(plugin_site, "toyfmt:Lines")
    (plugin_site / "toyfmt.py").write_text(TOY_MODULE.replace('name = "lines"', 'name = "csv"'), encoding="utf-8")
    with pytest.raises(InputError, match=r"^two input formats are named 'csv'$"):
        installed_formats()


def test_the_registry_needs_its_fallback_format() -> None:
    with pytest.raises(InputError, match="fallback input format 'seed' is not registered"):
        FormatRegistry([], fallback="seed")
    assert FormatRegistry([SeedText()], fallback="seed").detect("a.csv", "title,abstract\n").name == "seed"


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("a.json", '{"title": "x"}\n{"title": "y"}\n', "jsonl"),  # JSON Lines saved as .json
        ("a.json", '{"title": "x"}\n', "json"),
        ("a.json", "not json at all", "json"),  # the name decides: the error is "malformed JSON"
        ("a.jsonl", "[1, 2]", "jsonl"),
        ("a.txt", "title,abstract\nT,A\n", "csv"),  # .txt is sniffed
        ("a.txt", "title\tabstract,id\nT\tA\n", "tsv"),  # tabs are tried before commas
        ("a.dat", '[{"title": "x"}]', "json"),
        ("a.dat", "A header\n\nAn abstract.\n", "seed"),
        ("a.bib", "@article{k, title={T}}", "bibtex"),
        ("a.txt", "@article{k, title={T}}", "seed"),  # BibTeX is never sniffed
    ],
)
def test_detection(name: str, text: str, expected: str) -> None:
    assert built_in_formats().detect(name, text).name == expected


def test_the_walk_filter_and_its_message_list_every_extension_in_order() -> None:
    every = [".txt", ".md", ".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".bib", ".pdf"]
    assert list(built_in_formats().extensions) == every
    assert built_in_formats().for_name("Paper.PDF") == "pdf"
    assert built_in_formats().for_name("A.JSONL.GZ") == "jsonl"
    assert built_in_formats().for_name("notes.docx") is None
