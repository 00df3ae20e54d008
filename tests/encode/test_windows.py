"""Reading whole abstracts (issue 24): tail windows past the encoder's cut, pooled into one vector per document."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from semsearch import BuildOptions, Index, build_index
from semsearch.core.errors import SemsearchError
from semsearch.encode.cache import decode_vector, encode_vector
from semsearch.encode.windows import document_windows, pool, tail_windows
from semsearch.store.layout import CURRENT
from semsearch.store.manifest import MANIFEST
from tests.helpers import FakeEmbedder

TITLE = "Forgetting on request"
SENTENCES = [
    "Machine unlearning removes the influence of chosen training examples from a trained model.",
    "Retraining from scratch is exact but costly.",
    "We bound the influence of each example during training.",
    "Deleting an example then costs one cheap update.",
    "Experiments on vision and text benchmarks confirm the guarantee.",
]
TEXT = " ".join(SENTENCES)
FULL = f"{TITLE} {TEXT}"
CUT = 120  # the fake encoder reads this many characters, like a 256-token window on a long abstract


class WindowedFake(FakeEmbedder):
    """The fake encoder, reading only the first CUT characters of each text (and saying so)."""

    def read_chars(self, text: str) -> int:
        return min(len(text), CUT)

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        self.calls.append(list(texts))
        return FakeEmbedder().encode([t[:CUT] for t in texts])


def _lines(*papers: tuple[str, str]) -> str:
    return "".join(json.dumps({"title": title, "abstract": text}) + "\n" for title, text in papers)


def _corpus(tmp_path: Path, *papers: tuple[str, str], name: str = "papers.jsonl") -> Path:
    path = tmp_path / "corpus" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(_lines(*papers), encoding="utf-8")
    return path


def test_tail_windows_start_at_the_first_sentence_not_read_to_its_end_and_carry_the_title() -> None:
    prefix = len(TITLE) + 1
    cut = prefix + len(SENTENCES[0]) + 5  # inside the second sentence
    assert tail_windows(TITLE, TEXT, prefix, cut) == [
        f"{TITLE} {SENTENCES[1]} {SENTENCES[2]}",
        f"{TITLE} {SENTENCES[3]} {SENTENCES[4]}",
    ]
    assert tail_windows(TITLE, TEXT, prefix, cut, size=3) == [
        f"{TITLE} {' '.join(SENTENCES[1:4])}",
        f"{TITLE} {SENTENCES[4]}",
    ]
    assert tail_windows(TITLE, TEXT, prefix, len(FULL)) == []  # read whole: no window


def test_document_windows_need_a_cut_and_a_text_longer_than_it() -> None:
    items = [(FULL, TITLE, TEXT), ("short text.", "", "short text.")]
    assert document_windows(items, None) == [[], []]
    windows = document_windows(items, lambda t: min(len(t), CUT))
    assert windows[1] == [] and windows[0][0].startswith(TITLE + " ")
    # Every sentence past the cut is in some window: the whole abstract reaches the dense side.
    tail = [s for s in SENTENCES if FULL.index(s) + len(s) > CUT]
    assert all(any(s in w for w in windows[0]) for s in tail)


def test_pool_is_the_unit_mean_and_leaves_a_lone_vector_alone() -> None:
    whole = np.array([1.0, 0.0, 0.0], dtype=np.float32)
    windows = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    pooled = pool(whole, windows)
    assert pooled.dtype == np.float32
    np.testing.assert_allclose(pooled, np.array([1.0, 2.0, 0.0]) / np.sqrt(5), rtol=1e-6)
    np.testing.assert_array_equal(pool(whole, np.zeros((0, 3), dtype=np.float32)), whole)


def _vector(index_dir: Path, title: str) -> np.ndarray:
    from semsearch.store.layout import doc_num

    with Index.open(index_dir) as index:
        doc = next(h for h in index.search(title, 5, mode="lexical") if h.title == title)
        return np.asarray(index.vectors.get_one(doc_num(doc.id)), dtype=np.float32)


def _manifest(index_dir: Path) -> dict:
    return json.loads((index_dir / (index_dir / CURRENT).read_text().strip() / MANIFEST).read_text())


def test_a_build_pools_each_long_abstract_with_its_tail_windows_and_records_it(tmp_path: Path) -> None:
    short = "A short note. It fits the window."
    corpus = _corpus(tmp_path, (TITLE, TEXT), ("Tiny paper", short))
    fake = WindowedFake()
    idx = tmp_path / "idx"
    summary = build_index([str(corpus)], idx, BuildOptions(progress=False, reading="pooled"), embedder=fake)
    assert summary.encoded == 2 and summary.cached == 0  # documents, not texts
    windows = document_windows([(FULL, TITLE, TEXT)], fake.read_chars)[0]
    assert windows and set(windows) <= set(fake.encoded_texts)
    np.testing.assert_allclose(_vector(idx, TITLE), _pooled(fake), atol=1e-6)
    tiny = _served(FakeEmbedder().encode([f"Tiny paper {short}"])[0])
    np.testing.assert_allclose(_vector(idx, "Tiny paper"), tiny, atol=1e-6)
    assert _manifest(idx)["model"]["reading"] == "pooled"


def test_reading_truncated_keeps_the_first_window_only_and_is_the_default(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT))
    fake = WindowedFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, BuildOptions(progress=False), embedder=fake)
    assert fake.encoded_texts == [FULL]
    np.testing.assert_allclose(_vector(idx, TITLE), _served(FakeEmbedder().encode([FULL[:CUT]])[0]), atol=1e-6)
    assert _manifest(idx)["model"]["reading"] == "truncated"
    # Asking for another reading re-makes the vectors; later refreshes keep the index's reading.
    build_index([str(corpus)], idx, BuildOptions(progress=False, reading="pooled"), embedder=fake)
    assert _manifest(idx)["model"]["reading"] == "pooled"
    assert build_index([str(corpus)], idx, BuildOptions(progress=False), embedder=fake).unchanged
    np.testing.assert_allclose(_vector(idx, TITLE), _pooled(fake), atol=1e-6)


def _served(vectors: np.ndarray) -> np.ndarray:
    """Encoded vectors as the embedding cache serves them (int8 codes and a scale, encode/cache.py)."""
    rows = [decode_vector(encode_vector(v), len(v)) for v in np.atleast_2d(vectors)]
    return np.stack([r for r in rows if r is not None]).reshape(np.shape(vectors))


def _pooled(fake: WindowedFake) -> np.ndarray:
    windows = document_windows([(FULL, TITLE, TEXT)], fake.read_chars)[0]
    embed = FakeEmbedder().encode
    return pool(_served(embed([FULL[:CUT]])[0]), _served(embed([w[:CUT] for w in windows])))


def _forget_reading(idx: Path) -> None:
    """Make the live manifest what a semsearch before issue 24 wrote: no reading."""
    path = idx / (idx / CURRENT).read_text().strip() / MANIFEST
    manifest = json.loads(path.read_text())
    del manifest["model"]["reading"]
    path.write_text(json.dumps(manifest))


def test_an_index_from_before_the_reading_was_recorded_is_not_re_encoded(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT))
    fake = WindowedFake()
    idx = tmp_path / "idx"
    build_index([str(corpus)], idx, BuildOptions(progress=False, reading="truncated"), embedder=fake)
    _forget_reading(idx)
    assert build_index([str(corpus)], idx, BuildOptions(progress=False), embedder=fake).unchanged  # truncated
    pooled = build_index([str(corpus)], idx, BuildOptions(progress=False, reading="pooled"), embedder=fake)
    assert not pooled.unchanged and _manifest(idx)["model"]["reading"] == "pooled"
    assert build_index([str(corpus)], idx, BuildOptions(progress=False), embedder=fake).unchanged


def test_an_appended_segment_pools_its_documents_too(tmp_path: Path) -> None:
    _corpus(tmp_path, *[(f"Paper {i}", f"Short note number {i}. It fits.") for i in range(6)])
    fake = WindowedFake()
    idx = tmp_path / "idx"
    opts = BuildOptions(progress=False, merge_share=0.9, reading="pooled")
    build_index([str(tmp_path / "corpus")], idx, opts, embedder=fake)
    _corpus(tmp_path, (TITLE, TEXT), name="more.jsonl")
    summary = build_index([str(tmp_path / "corpus")], idx, opts, embedder=fake)
    assert summary.segments == 1 and summary.encoded == 1, summary.rewritten_because  # appended, not rewritten
    np.testing.assert_allclose(_vector(idx, TITLE), _pooled(fake), atol=1e-6)


def test_an_unknown_reading_is_a_one_line_error(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path, (TITLE, TEXT))
    with pytest.raises(SemsearchError, match="unknown reading 'sideways'"):
        build_index(
            [str(corpus)], tmp_path / "idx", BuildOptions(progress=False, reading="sideways"), embedder=FakeEmbedder()
        )
    assert not (tmp_path / "idx").exists()


def test_the_cli_refuses_an_unknown_reading(tmp_path: Path) -> None:
    from semsearch.faces.cli import cli

    result = CliRunner().invoke(
        cli, ["index", str(_corpus(tmp_path, ("A", "B."))), "--index", str(tmp_path / "i"), "--reading", "x"]
    )
    assert result.exit_code == 2 and "Invalid value for '--reading'" in result.output


@pytest.mark.slow
def test_the_onnx_encoder_says_where_it_stops_reading(export_dir: Path) -> None:
    from semsearch.encode.onnx_backend import OnnxEmbedder

    embedder = OnnxEmbedder.load(export_dir, "int8")
    long_text = " ".join(SENTENCES * 12)  # well past 256 tokens
    cut = embedder.read_chars(long_text)
    assert 0 < cut < len(long_text)
    # What it reads is exactly that prefix: the prefix alone gives the same vector.
    whole, prefix = embedder.encode([long_text, long_text[:cut]])
    assert float(whole @ prefix) > 0.9999
    assert embedder.read_chars(TEXT) == len(TEXT)
    windows = document_windows([(f"{TITLE} {long_text}", TITLE, long_text)], embedder.read_chars)[0]
    assert windows and all(w.startswith(TITLE) for w in windows)


@pytest.mark.slow
def test_both_runtimes_stop_reading_at_the_same_character(export_dir: Path) -> None:
    from semsearch.encode.onnx_backend import OnnxEmbedder
    from semsearch.encode.torch_backend import SentenceTransformerEmbedder

    onnx, torch = OnnxEmbedder.load(export_dir, "int8"), SentenceTransformerEmbedder("all-MiniLM-L6-v2")
    long_text = " ".join(SENTENCES * 12)
    assert torch.read_chars(long_text) == onnx.read_chars(long_text) < len(long_text)
    assert torch.read_chars(TEXT) == len(TEXT)


@pytest.mark.slow
def test_the_onnx_encoder_reads_every_sentence_of_a_long_abstract_in_runs(export_dir: Path) -> None:
    from semsearch.encode.onnx_backend import OnnxEmbedder
    from semsearch.encode.sentence_runs import sentence_text

    embedder = OnnxEmbedder.load(export_dir, "int8", parallel="texts", threads=2)
    long_text = " ".join(f"{s[:-1]} in trial {i}." for i in range(12) for s in SENTENCES)  # ~8 runs of 128 tokens
    texts = (long_text, TEXT, "İstanbul İzmir study. Two cities.", "One sentence only, read as encode reads it")
    items = [sentence_text(f"{TITLE} {t}", TITLE, t) for t in texts]
    got = embedder.encode_sentences(items)
    for (whole, sentences), item in zip(got, items, strict=True):
        assert sentences.shape == (len(item.spans), embedder.dimension) and sentences.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(sentences, axis=1), 1.0, rtol=1e-5)
        if item.spans:  # the document's vector is its sentences' unit mean: it reads the whole abstract
            mean = sentences.mean(axis=0)
            np.testing.assert_allclose(whole, mean / np.linalg.norm(mean), atol=1e-6)
    assert got[3][0].tobytes() == embedder.encode([items[3].text])[0].tobytes()  # one sentence: encode's vector
    assert embedder.read_chars(items[0].text) < items[0].spans[-1][0]  # the last sentence lies past the cut...
    last = items[0].text[slice(*items[0].spans[-1])]
    alone = embedder.encode([last])[0]
    assert float(got[0][1][-1] @ alone) > 0.6  # ...and its vector is still about it (in context, not alone)
    # The same text gives the same bytes again, whatever else is encoded beside it and on how many threads.
    again = OnnxEmbedder.load(export_dir, "int8", threads=1).encode_sentences([items[0]])[0]
    assert again[1].tobytes() == got[0][1].tobytes() and again[0].tobytes() == got[0][0].tobytes()
