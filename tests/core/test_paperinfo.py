"""What people read about a paper: markup-free text, the author line and the link."""

from __future__ import annotations

import pytest

from semsearch.core.paperinfo import authors_of, byline, link_of, paper_fields, plain_text, venue_of, year_of
from tests.helpers import REPO

NEURIPS = {
    "venue": "neurips",
    "year": "2025",
    "authors": ["Hao Wang", "Licheng Pan", "Zhichao Chen", "Xu Chen"],
    "openreview_url": "https://openreview.net/forum?id=RxWILaXuhb",
    "pdf_url": "https://openreview.net/pdf/53f2.pdf",
    "doi": "",
}


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("We present *Plenodium* (*plenoptic medium*), an", "We present Plenodium (plenoptic medium), an"),
        ("**Non-Equilibrium Dynamics**, and", "Non-Equilibrium Dynamics, and"),
        (r"we propose $\texttt{Mozart}$, a", "we propose Mozart, a"),
        (r"rate $\tilde{\mathcal{O}}(1/N)$ in $O(\log n)$", "rate Õ(1/N) in O(log n)"),
        (r"$n \gtrsim \sqrt d \cdot \frac 1 {\alpha\epsilon}$", "n ≳ √d · 1/(αϵ)"),  # \epsilon is lunate ϵ
        (r"R\'{e}nyi and M{\"u}ller, 55.3\% \textbf{M}erging \emph{cross-fluctuations}",
         "Rényi and Müller, 55.3% Merging cross-fluctuations"),
        (r"code at \url{https://github.com/x/y} or \href{https://a.org}{our page}",
         "code at https://github.com/x/y or our page"),
        ("2 * 3 * 4 and a*b stay", "2 * 3 * 4 and a*b stay"),  # arithmetic is not emphasis
        ("plain text", "plain text"),
    ],
)  # fmt: skip
def test_plain_text_shows_markup_as_text(raw: str, shown: str) -> None:
    assert plain_text(raw) == shown


def test_byline_shows_two_authors_then_venue_and_year() -> None:
    assert byline(NEURIPS) == "Hao Wang, Licheng Pan, … · NeurIPS 2025"
    three = {**NEURIPS, "authors": ["A One", "B Two", "C Three"]}
    assert byline(three) == "A One, B Two, C Three · NeurIPS 2025"
    assert byline({"author": "Doe, Jane and Roe, R{\\'e}mi", "journal": "JMLR", "date": "2021-03-04"}) == (
        "Jane Doe, Rémi Roe · JMLR 2021"
    )
    assert byline({"venue": "iclrw", "year": 2024}) == "ICLR Workshop 2024"
    assert byline({"collection": "Seeds"}) is None


def test_authors_in_every_shape() -> None:
    assert authors_of({"authors": "A Doe and B Roe"}) == ["A Doe", "B Roe"]
    assert authors_of({"Authors": "A Doe; B Roe"}) == ["A Doe", "B Roe"]
    assert authors_of({"creators": [{"given": "Ada", "family": "Lovelace"}, {"name": "ACME Lab"}]}) == [
        "Ada Lovelace",
        "ACME Lab",
    ]
    assert authors_of({}) == []


def test_link_prefers_the_paper_page_then_doi_then_pdf_then_arxiv() -> None:
    assert link_of(NEURIPS) == "https://openreview.net/forum?id=RxWILaXuhb"
    assert link_of({"doi": "10.1145/3292500", "pdf_url": "https://x/p.pdf"}) == "https://doi.org/10.1145/3292500"
    assert link_of({"pdf_url": "https://x/p.pdf", "doi": ""}) == "https://x/p.pdf"
    assert link_of({"eprint": "2401.01234", "archiveprefix": "arXiv"}) == "https://arxiv.org/abs/2401.01234"
    assert link_of({"url": "javascript:alert(1)"}) is None  # only web links
    assert link_of({}) is None


