"""One text, one vector: the ONNX encoder gives a text the same bytes in any batch, order, thread count or build."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from semsearch import Index
from semsearch.encode.onnx_backend import OnnxEmbedder
from semsearch.faces.cli import cli
from semsearch.store.layout import CACHE_DIR, CURRENT, MANIFEST, doc_num
from tests.helpers import REPO, SEEDS

ARRIVALS = sorted((REPO / "tests" / "fixtures" / "arrivals").glob("arrival_*.txt"))
QUERIES = (
    "federated learning with differential privacy",
    "diffusion models for image generation",
    "reinforcement learning for robot control",
    "mathematical optimization dataset of handwritten models",
    "large language model reasoning benchmarks",
)


def seed_abstracts() -> list[str]:
    """The seed files' paragraphs (the first line of each file is a header)."""
    out: list[str] = []
    for path in sorted(SEEDS.glob("*.txt")):
        body = path.read_text(encoding="utf-8").partition("\n")[2]
        out += [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
    return out


def mixed_batch() -> list[str]:
    """32 texts of very different token lengths (abstracts, sentences, a word), so batches pad a lot."""
    abstracts = seed_abstracts()
    short = ["graph neural networks", "x", "A short query about transformers for protein folding"]
    return [*abstracts[:26], *short, abstracts[40][:300], abstracts[50][:120], abstracts[60][:40]]


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_a_text_alone_in_a_batch_and_in_another_order_is_the_same_bytes(export_dir: Path, precision: str) -> None:
    texts = mixed_batch()
    assert len(texts) == 32
    embedder = OnnxEmbedder.load(export_dir, precision)
    alone = np.vstack([embedder.encode([t]) for t in texts])
    in_batch = embedder.encode(texts, batch_size=32)
    order = np.random.default_rng(7).permutation(len(texts))
    reordered = np.empty_like(in_batch)
    reordered[order] = embedder.encode([texts[i] for i in order], batch_size=5)
    assert alone.dtype == in_batch.dtype == np.float32
    assert np.array_equal(alone, in_batch)
    assert np.array_equal(alone, reordered)
    # Duplicates inside one call get their own run each, and still the same bytes.
    assert np.array_equal(embedder.encode([texts[3], texts[3]]), np.vstack([alone[3], alone[3]]))


@pytest.mark.slow
def test_threads_and_parallel_mode_do_not_change_the_bytes(export_dir: Path) -> None:
    texts = mixed_batch()
    # One thread is what a Ray actor runs; two ops threads a local build; "texts" several texts at once.
    runs = [
        OnnxEmbedder.load(export_dir, "int8", threads=1).encode(texts),
        OnnxEmbedder.load(export_dir, "int8", threads=2).encode(texts),
        OnnxEmbedder.load(export_dir, "int8", threads=3, parallel="texts").encode(texts),
    ]
    for other in runs[1:]:
        assert np.array_equal(runs[0], other)


def index(args: list[str]) -> dict[str, Any]:
    """Run ``semsearch index ... --json`` in-process; its summary."""
    result = CliRunner().invoke(cli, ["index", *args, "--json"])
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads(result.output)
    return summary


def vectors_by_id(index_dir: Path) -> dict[str, np.ndarray]:
    """The live version's vectors keyed by document id."""
    with Index.open(index_dir) as idx:
        ids = [row[0] for row in idx.store._query("SELECT id FROM documents")]
        return {i: idx.vectors.get_one(doc_num(i)) for i in ids}


@pytest.mark.slow
def test_one_build_and_three_arrivals_give_the_same_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert len(ARRIVALS) == 3
    at_once, arriving = tmp_path / "at_once", tmp_path / "arriving"
    shutil.copytree(SEEDS, at_once)
    shutil.copytree(SEEDS, arriving)
    for path in ARRIVALS:
        shutil.copy(path, at_once / path.name)
    one = index([str(at_once), "--index", str(tmp_path / "one")])
    first = index([str(arriving), "--index", str(tmp_path / "three")])
    encoded = [first["encoded"]]
    for path in ARRIVALS:  # each refresh encodes only what arrived
        shutil.copy(path, arriving / path.name)
        encoded.append(index([str(arriving), "--index", str(tmp_path / "three")])["encoded"])
    assert one["documents"] == 151 and one["encoded"] == 151
    assert encoded == [91, 20, 20, 20]

    got_one, got_three = vectors_by_id(tmp_path / "one"), vectors_by_id(tmp_path / "three")
    assert sorted(got_one) == sorted(got_three)
    assert [i for i, v in got_one.items() if not np.array_equal(v, got_three[i])] == []
    with Index.open(tmp_path / "one") as a, Index.open(tmp_path / "three") as b:
        for query in QUERIES:
            for mode in ("dense", "hybrid"):
                hits_a, hits_b = a.search(query, k=10, mode=mode), b.search(query, k=10, mode=mode)
                assert [h.id for h in hits_a] == [h.id for h in hits_b], (query, mode)
                assert np.allclose([h.score for h in hits_a], [h.score for h in hits_b], rtol=0, atol=1e-6)


@pytest.mark.slow
def test_an_index_from_the_batched_regime_is_re_encoded_on_refresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    idx = tmp_path / "idx"
    assert index([str(SEEDS), "--index", str(idx)])["encoded"] == 91
    want = vectors_by_id(idx)
    # Make it what an earlier semsearch left: no regime in the manifest, the cache under the old runtime key,
    # holding vectors that differ from this regime's (as batched int8 ones did).
    version = idx / (idx / CURRENT).read_text().strip()
    manifest = json.loads((version / MANIFEST).read_text())
    assert manifest["model"].pop("regime") == "alone"
    (version / MANIFEST).write_text(json.dumps(manifest))
    (current,) = (idx / CACHE_DIR).glob("embeddings-*-onnx-int8-alone-*.sqlite")  # -alone-<export sha256>
    old = current.with_name(current.name.split("-onnx-int8-alone-")[0] + "-onnx-int8.sqlite")
    current.rename(old)
    import sqlite3

    from semsearch.encode.cache import encode_vector

    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE codes SET code = ?", (encode_vector(np.ones(384, dtype=np.float32)),))

    again = index([str(SEEDS), "--index", str(idx)])
    assert (again["unchanged"], again["encoded"], again["cached"]) == (False, 91, 0)
    got = vectors_by_id(idx)
    assert sorted(got) == sorted(want)
    assert all(np.array_equal(got[i], want[i]) for i in want)
    new_version = idx / (idx / CURRENT).read_text().strip()
    assert json.loads((new_version / MANIFEST).read_text())["model"]["regime"] == "alone"
    # The next refresh finds nothing to do.
    assert index([str(SEEDS), "--index", str(idx)])["unchanged"] is True
