"""``semsearch index --strict``: any skipped input names itself, the build exits 2 and the index stays as it was."""

from __future__ import annotations

import shutil
from pathlib import Path

from click.testing import Result

from tests.helpers import BAD_PDFS, PDFS, FakeEmbedder, run, snapshot

GOOD = ("01-single.pdf", "05-twocol.pdf")


def _papers(tmp_path: Path, *bad: str) -> Path:
    folder = tmp_path / "papers"
    folder.mkdir(exist_ok=True)
    for name in GOOD:
        shutil.copy(PDFS / name, folder / name)
    for name in bad:
        shutil.copy(PDFS / "bad" / name, folder / name)
    return folder


def _index(papers: Path, index: Path, *more: str) -> Result:
    return run(["index", str(papers), "--index", str(index), "-q", *more], FakeEmbedder())


def _refused(result: Result, *names: str) -> None:
    """Exit 2: one ``skipped`` line per name, then the one error line; no traceback."""
    output = result.output
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if line.strip()]
    for name in names:
        assert len([line for line in lines if name in line and "skipped" in line]) == 1, output
    many = "input was" if len(names) == 1 else "inputs were"
    assert lines[-1] == f"Error: --strict: {len(names)} {many} skipped; nothing was written", output
    assert len(lines) == len(names) + 1, output


def test_a_first_strict_build_with_bad_pdfs_writes_no_index(tmp_path: Path) -> None:
    papers = _papers(tmp_path, *BAD_PDFS)
    index = tmp_path / "idx"
    _refused(_index(papers, index, "--strict"), *BAD_PDFS)
    assert not index.exists()
    # Without --strict: the same files are one line each and the build goes on (exit 0).
    built = _index(papers, index)
    assert built.exit_code == 0, built.output
    for name, reason in BAD_PDFS.items():
        assert [line for line in built.output.splitlines() if name in line and reason in line], built.output


def test_a_strict_refresh_that_meets_a_bad_pdf_leaves_the_index_as_it_was(tmp_path: Path) -> None:
    papers = _papers(tmp_path)
    index = tmp_path / "idx"
    assert _index(papers, index).exit_code == 0
    before = snapshot(index)
    shutil.copy(PDFS / "bad" / "truncated.pdf", papers / "truncated.pdf")  # arrives: the refresh would append
    _refused(_index(papers, index, "--strict"), "truncated.pdf")
    assert snapshot(index) == before
    _refused(_index(papers, index, "--strict", "--full"), "truncated.pdf")  # the whole rewrite refuses as well
    assert snapshot(index) == before


def test_a_strict_refresh_with_nothing_new_still_names_what_the_index_skipped(tmp_path: Path) -> None:
    papers = _papers(tmp_path, "empty.pdf")
    index = tmp_path / "idx"
    assert _index(papers, index).exit_code == 0  # built without --strict: the empty file was passed over
    before = snapshot(index)
    _refused(_index(papers, index, "--strict"), "empty.pdf")
    assert snapshot(index) == before
    again = _index(papers, index)
    assert again.exit_code == 0 and "up to date" in again.output, again.output


def test_records_skip_bad_passes_over_fail_a_strict_build(tmp_path: Path) -> None:
    papers = _papers(tmp_path)
    (papers / "more.jsonl").write_text(
        '{"id": "a", "title": "Tides", "abstract": "Sea level rise and how harbours silt up."}\n'
        '{"id": "b"}\nnot json\n',
        encoding="utf-8",
    )
    index = tmp_path / "idx"
    _refused(_index(papers, index, "--skip-bad", "--strict"), "more.jsonl:line 2", "more.jsonl:line 3")
    assert not index.exists()
    built = _index(papers, index, "--skip-bad")
    assert built.exit_code == 0 and built.output.count("skipped") == 2, built.output


def test_a_strict_build_with_nothing_skipped_is_an_ordinary_build(tmp_path: Path) -> None:
    papers = _papers(tmp_path)
    index = tmp_path / "idx"
    built = _index(papers, index, "--strict")
    assert built.exit_code == 0 and "read 2 abstracts from 2 files" in built.output, built.output
    again = _index(papers, index, "--strict")
    assert again.exit_code == 0 and "up to date" in again.output, again.output
