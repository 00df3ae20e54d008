"""Refreshes that append a segment: the same answers as a full build of the same files, written in proportion."""

from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from semsearch.query.search import Index
from semsearch.store.corpus_map import load_map
from semsearch.store.layout import DOCS, current_version
from semsearch.store.manifest import Manifest
from semsearch.write.build import BuildOptions, build_index
from semsearch.write.remove import remove_documents
from semsearch.write.verify import verify_index
from tests.helpers import OPTS, WORDS, FakeEmbedder, abstracts, write

QUERIES = ["w1 w2 w3", "w10 w200 w37", "w999 w5", "w42", "w1200 w7 w8 w9", "w300 w301"]


def top(index_dir: Path, fake: FakeEmbedder, mode: str, where: tuple[str, ...] = ()) -> list[list[tuple[str, float]]]:
    with Index.open(index_dir, embedder=fake) as idx:
        return [[(h.id, h.score) for h in idx.search(q, 10, mode=mode, where=where)] for q in QUERIES]


def assert_same_answers(a: Path, b: Path, fake: FakeEmbedder) -> None:
    for mode in ("dense", "lexical", "hybrid"):
        for where in ((), ("year>=2022",)):
            left, right = top(a, fake, mode, where), top(b, fake, mode, where)
            for x, y in zip(left, right, strict=True):
                np.testing.assert_allclose([s for _, s in x], [s for _, s in y], atol=1e-6)
                # The fake encoder's hashed words tie exactly; which of a tie at the 10th place comes back is
                # up to FAISS, so ids are compared above the last score.
                last = x[-1][1] if x else 0.0
                assert [i for i, s in x if s > last + 1e-6] == [i for i, s in y if s > last + 1e-6], (mode, where)


def documents_of(index_dir: Path) -> dict[str, dict]:
    with Index.open(index_dir, embedder=FakeEmbedder()) as idx:
        return {d.id: {**d.to_dict(), "added": None} for d in idx.store.iter_documents()}


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    monkeypatch.setenv("SEMSEARCH_MAP", "off")
    src = tmp_path / "src"
    src.mkdir()
    a = write(src / "a.jsonl", abstracts(1, 120))
    b = write(src / "b.jsonl", abstracts(2, 80))
    late = abstracts(3, 30)
    late[0] = dict(abstracts(1, 120)[5])  # an exact copy of an indexed abstract
    near = dict(abstracts(2, 80)[7])
    near["abstract"] = near["abstract"].replace(near["abstract"].split()[3], "changedword", 1)
    late[1] = near  # a near copy
    c = write(src / "c.jsonl", late)
    return a, b, c


def test_new_file_appends_a_segment_with_the_answers_of_a_full_build(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder
) -> None:
    a, b, c = files
    idx, one_go = tmp_path / "idx", tmp_path / "one"
    build_index([str(a), str(b)], idx, OPTS, embedder=fake)
    # The full build to compare with refreshes the same live version: a late copy keeps the id and text of the
    # document it copies (identity.py), where a build from nothing may elect the copy's text.
    shutil.copytree(idx, one_go)
    before = current_version(idx)
    grown = build_index([str(a), str(b), str(c)], idx, OPTS, embedder=fake)
    full = build_index([str(a), str(b), str(c)], one_go, replace(OPTS, rewrite=True), embedder=FakeEmbedder())
    assert grown.segments == 1 and full.segments == 0
    assert grown.encoded == 28  # the two copies joined documents already indexed
    version = current_version(idx)
    manifest = Manifest.read(version)
    assert manifest.format_version == 4 and len(manifest.segments) == 1
    # The base's files are shared with the previous version, not copied.
    assert (version / DOCS).stat().st_ino == (before / DOCS).stat().st_ino
    for key in ("read", "documents", "exact_duplicates", "near_duplicates", "title_only"):
        assert getattr(grown, {"exact_duplicates": "duplicates"}.get(key, key)) == getattr(
            full, key.replace("exact_duplicates", "duplicates")
        )
    assert Manifest.read(version).counts == Manifest.read(current_version(one_go)).counts
    assert documents_of(idx) == documents_of(one_go)
    assert_same_answers(idx, one_go, fake)
    assert verify_index(idx) == []
    # Nothing changed since: the segmented version is up to date.
    assert build_index([str(a), str(b), str(c)], idx, OPTS, embedder=fake).unchanged


