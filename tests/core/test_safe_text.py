"""Every link and every byte shown is safe: one hostile record set through each output (issue 22, item 4)."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from semsearch import Index, build_index
from semsearch.core.safe_text import bare_doi, clean_text, csv_cell, doi_url, json_text, markdown_text, safe_url
from semsearch.write.build import BuildOptions
from tests.helpers import FakeEmbedder, run

ATOM = "{http://www.w3.org/2005/Atom}"
# What must never reach a terminal, a page, a feed or a spreadsheet raw.
ESC, CSI8, RLO, LRI, NUL = "\x1b", "\x9b", "\u202e", "\u2066", "\x00"
FORBIDDEN = (ESC, CSI8, RLO, LRI, NUL, "\x07", "\x0c")

HOSTILE = [
    {
        "id": "evil-js",
        "title": "Federated \x1b[31mprivacy\x1b[0m \u202etxt.exe\u202c attack",
        "abstract": "Federated privacy learning with \x1b]8;;http://evil.example\x07a hyperlink\x1b]8;;\x07, a bell\x07"
        " and \x9b2J a screen clear \u2066isolated\u2069 in differential privacy clients.",
        "url": "javascript:alert(1)",
        "authors": ['=HYPERLINK("http://evil.example","click")', "Ann \x1b[1mBold\x1b[0m"],
    },
    {
        "id": "evil-quote",
        "title": "=cmd|' /C calc'!A0 federated privacy",
        "abstract": "+SUM(1,2) federated privacy with a form feed \x0c and a NUL \x00 in the clients' data.",
        "url": "https://example.org/a\"onmouseover='alert(1)'<b>x</b>",
        "authors": ["@Mallory"],
    },
    {
        "id": "evil-md",
        "title": "[click](javascript:alert(1)) <img src=x onerror=alert(1)> federated **privacy** 29.7\\% $\\uparrow$",
        "abstract": "-2+3 federated privacy ``quoted'' with <script>alert(1)</script> and *emphasis* in clients.",
        "url": "data:text/html,<script>alert(1)</script>",
        "doi": "doi:10.1000/xyz<\"'>",
    },
]
QUOTE_LINK = "https://example.org/a%22onmouseover='alert(1)'%3Cb%3Ex%3C/b%3E"
DOI_LINK = "https://doi.org/10.1000/xyz%3C%22'%3E"


@pytest.fixture
def hostile(tmp_path: Path, fake: FakeEmbedder) -> Path:
    """An index of the hostile records, with a saved query that lists all of them in a digest."""
    src = tmp_path / "hostile.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in HOSTILE), encoding="utf-8")
    index = tmp_path / "idx"
    build_index([str(src)], index, BuildOptions(progress=False), embedder=fake)
    assert run(["watch", "add", "fed", "federated privacy", "--index", str(index)], fake).exit_code == 0
    return index


def assert_clean(text: str) -> None:
    found = [repr(c) for c in FORBIDDEN if c in text]
    assert not found, f"{found} in output"


def hrefs(text: str) -> list[str]:
    return re.findall(r"href=[\"']([^\"']*)", text)


# ---------------------------------------------------------------------------------------- the rules


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://openreview.net/forum?id=x", "https://openreview.net/forum?id=x"),
        ("  HTTP://Example.org/a b  ", "HTTP://Example.org/a%20b"),
        ('https://e.org/a"b<c>', "https://e.org/a%22b%3Cc%3E"),
        ("https://e.org/é", "https://e.org/%C3%A9"),
        ("https://e.org/50%25", "https://e.org/50%25"),
        ("javascript:alert(1)", None),
        ("JaVaScRiPt:alert(1)", None),
        ("java\tscript:alert(1)", None),
        ("https://e.org/\nx", None),
        ("data:text/html,x", None),
        ("file:///etc/passwd", None),
        ("//evil.example/x", None),
        ("http:evil.example", None),
        ("https://[::1", None),
        ("", None),
        (None, None),
    ],
)
def test_safe_url_allows_only_http_links(value: object, expected: str | None) -> None:
    assert safe_url(value) == expected


def test_doi_links_and_bare_dois() -> None:
    assert doi_url("10.1000/xyz") == "https://doi.org/10.1000/xyz"
    assert doi_url("doi:10.1000/a#b?c") == "https://doi.org/10.1000/a%23b%3Fc"
    assert doi_url("https://doi.org/10.1000/x") == "https://doi.org/10.1000/x"
    assert doi_url("doi:10.1000/xyz<\"'>") == "https://doi.org/10.1000/xyz%3C%22'%3E"
    assert bare_doi("DOI: 10.5555/x_y") == "10.5555/x_y"
    assert bare_doi("javascript:alert(1)") is None and doi_url("not a doi") is None


def test_clean_text_drops_escapes_controls_and_bidi_overrides() -> None:
    assert clean_text("a\x1b[31mred\x1b[0m b") == "ared b"
    assert clean_text("\x1b]8;;http://e\x07link\x1b]8;;\x07") == "link"
    assert clean_text("x\x9b2Jy\u202ez\u2066w\u2069\x00\x07\ud800\ufffe") == "xyzw"
    assert clean_text("tab\tand\nline\r\nCR\rend") == "tab\tand\nline\nCR\nend"
    assert clean_text("tab\tand\nline", one_line=True) == "tab and line"
    assert clean_text("Rényi 中文 ‖x‖ — ok") == "Rényi 中文 ‖x‖ — ok"  # ordinary text passes as it is


def test_csv_cells_that_would_be_formulas_are_neutralised() -> None:
    for value in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(value) == "'" + value
    assert csv_cell("1-2") == "1-2" and csv_cell(-0.5) == -0.5 and csv_cell("") == ""


def test_json_text_escapes_what_a_terminal_would_act_on_and_keeps_the_data() -> None:
    data = {"t": "a\x9b2J\u202eb\u2028c\x1bd"}
    text = json_text(json.dumps(data, ensure_ascii=False))
    assert_clean(text) and "\u2028" not in text
    assert json.loads(text) == data


def test_markdown_text_keeps_markup_as_text() -> None:
    written = markdown_text("[x](javascript:alert(1)) <b> *e* a_b (c) #d")
    assert written == r"\[x\](javascript:alert(1)) \<b\> \*e\* a\_b (c) #d"


# ------------------------------------------------------------------------------- through each output


@pytest.mark.parametrize("fmt", ["md", "html", "atom", "json"])
def test_also_new_titles_of_hostile_records_are_safe(hostile: Path, fake: FakeEmbedder, fmt: str) -> None:
    """Papers below the fit floor are listed as 'also new' titles: the same escaping holds there."""
    args = ["digest", "--format", fmt, "--min-fit", "1000", "--no-bookmark", "--index", str(hostile)]
    result = run(args, fake)
    assert result.exit_code == 0, result.output
    text = result.output
    assert_clean(text)
    if fmt == "json":
        data = json.loads(text)
        assert data["sections"] == [] and data["also_new_count"] == 3
    if fmt == "atom":
        entries = ET.fromstring(text).findall(f"{ATOM}entry")
        assert len(entries) == 3
        for entry in entries:  # RFC 4287: a link or content each; links only http(s)
            links = [link.get("href") or "" for link in entry.findall(f"{ATOM}link")]
            assert links or entry.find(f"{ATOM}content") is not None
            assert all(href.startswith(("https://", "http://")) for href in links), links
        assert any("29.7% ↑" in (e.findtext(f"{ATOM}title") or "") for e in entries)
    if fmt == "html":
        assert "<script>" not in text and "<img" not in text and not hrefs(text)
        assert "29.7% ↑" in text
    if fmt == "md":
        assert "\\[click\\](javascript:alert(1))" in text and not re.search(r"(?<!\\)[<>]", text)


@pytest.mark.parametrize("fmt", ["md", "html", "atom", "json"])
def test_digests_of_hostile_records_are_safe(hostile: Path, fake: FakeEmbedder, fmt: str) -> None:
    args = ["digest", "--format", fmt, "--min-fit", "-1000", "--no-bookmark", "--index", str(hostile)]
    result = run(args, fake)
    assert result.exit_code == 0, result.output
    text = result.output
    assert_clean(text)
    md_links = re.findall(r"(?<!\\)\]\(([^)\s]*)\)", text) if fmt == "md" else []
    for href in hrefs(text) + md_links:  # html/atom attributes, Markdown links
        assert href.startswith(("https://", "http://")), href
    if fmt == "json":
        assert len(json.loads(text)["sections"][0]["papers"]) == 3
    if fmt == "atom":
        feed = ET.fromstring(text)  # a quote or a control character in a field would make this raise
        entries = feed.findall(f"{ATOM}entry")
        assert len(entries) == 3
        links = [link.get("href") for entry in entries for link in entry.findall(f"{ATOM}link")]
        # javascript: is passed over; data: too, so the DOI gives the third paper's link.
        assert sorted(links) == [DOI_LINK, QUOTE_LINK]
        titles = [e.findtext(f"{ATOM}title") for e in entries]
        assert "Federated privacy txt.exe attack" in titles
        assert any("29.7% ↑" in (t or "") for t in titles)  # readable, not raw markup
    if fmt == "html":
        assert "<script>" not in text and "<img" not in text and len(hrefs(text)) == 2
        assert "&lt;img src=x onerror=alert(1)&gt;" in text and "29.7% ↑" in text
    if fmt == "md":
        quoted = re.sub(r"^   > ", "", text, flags=re.MULTILINE)  # the best sentence's blockquote
        assert not re.search(r"(?<!\\)[<>]", quoted)  # no raw HTML: every angle bracket is escaped
        assert "\\[click\\](javascript:alert(1))" in text  # a title's link is text
        assert "29.7% ↑" in text and "“quoted”" in text


def test_terminal_table_and_json_carry_no_escapes(hostile: Path, fake: FakeEmbedder) -> None:
    for args in (["query", "federated privacy"], ["query", "federated privacy", "--json"]):
        result = run([*args, "--index", str(hostile), "-k", "3"], fake)
        assert result.exit_code == 0, result.output
        assert_clean(result.output)
    table = run(["query", "federated privacy", "--index", str(hostile), "-k", "3"], fake).output
    assert not re.search(r"(^\s+|·  )javascript:", table, re.MULTILINE)  # no link line gives it
    assert "Federated privacy txt.exe attack" in table and "    https://doi.org/10.1000/xyz%3C%22'%3E" in table
    rows = json.loads(run(["query", "federated privacy", "--json", "--index", str(hostile)], fake).output)
    assert all(r["link"] is None or r["link"].startswith("https://") for r in rows)
    # The JSON keeps the stored text (escaped), for programs; the table shows it made safe, for people.
    assert any("\x1b[31m" in r["title"] for r in rows)


def test_the_table_itself_carries_no_escapes(hostile: Path) -> None:
    """click strips ANSI codes only when output is not a terminal: the table must be clean before it, coloured too."""
    from semsearch.faces.render import hits_table

    with Index.open(hostile, embedder=FakeEmbedder()) as idx:
        hits = idx.search("federated privacy", 3)
    for color in (False, True):
        table = hits_table(hits, color=color)
        assert_clean(re.sub(r"\x1b\[[0-9;]*m", "", table) if color else table)  # colour codes are ours
        assert "[31m" not in table and "[1mBold" not in table


def test_errors_and_info_quote_names_without_their_escapes(hostile: Path, tmp_path: Path, fake: FakeEmbedder) -> None:
    missing = tmp_path / "evil\x1b[2J\u202ename"
    result = run(["query", "x", "--index", str(missing)], fake)
    assert result.exit_code == 2 and "no index at" in result.output and "evilname" in result.output
    assert_clean(result.output)
    odd = tmp_path / "odd\x1b[31m\u202e.jsonl"
    odd.write_text(json.dumps({"title": "t", "abstract": "An abstract about federated privacy."}) + "\n")
    index = tmp_path / "odd-idx"
    build_index([str(odd)], index, BuildOptions(progress=False), embedder=fake)
    info = run(["info", "--index", str(index)], fake)
    assert info.exit_code == 0, info.output
    assert_clean(info.output) and "odd.jsonl" in info.output


def test_exports_carry_only_http_links_and_no_formula_cells(hostile: Path, fake: FakeEmbedder) -> None:
    out = {}
    for fmt in ("bibtex", "ris", "csljson", "csv"):
        result = run(["export", "--format", fmt, "--index", str(hostile)], fake)
        assert result.exit_code == 0, result.output
        assert_clean(result.output)
        out[fmt] = result.output
    url_lines = re.findall(r"^\s*(?:url = \{|UR  - )(.*)$", out["bibtex"] + out["ris"], re.MULTILINE)
    assert len(url_lines) == 4 and all(line.startswith("https://") for line in url_lines), url_lines
    items = json.loads(out["csljson"])
    assert sorted(i.get("URL", "") for i in items) == [
        "",
        DOI_LINK,
        QUOTE_LINK,
    ]
    rows = list(csv.DictReader(io.StringIO(out["csv"])))
    assert len(rows) == 3
    for row in rows:
        for column, cell in row.items():
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (column, cell)
    assert {r["title"] for r in rows} >= {"'=cmd|' /C calc'!A0 federated privacy"}
    assert any(r["authors"].startswith("'=HYPERLINK(") for r in rows)
    assert any(r["abstract"].startswith("'+SUM(1,2)") for r in rows)


def test_mcp_cards_and_papers_are_safe(hostile: Path) -> None:
    from semsearch.faces import agent_results

    with Index.open(hostile, embedder=FakeEmbedder()) as idx:
        page = agent_results.search_page(idx, "federated privacy", k=3)
        text = agent_results.compact_json(agent_results.to_dict(page))
        assert_clean(text)
        assert all(c.link is None or c.link.startswith("https://") for c in page.items)
        assert {c.link for c in page.items} == {
            None,
            QUOTE_LINK,
            DOI_LINK,
        }
        for card in page.items:
            full = agent_results.paper(idx, card.id)
            assert_clean(full.text + full.title) and full.link == card.link


def test_map_page_labels_and_texts_are_clean(hostile: Path, tmp_path: Path) -> None:
    from semsearch.faces.map_page import write_map_html

    out = tmp_path / "map.html"
    write_map_html(hostile, out)
    assert_clean(out.read_text(encoding="utf-8"))
