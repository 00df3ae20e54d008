"""--reading windows (issue 24): window vectors stored per segment re-score a search's dense candidates."""

from __future__ import annotations

import copy
import errno
import os
from pathlib import Path

import numpy as np
import pytest

import semsearch.store.windows_part
from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import IndexCorruptError
from semsearch.encode.windows import document_windows
from semsearch.store.index_parts import WindowsPart
from semsearch.store.layout import CURRENT, current_version, doc_id_from_num, doc_num
from semsearch.store.manifest import Manifest
from semsearch.store.segments import Segment
from semsearch.store.versions import PreviousVersion
from semsearch.store.windows_part import WINDOW_FILE, WINDOW_IDS_FILE, WINDOW_SCALES_FILE, WindowIndex, WindowSet, write
from semsearch.write.contents import INDEX_PARTS
from semsearch.write.remove import remove_documents
from semsearch.write.segment_writer import SegmentChange, write_segment_version
from semsearch.write.verify import verify_index
from tests.helpers import (
    DECOY,
    OTHERS,
    QUERY,
    SOIL,
    TEXT,
    TITLE,
    WindowedFake,
    _corpus,
    _id_of,
    _top,
    assert_one_line_error,
    needs_ray,
    run,
    snapshot,
)


def _opts(reading: str, **kw: object) -> BuildOptions:
    return BuildOptions(progress=False, reading=reading, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("reading", ["windows", "windows-all"])
def test_a_match_past_the_cut_ranks_first_with_windows_and_not_without(tmp_path: Path, reading: str) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY, *OTHERS)
    fake = WindowedFake()
    truncated, windowed = tmp_path / "truncated", tmp_path / "windows"
    build_index([str(corpus)], truncated, _opts("truncated"), embedder=fake)
    build_index([str(corpus)], windowed, _opts(reading), embedder=fake)
    assert _top(truncated, fake)[0] == DECOY[0]  # the encoder never read the quokka sentence
    assert _top(windowed, fake)[0] == TITLE
    assert _top(windowed, fake, mode="hybrid")[0] == TITLE
    version = current_version(windowed)
    assert Manifest.read(version).model.reading == reading
    # The documents' vectors stay their whole-text ones (related, recommend and the map read those).
    np.testing.assert_array_equal(np.load(version / "vectors.npy"), np.load(current_version(truncated) / "vectors.npy"))
    ids = np.load(version / WINDOW_IDS_FILE)
    assert len(ids) == (2 if reading == "windows-all" else 1)  # every window, or the one past the cut
    with Index.open(windowed, embedder=fake) as index:
        target = next(h for h in index.search(TITLE, 1, mode="lexical"))
    assert set(ids.tolist()) == {doc_num(target.id)} and np.load(version / WINDOW_FILE).dtype == np.int8
    assert not (current_version(truncated) / WINDOW_FILE).exists()
    assert verify_index(windowed) == []


def test_an_appended_segment_carries_its_windows_and_removal_keeps_the_rest(tmp_path: Path) -> None:
    _corpus(tmp_path, DECOY, *OTHERS)
    fake = WindowedFake()
    idx = tmp_path / "idx"
    opts = _opts("windows", merge_share=0.9)
    build_index([str(tmp_path / "corpus")], idx, opts, embedder=fake)
    assert np.load(current_version(idx) / WINDOW_IDS_FILE).size == 0  # short abstracts: no window
    _corpus(tmp_path, (TITLE, TEXT), name="more.jsonl")
    summary = build_index([str(tmp_path / "corpus")], idx, opts, embedder=fake)
    assert summary.segments == 1 and summary.encoded == 1, summary.rewritten_because  # appended, not rewritten
    seg = next(current_version(idx).glob("seg-*"))
    assert np.load(seg / WINDOW_IDS_FILE).size == 1 and _top(idx, fake)[0] == TITLE
    # Removing another document (a segment: nothing hidden of the quokka paper) keeps its windows in play.
    remove_documents(idx, ids=[_id_of(idx, fake, DECOY[0])], merge_share=0.9)
    assert _top(idx, fake)[0] == TITLE and verify_index(idx) == []
    # A removal rewritten as one base carries the windows of the documents it keeps.
    remove_documents(idx, ids=[_id_of(idx, fake, "Paper 0")], merge_share=0.0)
    assert not list(current_version(idx).glob("seg-*")) and _top(idx, fake)[0] == TITLE
    # Removing the paper itself hides its windows too.
    remove_documents(idx, ids=[_id_of(idx, fake, TITLE)], merge_share=0.9)
    assert TITLE not in _top(idx, fake) and verify_index(idx) == []


