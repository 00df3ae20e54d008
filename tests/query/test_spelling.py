"""Typo correction: which words are corrected, to what, and the word counts a lexical folder keeps for it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from semsearch.core.errors import IndexCorruptError
from semsearch.query.spelling import Vocabulary, correct, nearest
from semsearch.store.analyzer import Analyzer
from semsearch.store.words import WORDS_FILE, count_words, read_words, write_words

ANALYZER = Analyzer()
COUNTS = Counter(
    {
        "diffusion": 40,
        "models": 90,
        "model": 120,
        "image": 60,
        "imgae": 1,  # a misspelling some abstract made
        "generation": 50,
        "convolutional": 30,
        "neural": 80,
        "networks": 70,
        "graph": 25,
        "great": 30,
        "grape": 3,
        "diffuse": 4,
    }
)


def stem_frequency(word: str) -> int:
    """Documents holding a word's stem, summed over the words of COUNTS that share it (as BM25 would count)."""
    stem = ANALYZER.stem(word)
    return sum(c for w, c in COUNTS.items() if ANALYZER.stem(w) == stem)


def fix(text: str, counts: Counter[str] | None = COUNTS) -> tuple[str, list[tuple[str, str, int, bool]]]:
    got = correct(text, stem_frequency, lambda: None if counts is None else Vocabulary.of(counts))
    return got.text, [(c.word, c.to, c.distance, c.kept) for c in got.corrections]


def test_heavy_typos_become_the_nearest_frequent_words() -> None:
    text, found = fix("difussion modles for imgae generaton")
    assert text == "diffusion models for imgae image generation"
    assert found == [
        ("difussion", "diffusion", 2, False),
        ("modles", "models", 1, False),
        ("imgae", "image", 1, True),  # an abstract's own typo is still searched as typed
        ("generaton", "generation", 1, False),
    ]


def test_a_swap_across_the_stem_is_one_edit() -> None:
    # Snowball stems "convolutoinal" to "convolutoin", three edits from "convolut": the typed word is compared.
    assert fix("Convolutoinal nueral netwroks") == (
        "convolutional neural networks",
        [
            ("convolutoinal", "convolutional", 1, False),
            ("nueral", "neural", 1, False),
            ("netwroks", "networks", 1, False),
        ],
    )


def test_known_words_short_words_acronyms_and_stop_words_are_left_alone() -> None:
    # "models" is known; "gan" is too short; "DPOO", "RoMa" and "LoRAs" are written as method names; "with" is a
    # stop word.
    assert fix("models with gan DPOO RoMa LoRAs") == ("models with gan DPOO RoMa LoRAs", [])


def test_the_more_common_word_wins_a_tie_and_short_words_get_one_edit() -> None:
    # "grpah": one swap from "graph" (25 documents); "grate" would be one edit from "great" and "grape".
    assert fix("grpah")[0] == "graph"
    assert fix("grat")[0] == "great"  # four letters: one edit at most, so not "grape" or "graph" (two)
    assert nearest("modelx", Vocabulary.of(COUNTS)) == ("model", 1)  # both one edit: 120 documents beat 90
    assert nearest("grxxh", Vocabulary.of(COUNTS)) is None  # "graph" is two edits: too many for five letters


def test_a_word_nothing_is_near_is_kept_and_no_counts_correct_nothing() -> None:
    assert fix("zzyzx quux") == ("zzyzx quux", [])
    assert fix("difussion", counts=None) == ("difussion", [])  # an index built before word counts


def test_word_counts_are_document_frequencies_and_survive_a_round_trip(tmp_path: Path) -> None:
    texts = ["Diffusion models, diffusion!", "Image models 42 x2", "the image"]
    assert count_words(texts) == Counter({"diffusion": 1, "models": 2, "image": 2})
    write_words(tmp_path, texts)
    other = tmp_path / "b"
    other.mkdir()
    write_words(other, ["image"])
    assert read_words([tmp_path, other]) == Counter({"diffusion": 1, "models": 2, "image": 3})
    assert read_words([tmp_path / "missing"]) is None


def test_a_damaged_word_list_is_named(tmp_path: Path) -> None:
    (tmp_path / WORDS_FILE).write_text(json.dumps({"format": "semsearch-words", "words": [1, 2]}), "utf-8")
    with pytest.raises(IndexCorruptError, match="words.json is not a valid word list"):
        read_words([tmp_path])


# ---------------------------------------------------------------- on every face, over the seeds

TYPED = "difussion modles for imgae generaton"
SPELLED = "diffusion models for image generation"


@pytest.fixture(scope="module")
def seed_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from semsearch import BuildOptions, build_index
    from tests.helpers import SEEDS, FakeEmbedder

    folder = tmp_path_factory.mktemp("spelling")
    build_index([str(SEEDS)], folder / "index", BuildOptions(progress=False), embedder=FakeEmbedder())
    return folder / "index"


def ids(index: Path, text: str, **kw: object) -> list[str]:
    from semsearch import Index
    from tests.helpers import FakeEmbedder

    with Index.open(index, embedder=FakeEmbedder()) as idx:
        return [h.id for h in idx.search(text, 10, **kw)]  # type: ignore[arg-type]


