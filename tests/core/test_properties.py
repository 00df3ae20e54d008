"""Property tests: the parsers of user text take any Unicode of any length and raise only typed errors.

Bounded so the whole file runs in well under a minute: a few hundred examples per property.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from tests.helpers import PAPERS, FakeEmbedder

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from semsearch import BuildOptions, Index, build_index  # noqa: E402
from semsearch.core.errors import InputError, QueryError, UnknownDocumentError  # noqa: E402
from semsearch.core.records import Document, Provenance  # noqa: E402
from semsearch.ingest.sources import read_file  # noqa: E402
from semsearch.query.highlight import best_sentences, highlight, highlight_spans, matched_terms, sentences  # noqa: E402
from semsearch.store.filters import OPERATORS, evaluate, parse_where  # noqa: E402

BOUNDED = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

field_names = st.from_regex(r"[A-Za-z_][\w.\-]{0,12}", fullmatch=True)
values = st.one_of(st.text(max_size=30), st.integers(-10_000, 10_000).map(str), st.floats(allow_nan=True).map(str))
# Text that looks like a clause most of the time, and anything at all some of the time.
clauses = st.one_of(
    st.builds(
        lambda f, op, v: f"{f}{op}{v}", field_names, st.sampled_from([*OPERATORS, "=>", "==", ":", "<>"]), values
    ),
    st.text(max_size=80),
    st.text(min_size=490, max_size=600),
)
metadata_values = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=20),
    st.lists(st.one_of(st.text(max_size=10), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
)
documents = st.lists(
    st.builds(
        lambda n, title, meta: Document(
            f"{n:016x}", "some text", title, [Provenance("a.jsonl", "line", 1)], metadata=meta
        ),
        st.integers(0, 2**62),
        st.one_of(st.none(), st.text(max_size=20)),
        st.dictionaries(st.sampled_from(["year", "venue", "Year", "authors", "x"]), metadata_values, max_size=4),
    ),
    max_size=8,
)


@BOUNDED
@given(st.lists(clauses, min_size=1, max_size=4), documents)
def test_where_parses_and_filters_or_raises_query_error(texts: list[str], docs: list[Document]) -> None:
    try:
        parsed = parse_where(texts)
    except QueryError as exc:
        assert "\n" not in str(exc).strip() or "\n" in "".join(texts)
        return
    assert len(parsed) == len(texts) and all(c.op in OPERATORS for c in parsed)
    try:
        result = evaluate(docs, parsed)
    except QueryError:
        return
    assert set(result.ids) <= {d.id for d in docs}
    assert bool(result.warnings) == (not result.ids and bool(docs))


def _read(name: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            records, source, _ = read_file(path, skip_bad=False)
        except InputError:
            return
        assert records and source.records == len(records)
        assert all(r.text.strip() for r in records)


@BOUNDED
@given(st.text(max_size=2000))
def test_seed_reader_takes_any_text(text: str) -> None:
    _read("seeds.txt", text.encode("utf-8", errors="surrogatepass"))


@BOUNDED
@given(st.binary(max_size=2000), st.sampled_from(["x.txt", "x.jsonl", "x.csv", "x.tsv", "x.json", "x.txt.gz"]))
def test_readers_take_any_bytes(data: bytes, name: str) -> None:
    _read(name, data)


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=50))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
records = st.dictionaries(
    st.sampled_from(["id", "_id", "title", "abstract", "text", "year", "metadata", "authors", "\u00e9t\u00e9", ""]),
    json_values,
    max_size=6,
)


@BOUNDED
@given(st.lists(st.one_of(records, json_values), max_size=6), st.booleans())
def test_jsonl_and_json_readers_take_any_json(rows: list[object], as_array: bool) -> None:
    if as_array:
        _read("x.json", json.dumps(rows).encode())
    else:
        _read("x.jsonl", "\n".join(json.dumps(r) for r in rows).encode())


cells = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=30)


@BOUNDED
@given(st.lists(st.lists(cells, min_size=1, max_size=5), max_size=6), st.sampled_from([",", "\t"]))
def test_csv_reader_takes_any_table(rows: list[list[str]], sep: str) -> None:
    import csv
    import io

    out = io.StringIO()
    csv.writer(out, delimiter=sep).writerows([["id", "title", "abstract"], *rows])
    _read("x.csv" if sep == "," else "x.tsv", out.getvalue().encode("utf-8"))


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    folder = tmp_path_factory.mktemp("props")
    src = folder / "papers.jsonl"
    rows = [{"id": f"ext-{i}", "abstract": text, "year": 2020 + i} for i, text in enumerate(PAPERS.values())]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    build_index([str(src)], folder / "idx", BuildOptions(progress=False), embedder=FakeEmbedder())
    opened = Index.open(folder / "idx", embedder=FakeEmbedder())
    yield opened  # type: ignore[misc]
    opened.close()


@FEW
@given(st.one_of(st.text(max_size=40), st.from_regex(r"[0-9a-fA-F]{1,20}", fullmatch=True)))
def test_id_prefixes_find_a_document_or_say_unknown(index: Index, key: str) -> None:
    try:
        doc = index.get(key)
    except UnknownDocumentError:
        return
    assert doc.id.startswith(key.strip().lower()) or key.strip() in doc.external_ids


@FEW
@given(st.text(max_size=300), st.lists(st.text(max_size=40), max_size=3))
def test_search_with_any_text_and_filters(index: Index, text: str, where: list[str]) -> None:
    try:
        hits = index.search(text, 3, where=where)
    except QueryError:
        return
    assert len(hits) <= 3


@BOUNDED
@given(st.text(max_size=3000), st.text(max_size=200))
def test_highlighter_takes_any_text(text: str, query: str) -> None:
    spans = sentences(text)
    assert all(isinstance(s, str) for s in spans)
    best = best_sentences(text, query.split(), n=1)
    assert len(best) <= 1
    for start_end in highlight_spans(best, query):
        for start, end in start_end:
            assert 0 <= start <= end
    assert isinstance(matched_terms(text, query), list)
    assert isinstance(highlight(text, query.split(), "ansi"), str)
