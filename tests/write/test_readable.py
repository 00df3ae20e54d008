"""Readable everywhere (issue 25, item 5): one renderer (paperinfo.plain_text) for digests, and whole words."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from semsearch import build_index
from semsearch.write.build import BuildOptions
from tests.helpers import FakeEmbedder, run

ATOM = "{http://www.w3.org/2005/Atom}"
LONG_TITLE = "Federated Privacy Attacks and the Defences Beyond Gradient Inversion in Practice"
RECORDS = [
    {
        "id": "marked",
        "title": "**HYPERION**: ``utility-first'' federated privacy, 29.7\\% $\\uparrow$ with $\\texttt{Mozart}$",
        "abstract": "We make *federated privacy* ``utility-first'' and gain 29.7\\% $\\uparrow$ over \\textbf{strong}"
        " baselines of federated privacy clients.",
    },
    {"id": "long", "title": LONG_TITLE, "abstract": "Federated privacy attacks with gradient inversion clients."},
    {"id": "other", "title": "Soil moisture", "abstract": "Soil moisture forecasting with radar and sensors."},
]
RAW = ("**", "``", "''", "\\%", "$", "\\uparrow", "\\texttt", "\\textbf", "*federated")


@pytest.fixture
def index(tmp_path: Path, fake: FakeEmbedder) -> Path:
    src = tmp_path / "marked.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    out = tmp_path / "idx"
    build_index([str(src)], out, BuildOptions(progress=False), embedder=fake)
    assert run(["watch", "add", "fed", "federated privacy", "--index", str(out)], fake).exit_code == 0
    return out


@pytest.mark.parametrize("fmt", ["md", "html", "atom"])
def test_digests_show_markup_as_a_person_reads_it(index: Path, fake: FakeEmbedder, fmt: str) -> None:
    args = ["digest", "--format", fmt, "--min-fit", "-1000", "--no-bookmark", "--index", str(index)]
    result = run(args, fake)
    assert result.exit_code == 0, result.output
    text = result.output
    if fmt == "atom":
        entries = ET.fromstring(text).findall(f"{ATOM}entry")
        text = "\n".join(f"{e.findtext(f'{ATOM}title')}\n{e.findtext(f'{ATOM}summary')}" for e in entries)
    if fmt == "md":  # the digest's own Markdown (bold titles, blockquotes) aside, and its escapes undone
        text = re.sub(r"\\(.)", r"\1", text.replace("**", "").replace("`", ""))
    shown = [raw for raw in RAW if raw in text]
    assert not shown, shown
    assert "HYPERION: “utility-first” federated privacy, 29.7% ↑ with Mozart" in text
    assert "gain 29.7% ↑ over strong baselines" in text or fmt != "atom"


def test_because_lines_cut_titles_at_a_word(index: Path, fake: FakeEmbedder) -> None:
    result = run(["recommend", "--like", "long", "-k", "2", "--index", str(index)], fake)
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if "because: near" in line]
    assert lines
    for line in lines:
        label = re.search(r"\((.*), cosine", line)
        assert label is not None, line
        shown = label.group(1).removesuffix(" …")
        assert LONG_TITLE.startswith(shown) and LONG_TITLE[len(shown)] == " ", line  # whole words only
        assert " , cosine" not in line