def test_a_refresh_keeps_the_reading_and_another_reading_drops_the_windows(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY)
    fake = WindowedFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, _opts("windows"), embedder=fake)
    assert build_index([str(corpus)], idx, BuildOptions(progress=False), embedder=fake).unchanged
    build_index([str(corpus)], idx, BuildOptions(progress=False, full=True), embedder=fake)
    assert Manifest.read(current_version(idx)).model.reading == "windows" and _top(idx, fake)[0] == TITLE
    build_index([str(corpus)], idx, _opts("truncated"), embedder=fake)
    assert not (current_version(idx) / WINDOW_FILE).exists() and _top(idx, fake)[0] == DECOY[0]


@pytest.mark.parametrize("damage", ["garbage", "wrong dtype", "unsorted ids", "scales garbage", "scales too short"])
def test_a_damaged_windows_file_is_index_corrupt_with_the_rebuild_hint(tmp_path: Path, damage: str) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY, SOIL)
    fake = WindowedFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, _opts("windows"), embedder=fake)
    version = current_version(idx)
    names = {"unsorted ids": WINDOW_IDS_FILE, "scales garbage": WINDOW_SCALES_FILE}
    path = version / names.get(damage, WINDOW_SCALES_FILE if damage.startswith("scales") else WINDOW_FILE)
    size = path.stat().st_size
    if damage in ("garbage", "scales garbage"):
        path.write_bytes(b"\x00" * size)  # same size: only reading the file can tell
    elif damage == "wrong dtype":
        vectors = np.load(path)
        np.save(path, np.frombuffer(vectors.tobytes(), np.float32).reshape(len(vectors), -1))  # the same bytes
    elif damage == "scales too short":
        np.save(path, np.load(path)[:-1])
        size = path.stat().st_size
    else:
        ids = np.load(path)
        assert len(set(ids.tolist())) == 2
        np.save(path, ids[::-1].copy())
    assert path.stat().st_size == size
    with pytest.raises(IndexCorruptError, match="rebuild with: semsearch index --full"):
        Index.open(idx, embedder=fake)
    assert any(str(path) in line for line in verify_index(idx))


def test_the_cli_names_a_damaged_windows_file_in_one_line(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY)
    idx = tmp_path / "idx"
    fake = WindowedFake()
    build_index([str(corpus)], idx, _opts("windows"), embedder=fake)
    (idx / (idx / CURRENT).read_text().strip() / WINDOW_IDS_FILE).unlink()
    result = run(["query", QUERY, "--index", str(idx)], embedder=fake)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1 and "semsearch index --full" in result.output