def test_removing_a_file_hides_its_documents(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder
) -> None:
    a, b, c = files
    idx, one_go = tmp_path / "idx", tmp_path / "one"
    extra = write(a.parent / "d.jsonl", abstracts(40, 20))
    build_index([str(a), str(b), str(extra)], idx, OPTS, embedder=fake)
    shrunk = build_index([str(a), str(b)], idx, OPTS, embedder=fake)
    build_index([str(a), str(b)], one_go, OPTS, embedder=FakeEmbedder())
    assert shrunk.removed == 20 and shrunk.segments == 0  # nothing added: no new segment, rows hidden
    assert Manifest.read(current_version(idx)).counts == Manifest.read(current_version(one_go)).counts
    assert documents_of(idx) == documents_of(one_go)
    assert_same_answers(idx, one_go, fake)
    assert verify_index(idx) == []


def test_remove_source_and_ids_append(tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder) -> None:
    a, b, c = files
    idx = tmp_path / "idx"
    build_index([str(a), str(b), str(c)], idx, OPTS, embedder=fake)
    before = documents_of(idx)
    summary = remove_documents(idx, sources=[str(c)], merge_share=1.0)
    after = documents_of(idx)
    assert summary.removed == 28 and len(after) == len(before) - 28
    # The two documents c.jsonl copied stay, without c.jsonl among their sources.
    kept = [d for d in after.values() if any("c.jsonl" in s["file"] for s in before[d["id"]]["sources"])]
    assert len(kept) == 2 and all(all("c.jsonl" not in s["file"] for s in d["sources"]) for d in kept)
    gone = next(iter(after))
    remove_documents(idx, ids=[gone], merge_share=1.0)
    assert gone not in documents_of(idx)
    with Index.open(idx, embedder=fake) as opened:
        assert all(h.id != gone for q in QUERIES for h in opened.search(q, 50, mode="hybrid"))
    assert verify_index(idx) == []
    # Ids removed by hand come back with the next refresh, which rewrites the index in one base.
    back = build_index(None, idx, OPTS, embedder=fake)
    assert gone in documents_of(idx) and back.segments == 0


def test_arrivals_in_steps_equal_one_build(tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder) -> None:
    a, b, c = files
    src = a.parent
    extra = [write(src / f"d{i}.jsonl", abstracts(10 + i, 15)) for i in range(9)]
    idx, one_go = tmp_path / "idx", tmp_path / "one"
    build_index([str(a)], idx, OPTS, embedder=fake)
    sources = [str(a)]
    appended, why = [], []
    for f in [b, *extra]:  # ten arrivals, no late copies: a build from nothing elects the same texts
        sources.append(str(f))
        summary = build_index(sources, idx, OPTS, embedder=fake)
        appended.append(summary.segments)
        why.append(summary.rewritten_because)
    # Eight segments at most: the ninth arrival rewrote one base (the merge), and the tenth appended again.
    assert appended == [1, 2, 3, 4, 5, 6, 7, 8, 0, 1]
    assert why[8] == "the index has 8 appended segments, the most it keeps"
    build_index(sources, one_go, OPTS, embedder=FakeEmbedder())
    assert documents_of(idx) == documents_of(one_go)
    assert_same_answers(idx, one_go, fake)


@pytest.mark.parametrize(
    ("case", "reason"),
    [
        ("changed", "b.jsonl changed"),
        ("partial", "a document keeps some of its sources and loses others"),
        ("share", "more than 10% of the index"),
    ],
)
def test_changes_a_segment_cannot_hold_take_the_full_build(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder, case: str, reason: str
) -> None:
    a, b, c = files
    idx, one_go = tmp_path / "idx", tmp_path / "one"
    sources = [str(b), str(c)]
    build_index(sources, idx, OPTS, embedder=fake)
    shutil.copytree(idx, one_go)
    opts = OPTS
    if case == "changed":
        write(b, abstracts(2, 81))
    elif case == "partial":
        sources = [str(b)]  # c.jsonl's near copy of a b.jsonl abstract keeps one source and loses one
        a.unlink()
    else:
        sources = [str(b), str(c), str(a)]
        opts = BuildOptions(progress=False)  # a.jsonl is more than a tenth of the corpus
    summary = build_index(sources, idx, opts, embedder=fake)
    build_index(sources, one_go, replace(opts, rewrite=True), embedder=FakeEmbedder())
    assert summary.segments == 0 and not Manifest.read(current_version(idx)).segments
    assert reason in summary.rewritten_because
    assert documents_of(idx) == documents_of(one_go)


