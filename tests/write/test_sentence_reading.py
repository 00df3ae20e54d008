"""--reading sentences (issue 24): one vector per sentence, pooled from runs that read the whole abstract."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import SemsearchError
from semsearch.core.sentences import split_sentences
from semsearch.encode import sentence_runs
from semsearch.encode.encoder_choice import EncoderChoice
from semsearch.encode.sentence_runs import plan_runs, sentence_text, sentence_tokens
from semsearch.faces.agent_results import related_page, summary
from semsearch.store.layout import CURRENT, current_version, doc_num
from semsearch.store.manifest import Manifest
from semsearch.store.windows_part import WINDOW_FILE, WINDOW_IDS_FILE, WINDOW_SCALES_FILE, WindowSet, read_all, write
from semsearch.write.build import settle_reading
from semsearch.write.plan import encoder_differs
from semsearch.write.verify import verify_index
from tests.helpers import (
    DECOY,
    OTHERS,
    SOIL,
    TEXT,
    TITLE,
    SentenceFake,
    WindowedFake,
    _corpus,
    _id_of,
    _top,
    assert_one_line_error,
    run,
)


def _opts(reading: str | None = "sentences", **kw: object) -> BuildOptions:
    return BuildOptions(progress=False, reading=reading, **kw)  # type: ignore[arg-type]


def test_runs_hold_every_sentence_once_the_first_being_the_truncated_text() -> None:
    # Ten sentences of four tokens after a two-token title, in runs of ten tokens.
    sentences = [(2 + 4 * i, 6 + 4 * i) for i in range(10)]
    runs = plan_runs(42, sentences, title_tokens=2, room=10)
    assert runs[0].positions == tuple(range(10))  # what the encoder reads of the text anyway
    assert runs[0].held == {0: (2, 6), 1: (6, 10)}  # sentence 1 ends at the cut: held whole
    assert runs[1].positions[2] == 10  # the next run starts at sentence 2, after the title
    held = [s for r in runs for s in r.held]
    assert sorted(held) == list(range(10)) and len(held) == 10  # each sentence pooled from one run
    for later in runs[1:]:
        assert later.positions[:2] == (0, 1) and len(later.positions) <= 10  # the title first
        for s, (a, b) in later.held.items():
            assert [later.positions[p] for p in range(a, b)] == list(range(*sentences[s]))


def test_a_sentence_longer_than_a_run_is_held_cut_where_it_starts_and_nothing_loops() -> None:
    runs = plan_runs(40, [(0, 3), (3, 30), (30, 40)], title_tokens=0, room=8)
    assert runs[0].held == {0: (0, 3), 1: (3, 8)}  # no run could hold sentence 1 whole: its head, no extra run
    assert runs[1].positions == tuple(range(30, 38)) and runs[1].held == {2: (0, 8)} and len(runs) == 2


def test_a_long_title_takes_at_most_half_of_a_later_run() -> None:
    runs = plan_runs(400, [(300, 350), (350, 400)], title_tokens=300, room=254)
    assert all(len(run.positions) <= 254 for run in runs)
    assert runs[1].positions[:127] == tuple(range(127)) and runs[1].held == {0: (127, 177), 1: (177, 227)}


def test_sentence_tokens_follow_character_offsets() -> None:
    offsets = [(0, 3), (4, 8), (8, 9), (10, 14), (15, 18), (18, 19)]  # "The cats. Dogs ran."
    assert sentence_tokens(offsets, [(0, 9), (10, 19)]) == [(0, 3), (3, 6)]


def test_sentence_spans_skip_the_title_and_a_one_sentence_text_has_none() -> None:
    full = f"{TITLE} {TEXT}"
    st = sentence_text(full, TITLE, TEXT)
    assert st.title_end == len(TITLE) + 1
    assert [full[a:b] for a, b in st.spans] == [TEXT[a:b] for a, b in split_sentences(TEXT)]
    assert sentence_text("T One sentence only.", "T", "One sentence only.").spans == ()
    keys = st.keys()
    assert len(set(keys)) == len(st.spans)
    assert sentence_text(full + " More.", TITLE, TEXT + " More.").keys()[0] != keys[0]  # another text: other keys


def test_a_match_past_the_cut_ranks_first_and_every_sentence_is_stored(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY, SOIL, *OTHERS)
    fake = SentenceFake()
    truncated, read = tmp_path / "truncated", tmp_path / "sentences"
    build_index([str(corpus)], truncated, _opts("truncated"), embedder=fake)
    build_index([str(corpus)], read, _opts(), embedder=fake)
    assert _top(truncated, fake)[0] == DECOY[0]  # the encoder's window never reached the quokka sentence
    assert _top(read, fake)[0] == TITLE and _top(read, fake, mode="hybrid")[0] == TITLE
    version = current_version(read)
    assert Manifest.read(version).model.reading == "sentences"
    ids = np.load(version / WINDOW_IDS_FILE).tolist()
    target = doc_num(_id_of(read, fake, TITLE))
    assert ids.count(target) == len(split_sentences(TEXT)) == 3
    # A document's vector (what related, recommend and the map read) is its sentences' mean: it reads them all.
    row = np.load(version / "ids.npy").tolist().index(target)
    sentences = read_all(version, fake.dimension).vectors[np.asarray(ids) == target]
    mean, vector = sentences.mean(axis=0), np.load(version / "vectors.npy")[row]
    assert float(vector @ mean) / float(np.linalg.norm(vector) * np.linalg.norm(mean)) > 0.9999
    assert not np.allclose(
        np.load(version / "vectors.npy")[row], np.load(current_version(truncated) / "vectors.npy")[row]
    )
    assert len(ids) == 3 + 2 + 3 + 2 * len(OTHERS)  # one per sentence of every text of two sentences or more
    assert np.load(version / WINDOW_FILE).dtype == np.int8 and verify_index(read) == []  # codes beside their scales
    assert np.load(version / WINDOW_SCALES_FILE).shape == (len(ids),)
    with Index.open(read, embedder=fake) as index:
        assert (index.info().reading, index.info().windows) == ("sentences", len(ids))
        told = summary(index.info().to_dict())  # what MCP's info tool tells an agent
        assert (told.reading, told.windows) == ("sentences", len(ids))
    shown = run(["info", "--index", str(read)], fake).output
    assert f"reading:      sentences ({len(ids)} sentence vectors" in shown
    assert "reading:      truncated" in run(["info", "--index", str(truncated)], fake).output
    pooled = tmp_path / "pooled"
    build_index([str(corpus)], pooled, _opts("pooled"), embedder=fake)
    assert "reading:      pooled (each vector averages" in run(["info", "--index", str(pooled)], fake).output


def test_a_refresh_runs_only_the_arrived_documents(tmp_path: Path) -> None:
    _corpus(tmp_path, DECOY, *OTHERS)
    fake = SentenceFake()
    idx = tmp_path / "idx"
    build_index([str(tmp_path / "corpus")], idx, _opts(merge_share=0.9), embedder=fake)
    assert len(fake.sentence_calls[-1]) == 1 + len(OTHERS)
    _corpus(tmp_path, (TITLE, TEXT), name="more.jsonl")
    summary = build_index([str(tmp_path / "corpus")], idx, _opts(None, merge_share=0.9), embedder=fake)
    assert summary.segments == 1 and summary.encoded == 1, summary.rewritten_because
    assert fake.sentence_calls[-1] == [f"{TITLE} {TEXT}"]
    seg = next(current_version(idx).glob("seg-*"))
    assert np.load(seg / WINDOW_IDS_FILE).size == 3 and _top(idx, fake)[0] == TITLE
    # Another reading asked for re-makes the vectors from the cache: no document is run again.
    calls = len(fake.sentence_calls)
    build_index([str(tmp_path / "corpus")], idx, _opts("truncated"), embedder=fake)
    build_index([str(tmp_path / "corpus")], idx, _opts(), embedder=fake)
    assert len(fake.sentence_calls) == calls and _top(idx, fake)[0] == TITLE and verify_index(idx) == []


def test_the_highlight_is_the_sentence_whose_vector_matched(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY)
    fake = SentenceFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, _opts(), embedder=fake)
    query = "survey small mammals coastal sites"  # the words of the first sentence
    version = current_version(idx)
    ids, vectors = np.load(version / WINDOW_IDS_FILE), read_all(version, fake.dimension).vectors
    rows = np.flatnonzero(ids == doc_num(_id_of(idx, fake, TITLE)))
    q = fake.encode([query])[0]
    planted = np.array(vectors)
    planted[rows] = -q  # every sentence points away from the query...
    planted[rows[1]] = q  # ...but the second, which shares none of its words
    write(version, WindowSet(ids, planted))  # same shape, same size
    with Index.open(idx, embedder=fake) as index:
        hit = next(h for h in index.search(query, 2, mode="dense") if h.title == TITLE)
        assert hit.highlights == ["Counts were taken at dawn."]
        lexical = next(h for h in index.search(query, 2, mode="lexical") if h.title == TITLE)
        assert lexical.highlights[0].startswith("We describe a survey")  # no query vector: the words decide
        assert index.search(query, 2, mode="dense", where=["title~Nothing*"]) == []  # no hit, no sentence
        ferry = next(h for h in index.search("island ferry", 5, mode="dense") if h.title == DECOY[0])
        assert ferry.highlights and ferry.highlights[0] in DECOY[1]  # another hit: one of its own sentences


def test_the_default_reads_sentences_where_the_encoder_can_and_truncated_where_not(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY)
    can, cannot = tmp_path / "can", tmp_path / "cannot"
    build_index([str(corpus)], can, BuildOptions(progress=False), embedder=SentenceFake())
    build_index([str(corpus)], cannot, BuildOptions(progress=False), embedder=WindowedFake())
    assert Manifest.read(current_version(can)).model.reading == "sentences"
    assert Manifest.read(current_version(cannot)).model.reading == "truncated"
    assert not (current_version(cannot) / WINDOW_FILE).exists()
    # Asked for, it is an error, and nothing is written.
    with pytest.raises(SemsearchError, match="gives no token outputs"):
        build_index([str(corpus)], tmp_path / "asked", _opts(), embedder=WindowedFake())
    assert not (tmp_path / "asked" / CURRENT).exists()


def test_the_cli_refuses_sentences_from_an_encoder_without_token_outputs_in_one_line(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY)
    idx = tmp_path / "idx"
    result = run(["index", str(corpus), "--index", str(idx), "--reading", "sentences", "-q"], WindowedFake())
    assert_one_line_error(result, "--reading sentences", "no token outputs")
    assert not (idx / CURRENT).exists()
    # An index that reads sentences is not refreshed by such an encoder either (its vectors would not be the same).
    assert run(["index", str(corpus), "--index", str(idx), "-q"], SentenceFake()).exit_code == 0
    _corpus(tmp_path, SOIL, name="more.jsonl")
    before = (idx / CURRENT).read_text()
    assert_one_line_error(run(["index", str(tmp_path / "corpus"), "--index", str(idx)], WindowedFake()), "sentences")
    assert (idx / CURRENT).read_text() == before


def test_only_an_encoder_without_token_outputs_changes_the_reading() -> None:
    choice = EncoderChoice(SentenceFake(), "onnx", "int8")
    assert settle_reading(choice, "sentences", default=False) == "sentences"
    assert settle_reading(EncoderChoice(WindowedFake(), "torch", "fp32"), "sentences", default=True) == "truncated"
    with pytest.raises(SemsearchError, match="gives no token outputs"):
        settle_reading(EncoderChoice(WindowedFake(), "torch", "fp32"), "sentences", default=False)
    assert settle_reading(EncoderChoice(WindowedFake(), "torch", "fp32"), "windows", default=False) == "windows"


def test_an_index_of_the_previous_sentence_scheme_is_encoded_again_by_its_next_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _corpus(tmp_path, (TITLE, TEXT), DECOY, *OTHERS)
    fake = SentenceFake()
    idx = tmp_path / "idx"
    build_index([str(tmp_path / "corpus")], idx, _opts(merge_share=0.9), embedder=fake)
    assert Manifest.read(current_version(idx)).model.scheme == sentence_runs.SCHEME
    # An index of the release before records no scheme: it read runs of the whole window ("sentences-2").
    path = current_version(idx) / "manifest.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["model"].pop("scheme")
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    _corpus(tmp_path, SOIL, name="more.jsonl")
    built = build_index([str(tmp_path / "corpus")], idx, _opts(None, merge_share=0.9), embedder=fake)
    assert built.segments == 0 and built.added == 1  # rewritten whole, not appended to
    assert Manifest.read(current_version(idx)).model.scheme == sentence_runs.SCHEME and verify_index(idx) == []
    assert build_index([str(tmp_path / "corpus")], idx, _opts(None), embedder=fake).unchanged
    # Recorded now: the planner no longer asks for a rewrite on that ground.
    assert encoder_differs(_opts(None), Manifest.read(current_version(idx)), fake) == ""
    data["model"].pop("scheme", None)
    assert encoder_differs(_opts(None), Manifest.from_dict(data), fake) == "the sentence reading changed"
    # The cache keys name the scheme, so vectors of another scheme are never taken for this one's.
    item = sentence_text(f"{TITLE} {TEXT}", TITLE, TEXT)
    keys = [*item.keys(), item.document_key()]
    monkeypatch.setattr(sentence_runs, "SCHEME", "sentences-next")
    again = sentence_text(f"{TITLE} {TEXT}", TITLE, TEXT)
    assert not set(keys) & {*again.keys(), again.document_key()}


def test_an_abstract_given_as_text_is_read_as_the_index_read_its_documents(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY, *OTHERS)
    fake = SentenceFake()
    read, truncated = tmp_path / "sentences", tmp_path / "truncated"
    build_index([str(corpus)], read, _opts(), embedder=fake)
    build_index([str(corpus)], truncated, _opts("truncated"), embedder=fake)
    given = TEXT.replace("Counts were taken at dawn.", "Traps were checked at noon.")
    with Index.open(read, embedder=fake) as index:  # related --file and recommend --like-text read it so
        want = fake.encode_sentences([sentence_text(given, "", given)])[0][0]
        np.testing.assert_allclose(index.encode_abstracts([given])[0], want, atol=1e-6)
        assert not np.allclose(want, fake.encode([given])[0])  # not the first CUT characters only
        assert index.related_to_text(given, 1)[0].title == TITLE  # the quokka sentence past the cut counts
    with Index.open(truncated, embedder=fake) as index:
        np.testing.assert_array_equal(index.encode_abstracts([given]), fake.encode([given]))


def test_a_related_hit_shows_its_sentence_nearest_the_paper(tmp_path: Path) -> None:
    """related has no query: the hit's highlight is its sentence whose vector is nearest the paper's (issue 24)."""
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY, SOIL)
    fake = SentenceFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, _opts(), embedder=fake)
    source, target = _id_of(idx, fake, DECOY[0]), _id_of(idx, fake, TITLE)
    version = current_version(idx)
    ids, vectors = np.load(version / WINDOW_IDS_FILE), read_all(version, fake.dimension).vectors
    with Index.open(idx, embedder=fake) as index:
        paper = index.vectors.get_one(doc_num(source))
    rows = np.flatnonzero(ids == doc_num(target))
    planted = np.array(vectors)
    planted[rows] = -paper  # every sentence of the target points away from the paper...
    planted[rows[1]] = paper  # ...but the second, which shares no word with it
    write(version, WindowSet(ids, planted))
    with Index.open(idx, embedder=fake) as index:
        hit = next(h for h in index.related(source, 2) if h.id == target)
        assert hit.highlights == ["Counts were taken at dawn."] and hit.matched_terms == []
        given = next(h for h in index.related_to_text(DECOY[1], 3) if h.id == target)
        assert given.highlights == ["Counts were taken at dawn."]  # the text's vector is the paper's
        card = next(c for c in related_page(index, source, k=2).items if c.id == target)
        assert card.best_sentence == "Counts were taken at dawn."  # MCP's card quotes the same sentence


def test_without_sentence_vectors_a_related_hit_shows_the_sentence_sharing_most_words(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT), DECOY, SOIL)
    fake = SentenceFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, _opts("truncated"), embedder=fake)
    with Index.open(idx, embedder=fake) as index:
        source, target = _id_of(idx, fake, DECOY[0]), _id_of(idx, fake, TITLE)
        hit = next(h for h in index.related(source, 2) if h.id == target)
        # The ferry paper's words "island" and "cats" are in the third sentence only.
        assert hit.highlights == ["The quokka colony on the island grew after feral cats were removed."]