def test_window_index_scores_the_best_live_window_and_ignores_hidden_rows(tmp_path: Path) -> None:
    base, seg = tmp_path / "base", tmp_path / "seg"
    base.mkdir(), seg.mkdir()
    e = np.eye(4, dtype=np.float32)
    write(base, WindowSet(np.array([7, 3, 3], dtype=np.int64), np.stack([e[0], e[1], e[2]])))
    write(seg, WindowSet(np.array([7], dtype=np.int64), e[3][None]))
    segments = [
        Segment(base, "", 3, np.array([7], dtype=np.int64)),  # 7 was written again in the newer segment
        Segment(seg, "seg-000002", 1, np.zeros(0, dtype=np.int64)),
    ]
    windows = WindowIndex.open(segments, 4)
    nums = np.array([3, 7, 9], dtype=np.int64)
    np.testing.assert_allclose(windows.best(nums, e[0]), [0.0, 0.0, -np.inf])  # 7: its e0 window is hidden, not 1
    np.testing.assert_allclose(windows.best(nums, e[3]), [0.0, 1.0, -np.inf])
    got = windows.get([3, 9, 7])
    assert got.ids.tolist() == [3, 3, 7] and got.vectors.dtype == np.float16
    # Re-scoring: 0.3 * whole + 0.7 * max(whole, best window), best first.
    order, scores = windows.rescore(nums, np.array([0.5, 0.4, 0.45], dtype=np.float32), e[3])
    assert order.tolist() == [7, 3, 9]
    np.testing.assert_allclose(scores, [0.3 * 0.4 + 0.7, 0.5, 0.45], rtol=1e-6)


def test_windows_all_reads_every_window_from_the_start_even_of_an_abstract_read_whole() -> None:
    short = "One. Two. Three."
    items = [(f"{TITLE} {TEXT}", TITLE, TEXT), (f"T {short}", "T", short), ("Alone. Two.", "", "Alone. Two.")]
    assert document_windows(items, lambda t: len(t), every=True) == [
        [f"{TITLE} {TEXT.split('. ')[0]}. {TEXT.split('. ')[1]}.", f"{TITLE} {TEXT.split('. ')[2]}"],
        ["T One. Two.", "T Three."],
        [],  # two sentences: the whole-text vector is that window already
    ]
    assert document_windows(items, lambda t: len(t)) == [[], [], []]  # tails only: all read whole


@pytest.mark.parametrize("kind", ["refresh", "full"])
def test_disk_full_at_the_windows_keeps_the_published_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    _corpus(tmp_path, DECOY, *OTHERS, SOIL)
    fake = WindowedFake()
    idx = tmp_path / "idx"
    args = ["index", str(tmp_path / "corpus"), "--index", str(idx), "-q"]
    assert run([*args, "--reading", "windows"], fake).exit_code == 0
    current = (idx / CURRENT).read_text().strip()
    live = snapshot(idx / current)
    _corpus(tmp_path, (TITLE, TEXT), name="more.jsonl")  # a refresh appends it as a segment with its windows
    real_save = np.save

    def save(path: object, array: object, *a: object, **k: object) -> None:
        if "window" in str(path):
            Path(str(path)).write_bytes(b"\x93NUMPY" + b"\0" * 100)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_save(path, array, *a, **k)  # type: ignore[call-overload]

    again = [*args, "--full"] if kind == "full" else args
    with monkeypatch.context() as patch:
        patch.setattr(semsearch.store.windows_part.np, "save", save)
        result = run(again, fake)
    assert_one_line_error(result, "disk full", str(idx), "is unchanged")
    assert (idx / CURRENT).read_text().strip() == current and snapshot(idx / current) == live
    assert not [p for p in idx.iterdir() if p.name.startswith(".build-")]
    assert run(again, fake).exit_code == 0 and verify_index(idx) == [] and _top(idx, fake)[0] == TITLE


def test_only_the_first_candidates_are_re_scored_and_they_stay_ahead(tmp_path: Path) -> None:
    e = np.eye(4, dtype=np.float32)
    write(tmp_path, WindowSet(np.array([3, 9], dtype=np.int64), np.stack([e[3], e[3]])))
    windows = WindowIndex.open([Segment(tmp_path, "", 2, np.zeros(0, dtype=np.int64))], 4)
    nums, scores = np.array([7, 3, 9], dtype=np.int64), np.array([0.5, 0.45, 0.4], dtype=np.float32)
    order, mixed = windows.rescore(nums, scores, e[3], depth=2)
    assert order.tolist() == [3, 7, 9]  # 9's window would win too, but it lies past the re-scored depth
    np.testing.assert_allclose(mixed, [0.3 * 0.45 + 0.7, 0.5, 0.4], rtol=1e-6)


