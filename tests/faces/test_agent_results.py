"""agent_results: the cards, pages, budgets and full papers that the MCP server hands to agents (no MCP needed)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from semsearch import Index, build_index
from semsearch.core.errors import QueryError, UnknownDocumentError
from semsearch.core.options import MAX_K
from semsearch.core.paperinfo import plain_text
from semsearch.faces.agent_results import (
    MIN_BUDGET,
    PaperCard,
    authors_of,
    check_budget,
    check_page,
    citations,
    compact_json,
    link_of,
    paginate,
    paper,
    related_page,
    search_page,
    summary,
    to_dict,
    year_of,
)
from tests.helpers import FakeEmbedder


@pytest.fixture(scope="module")
def index(seeded_index: Path) -> Iterator[Index]:
    with Index.open(seeded_index, embedder=FakeEmbedder()) as idx:
        yield idx


def size(record: Any) -> int:
    return len(compact_json(to_dict(record)))


def quoted(sentence: str | None, text: str) -> bool:
    """The sentence is taken from the text as a person reads it (plain_text; a long one is clipped with "…")."""
    return sentence is not None and sentence.removesuffix("…") in plain_text(text)


def fedask_id(index: Index) -> str:
    hits = index.search("FedASK federated LoRA differential privacy", 1, mode="lexical")
    assert "FedASK" in hits[0].text
    return hits[0].id


def test_citations_keep_whole_entries_within_the_budget(index: Index) -> None:
    ids = [h.id for h in index.search("learning", 12, mode="lexical")]
    whole = citations(index, ids, "bibtex", budget=1_000_000)
    assert whole.ids == ids and whole.rest == [] and whole.text.count("\n@") + 1 == 12
    part = citations(index, ids, "bibtex", budget=MIN_BUDGET)
    assert part.ids + part.rest == ids and 1 <= len(part.ids) < 12
    assert len(part.text) <= MIN_BUDGET or len(part.ids) == 1  # one entry always comes back
    assert part.text.count("@") == len(part.ids)
    with pytest.raises(UnknownDocumentError):
        citations(index, ["0000000000000000"], "ris")
    with pytest.raises(QueryError, match="unknown export format"):
        citations(index, ids[:1], "docx")


def test_card_fields_come_from_metadata_when_present() -> None:
    many = [f"Author {i}" for i in range(11)]
    assert authors_of({"authors": many}) == many[:8] + ["+3 more"]
    assert authors_of({"authors": "Ada Lovelace; Alan Turing"}) == ["Ada Lovelace", "Alan Turing"]
    assert authors_of({"author": "Ada Lovelace and Alan Turing"}) == ["Ada Lovelace", "Alan Turing"]
    assert authors_of({"authors": [{"name": "Grace Hopper"}, ""]}) == ["Grace Hopper"]
    assert authors_of({}) is None
    assert year_of({"year": "2025"}) == 2025
    assert year_of({"year": 2019}) == 2019
    assert year_of({"date": "2024-05-01"}) == 2024
    assert year_of({"year": "n/a"}) is None
    assert link_of({"pdf_url": "https://x.org/a.pdf", "venue_url": "https://x.org/a"}) == "https://x.org/a"
    assert link_of({"url": "ftp://old", "doi": "10.1000/xyz"}) == "https://doi.org/10.1000/xyz"
    assert link_of({"doi": ""}) is None


def test_search_cards_carry_no_abstract_and_a_sentence_from_it(index: Index) -> None:
    page = search_page(index, "federated privacy", k=3)
    # Seeds have no metadata: no authors, year or link, and no nulls spent on saying so.
    assert [set(to_dict(c)) for c in page.items] == [{"id", "title", "score", "best_sentence"}] * 3
    assert set(to_dict(page)["items"][0]) == {"id", "title", "score", "best_sentence"}
    assert any(c.id == fedask_id(index) for c in page.items)
    for card in page.items:
        text = index.get(card.id).text
        assert quoted(card.best_sentence, text)
    assert page.version == index.version.name and page.offset == 0


def test_pages_fit_the_budget_and_follow_on_without_gaps(index: Index) -> None:
    first = search_page(index, "learning models", k=50, budget=2000)
    assert size(first) <= 2000
    assert first.cut_by_budget and 0 < len(first.items) < 50
    assert first.next_offset == len(first.items)
    second = search_page(index, "learning models", k=50, offset=first.next_offset, budget=2000)
    assert size(second) <= 2000 and second.offset == first.next_offset
    both = [c.id for c in first.items + second.items]
    whole = search_page(index, "learning models", k=len(both), budget=10**6)
    assert both == [c.id for c in whole.items]
    assert not whole.cut_by_budget and whole.next_offset == len(both)


def test_a_diverse_page_says_its_order(index: Index) -> None:
    assert search_page(index, "federated privacy", k=3).order == "relevance"
    assert search_page(index, "federated privacy", k=3, diverse=True).order == "diverse"


def test_the_last_page_has_no_next_offset(index: Index) -> None:
    everything = search_page(index, "learning", k=100, budget=10**6)
    assert len(everything.items) == len(index) == 91
    assert everything.next_offset is None
    tail = search_page(index, "learning", k=10, offset=88, budget=10**6)
    assert [c.id for c in tail.items] == [c.id for c in everything.items[88:]]
    assert tail.next_offset is None


def test_a_card_over_the_budget_alone_is_shrunk_not_dropped() -> None:
    big = PaperCard(id="a" * 16, title="T" * 900, authors=["X" * 200] * 8, best_sentence="s " * 400, score=1.0)
    page = paginate([big, big], offset=0, k=2, more=False, budget=MIN_BUDGET, version="v")
    assert len(page.items) == 1 and size(page) <= MIN_BUDGET
    assert page.cut_by_budget and page.next_offset == 1
    assert page.items[0].id == big.id


def test_related_never_returns_the_paper_and_quotes_a_sentence_of_each(index: Index) -> None:
    source = fedask_id(index)
    page = related_page(index, source, k=90, budget=10**6)
    assert len(page.items) == 90 and source not in {c.id for c in page.items}
    assert page.next_offset is None  # 91 documents: 90 others
    for card in page.items:
        assert card.best_sentence and quoted(card.best_sentence, index.get(card.id).text)
    assert [c.id for c in related_page(index, source[:8], k=5).items] == [c.id for c in page.items[:5]]
    later = related_page(index, source, k=5, offset=5, budget=10**6).items  # only the page shown is explained
    assert [(c.id, c.best_sentence) for c in later] == [(c.id, c.best_sentence) for c in page.items[5:10]]
    hits = index.related(source, 10)
    cards = [PaperCard.of(h, score=h.score, sentence=h.highlights[0]).best_sentence for h in hits[5:]]
    assert cards == [c.best_sentence for c in later]  # the highlight related gives, as a card shows it
    assert all(h.highlights == [] for h in index.related(source, 10, explain=False))


def test_a_paper_in_full_and_clipped_to_the_budget(index: Index) -> None:
    doc = index.get(fedask_id(index))
    full = paper(index, doc.id)
    assert full.text == doc.text and not full.text_truncated
    assert full.sources == [s.label() for s in doc.sources]
    assert len(doc.text) > MIN_BUDGET
    clipped = paper(index, doc.id, budget=MIN_BUDGET)
    assert clipped.text_truncated and clipped.text.endswith("…") and size(clipped) <= MIN_BUDGET
    assert doc.text.startswith(clipped.text[:-1])


def test_summary_names_what_an_agent_needs(index: Index) -> None:
    info = summary(index.info().to_dict(), budget=3000)
    assert (info.documents, info.sources_total, info.max_k, info.budget_chars) == (91, 5, MAX_K, 3000)
    assert info.model == "fake-bow" and info.modes == ["hybrid", "dense", "lexical"]
    assert (info.reading, info.windows) == (index.info().reading, 0)  # a sentences index
    assert info.fusion.startswith("adaptive")  # what a new build records; a tuned one: tests/query/test_fusion_tune.py


@pytest.mark.parametrize(
    ("k", "offset", "message"),
    [
        (0, 0, "k must be an integer from 1 to 1000, got 0"),
        (1001, 0, "k must be an integer from 1 to 1000, got 1001"),
        (10, -1, "offset must be a non-negative integer, got -1"),
        (10, 995, "offset + k must be at most 1000"),
    ],
)
def test_bad_page_arguments_are_one_line_errors(index: Index, k: int, offset: int, message: str) -> None:
    with pytest.raises(QueryError, match=re.escape(message)):
        check_page(k, offset)
    with pytest.raises(QueryError, match=re.escape(message)):
        search_page(index, "privacy", k=k, offset=offset)


def test_other_bad_input_is_one_line_errors(index: Index, tmp_path: Path) -> None:
    with pytest.raises(QueryError, match="at least 1000"):
        check_budget(999)
    with pytest.raises(QueryError, match="1,001 characters; the limit is 1,000 "):
        search_page(index, "x" * 1001)
    with pytest.raises(QueryError, match="malformed --where"):
        search_page(index, "privacy", where=["year>"])
    for call in (lambda: paper(index, "f" * 16), lambda: related_page(index, "f" * 16)):
        with pytest.raises(UnknownDocumentError, match=r"no paper 'ffff+' in the index \(ids come from search"):
            call()


def test_cards_from_a_corpus_with_metadata(tmp_path: Path) -> None:
    rows = [
        {
            "_id": "lovelace2025",
            "title": "Federated privacy for analytical engines",
            "text": "We add differential privacy to federated training. Clients keep their data.",
            "metadata": {"authors": ["Ada Lovelace", "Charles Babbage"], "year": "2025", "url": "https://x.org/p"},
        },
        {"_id": "plain", "title": "Graph networks", "text": "Message passing on graphs oversmooths deep layers."},
    ]
    corpus = tmp_path / "papers.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    fake = FakeEmbedder()
    build_index([str(corpus)], tmp_path / "idx", embedder=fake)
    with Index.open(tmp_path / "idx", embedder=fake) as idx:
        cards = [to_dict(c) for c in search_page(idx, "federated privacy", k=2).items]
    assert cards[0]["title"] == "Federated privacy for analytical engines"
    assert (cards[0]["authors"], cards[0]["year"], cards[0]["link"]) == (
        ["Ada Lovelace", "Charles Babbage"],
        2025,
        "https://x.org/p",
    )
    assert cards[0]["best_sentence"] == "We add differential privacy to federated training."
    assert set(cards[1]) == {"id", "title", "score", "best_sentence"}
