"""The query language read out of the text: fields, phrases, -words, and a clear line for what cannot be read."""

from __future__ import annotations

import pytest

from semsearch.core.errors import QueryError
from semsearch.query.syntax import ParsedQuery, admits, parse_query


def test_fields_map_onto_the_where_filters() -> None:
    parsed = parse_query('author:"Zhouchen Lin" diffusion year:>=2024 -survey "score matching" venue:neurips')
    assert parsed.text == "diffusion score matching"
    assert parsed.authors == ("Zhouchen Lin",)
    assert parsed.where == ("year>=2024", "venue~neurips")
    assert parsed.phrases == ("score matching",)
    assert parsed.exclude == ("survey",)
    assert parsed.fields == {"author": ["Zhouchen Lin"], "year": [">=2024"], "venue": ["neurips"]}
    assert not parsed.plain


@pytest.mark.parametrize(
    ("typed", "where"),
    [
        ("year:2025", ("year=2025",)),
        ("year:>2024", ("year>2024",)),
        ("year:<=2020", ("year<=2020",)),
        ("year:2020..2024", ("year>=2020", "year<=2024")),
        ("year:2020..", ("year>=2020",)),
        ("year:..2020", ("year<=2020",)),
        ("Title:privacy", ("title~privacy",)),
        ('title:"differential privacy"', ("title~differential privacy",)),
    ],
)
def test_each_field_form(typed: str, where: tuple[str, ...]) -> None:
    assert parse_query(f"learning {typed}").where == where


def test_plain_text_is_left_as_typed() -> None:
    for text in ("graph neural networks", "state-of-the-art transformers", "arXiv:2401.01234", "BERT: pre-training"):
        parsed = parse_query(text)
        assert parsed.plain and parsed.text == text  # an unknown field is text, as GitHub reads it


def test_exclusions_and_phrases() -> None:
    parsed = parse_query('federated -"secure aggregation" -survey “smart quotes”')
    assert parsed.exclude == ("secure aggregation", "survey")
    assert parsed.phrases == ("smart quotes",)
    assert parsed.text == "federated smart quotes"
    assert parse_query("a - b").text == "a - b"  # a lone dash is no exclusion


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('"open phrase', "unclosed"),
        ("year:>=abc", "year:>=abc is not a year"),
        ("year:24", "is not a year"),
        ("year:", "year: needs a value"),
        ('author:""', "author: needs a value"),
        ("title: privacy", "title: needs a value"),
        ("-year:2024", "cannot be negated"),
    ],
)
def test_malformed_is_one_clear_line(text: str, fragment: str) -> None:
    with pytest.raises(QueryError) as caught:
        parse_query(text)
    message = str(caught.value)
    assert fragment in message and "\n" not in message


def test_admits_phrases_and_exclusions_folded() -> None:
    parsed = parse_query('"Score-Matching" -survey')
    assert admits(parsed, "Denoising score matching, revisited")
    assert not admits(parsed, "A survey of score matching")
    assert not admits(parsed, "score and matching")
    assert admits(ParsedQuery(raw="x", text="x"), "anything")  # no phrase, no exclusion: every text passes
    assert admits(parse_query('"muller"'), "Jörg Müller")  # accents folded on both sides


def test_parsed_query_as_json() -> None:
    assert parse_query("year:2025 privacy").to_dict() == {
        "text": "privacy",
        "fields": {"year": ["2025"]},
        "where": ["year=2025"],
        "authors": [],
        "phrases": [],
        "exclude": [],
    }