@needs_ray
@pytest.mark.usefixtures("local_ray")
def test_a_ray_build_stores_the_same_windows_as_a_local_one(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY, SOIL, *OTHERS)
    from tests.helpers import SentenceFake

    for reading in ("windows", "windows-all", "sentences"):
        local, on_ray = tmp_path / f"local-{reading}", tmp_path / f"ray-{reading}"
        build_index([str(corpus)], local, _opts(reading), embedder=SentenceFake())
        build_index([str(corpus)], on_ray, _opts(reading, engine="ray", actors=1), embedder=SentenceFake())
        for name in (WINDOW_FILE, WINDOW_IDS_FILE, "vectors.npy"):
            np.testing.assert_array_equal(
                np.load(current_version(local) / name), np.load(current_version(on_ray) / name)
            )
        assert _top(on_ray, SentenceFake())[0] == TITLE
        assert Manifest.read(current_version(on_ray)).model.reading == reading


def test_a_document_rewritten_by_a_removal_keeps_its_windows(tmp_path: Path) -> None:
    a = _corpus(tmp_path, (TITLE, TEXT), name="a.jsonl")
    _corpus(tmp_path, (TITLE, TEXT), name="b.jsonl")  # the same paper in a second file
    _corpus(tmp_path, DECOY, *OTHERS, name="c.jsonl")
    fake = WindowedFake()
    idx = tmp_path / "idx"
    build_index([str(tmp_path / "corpus")], idx, _opts("windows"), embedder=fake)
    remove_documents(idx, sources=[str(a)], merge_share=0.9)  # the paper stays, written again in a segment
    version = current_version(idx)
    seg = next(version.glob("seg-*"))
    target = doc_num(_id_of(idx, fake, TITLE))
    assert target in np.load(seg / WINDOW_IDS_FILE).tolist()  # carried into the segment the paper now lives in
    assert _top(idx, fake)[0] == TITLE and verify_index(idx) == []


def test_the_windows_are_an_index_part_that_opens_checks_and_describes_its_files(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY)
    fake = WindowedFake()
    windowed, truncated = tmp_path / "windows", tmp_path / "truncated"
    build_index([str(corpus)], windowed, _opts("windows"), embedder=fake)
    build_index([str(corpus)], truncated, _opts("truncated"), embedder=fake)
    part = next(p for p in INDEX_PARTS if isinstance(p, WindowsPart))
    version = current_version(windowed)
    manifest = Manifest.read(version)
    target = doc_num(_id_of(windowed, fake, TITLE))
    opened = part.open(version, manifest)
    assert isinstance(opened, WindowIndex) and opened.get([target]).ids.tolist() == [target]
    assert part.verify(version, manifest) == [] and part.describe(manifest) is None and part.stale(manifest) == ""
    plain = current_version(truncated)
    assert part.open(plain, Manifest.read(plain)) is None and part.verify(plain, Manifest.read(plain)) == []


def test_a_windowed_segment_refuses_added_documents_without_their_windows(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY)
    fake = WindowedFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, _opts("windows"), embedder=fake)
    previous = PreviousVersion.load(idx)
    assert previous is not None
    with Index.open(idx, embedder=fake) as index:
        doc = copy.deepcopy(index.store.get_many([doc_num(_id_of(idx, fake, TITLE))]).popitem()[1])
    doc.id = doc_id_from_num(doc_num(doc.id) ^ 1)  # a document the version lacks
    change = SegmentChange([doc], fake.encode([doc.text]), [], set())
    (tmp_path / "next").mkdir()
    with pytest.raises(ValueError, match="need their window vectors"):
        write_segment_version(tmp_path / "next", previous, change, 99)
