"""Refreshes of folders of many files: provenance names are matched to paths once per refresh, not per name."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from semsearch.core.records import Document, Provenance
from semsearch.dedup import incremental as append
from semsearch.ingest.sources import PathLookup, files_named
from semsearch.store.layout import current_version
from semsearch.write.build import BuildOptions, build_index
from tests.helpers import FakeEmbedder

OPTS = BuildOptions(progress=False)


def _reference(name: str, paths: list[str]) -> list[str]:
    """files_named as it was written first: one scan of every path per name."""
    if os.path.isabs(name):
        return [p for p in paths if p == name]
    tail = os.sep + os.path.normpath(name)
    return [p for p in paths if p.endswith(tail)]


_part = st.sampled_from(["a", "b", "sub", "a.jsonl", "b.txt", ".", "..", "x y", "a.jsonl.gz"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_part, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts)), max_size=12),
    st.lists(_part, min_size=1, max_size=3).map("/".join),
    st.booleans(),
)
def test_lookup_means_what_files_named_meant(paths: list[str], name: str, absolute: bool) -> None:
    name = "/" + name if absolute else name
    lookup = PathLookup(paths)
    assert lookup.named(name) == _reference(name, paths) == files_named(name, paths)


class _Counted(str):
    """A path that counts the times it is looked at: compared with a name's tail, or split to be filed."""

    calls = [0]

    def endswith(self, *args: object) -> bool:  # type: ignore[override]
        _Counted.calls[0] += 1
        return str.endswith(self, *args)  # type: ignore[arg-type]

    def rsplit(self, *args: object, **kwargs: object) -> list[str]:  # type: ignore[override]
        _Counted.calls[0] += 1
        return str.rsplit(self, *args, **kwargs)  # type: ignore[arg-type]


def _paths(count: int) -> list[str]:
    return [_Counted(f"/data/part{i // 100:03d}/paper{i:05d}.txt") for i in range(count)]


def test_ranking_many_provenances_compares_each_name_with_its_matches_only() -> None:
    paths = _paths(3000)
    rank = append._Ranks(paths)
    _Counted.calls[0] = 0
    places = [rank(Provenance(p.removeprefix("/data/"), "paragraph", 1)) for p in paths]
    assert places == [(i, 1) for i in range(3000)]
    # One comparison per name (its own path); a scan per name made 9,000,000 (3000 x 3000).
    assert _Counted.calls[0] <= 2 * 3000  # filed once, compared once


class _Store:
    """The two questions ``incremental._dropped`` asks of a version's documents, over one record per file."""

    def __init__(self, names: list[str]) -> None:
        self.names = names

    def source_files(self) -> list[str]:
        return list(self.names)

    def nums_read_from(self, files: list[str]) -> list[int]:
        wanted = set(files)
        return [i for i, n in enumerate(self.names) if n in wanted]

    def get_many(self, nums: list[int]) -> dict[int, Document]:
        return {
            i: Document(id=f"{i:016x}", text="t", title=None, sources=[Provenance(self.names[i], "paragraph", 1)])
            for i in nums
        }


def test_a_file_that_left_is_found_among_many_with_one_comparison_per_name() -> None:
    paths = _paths(3000)
    store = _Store([p.removeprefix("/data/") for p in paths])
    _Counted.calls[0] = 0
    dropped = append._dropped([paths[1234]], paths, store)  # type: ignore[arg-type]
    assert [d.sources[0].file for d in dropped] == ["part012/paper01234.txt"]
    assert _Counted.calls[0] <= 2 * 3000 + 2  # a scan per name made 9,000,000


def test_a_relative_name_that_could_mean_two_files_is_still_ambiguous() -> None:
    rank = append._Ranks(["/src/a.jsonl", "/src/sub/a.jsonl"])
    assert rank(Provenance("sub/a.jsonl", "line", 3)) == (1, 3)
    assert rank(Provenance("/src/a.jsonl", "line", 2)) == (0, 2)
    try:
        rank(Provenance("a.jsonl", "line", 1))
    except append.FullBuild as why:
        assert "could mean 2 files" in str(why)
    else:
        raise AssertionError("a.jsonl ends both paths: it must not be taken for one of them")


def _abstract(i: int) -> str:
    """One abstract longer than a seed header (120 characters), sharing few words with the others."""
    return " ".join(f"w{i}x{j}" for j in range(30)) + " about a folder of many small files.\n"


def test_removing_a_file_of_many_matches_each_recorded_name_once(tmp_path: Path, fake: FakeEmbedder) -> None:
    src = tmp_path / "src"
    for i in range(300):
        folder = src / f"part{i // 100}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"p{i:04d}.txt").write_text(_abstract(i))
    idx = tmp_path / "idx"
    build_index([str(src)], idx, OPTS, embedder=fake)
    gone = src / "part1" / "p0150.txt"
    gone.unlink()
    shrunk = build_index([str(src)], idx, OPTS, embedder=fake)
    assert shrunk.documents == 299 and shrunk.removed == 1 and shrunk.rewritten_because == ""
    assert (current_version(idx) / "hidden.npy").exists()  # appended: the row hidden, nothing rewritten
    (src / "part2" / "new.txt").write_text(_abstract(1000))
    grown = build_index([str(src)], idx, OPTS, embedder=fake)
    assert grown.added == 1 and grown.segments > 0 and grown.rewritten_because == ""
