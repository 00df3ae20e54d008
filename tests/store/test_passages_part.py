"""A full-text index's passages part: written per segment, carried by refreshes, removals and merges, verified."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from semsearch.core.errors import QueryError
from semsearch.query.search import Index
from semsearch.store import passages_part
from semsearch.store.layout import current_version
from semsearch.store.manifest import Manifest
from semsearch.store.passages_part import FILES, PASSAGE_OFFSETS_FILE, PASSAGE_TEXT_FILE, has_passages
from semsearch.write.build import BuildOptions, build_index
from semsearch.write.remove import remove_documents
from semsearch.write.verify import verify_index
from tests.helpers import PDFS, FakeEmbedder, passages_by_title

FULL = BuildOptions(progress=False, full_text=True, map_method="off")  # no map: every change fits a segment
QUIET = BuildOptions(progress=False, map_method="off")


def _papers(tmp_path: Path, *names: str) -> Path:
    folder = tmp_path / "papers"
    folder.mkdir(exist_ok=True)
    for name in names:
        shutil.copy(PDFS / name, folder / name)
    return folder


def test_a_full_text_build_writes_passages_and_an_abstract_only_build_none(tmp_path: Path) -> None:
    papers = _papers(tmp_path, "01-single.pdf", "05-twocol.pdf")
    plain = tmp_path / "plain"
    build_index([str(papers)], plain, QUIET, embedder=FakeEmbedder())
    version = current_version(plain)
    assert not any((version / name).exists() for name in FILES)
    assert "full_text" not in json.loads((version / "manifest.json").read_text(encoding="utf-8"))
    with Index.open(plain, embedder=FakeEmbedder()) as index:
        assert index.passages is None
        assert all(h.passage is None for h in index.search("data valuation", 2))
        with pytest.raises(QueryError, match="--full-text"):
            index.search_passages("data valuation")

    full = tmp_path / "full"
    build_index([str(papers)], full, FULL, embedder=FakeEmbedder())
    version = current_version(full)
    assert all((version / name).is_file() for name in FILES)
    assert has_passages(Manifest.read(version))
    held = passages_by_title(full)
    assert len(held) == 2 and all(len(p) > 10 for p in held.values())
    assert verify_index(full) == []


def test_an_unchanged_refresh_reads_no_full_text_and_a_refresh_keeps_the_setting(
    tmp_path: Path, text_reads: list[bytes]
) -> None:
    papers = _papers(tmp_path, "01-single.pdf", "05-twocol.pdf")
    index = tmp_path / "idx"
    build_index([str(papers)], index, FULL, embedder=FakeEmbedder())
    assert len(text_reads) == 2
    before = passages_by_title(index)
    again = build_index(None, index, QUIET, embedder=FakeEmbedder())  # no --full-text given: the index's setting
    assert again.unchanged and len(text_reads) == 2

    shutil.copy(PDFS / "09-twocol-hyphen.pdf", papers / "09-twocol-hyphen.pdf")
    added = build_index(
        None, index, BuildOptions(progress=False, merge_share=1.0, map_method="off"), embedder=FakeEmbedder()
    )
    assert added.segments == 1 and added.added == 1
    assert len(text_reads) == 3  # only the arrival's full text is read
    after = passages_by_title(index)
    assert {t: p for t, p in after.items() if t in before} == before
    assert len(after) == 3 and all(after.values())
    assert has_passages(Manifest.read(current_version(index)))
    assert verify_index(index) == []

    merged = build_index(
        None, index, BuildOptions(progress=False, rewrite=True, map_method="off"), embedder=FakeEmbedder()
    )
    assert merged.segments == 0
    assert passages_by_title(index) == after
    assert len(text_reads) == 3  # a rewrite reads the full text from the cache


@pytest.mark.parametrize("share", [0.1, 1.0])  # a rewrite whole; a segment hiding the paper's rows
def test_removal_drops_a_papers_passages_and_keeps_the_rest(tmp_path: Path, share: float) -> None:
    papers = _papers(tmp_path, "01-single.pdf", "05-twocol.pdf", "09-twocol-hyphen.pdf")
    index = tmp_path / "idx"
    build_index([str(papers)], index, FULL, embedder=FakeEmbedder())
    before = passages_by_title(index)
    with Index.open(index, embedder=FakeEmbedder()) as opened:
        gone = next(d for d in opened.store.iter_documents() if "Privacy" in (d.title or ""))
    remove_documents(index, ids=[gone.id], merge_share=share, map_method="off")
    after = passages_by_title(index)
    assert after == {t: p for t, p in before.items() if t != gone.title}
    with Index.open(index, embedder=FakeEmbedder()) as opened:
        assert opened.passages is not None
        assert all(f.num != int(gone.id, 16) for f in opened.passages.top(np.ones(64) / 8.0, 1000))
    assert verify_index(index) == []


def test_switching_full_text_off_rewrites_without_passages(tmp_path: Path) -> None:
    papers = _papers(tmp_path, "01-single.pdf")
    index = tmp_path / "idx"
    build_index([str(papers)], index, FULL, embedder=FakeEmbedder())
    off = build_index(
        None, index, BuildOptions(progress=False, full_text=False, map_method="off"), embedder=FakeEmbedder()
    )
    assert not off.unchanged
    version = current_version(index)
    assert not has_passages(Manifest.read(version))
    assert not any((version / name).exists() for name in FILES)


@pytest.mark.parametrize("damage", ["offsets", "text", "missing"])
def test_verify_names_a_damaged_passages_file(tmp_path: Path, damage: str) -> None:
    papers = _papers(tmp_path, "01-single.pdf")
    index = tmp_path / "idx"
    build_index([str(papers)], index, FULL, embedder=FakeEmbedder())
    version = current_version(index)
    if damage == "offsets":
        offsets = np.load(version / PASSAGE_OFFSETS_FILE)
        offsets[-1] += 7
        (version / PASSAGE_OFFSETS_FILE).unlink()  # a new file: the version's others are hard links
        np.save(version / PASSAGE_OFFSETS_FILE, offsets)
    elif damage == "text":
        text = np.load(version / PASSAGE_TEXT_FILE)
        text[:4] = 0xFF  # not UTF-8
        (version / PASSAGE_TEXT_FILE).unlink()
        np.save(version / PASSAGE_TEXT_FILE, text)
    else:
        (version / PASSAGE_TEXT_FILE).unlink()
    report = verify_index(index)
    assert report and any("passage" in line for line in report), report
    # The part's own check, past the manifest's file hashes, names it too.
    own = passages_part.verify(version, Manifest.read(version))
    assert own and all("passage" in line for line in own), own


def test_a_pdf_joining_an_indexed_paper_lends_it_its_passages(tmp_path: Path) -> None:
    from tests.helpers import PDF_EXPECTED

    exp = PDF_EXPECTED["05-twocol.pdf"]
    papers = tmp_path / "papers"
    papers.mkdir()
    row = {"id": "j1", "title": exp["title"], "abstract": exp["abstract"]}
    (papers / "papers.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    index = tmp_path / "idx"
    build_index([str(papers)], index, FULL, embedder=FakeEmbedder())
    assert passages_by_title(index) == {exp["title"]: []}  # a JSONL record has no full text
    shutil.copy(PDFS / "05-twocol.pdf", papers / "05-twocol.pdf")
    appending = BuildOptions(progress=False, merge_share=1.0, map_method="off")
    joined = build_index(None, index, appending, embedder=FakeEmbedder())
    assert joined.documents == 1 and "full text" in joined.rewritten_because
    (held,) = passages_by_title(index).values()
    assert len(held) > 10


def test_the_passage_files_round_trip_and_hidden_rows_are_never_read(tmp_path: Path) -> None:
    from semsearch.store.passages_part import PassageIndex, PassageSet
    from semsearch.store.segments import Segment

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(7, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids = np.array([30, 10, 20, 10, 30, 20, 10], dtype=np.int64)
    texts = [f"passage {i} ünïcode" for i in range(7)]
    passages_part.write(tmp_path, PassageSet(ids, np.arange(1, 8, dtype=np.int32), texts, vectors))
    whole = PassageIndex.open([Segment(tmp_path, "", 3, np.zeros(0, dtype=np.int64))], 8)
    assert whole.count() == 7
    got = whole.get([10, 30])
    assert got.ids.tolist() == [10, 10, 10, 30, 30]
    assert got.texts == [texts[1], texts[3], texts[6], texts[0], texts[4]]  # each document's in written order
    query = vectors[3]
    (best,) = whole.best([10], query)
    assert best is not None and best.text == texts[3] and best.page == 4
    assert best.score == pytest.approx(1.0, abs=1e-3)
    assert [f.text for f in whole.top(query, 3)][0] == texts[3]
    assert {f.num for f in whole.top(query, 7, allowed=np.array([20]))} == {20}
    assert whole.best([99], query) == [None]

    hidden = PassageIndex.open([Segment(tmp_path, "", 3, np.array([10], dtype=np.int64))], 8)
    assert hidden.count() == 4
    assert all(f.num != 10 for f in hidden.top(query, 7))
    assert hidden.best([10], query) == [None] and len(hidden.get([10])) == 0


def test_a_refresh_that_merges_two_indexed_papers_keeps_the_passages_a_full_build_keeps(tmp_path: Path) -> None:
    from tests.helpers import PDF_EXPECTED, synthetic_abstracts

    exp = PDF_EXPECTED["01-single.pdf"]
    words = exp["abstract"].split()
    extra = "moreover the proposed framework generalises across several unseen domains with careful ablations"

    def edit(share: float) -> str:
        cut = int(len(words) * (1 - share))
        return " ".join([*words[:cut], *(w + "x" for w in words[cut:]), *extra.split()])

    papers = _papers(tmp_path, "01-single.pdf")
    filler = synthetic_abstracts(40, 3)
    rows = [{"id": f"f{i}", "title": f"Filler {i}", "abstract": t} for i, t in enumerate(filler)]
    (papers / "filler.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    # b is an edit of the PDF's abstract too far to merge with it; c, nearer, is a near copy of both.
    (papers / "b.jsonl").write_text(json.dumps({"id": "b", "title": exp["title"], "abstract": edit(0.2)}) + "\n")
    index = tmp_path / "idx"
    assert build_index([str(papers)], index, FULL, embedder=FakeEmbedder()).documents == 42
    (papers / "c.jsonl").write_text(json.dumps({"id": "c", "title": exp["title"], "abstract": edit(0.1)}) + "\n")
    appending = BuildOptions(progress=False, merge_share=1.0, map_method="off")
    merged = build_index(None, index, appending, embedder=FakeEmbedder())
    assert "merge in a full-text index" in merged.rewritten_because
    refreshed = passages_by_title(index)
    build_index(None, index, BuildOptions(progress=False, map_method="off", full=True), embedder=FakeEmbedder())
    assert refreshed == passages_by_title(index)
    assert len(refreshed[exp["title"]]) > 10
