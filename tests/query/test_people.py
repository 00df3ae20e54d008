"""Name queries: a person's name, as people type it, finds that person's papers first, on every face."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import QueryError
from semsearch.core.names import matches, name_parts
from semsearch.write.remove import remove_documents
from tests.helpers import FIXTURES, FakeEmbedder, assert_one_line_error, run

FIXTURE = FIXTURES / "people" / "papers.jsonl"
LIN = ["Diffusion models as optimizers", "Equilibrium networks with implicit layers",
       "Accelerated optimization for low-rank matrix recovery"]  # fmt: skip


@pytest.fixture(scope="module")
def people_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("people")
    shutil.copy(FIXTURE, folder / "papers.jsonl")
    build_index([str(folder / "papers.jsonl")], folder / "index", BuildOptions(progress=False), embedder=FakeEmbedder())
    return folder / "index"


def by_of(index: Path, query: str, k: int = 10, **kw: object) -> list[tuple[str | None, str | None]]:
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        return [(h.by, h.title) for h in idx.search(query, k, **kw)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "typed", ["Zhouchen Lin", "Lin Zhouchen", "Lin, Zhouchen", "zhouchen lin", "ZHOUCHEN LÍN", "Zhouchen  Lin "]
)
def test_a_name_in_any_usual_form_finds_the_person_first(people_index: Path, typed: str) -> None:
    hits = by_of(people_index, typed, k=5)
    # Newest first, each marked with the name as the paper gives it; then the ordinary results, no repeats.
    assert [t for _, t in hits[:3]] == LIN
    assert [b for b, _ in hits[:3]] == ["Zhouchen Lin", "Zhouchen C. Lin", "Zhouchen Lin"]
    assert all(b is None for b, _ in hits[3:]) and len(hits) == 5
    assert len({t for _, t in hits}) == 5


def test_an_initial_shows_the_namesakes_each_by_its_own_name(people_index: Path) -> None:
    hits = dict((t, b) for b, t in by_of(people_index, "Z. Lin", k=4))
    assert hits["Point cloud registration by graph matching"] == "Zhiwei Lin"
    assert hits["Diffusion models as optimizers"] == "Zhouchen Lin"
    # A whole first name never matches a stored initial: "Zhouchen Lin" is not Zhiwei Lin.
    assert "Point cloud registration by graph matching" not in [t for b, t in by_of(people_index, "Zhouchen Lin") if b]


@pytest.mark.parametrize("typed", ["Lin", "Long", "Hall", "Song", "lin et al", "Emma Wang Lin", "Lin 2024"])
def test_a_surname_alone_or_a_sentence_is_no_name_query(people_index: Path, typed: str) -> None:
    assert all(b is None for b, _ in by_of(people_index, typed))


def test_diacritics_and_bibtex_names_fold(people_index: Path) -> None:
    assert by_of(people_index, "Lukasz Kaiser", k=1) == [("Łukasz Kaiser", "Attention is all you need, again")]
    assert by_of(people_index, "jorg muller", k=1) == [("Jörg Müller", "Sparse mixtures of experts")]  # "Müller, Jörg"
    assert by_of(people_index, "Alvarez, Jose", k=1)[0][0] == "José Álvarez"


def test_middle_names_may_be_left_out_not_first_names() -> None:
    assert matches(name_parts("Wei Wang"), name_parts("Wei Emma Wang"))
    assert not matches(name_parts("Emma Wang"), name_parts("Wei Emma Wang"))
    assert matches(name_parts("Z. Lin"), name_parts("Zhouchen Lin"))
    assert not matches(name_parts("Zhouchen Lin"), name_parts("Z. Lin"))
    assert not matches(name_parts("Lin"), name_parts("Zhouchen Lin"))  # one word is never a name


def test_a_generational_suffix_is_no_end_of_the_name(people_index: Path) -> None:
    assert name_parts("Hal Daumé III") == ["hal", "daume"]
    assert name_parts("King, Jr., Martin") == ["king", "jr", "martin"]  # BibTeX's "Last, Jr, First": ends kept
    assert name_parts("Li Ii") == ["li", "ii"]  # two parts: a name, not a suffix
    for typed in ("Hal Daume", "Hal Daumé III", "Daumé, Hal"):
        assert by_of(people_index, typed, k=1) == [("Hal Daumé III", "Search-based structured prediction")]


def test_every_mode_puts_the_person_first(people_index: Path) -> None:
    for mode in ("dense", "lexical", "hybrid"):
        assert [t for b, t in by_of(people_index, "Lin Zhouchen", k=3, mode=mode) if b] == LIN, mode


def test_the_person_meets_the_filters(people_index: Path) -> None:
    assert [t for b, t in by_of(people_index, "Zhouchen Lin", where=["year<=2022"]) if b] == LIN[1:]


def test_author_field_narrows_to_the_person(people_index: Path) -> None:
    assert by_of(people_index, 'author:"Lin, Z." year:>=2023') == [
        ("Zhouchen Lin", "Diffusion models as optimizers"),
        ("Zhiwei Lin", "Point cloud registration by graph matching"),
    ]
    ranked = by_of(people_index, 'optimization author:"Zhouchen Lin"')
    assert sorted(t for _, t in ranked) == sorted(LIN) and all(b for b, _ in ranked)
    # One word is no name: author:x is then the authors~x filter.
    assert {t for _, t in by_of(people_index, "attention author:shazeer")} == {
        "Attention is all you need, again",
        "Sparse mixtures of experts",
    }


def test_exclusions_and_phrases_hold_on_dense_results_too(people_index: Path) -> None:
    for mode in ("dense", "lexical", "hybrid"):
        titles = [t for _, t in by_of(people_index, "federated private -survey", mode=mode)]
        assert "Federated learning with differential privacy" not in titles and titles, mode
        assert [t for _, t in by_of(people_index, '"differential privacy"', mode=mode)] == [
            "Federated learning with differential privacy"
        ], mode


def test_filters_alone_need_words(people_index: Path) -> None:
    with pytest.raises(QueryError, match="no words to rank by"):
        by_of(people_index, "year:2024")
    assert {t for _, t in by_of(people_index, "year:2024 title:attention")} == {"Linear attention revisited"}


def test_people_follow_appends_and_removals(tmp_path: Path) -> None:
    """A segment's people are found, a removed paper's are not: the look-up reads the store's live rows."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(FIXTURE, src / "a.jsonl")
    later = {"title": "Lifted proximal operator machines", "authors": ["Zhouchen Lin"], "year": 2026,
             "abstract": "Lifted proximal operators train deep networks by block coordinate descent."}  # fmt: skip
    (src / "b.jsonl").write_text(json.dumps(later) + "\n", encoding="utf-8")
    index = tmp_path / "index"
    opts = BuildOptions(progress=False, merge_share=1.0)
    build_index([str(src / "a.jsonl")], index, opts, embedder=FakeEmbedder())
    build_index([str(src / "a.jsonl"), str(src / "b.jsonl")], index, opts, embedder=FakeEmbedder())
    with Index.open(index, embedder=FakeEmbedder()) as idx:
        assert len(idx.manifest.segments) >= 1  # appended, not rewritten
        first = idx.search("Zhouchen Lin", 4)
        assert [h.title for h in first] == ["Lifted proximal operator machines", *LIN]
        gone = first[1].id
    remove_documents(index, ids=[gone], merge_share=1.0)
    titles = [t for b, t in by_of(index, "Zhouchen Lin") if b]
    assert titles == ["Lifted proximal operator machines", *LIN[1:]]