def test_arrivals_read_before_indexed_files_merge_in_reading_order(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder
) -> None:
    a, b, c = files
    # z.jsonl and y.jsonl hold copies of one abstract (a merged document of two sources), with their own ids.
    shared = abstracts(60, 1)[0]
    z = write(a.parent / "z.jsonl", [{**shared, "id": "z-1"}, *abstracts(61, 20)])
    y = write(a.parent / "y.jsonl", [{**shared, "id": "y-1"}, *abstracts(62, 20)])
    idx, full = tmp_path / "idx", tmp_path / "full"
    build_index([str(b), str(y), str(z)], idx, OPTS, embedder=fake)
    shutil.copytree(idx, full)
    # c.jsonl is read before y and z, x.jsonl between them: a near copy of b's and copies of the merged abstract.
    x = write(a.parent / "x.jsonl", [{**shared, "id": "x-1"}, *abstracts(63, 5)])
    sources = [str(p) for p in (b, c, x, y, z)]
    grown = build_index(sources, idx, OPTS, embedder=fake)
    build_index(sources, full, replace(OPTS, rewrite=True), embedder=FakeEmbedder())
    assert grown.segments == 1, grown.rewritten_because
    merged = next(d for d in documents_of(idx).values() if len(d["sources"]) == 3)
    assert [s["file"].rsplit("/", 1)[1] for s in merged["sources"]] == ["x.jsonl", "y.jsonl", "z.jsonl"]
    assert documents_of(idx) == documents_of(full)


def test_segments_merge_when_they_grow(tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder) -> None:
    a, b, c = files
    idx = tmp_path / "idx"
    build_index([str(a), str(b)], idx, OPTS, embedder=fake)
    assert (
        build_index(
            [str(a), str(b), str(c)], idx, BuildOptions(progress=False, merge_share=0.2), embedder=fake
        ).segments
        == 1
    )
    extra = write(a.parent / "d.jsonl", abstracts(20, 30))
    merged = build_index(
        [str(a), str(b), str(c), str(extra)], idx, BuildOptions(progress=False, merge_share=0.2), embedder=fake
    )
    assert merged.segments == 0 and not (current_version(idx) / "hidden.npy").exists()


