"""Ids that never move and title-only records, end to end with the real model on the real seeds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from semsearch.dedup.duplicates import deduplicate
from semsearch.ingest.sources import read_sources
from tests.helpers import FIXTURES, SEEDS, semsearch

pytestmark = pytest.mark.slow

FIXTURE = FIXTURES / "beir_title_only"


def rewrap(text: str) -> str:
    words = text.split()
    for i in (3, 11):
        words[i] = f"*{words[i]}*"
    return "\n".join(" ".join(words[i : i + 9]) for i in range(0, len(words), 9))


def test_copies_of_seed_abstracts_keep_their_ids_and_are_not_encoded(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds"
    shutil.copytree(SEEDS, seeds)
    index = tmp_path / "idx"
    first = semsearch("index", str(seeds), "--index", str(index), "--json")
    assert first.returncode == 0, first.stderr
    docs = deduplicate(read_sources([str(seeds)]).records).documents
    fed = next(d for d in docs if "FedASK" in d.text)
    others = [d for d in docs if d.id != fed.id][:2]
    words = others[1].text.split()
    words[5], words[-4] = "notably", "clearly"
    copies = [fed.text + " Our code is publicly available.", rewrap(others[0].text), " ".join(words)]
    new = "Tabular foundation models pretrained on synthetic tables predict missing values in spreadsheets."
    (seeds / "late.txt").write_text("Late additions\n\n" + "\n\n".join([*copies, new]) + "\n", encoding="utf-8")

    second = semsearch("index", "--index", str(index), "--json")
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    assert (summary["encoded"], summary["added"], summary["removed"], summary["documents"]) == (1, 1, 0, 92)
    for doc in [fed, *others]:
        shown = semsearch("related", doc.id, "--index", str(index), "--json", "-k", "1")
        assert shown.returncode == 0, shown.stderr
    hits = json.loads(semsearch("query", "federated privacy", "--index", str(index), "--json", "-k", "1").stdout)
    assert hits[0]["id"] == fed.id and hits[0]["text"] == fed.text
    assert [s["file"].rsplit("/", 1)[-1] for s in hits[0]["sources"]][-1] == "late.txt"


def test_eval_on_a_beir_corpus_where_half_the_records_are_titles(tmp_path: Path) -> None:
    data = tmp_path / "beir"
    shutil.copytree(FIXTURE, data)
    result = semsearch("eval", str(data), "--index", str(tmp_path / "idx"), "--json")
    assert result.returncode == 0, result.stderr
    metrics = json.loads(result.stdout)
    assert metrics["queries"] == 6
    for mode in ("dense", "lexical", "hybrid"):
        assert metrics[mode]["recall@100"] == 1.0
    assert metrics["hybrid"]["ndcg@10"] > 0.9