def test_year_and_venue() -> None:
    assert year_of({"date": "March 2019"}) == "2019"
    assert year_of({"year": "n.d."}) is None
    assert venue_of({"booktitle": "Proceedings of {ICML}"}) == "Proceedings of ICML"


def test_paper_fields_leave_the_stored_title_alone() -> None:
    fields = paper_fields(r"*Mozart*: $\alpha$-Scaling", NEURIPS)
    assert fields["display_title"] == "Mozart: α-Scaling"
    assert fields["byline"] == "Hao Wang, Licheng Pan, … · NeurIPS 2025"
    assert paper_fields(None, {}) == {"display_title": None, "authors": [], "byline": None, "link": None}


def test_the_page_reads_markup_exactly_as_python_does() -> None:
    """web/app.js's readable() mirrors plain_text: run it under Node on every seed abstract and compare."""
    import json
    import re
    import shutil
    import subprocess

    from tests.helpers import SEEDS

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    app = (REPO / "semsearch" / "faces" / "web" / "app.js").read_text(encoding="utf-8")
    block = re.search(r"  const SYMBOLS = \{.*?(?=  window\.semsearchReadable)", app, re.S)
    assert block is not None
    texts = [p for f in sorted(SEEDS.glob("*.txt")) for p in f.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    texts += [r"$\sqrt{}$ $\frac{a}{}$ \href{u}{} ``x'' `code` **b** *e*", r"\tilde O(\log^{3/2} k) \uparrow 3\%"]
    texts += ["raised $5 million and $10 million", r"by $\sim$30%, a $\sim$2$\times$ speedup for $k$-means"]
    # Terminal escapes, controls and bidi overrides (safe_text.clean_text) are dropped alike.
    texts += [
        "a\x1b[31mred\x1b[0m \u202eevil\u202c \x1b]8;;http://e\x07l\x1b]8;;\x07 \x9b2J\x00\x07\r\n\u2066i\u2069 *e*"
    ]
    script = block.group(0) + (
        "\nlet input = ''; process.stdin.on('data', (d) => (input += d));"
        "\nprocess.stdin.on('end', () => console.log(JSON.stringify(JSON.parse(input).map(readable))));"
    )
    out = subprocess.run([node, "-e", script], input=json.dumps(texts), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    page = json.loads(out.stdout)
    assert len(page) == len(texts) > 90
    for text, shown in zip(texts, page, strict=True):
        assert shown == plain_text(text), text


def test_the_page_allows_the_links_python_allows() -> None:
    """web/app.js's safeUrl accepts exactly the links safe_text.safe_url accepts (only http and https)."""
    import json
    import re
    import shutil
    import subprocess

    from semsearch.core.safe_text import safe_url

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    app = (REPO / "semsearch" / "faces" / "web" / "app.js").read_text(encoding="utf-8")
    block = re.search(r"  const ESCAPES = .*?(?=  function readable)", app, re.S)
    assert block is not None
    urls = [
        "https://openreview.net/forum?id=x",
        " http://e.org/a b ",
        'https://e.org/a"b<c>',
        "https://e.org/é",
        "javascript:alert(1)",
        "JaVaScRiPt:alert(1)",
        "java\tscript:alert(1)",
        "https://e.org/\nx",
        "data:text/html,x",
        "file:///etc/passwd",
        "//evil.example/x",
        "http:evil.example",
        "vbscript:x",
        "",
        "https://e.org/\u202ex",
        "ftp://e.org/x",
        "https://",
    ]
    script = block.group(0) + (
        "\nlet input = ''; process.stdin.on('data', (d) => (input += d));"
        "\nprocess.stdin.on('end', () => console.log(JSON.stringify(JSON.parse(input).map(safeUrl))));"
    )
    out = subprocess.run([node, "-e", script], input=json.dumps(urls), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    page = json.loads(out.stdout)
    for url, shown in zip(urls, page, strict=True):
        assert (shown is None) == (safe_url(url) is None), url
        assert shown is None or shown.startswith(("http://", "https://")) and '"' not in shown and "<" not in shown
