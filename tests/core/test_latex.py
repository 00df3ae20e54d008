"""Text in, text out (issue 39, item 1): LaTeX read as Unicode for display, search and export, and written back."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from semsearch.atlas.labels import cluster_terms
from semsearch.core import latex
from semsearch.core.latex import has_latex, latex_to_text, text_to_bibtex
from semsearch.core.paperinfo import plain_text
from semsearch.core.records import Document
from semsearch.curate.export import bibtex_title, citations, export
from semsearch.ingest.sources import read_sources
from semsearch.store.analyzer import analyze, lexical_text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        # What a tester saw leak into RIS, CSL-JSON and the map.
        (r"G{\string^}2m: Gradient Flows", "G^2m: Gradient Flows"),
        (r"Q\sharp: a quantum language", "Q♯: a quantum language"),
        (r"Layers:\ Exact bounds", "Layers: Exact bounds"),
        (r"with {\it local homogeneity} of", "with local homogeneity of"),
        (r"a bound $\omega \cdot n$ that is tight", "a bound ω · n that is tight"),
        # Accents, text commands, TeX's dashes and quotes, escapes.
        (r"R\'{e}nyi, Erd\H{o}s, Pe\~na, \c{C}etin, M\"uller, \o{}re", "Rényi, Erdős, Peña, Çetin, Müller, øre"),
        (r"\emph{cross-fluctuations} and \textbf{M}erging, \texttt{torch}", "cross-fluctuations and Merging, torch"),
        (r"pages 1--10 --- ``quoted'' text", "pages 1–10 — “quoted” text"),
        (r"55.3\% and \& and \$5", "55.3% and & and $5"),
        # Abstracts are not whole LaTeX documents: a bare % is a percent, a leading ~ means "about".
        (r"improves $\alpha$ by 5% (~3x) at Fig.~3", "improves α by 5% (~3x) at Fig. 3"),
        (r"lDDT \~ $0.7$ and x\^ 2", "lDDT ~ 0.7 and x^ 2"),
        # Math: symbols, fractions and roots grouped when they must be, math alphabets as plain letters.
        (r"$n \gtrsim \sqrt d \cdot \frac 1 {\alpha\epsilon}$", "n ≳ √d · 1/(αϵ)"),
        (r"rate $\tilde{\mathcal{O}}(1/N)$ with $\mathbf{x}_i \in \mathbb{R}^d$", "rate Õ(1/N) with x_i ∈ ℝ^d"),
        (r"$\{\hat\pi_k\}$ at $O(\sqrt \kappa)$ and $\tilde\Theta(d^{1/2})$", "{π̂_k} at O(√κ) and Θ̃(d^(1/2))"),
        (r"we propose $\texttt{Mozart}$, a", "we propose Mozart, a"),
        (r"code at \url{https://github.com/x/y} or \href{https://a.org}{our page}",
         "code at https://github.com/x/y or our page"),
        (r"\S 3 of the \LaTeX{} guide\ldots", "§ 3 of the LaTeX guide…"),
        (r"{R-KV}: {KV} cache", "R-KV: KV cache"),
    ],
)  # fmt: skip
def test_latex_reads_as_unicode(raw: str, shown: str) -> None:
    assert latex_to_text(raw) == shown


def test_text_without_markup_is_not_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path: most abstracts have no markup and never reach pylatexenc (nor change)."""

    def fail() -> None:
        raise AssertionError("pylatexenc was asked")

    monkeypatch.setattr(latex, "_decoder", fail)
    plain = "We improve by ~5% over 2 * 3 baselines (a_b, x^2, it's) in 2024."
    assert not has_latex(plain)
    assert latex_to_text(plain) is plain
    assert has_latex(r"R\'enyi") and has_latex("$x$") and has_latex("a -- b") and has_latex("{BERT}")


def test_plain_pieces_of_a_marked_text_stay_as_written() -> None:
    """Only the pieces with markup are decoded: the words around them keep their spacing and newlines."""
    assert latex_to_text("two  spaces\nthen \\emph{two words}  end") == "two  spaces\nthen two words  end"


