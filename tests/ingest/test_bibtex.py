"""BibTeX in: .bib entries as records (bibtexparser 2), LaTeX decoded, the citation key as an external id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from semsearch.core.errors import ExtraNotInstalledError, InputError
from semsearch.ingest.sources import read_sources
from tests.helpers import PAPERS, FakeEmbedder, run

pytest.importorskip("bibtexparser", reason="the bibtex extra is not installed")

REFS = r"""% a reading list, as people write them
@string{nips = "Advances in Neural Information Processing Systems"}

@inproceedings{wen2025fedask,
  title     = {Differentially Private {F}ederated Low Rank Adaptation},
  author    = {Wen, Ming and Zhu, Jiaqi and M{\"u}ller, J{\'e}r{\^o}me and {Google Research} and van der Berg, Jan},
  booktitle = nips,
  year      = 2025,
  abstract  = {FED with R\'{e}nyi DP, 50\% less noise \& \emph{two} sketches.},
  doi       = {10.5555/fedask},
  url       = {https://example.org/fedask},
  eprint    = {2501.00001},
  archivePrefix = {arXiv},
}

@article{graph2024,
  title = {Oversmoothing in Deep Graph Networks},
  author = {Doe, Jane},
  journal = {JMLR},
  year = {2024},
  abstract = "GRAPH",
}
""".replace("FED", PAPERS["fed"].rstrip(".")).replace("GRAPH", PAPERS["graph"])


def write(tmp_path: Path, text: str, name: str = "refs.bib") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_entries_become_records_with_decoded_fields(tmp_path: Path) -> None:
    result = read_sources([str(write(tmp_path, REFS))])
    assert [f.format for f in result.files] == ["bibtex"]
    fed, graph = result.records
    assert fed.external_id == "wen2025fedask" and graph.external_id == "graph2024"
    assert fed.title == "Differentially Private Federated Low Rank Adaptation"  # protective braces gone
    assert fed.text.endswith("with Rényi DP, 50% less noise & two sketches.")
    assert fed.metadata["authors"] == ["Ming Wen", "Jiaqi Zhu", "Jérôme Müller", "Google Research", "Jan van der Berg"]
    assert fed.metadata["year"] == "2025"
    assert fed.metadata["venue"] == "Advances in Neural Information Processing Systems"  # @string resolved
    assert fed.metadata["booktitle"] == fed.metadata["venue"]
    assert (fed.metadata["doi"], fed.metadata["eprint"], fed.metadata["archiveprefix"]) == (
        "10.5555/fedask",
        "2501.00001",
        "arXiv",
    )
    assert fed.metadata["entry_type"] == "inproceedings"
    assert graph.metadata["venue"] == "JMLR" and graph.metadata["authors"] == ["Jane Doe"]
    assert fed.provenance.label().endswith("refs.bib:line 4")


def test_title_only_entries_are_records_and_broken_entries_are_skipped_by_skip_bad(tmp_path: Path) -> None:
    text = REFS + "\n@misc{titleonly, title = {Just a Title}}\n\n@article{graph2024, title={Again}, abstract={x}}\n"
    text += "\n@article{broken,\n  title = {unclosed\n"
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=r"refs.bib:line \d+: duplicate citation key 'graph2024'"):
        read_sources([str(path)])
    result = read_sources([str(path)], skip_bad=True)
    assert [r.external_id for r in result.records] == ["wen2025fedask", "graph2024", "titleonly"]
    title_only = result.records[2]
    assert title_only.title_only and title_only.text == title_only.title == "Just a Title"
    reasons = [line.split(": ", 1)[1] for line in result.skipped]
    assert reasons[0] == "duplicate citation key 'graph2024'"
    assert reasons[1].startswith("malformed BibTeX (")


def test_a_bib_file_with_no_entries_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no abstracts found"):
        read_sources([str(write(tmp_path, "% only a comment\n@comment{nothing}\n"))])


def test_index_a_bib_and_find_papers_by_citation_key(tmp_path: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    folder = tmp_path / "lib"
    folder.mkdir()
    write(folder, REFS)  # found by a directory walk: .bib is a known extension
    result = run(["index", str(folder), "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["documents"] == 2
    result = run(["related", "wen2025fedask", "-k", "1", "--index", str(index), "--json"], fake)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)[0]["external_ids"] == ["graph2024"]
    hit = json.loads(run(["query", "federated privacy", "-k", "1", "--index", str(index), "--json"], fake).output)[0]
    assert hit["byline"] == "Ming Wen, Jiaqi Zhu, … · Advances in Neural Information Processing Systems 2025"
    assert hit["link"] == "https://example.org/fedask"


def test_without_bibtexparser_a_bib_file_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "bibtexparser", None)  # as if the bibtex extra were not installed
    with pytest.raises(
        ExtraNotInstalledError,
        match=r"refs.bib: reading BibTeX needs the 'bibtex' extra \(bibtexparser is missing\): "
        r"pip install 'semsearch\[bibtex\]'$",
    ):
        read_sources([str(write(tmp_path, REFS))])


def test_a_bib_file_as_catalogue(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    bib = write(tmp_path, REFS)
    result = run(["index", str(small_corpus), "--index", str(index), "--catalogue", str(bib), "--json"], fake)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["catalogue"]["exact"] == 1  # the graph abstract, word for word
    hit = json.loads(run(["related", "graph2024", "-k", "1", "--index", str(index), "--json"], fake).output)
    assert hit and hit[0]["id"] != "graph2024"
    doc = json.loads(run(["query", "oversmoothing graph", "-k", "1", "--index", str(index), "--json"], fake).output)[0]
    assert doc["title"] == "Oversmoothing in Deep Graph Networks" and doc["byline"] == "Jane Doe · JMLR 2024"
    assert doc["external_ids"] == ["graph2024"]


def test_a_value_holding_the_private_placeholder_still_decodes(tmp_path: Path) -> None:
    """The reader marks kept escapes with U+E000 while decoding; a value that holds one itself is decoded whole."""
    path = tmp_path / "odd.bib"
    path.write_text("@article{k, title={A \ue000 B \\{x\\}}, abstract={text}}\n", encoding="utf-8")
    (record,) = read_sources([str(path)]).records
    assert record.title is not None and "\ue000" in record.title and "x" in record.title