def test_cli_marks_the_person_and_shows_the_parse(people_index: Path) -> None:
    fake = FakeEmbedder()
    table = run(["query", "Zhouchen Lin", "-k", "4", "--index", str(people_index)], fake)
    assert table.exit_code == 0, table.output
    assert table.output.startswith(" 1. by Zhouchen Lin  Diffusion models as optimizers")
    out = run(["query", "Zhouchen Lin year:>=2024", "--json", "--index", str(people_index)], fake)
    rows = json.loads(out.output)
    assert rows[0]["by"] == "Zhouchen Lin" and "by" not in rows[-1]
    assert rows[0]["parsed"]["where"] == ["year>=2024"] and rows[0]["parsed"]["text"] == "Zhouchen Lin"
    assert_one_line_error(run(["query", "privacy year:>=abc", "--index", str(people_index)], fake), "not a year")
    assert_one_line_error(run(["query", '"privacy', "--index", str(people_index)], fake), "unclosed")


def test_http_and_mcp_faces(people_index: Path) -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from semsearch.faces.agent_results import search_page
    from semsearch.faces.serve import create_app

    with TestClient(create_app(people_index, embedder=FakeEmbedder()), base_url="http://localhost") as client:
        data = client.get("/api/search", params={"q": "Lin Zhouchen -diffusion", "k": 3}).json()
        assert [h.get("by") for h in data["hits"]] == ["Zhouchen C. Lin", "Zhouchen Lin", None]
        assert data["parsed"]["exclude"] == ["diffusion"]
        bad = client.get("/api/search", params={"q": "year:>=abc privacy"})
        assert bad.status_code == 422 and "is not a year" in bad.json()["error"]
    with Index.open(people_index, embedder=FakeEmbedder()) as idx:
        page = search_page(idx, "Z. Lin", k=2)
        assert [c.why for c in page.items] == ["by Zhouchen Lin", "by Zhiwei Lin"]


def test_fields_in_the_text_warn_as_where_does(people_index: Path) -> None:
    """A field that matches nothing says why, as --where does, on the CLI and over HTTP."""
    fake = FakeEmbedder()
    result = run(["query", "privacy venue:nosuchvenue", "--index", str(people_index)], fake)
    assert result.exit_code == 0 and "no results" in result.output
    assert "venue~nosuchvenue" in result.output  # the stderr line naming the clause
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from semsearch.faces.serve import create_app

    with TestClient(create_app(people_index, embedder=fake), base_url="http://localhost") as client:
        data = client.get("/api/search", params={"q": "privacy venue:nosuchvenue"}).json()
        assert data["hits"] == [] and "venue~nosuchvenue" in data["warnings"][0]


def test_an_agent_gets_the_one_line_error(people_index: Path) -> None:
    from semsearch.faces.agent_results import search_page

    with Index.open(people_index, embedder=FakeEmbedder()) as idx, pytest.raises(QueryError, match="unclosed"):
        search_page(idx, 'privacy "open', k=2)


def test_a_version_without_the_people_table_has_no_name_queries(tmp_path: Path) -> None:
    """An index written before the people table answers a name as words, never half a person's papers."""
    import sqlite3

    from semsearch.store.layout import DOCS, current_version

    shutil.copy(FIXTURE, tmp_path / "papers.jsonl")
    index = tmp_path / "index"
    build_index([str(tmp_path / "papers.jsonl")], index, BuildOptions(progress=False), embedder=FakeEmbedder())
    with sqlite3.connect(current_version(index) / DOCS) as conn:
        conn.execute("DROP TABLE people")
    hits = by_of(index, "Zhouchen Lin")
    assert hits and all(b is None for b, _ in hits)