def test_markup_pylatexenc_cannot_read_is_left_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece pylatexenc fails on is shown as written; the other pieces of the text are still decoded."""
    real = latex._decoder()

    class Broken:
        def latex_to_text(self, text: str) -> str:
            if "\\bad" in text:
                raise IndexError("list index out of range")
            return str(real.latex_to_text(text))

    monkeypatch.setattr(latex, "_decoder", lambda: Broken())
    assert latex_to_text(r"R\'{e}nyi meets $\bad{x}$ and $\alpha$") == r"Rényi meets $\bad{x}$ and α"


@pytest.mark.slow  # reads a whole corpus from ../shared
def test_no_command_leaks_from_a_real_corpus() -> None:
    """Every title and abstract of NeurIPS 2025 (5,823 records, 1 in 6 with markup) reads without a LaTeX command."""
    import gzip
    import json
    import re

    from semsearch.core.paperinfo import plain_text
    from tests.helpers import requires_shared

    source = requires_shared("data", "mlanthology", "neurips2025.jsonl.gz")
    leaks: list[str] = []
    marked = 0
    with gzip.open(source, "rt", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            for text in (record.get("title") or "", record.get("text") or ""):
                marked += has_latex(text)
                leaks += re.findall(r"\\[A-Za-z]+", plain_text(text))
    assert marked > 500
    assert leaks == []


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("Rényi and Müller, Łukasz, Straße", r"R{\'e}nyi and M{\"u}ller, {\L}ukasz, Stra{\ss}e"),
        ("50% of a_b & #c {x} $5 ~ x^2", r"50\% of a\_b \& \#c \{x\} \$5 \textasciitilde{} x\textasciicircum{}2"),
        ("a -- b, “q” – c", "a -{}- b, {``}q{''} {--} c"),
        # Not every BibTeX reader decodes "$\omega$", "{\string^}" or "\nobreakdash": written as UTF-8.
        ("ω · n ≤ 3, Q♯, 中文 ‑ ok", "ω · n ≤ 3, Q♯, 中文 ‑ ok"),
    ],
)
def test_unicode_is_written_back_as_latex_that_reads_the_same(text: str, written: str) -> None:
    assert text_to_bibtex(text) == written
    assert latex_to_text(written) == text


def test_an_unmatched_brace_is_written_so_bibtex_parsers_still_close_the_value(tmp_path: Path) -> None:
    """BibTeX counts "\\{" as a brace: a title with a lone one (a real corpus title) would swallow the file."""
    from pybtex.database import parse_string

    assert text_to_bibtex("a {b} c") == r"a \{b\} c"  # matched: the usual escape
    written = text_to_bibtex("Rates{via x}}")
    assert written == r"Rates\textbraceleft{}via x\textbraceright{}\textbraceright{}"
    assert latex_to_text(written) == "Rates{via x}}"
    paper = Paper("00000000000000a2", r"AdaGrad Rates\{via Publicly", "abc", {"year": "2021", "authors": ["A B"]})
    bib = export([paper], "bibtex")
    assert len(parse_string(bib, "bibtex").entries) == 1
    (tmp_path / "x.bib").write_text(bib, encoding="utf-8")
    back = read_sources([str(tmp_path / "x.bib")]).records[0]
    assert back.title is not None and plain_text(back.title) == "AdaGrad Rates{via Publicly"


@dataclass
class Paper:
    id: str
    title: str | None
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    external_ids: list[str] = field(default_factory=list)


def test_bibtex_titles_brace_acronyms_and_encode_latex_back() -> None:
    title = r"R-KV: Redundancy-aware {KV} Cache Compression for Reasoning {LLMs} with Q\sharp and $\omega$"
    paper = Paper("00000000000000a1", title, r"We cut R\'{e}nyi costs by 90\%.", {"year": "2025"})
    text = export([paper], "bibtex")
    assert r"title = {{R-KV}: Redundancy-aware {KV} Cache Compression for Reasoning {LLMs} with {Q}♯ and ω}" in text
    assert r"abstract = {We cut R{\'e}nyi costs by 90\%.}" in text
    # RIS and CSL-JSON carry the Unicode a person reads.
    cite = citations([paper])[0]
    assert cite.title == "R-KV: Redundancy-aware KV Cache Compression for Reasoning LLMs with Q♯ and ω"
    assert "TI  - R-KV: Redundancy-aware KV Cache Compression for Reasoning LLMs with Q♯ and ω" in export(
        [paper], "ris"
    )


@pytest.mark.parametrize(
    ("title", "written"),
    [
        ("Scaling LLMs with Q-learning on ImageNet", "Scaling {LLMs} with {Q-learning} on {ImageNet}"),
        ("Self-Supervised Learning for GPT-4", "Self-Supervised Learning for {GPT-4}"),
        ("Müller's Theorem, Revisited", r"M{\"u}ller's Theorem, Revisited"),
        ("G^2M: Fast", r"{G}\textasciicircum{}{2M}: Fast"),
        ("a study in lowercase", "a study in lowercase"),
    ],
)
def test_title_protection_braces_only_what_sentence_case_would_lose(title: str, written: str) -> None:
    assert bibtex_title(title) == written


def test_search_reads_decoded_text() -> None:
    """BM25 and the encoder see "Rényi" and "ω", not "R", "nyi", "omega", "cdot"; the stored text is unchanged."""
    doc = Document(
        id="00000000000000a2", text=r"R\'{e}nyi bounds $\omega \cdot n$", title=r"{\it Tight} Bounds", sources=[]
    )
    assert doc.embedding_parts() == ("Tight Bounds Rényi bounds ω · n", "Tight Bounds", "Rényi bounds ω · n")
    assert doc.embedding_text() == "Tight Bounds Rényi bounds ω · n"
    assert doc.text == r"R\'{e}nyi bounds $\omega \cdot n$"
    tokens = analyze(lexical_text(doc.title, doc.text))
    assert "rényi" in tokens and "nyi" not in tokens and "omega" not in tokens and "cdot" not in tokens
    title_only = Document(id="00000000000000a3", text=r"Q\sharp", title=r"Q\sharp", sources=[], title_only=True)
    assert title_only.embedding_parts() == ("Q♯", "", "Q♯")


def test_map_labels_come_from_decoded_text() -> None:
    """A cluster of math-heavy abstracts is not labelled "omega · cdot · tight"."""
    math = [
        Document(id=f"{i:016x}", text=rf"a $\omega \cdot \alpha$ bound is tight for regret {i}", title=None, sources=[])
        for i in range(6)
    ]
    graphs = [Document(id=f"{i + 6:016x}", text=f"graph nodes edges {i}", title=None, sources=[]) for i in range(6)]
    terms = cluster_terms(math + graphs, np.array([0] * 6 + [1] * 6), 2)
    assert "tight" in terms[0] and "regret" in terms[0]
    assert not {"omega", "cdot", "alpha"} & set(terms[0])


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("raised $5 million and $10 million", "raised $5 million and $10 million"),  # money, not math
        ("a lone $ here, US$ 3.2", "a lone $ here, US$ 3.2"),
        (r"by $\sim$30%, a $\sim$2$\times$ speedup", "by ∼30%, a ∼2× speedup"),  # math before a digit
        (r"$k$-means costs \$5", "k-means costs $5"),
    ],
)
def test_a_dollar_that_opens_or_closes_no_math_is_itself(raw: str, shown: str) -> None:
    assert latex_to_text(raw) == shown


def test_references_to_labels_and_the_bibliography_show_nothing() -> None:
    shown = latex_to_text(r"as in~\cite{x}, Eq.~\eqref{e1} and \citep[p.~3]{y}")
    assert "cit" not in shown and "ref" not in shown and "<" not in shown
    assert shown.split() == ["as", "in", ",", "Eq.", "and"]