def test_the_library_searches_the_corrected_words_and_exact_turns_it_off(seed_index: Path) -> None:
    from semsearch import Index
    from tests.helpers import FakeEmbedder

    assert ids(seed_index, TYPED, mode="lexical") == ids(seed_index, SPELLED, mode="lexical") != []
    assert ids(seed_index, TYPED, mode="lexical", exact=True) == []  # as typed, no abstract holds those words
    with Index.open(seed_index, embedder=FakeEmbedder()) as idx:
        spelling = idx.spell(TYPED)
        assert spelling.text == SPELLED and [c.word for c in spelling.corrections] == [
            "difussion",
            "modles",
            "imgae",
            "generaton",
        ]
        assert not idx.spell(SPELLED).changed  # a word the corpus uses is never corrected
        assert not idx.spell(TYPED, exact=True).changed
        hits = idx.search("imgae generaton", 3, mode="lexical")
        assert {"image", "generation"} & {t.lower() for h in hits for t in h.matched_terms}  # highlights corrected


def test_an_index_without_word_counts_corrects_nothing(seed_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from semsearch import Index
    from semsearch.store import words
    from tests.helpers import FakeEmbedder

    monkeypatch.setattr(words, "read_words", lambda folders: None)  # a version written before words.json
    with Index.open(seed_index, embedder=FakeEmbedder()) as idx:
        assert idx.spell(TYPED).text == TYPED
        assert idx.search(TYPED, 3, mode="lexical") == []


def test_an_appended_segment_brings_its_words(tmp_path: Path) -> None:
    from semsearch import BuildOptions, Index, build_index
    from tests.helpers import FakeEmbedder

    papers = tmp_path / "papers"
    papers.mkdir()
    (papers / "a.txt").write_text("Papers\n\nWe study graph coarsening for molecules.\n", encoding="utf-8")
    build_index([str(papers)], tmp_path / "index", BuildOptions(progress=False), embedder=FakeEmbedder())
    with Index.open(tmp_path / "index", embedder=FakeEmbedder()) as idx:
        assert not idx.spell("quasicrystals").changed and not idx.spell("quasicrystels").changed
    abstracts = [f"Quasicrystals of kind {i} tile the plane without period." for i in range(3)]
    (papers / "b.txt").write_text("Papers\n\n" + "\n\n".join(abstracts) + "\n", encoding="utf-8")
    build_index([str(papers)], tmp_path / "index", BuildOptions(progress=False), embedder=FakeEmbedder())
    with Index.open(tmp_path / "index", embedder=FakeEmbedder()) as idx:
        assert idx.spell("quasicrystels").text == "quasicrystals"


def test_the_cli_says_what_it_searched_and_why_nothing_matched(seed_index: Path) -> None:
    from tests.helpers import FakeEmbedder, run

    fake = FakeEmbedder()
    table = run(["query", TYPED, "-k", "2", "--mode", "lexical", "--index", str(seed_index)], fake)
    assert table.exit_code == 0 and f"searched for: {SPELLED} (--exact to search as typed)" in table.output
    rows = json.loads(run(["query", TYPED, "-k", "2", "--json", "--index", str(seed_index)], fake).output)
    assert rows[0]["spelling"]["searched_for"] == SPELLED
    first = {"word": "difussion", "to": "diffusion", "distance": 2, "kept": False}
    assert rows[0]["spelling"]["corrections"][0] == first
    exact = run(["query", TYPED, "--exact", "--mode", "lexical", "--index", str(seed_index)], fake)
    assert exact.exit_code == 0 and "no results" in exact.output
    assert f"no document holds any of the words searched for (as typed): {TYPED}" in exact.output
    nothing = run(["query", "zzqxv blorft", "--mode", "lexical", "--index", str(seed_index)], fake)
    assert "no word was close enough to a frequent word to correct" in nothing.output


def test_http_and_mcp_say_what_was_searched(seed_index: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from semsearch import Index
    from semsearch.faces.agent_results import search_page
    from semsearch.faces.serve import create_app
    from tests.helpers import FakeEmbedder

    with TestClient(create_app(seed_index, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        data = client.get("/api/search", params={"q": TYPED, "mode": "lexical", "k": 3}).json()
        assert data["spelling"]["searched_for"] == SPELLED and data["hits"]
        data = client.get("/api/search", params={"q": TYPED, "mode": "lexical", "exact": "true"}).json()
        assert data["spelling"] == {"searched_for": TYPED, "corrections": []} and data["hits"] == []
    with Index.open(seed_index, embedder=FakeEmbedder()) as idx:
        assert search_page(idx, TYPED, k=2).searched_for == SPELLED
        assert search_page(idx, TYPED, k=2, exact=True).searched_for is None


@pytest.mark.parametrize("mode", ["hybrid", "lexical", "dense"])
def test_a_phrase_that_looks_like_a_field_is_searched_not_parsed_again(seed_index: Path, mode: str) -> None:
    """BM25's words come from the parse the search made: a quoted "title: graph" is a phrase, not a field."""
    from semsearch import Index
    from tests.helpers import FakeEmbedder

    with Index.open(seed_index, embedder=FakeEmbedder()) as idx:
        assert idx.search('"title: graph" networks', 3, mode=mode) == []  # no abstract holds that phrase
        assert idx.search('"year: 2020" graph', 3, mode=mode) == []
