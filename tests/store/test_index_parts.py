"""The index parts behind one interface: a toy ANN kind added from outside the package, typed manifest sections
that keep the JSON as it was, BM25 settings recorded and compared, and each part's own check."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import semsearch.store.lexical
from semsearch.atlas.map_part import MapPart
from semsearch.core.errors import IndexCorruptError, InputError
from semsearch.core.options import ann_choices
from semsearch.dedup.near_part import NearKeysPart
from semsearch.query.search import Index
from semsearch.store.ann_build import choose_kind
from semsearch.store.ann_kinds import AnnKind, AnnSpec, ann_kind_names, register_ann_kind, unregister_ann_kind
from semsearch.store.index_parts import FilterColumnsPart, LexicalPart
from semsearch.store.layout import DOCS, current_version
from semsearch.store.lexical import BM25Params, LexicalIndex
from semsearch.store.manifest import Manifest
from semsearch.store.sections import LexicalSection, MapSection, VectorsSection
from semsearch.store.versions import PreviousVersion
from semsearch.write.build import BuildOptions, build_index
from semsearch.write.contents import INDEX_PARTS, stale_parts
from semsearch.write.remove import remove_documents
from semsearch.write.segment_writer import no_room
from semsearch.write.verify import verify_index
from tests.helpers import FakeEmbedder

QUIET = BuildOptions(progress=False)


class Brute(AnnKind):
    """Exact search under another name: all a kind needs is a FAISS spelling and a description."""

    name = "brute"
    exact = True

    def factory(self, spec: AnnSpec) -> str:
        return "IDMap,Flat"

    def describe(self, spec: AnnSpec) -> str:
        return "brute force"


@pytest.fixture
def brute() -> Iterator[str]:
    register_ann_kind(Brute)
    yield Brute.name
    unregister_ann_kind(Brute.name)


def live_manifest(index: Path) -> Manifest:
    return Manifest.read(current_version(index))


def raw_manifest(index: Path) -> dict[str, Any]:
    return json.loads((current_version(index) / "manifest.json").read_text(encoding="utf-8"))


def test_the_built_in_kinds_are_the_ones_the_cli_offers() -> None:
    assert ann_kind_names() == ("flat", "ivf", "ivfpq", "hnsw")
    assert ann_choices() == ("auto", *ann_kind_names())


def test_a_toy_kind_registered_outside_the_package_builds_refreshes_and_answers(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, brute: str
) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, BuildOptions(progress=False, ann=brute), embedder=fake)
    flat = tmp_path / "flat"
    build_index([str(small_corpus.parent)], flat, BuildOptions(progress=False, ann="flat"), embedder=fake)
    assert live_manifest(index).ann == {**live_manifest(index).ann, "kind": "brute", "requested": "brute"}
    assert raw_manifest(index)["faiss"]["type"] == "IDMap,Flat"
    with Index.open(index, embedder=fake) as toy, Index.open(flat, embedder=fake) as exact:
        assert toy.info().ann == "brute (brute force), recall@10 1.000"
        for query in ("federated learning privacy", "robot navigation", "graph"):
            assert [(h.id, h.score) for h in toy.search(query, 5, mode="dense")] == [
                (h.id, h.score) for h in exact.search(query, 5, mode="dense")
            ]
    assert verify_index(index) == []
    # A refresh keeps the kind: an arrival is appended as a segment, searched with the base's toy structure.
    (small_corpus.parent / "more.txt").write_text(
        "More\n\nSparse attention lets transformers read long documents at linear cost.\n", encoding="utf-8"
    )
    summary = build_index(None, index, BuildOptions(progress=False, merge_share=1.0), embedder=fake)
    assert summary.segments == 1 and live_manifest(index).ann["kind"] == "brute"
    with Index.open(index, embedder=fake) as toy:
        assert toy.search("sparse attention transformers", 1, mode="dense")[0].text.startswith("Sparse attention")
    assert verify_index(index) == []


def test_an_index_of_a_kind_no_longer_registered_says_so(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    register_ann_kind(Brute)
    try:
        build_index(
            [str(small_corpus.parent)], tmp_path / "idx", BuildOptions(progress=False, ann="brute"), embedder=fake
        )
    finally:
        unregister_ann_kind("brute")
    with pytest.raises(IndexCorruptError, match="unknown ANN kind 'brute'"):
        Index.open(tmp_path / "idx", embedder=fake)
    with pytest.raises(InputError, match="unknown ANN type 'brute'; choose one of: auto, flat, ivf, ivfpq, hnsw"):
        choose_kind(10, 8, "brute")


def test_registering_a_kind_refuses_clashes_and_built_ins_stay(brute: str) -> None:
    assert ann_kind_names()[-1] == brute
    register_ann_kind(Brute)  # the same class again: nothing changes

    class Other(Brute):
        name = "brute"

    class Auto(Brute):
        name = "auto"

    with pytest.raises(ValueError, match="already registered"):
        register_ann_kind(Other)
    with pytest.raises(ValueError, match="other than 'auto'"):
        register_ann_kind(Auto)
    with pytest.raises(ValueError, match="built-in"):
        unregister_ann_kind("ivf")


def test_every_section_reads_and_writes_the_manifest_json_as_it_was(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, QUIET, embedder=fake)
    raw, manifest = raw_manifest(index), live_manifest(index)
    described: dict[str, Any] = {}
    for part in INDEX_PARTS:
        section = part.describe(manifest)
        if section is not None:
            described.update(section.entries())
    assert described == {key: raw[key] for key in ("vectors", "faiss", "ann", "lexical", "map")}
    assert list(described["lexical"]) == list(raw["lexical"])  # key order too
    lexical = LexicalSection.from_dict(raw["lexical"])
    assert lexical.bm25 == BM25Params() and lexical.terms > 0 and "analyzer" in lexical.written


def test_a_section_keeps_keys_it_does_not_know_and_leaves_out_keys_never_written() -> None:
    older = {"bm25": {"method": "lucene", "k1": 1.5, "b": 0.75, "delta": 0.5}, "terms": 9}  # before "analysed"
    assert LexicalSection.from_dict(older).to_dict() == older
    newer = {"file": None, "method": "off", "clusters": 0, "seconds": 0.0, "tiles": [1, 2]}
    section = MapSection.from_dict(newer)
    assert section.method == "off" and section.extra == {"tiles": [1, 2]} and section.to_dict() == newer
    assert VectorsSection(file="vectors.npy", ids="ids.npy", rows=3).to_dict() == {
        "file": "vectors.npy",
        "ids": "ids.npy",
        "rows": 3,
    }


@pytest.mark.parametrize("entry", [[], "lucene", {"bm25": {"k1": 1.5, "shape": 2}}])
def test_a_malformed_section_is_a_corrupt_index(entry: Any) -> None:
    with pytest.raises(IndexCorruptError, match="'lexical' entry"):
        LexicalSection.from_dict(entry)


def test_a_bm25_setting_change_rewrites_the_lexical_part_without_a_release_bump(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "idx"
    first = build_index([str(small_corpus.parent)], index, QUIET, embedder=fake)
    assert raw_manifest(index)["lexical"]["analyzer"] == semsearch.store.lexical.ANALYZER_NAME
    assert build_index(None, index, QUIET, embedder=fake).unchanged  # unchanged settings: nothing to do
    assert stale_parts(live_manifest(index)) == []

    monkeypatch.setattr(semsearch.store.lexical, "DEFAULT_PARAMS", BM25Params(k1=1.2))
    assert stale_parts(live_manifest(index)) == ["the BM25 settings changed (k1 1.5 to 1.2)"]
    again = build_index(None, index, QUIET, embedder=fake)
    assert not again.unchanged and again.version != first.version and again.encoded == 0
    lexical = raw_manifest(index)["lexical"]
    assert lexical["bm25"]["k1"] == 1.2 and lexical["analysed"] == first.documents  # every document analysed again
    assert LexicalIndex.load(current_version(index) / "lexical").params == BM25Params(k1=1.2)
    scratch = tmp_path / "scratch"
    build_index([str(small_corpus.parent)], scratch, QUIET, embedder=fake)
    with Index.open(index, embedder=fake) as refreshed, Index.open(scratch, embedder=fake) as whole:
        for query in ("federated privacy", "graph networks"):
            got = [(h.id, h.score) for h in refreshed.search(query, 5, mode="lexical")]
            assert got == [(h.id, h.score) for h in whole.search(query, 5, mode="lexical")]
    assert build_index(None, index, QUIET, embedder=fake).unchanged  # the new settings are now the recorded ones


def test_an_arrival_under_new_bm25_settings_rewrites_instead_of_appending(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, QUIET, embedder=fake)
    (small_corpus.parent / "more.txt").write_text(
        "More\n\nSparse attention lets transformers read long documents at linear cost.\n", encoding="utf-8"
    )
    monkeypatch.setattr(semsearch.store.lexical, "DEFAULT_PARAMS", BM25Params(b=0.5))
    summary = build_index(None, index, BuildOptions(progress=False, merge_share=1.0), embedder=fake)
    manifest = live_manifest(index)
    assert summary.segments == 0 and manifest.segments == [] and manifest.lexical["bm25"]["b"] == 0.5
    # `remove` appends segments too: under changed settings it writes the index whole as well.
    previous = PreviousVersion.load(index)
    assert previous is not None and no_room(previous, 1, share=1.0) == ""
    monkeypatch.setattr(semsearch.store.lexical, "DEFAULT_PARAMS", BM25Params(b=0.4))
    assert no_room(previous, 1, share=1.0) == "the BM25 settings changed (b 0.5 to 0.4)"
    with Index.open(index, embedder=fake) as opened:
        gone = opened.search("sparse attention transformers", 1, mode="lexical")[0].id
    remove_documents(index, ids=[gone], merge_share=1.0)
    manifest = live_manifest(index)
    assert manifest.segments == [] and manifest.hidden == 0 and manifest.lexical["bm25"]["b"] == 0.4


def test_a_recorded_analyzer_other_than_this_one_is_stale(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, QUIET, embedder=fake)
    manifest = live_manifest(index)
    older = manifest.updated(lexical={**manifest.lexical, "analyzer": "lower+word2"})
    assert (
        LexicalPart().stale(older)
        == f"the BM25 analyzer changed (lower+word2 to {semsearch.store.lexical.ANALYZER_NAME})"
    )
    unrecorded = manifest.updated(lexical={k: v for k, v in manifest.lexical.items() if k != "analyzer"})
    assert LexicalPart().stale(unrecorded) == ""  # a version from before it was recorded is compared on the rest


def test_the_map_part_is_stale_when_the_map_method_asked_for_changed(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, QUIET, embedder=fake)
    monkeypatch.setenv("SEMSEARCH_MAP", "off")
    assert MapPart().stale(live_manifest(index)) == "the map method is off, the version's pca"
    monkeypatch.setenv("SEMSEARCH_MAP", "sideways")
    assert "not a map method" in MapPart().stale(live_manifest(index))


def test_each_part_checks_its_own_files(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, QUIET, embedder=fake)
    version, manifest = current_version(index), live_manifest(index)
    assert [p for part in INDEX_PARTS for p in part.verify(version, manifest)] == []
    # Each damage below would also fail the checksums; the parts' own checks name what is wrong.
    conn = sqlite3.connect(version / DOCS)
    conn.execute("UPDATE filter_documents SET count = count + 1")
    conn.commit()
    conn.close()
    assert FilterColumnsPart().verify(version, manifest) == [
        f"{version / DOCS}: the filter columns index 6 documents, the store holds 5"
    ]
    lexical = version / "lexical"
    params = json.loads((lexical / "params.json").read_text())
    (lexical / "params.json").write_text(json.dumps({**params, "analyzer": "other"}))
    [problem] = LexicalPart().verify(version, manifest)
    assert "not a valid lexical index description" in problem
    shutil.rmtree(lexical)
    assert LexicalPart().verify(version, manifest) == [f"{lexical} is missing; rebuild with: semsearch index --full"]
    (version / "near" / "keys.npy").write_bytes(b"damaged")
    assert NearKeysPart().verify(version, manifest) == [f"{version / 'near'}: the near-duplicate keys are unreadable"]
    assert verify_index(index) != []  # the checksums see it all first


def test_a_segment_of_the_wrong_size_is_reported_by_the_lexical_part(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder
) -> None:
    index = tmp_path / "idx"
    build_index([str(small_corpus.parent)], index, QUIET, embedder=fake)
    version, manifest = current_version(index), live_manifest(index)
    fewer = manifest.updated(vectors={**(manifest.vectors or {}), "rows": 4}, counts=manifest.counts)
    assert LexicalPart().verify(version, fewer) == [f"{version / 'lexical'}: 5 documents, the segment holds 4"]
