"""Figures in README.md and docs/ that state a recorded measurement agree with the record.

A figure taken from ``semsearch/encode/measured.json`` (what ``semsearch models`` shows) carries, right after it,
an HTML comment naming the record: ``0.7365<!-- measured: hybrid ndcg@10 -->`` for the default model, or
``0.6731<!-- measured: all-mpnet-base-v2 dense ndcg@10 -->``; ``encode_per_s`` names the encoding speed. A figure
of the model catalogue names its field: ``92<!-- catalogue: all-MiniLM-L6-v2 disk_mb -->``. Rendered pages do not
show the comment. A figure is checked to the decimals it shows, so a hand-typed 0.733 where the record
says 0.7365 fails, and so does every such figure once the record is measured again. Tables of figures the record
holds are generated instead (``<!-- semsearch:measured-modes -->``, scripts/docs_hooks.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from semsearch.encode.catalogue import DEFAULT_MODEL, find_spec, recorded_figures
from tests.helpers import REPO

DOC_FILES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
_FIGURE = re.compile(r"([-+]?\d+(?:\.\d+)?)\**<!-- ((?:measured|catalogue): [^>]*?) -->")
_ANNOTATION = re.compile(r"<!-- (?:measured|catalogue):")
CATALOGUE_FIELDS = ("dimension", "disk_mb")
MODES = ("dense", "lexical", "hybrid")
METRICS = ("ndcg@10", "recall@100", "mrr@10")


@dataclass(frozen=True)
class Figure:
    """One annotated figure: where it is, what it shows, which record it names."""

    path: Path
    line: int
    shown: str
    key: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}: {self.shown} ({self.key})"


def figures(path: Path) -> list[Figure]:
    """The annotated figures of one Markdown file."""
    found = []
    for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        found += [Figure(path, number, m.group(1), " ".join(m.group(2).split())) for m in _FIGURE.finditer(text)]
    return found


def recorded(key: str, models: dict[str, Any] | None = None) -> float:
    """The value a key names: ``[measured:] [MODEL] MODE METRIC`` (SciFact test) or ``[MODEL] encode_per_s``;
    ``catalogue: MODEL FIELD`` for the model catalogue."""
    source, _, key = key.rpartition(": ")
    if source == "catalogue":
        name, _, field = key.partition(" ")
        spec = find_spec(name)
        if spec is None or field not in CATALOGUE_FIELDS:
            raise KeyError(f"not a catalogue figure: {key!r} (want MODEL {' or '.join(CATALOGUE_FIELDS)})")
        return float(getattr(spec, field))
    models = recorded_figures() if models is None else models
    words = key.split()
    model = words.pop(0) if words and words[0] in models else DEFAULT_MODEL
    entry = models[model]
    if words == ["encode_per_s"]:
        return float(entry["encode_per_s"])
    if len(words) != 2 or words[0] not in MODES or words[1] not in METRICS:
        raise KeyError(f"not a recorded figure: {key!r} (want [MODEL] MODE METRIC or [MODEL] encode_per_s)")
    return float(entry["scifact_test"][words[0]][words[1]])


def agrees(shown: str, value: float) -> bool:
    """Whether a figure as shown is the recorded value rounded to the decimals shown."""
    decimals = len(shown.partition(".")[2])
    return abs(float(shown) - value) <= 0.5 * 10.0**-decimals + 1e-9


FIGURES = [figure for path in DOC_FILES for figure in figures(path)]


def test_agreement_rules() -> None:
    """Rounded to the decimals shown: 0.737 and 0.7365 agree with 0.7365; 0.733 and 0.7366 do not."""
    assert agrees("0.7365", 0.7365) and agrees("0.737", 0.7365) and agrees("33", 33.0)
    assert not agrees("0.733", 0.7365)
    assert not agrees("0.7366", 0.7365)
    assert not agrees("0.74", 0.7349)
    models = {"m": {"scifact_test": {"hybrid": {"ndcg@10": 0.5}}, "encode_per_s": 3.0}}
    assert recorded("m hybrid ndcg@10", models) == 0.5 and recorded("m encode_per_s", models) == 3.0
    with pytest.raises(KeyError):
        recorded("m hybrid ndcg@100", models)
    assert recorded("catalogue: all-MiniLM-L6-v2 dimension") == 384
    with pytest.raises(KeyError):
        recorded("catalogue: all-MiniLM-L6-v2 summary")


def test_every_annotation_follows_a_figure() -> None:
    """An annotation sits right after the number it names (a stray one would check nothing)."""
    for path in DOC_FILES:
        text = path.read_text(encoding="utf-8")
        assert len(_ANNOTATION.findall(text)) == len(_FIGURE.findall(text)), path


def test_headline_figures_are_annotated() -> None:
    """The README and the Quality page state the default's recorded figures through annotations."""
    keys = {(figure.path.name, figure.key) for figure in FIGURES}
    for mode in MODES:
        assert ("README.md", f"measured: {mode} ndcg@10") in keys
    assert ("quality.md", "measured: hybrid ndcg@10") in keys
    assert ("quality.md", "measured: all-mpnet-base-v2 hybrid ndcg@10") in keys
    assert ("models.md", "catalogue: all-MiniLM-L6-v2 disk_mb") in keys


@pytest.mark.parametrize("figure", FIGURES, ids=[figure.name for figure in FIGURES])
def test_figure_agrees_with_the_record(figure: Figure) -> None:
    """Each annotated figure is the recorded value, to the decimals it shows."""
    value = recorded(figure.key)
    assert agrees(figure.shown, value), f"{figure.name}: measured.json records {value}"