def test_map_places_arrivals_of_an_appended_segment(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SEMSEARCH_MAP", "pca")
    a, b, _c = files
    idx = tmp_path / "idx"
    build_index([str(a), str(b)], idx, OPTS, embedder=fake)
    small = write(a.parent / "e.jsonl", abstracts(30, 10))
    grown = build_index([str(a), str(b), str(small)], idx, OPTS, embedder=fake)
    assert grown.segments == 1
    version = current_version(idx)
    data = load_map(version)  # the base map.json with the segment's point file applied
    assert data is not None
    ids = [p[0] for p in data["points"]]
    assert len(ids) == len(set(ids)) == grown.documents
    assert Manifest.read(version).map["layout"] == "incremental"
    # The appended version wrote what it placed, not the map: map.json is the base's own file (one inode).
    base = json.loads((version / "map.json").read_text())
    assert len(base["points"]) == grown.documents - 10 and (version / "map-seg-000001.json").is_file()


def test_a_file_removed_by_hand_and_named_again_comes_back_appended(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder
) -> None:
    a, b, c = files
    idx = tmp_path / "idx"
    extra = write(a.parent / "d.jsonl", abstracts(50, 12))
    build_index([str(a.parent)], idx, OPTS, embedder=fake)
    remove_documents(idx, sources=[str(extra)], merge_share=1.0)
    assert Manifest.read(current_version(idx)).excluded_sources == [str(extra)]
    back = build_index([str(a.parent)], idx, OPTS, embedder=fake)  # named again: read like any other file
    assert back.segments == 1 and back.added == 12
    assert Manifest.read(current_version(idx)).excluded_sources == []
    assert remove_documents(idx, sources=[str(extra)], merge_share=1.0).removed == 12


def test_a_removal_too_big_for_a_segment_rewrites_one_base(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder
) -> None:
    a, b, c = files
    idx = tmp_path / "idx"
    build_index([str(a), str(b)], idx, OPTS, embedder=fake)
    build_index([str(a), str(b), str(c)], idx, OPTS, embedder=fake)
    assert Manifest.read(current_version(idx)).segmented
    remove_documents(idx, sources=[str(b)], merge_share=0.1)  # 80 of 228: rewritten, segments folded in
    manifest = Manifest.read(current_version(idx))
    assert not manifest.segmented and not list(current_version(idx).glob("seg-*"))
    assert verify_index(idx) == [] and len(documents_of(idx)) == manifest.counts.documents


def test_cli_says_a_segment_was_appended_and_optimize_merges_it(tmp_path: Path, fake: FakeEmbedder) -> None:
    from tests.helpers import run

    src = tmp_path / "src"
    src.mkdir()
    write(src / "a.jsonl", abstracts(1, 300))
    idx = str(tmp_path / "idx")
    assert run(["index", str(src), "--index", idx, "-q"], fake).exit_code == 0
    write(src / "b.jsonl", abstracts(2, 12))  # 4% of the corpus: appended
    grown = run(["index", str(src), "--index", idx, "-q"], fake)
    assert grown.exit_code == 0 and "+ 1 appended segment(s); --optimize merges them" in grown.output
    info = run(["info", "--index", idx], fake)
    assert "base + 1 appended, 0 rows hidden (semsearch index --optimize writes one base)" in info.output
    assert run(["query", abstracts(2, 12)[3]["abstract"], "--index", idx, "-k", "1", "--json"], fake).exit_code == 0
    merged = run(["index", "--optimize", "--index", idx, "--json"], fake)
    assert merged.exit_code == 0 and json.loads(merged.stdout)["segments"] == 0
    assert not Manifest.read(current_version(Path(idx))).segmented
    again = run(["index", "--index", idx, "--json"], fake)
    assert json.loads(again.stdout)["unchanged"] is True


def test_an_arrival_that_joins_two_documents_merges_them_as_a_full_refresh_does(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder
) -> None:
    a, b, _c = files
    rng = random.Random(5)
    words = rng.sample(WORDS, 60)
    first, second = list(words), list(words)
    first[2:8] = ["first"] * 6  # each a near copy of the bridge, but not of the other
    second[50:56] = ["second"] * 6
    pair = write(
        a.parent / "p.jsonl",
        [
            {"title": "one", "abstract": " ".join(first), "id": "p-1", "venue": "x"},
            {"title": "two", "abstract": " ".join(second), "id": "p-2", "year": "2021"},
        ],
    )
    idx, full = tmp_path / "idx", tmp_path / "full"
    build_index([str(a), str(b), str(pair)], idx, OPTS, embedder=fake)
    assert len(documents_of(idx)) == 202
    shutil.copytree(idx, full)
    bridge = write(a.parent / "q.jsonl", [{"title": "bridge", "abstract": " ".join(words), "id": "q-1"}])
    sources = [str(a), str(b), str(pair), str(bridge)]
    grown = build_index(sources, idx, OPTS, embedder=fake)
    build_index(sources, full, replace(OPTS, rewrite=True), embedder=FakeEmbedder())
    assert grown.segments == 1, grown.rewritten_because
    assert grown.encoded == 0 and grown.documents == 201
    assert documents_of(idx) == documents_of(full)
    merged = next(d for d in documents_of(idx).values() if len(d["sources"]) == 3)
    assert len(merged["aliases"]) == 1 and merged["external_ids"] == ["p-1", "p-2", "q-1"]
    assert Manifest.read(current_version(idx)).counts == Manifest.read(current_version(full)).counts
    assert_same_answers(idx, full, fake)
    with Index.open(idx, embedder=fake) as opened:  # the former id still resolves, to the merged document
        assert opened.get(merged["aliases"][0]).id == merged["id"]


def test_cli_says_why_a_refresh_rewrote_the_index(tmp_path: Path, fake: FakeEmbedder) -> None:
    from tests.helpers import run

    src = tmp_path / "src"
    src.mkdir()
    kept = write(src / "a.jsonl", abstracts(1, 300))
    idx = str(tmp_path / "idx")
    assert run(["index", str(src), "--index", idx, "-q"], fake).exit_code == 0
    write(kept, abstracts(1, 299))  # a kept file changed: its records are read and deduplicated again
    write(src / "b.jsonl", abstracts(2, 5))
    rewritten = run(["index", str(src), "--index", idx, "-q"], fake)
    assert rewritten.exit_code == 0
    assert f"rewrote the index whole rather than appending a segment: {kept} changed" in rewritten.output
    summary = json.loads(run(["index", str(src), "--index", idx, "--json"], fake).stdout)
    assert summary["unchanged"] is True and summary["rewritten_because"] == ""


def test_a_source_name_that_could_mean_two_files_takes_the_full_build(tmp_path: Path, fake: FakeEmbedder) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    top_level = write(src / "a.jsonl", abstracts(1, 40))
    nested = write(src / "sub" / "a.jsonl", abstracts(2, 10))
    idx = tmp_path / "idx"
    cwd = Path.cwd()
    os.chdir(src)  # provenance then names them a.jsonl and sub/a.jsonl, and a.jsonl ends both paths
    try:
        build_index([str(top_level), str(nested)], idx, OPTS, embedder=fake)
        shrunk = build_index([str(top_level)], idx, OPTS, embedder=fake)
    finally:
        os.chdir(cwd)
    assert shrunk.documents == 40 and "could mean 2 files" in shrunk.rewritten_because
    assert len(documents_of(idx)) == 40


@pytest.mark.parametrize("copy", ["smaller-id", "other-title"])
def test_an_arriving_copy_that_would_represent_its_document(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder, copy: str
) -> None:
    a, b, _c = files
    live = {**abstracts(1, 120)[9], "id": "z-9"}
    write(a, [*abstracts(1, 120)[:9], live, *abstracts(1, 120)[10:]])
    idx, full = tmp_path / "idx", tmp_path / "full"
    build_index([str(a), str(b)], idx, OPTS, embedder=fake)
    shutil.copytree(idx, full)
    # An exact copy with a smaller id (and other metadata) becomes the representative in a full build: its
    # year comes first. With another title it would also embed differently: that takes the full build.
    arriving = {**live, "id": "a-9", "year": "1999", **({"title": "Another title"} if copy == "other-title" else {})}
    d = write(a.parent / "d.jsonl", [arriving, *abstracts(70, 5)])
    sources = [str(a), str(b), str(d)]
    grown = build_index(sources, idx, OPTS, embedder=fake)
    build_index(sources, full, replace(OPTS, rewrite=True), embedder=FakeEmbedder())
    assert grown.segments == (1 if copy == "smaller-id" else 0)
    assert documents_of(idx) == documents_of(full)
    merged = next(doc for doc in documents_of(idx).values() if len(doc["sources"]) == 2)
    assert merged["metadata"]["year"] == "1999" and merged["external_ids"] == ["z-9", "a-9"]


@pytest.mark.parametrize("removal", ["rewrite", "segment"])
def test_after_a_removal_arrivals_append_and_near_copies_merge_as_a_full_build(
    tmp_path: Path, files: tuple[Path, Path, Path], fake: FakeEmbedder, removal: str
) -> None:
    a, b, c = files
    idx, one_go = tmp_path / "idx", tmp_path / "one"
    e = write(a.parent / "e.jsonl", [dict(abstracts(1, 120)[3]), *abstracts(60, 4)])  # one copy of a.jsonl's
    build_index([str(a), str(b), str(e)], idx, OPTS, embedder=fake)
    if removal == "rewrite":
        remove_documents(idx, sources=[str(b)], merge_share=0.1)  # 80 of 204: one base again
        sources = [str(a), str(e)]
        assert not Manifest.read(current_version(idx)).segmented
    else:
        # 4 documents go, the copy stays without e.jsonl: a segment writes it again.
        remove_documents(idx, sources=[str(e)], merge_share=1.0)
        sources = [str(a), str(b)]
        assert Manifest.read(current_version(idx)).segmented
    # The removal counts what it kept, as a build of the sources left does.
    fresh = tmp_path / "fresh"
    build_index(sources, fresh, OPTS, embedder=FakeEmbedder())
    assert Manifest.read(current_version(idx)).counts == Manifest.read(current_version(fresh)).counts
    near = dict(abstracts(1, 120)[9])
    near["abstract"] = near["abstract"].replace(near["abstract"].split()[2], "otherword", 1)
    d = write(a.parent / "d.jsonl", [near, *abstracts(50, 10)])
    shutil.copytree(idx, one_go)
    # The removal kept the band keys of what it kept: the arrival is checked against them, not the whole corpus.
    grown = build_index([*sources, str(d)], idx, OPTS, embedder=fake)
    full = build_index([*sources, str(d)], one_go, replace(OPTS, rewrite=True), embedder=FakeEmbedder())
    assert grown.segments >= 1 and not grown.rewritten_because, grown.rewritten_because
    assert grown.near_duplicates == full.near_duplicates >= 1
    assert documents_of(idx) == documents_of(one_go)
    assert verify_index(idx) == []
