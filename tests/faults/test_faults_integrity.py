"""Integrity faults (issue #37): the index never says "sound" while it answers wrong.

Classes, each a fault injected into a real index and what must hold after it:

- shared-store damage: one index's ONNX export changed in place (rsync --inplace, dd conv=notrunc, bit rot)
  changes no other index or version; queries refuse it at load; a refresh never reuses it nor records its
  bytes as the truth; ``verify`` names it; a damaged shared export is made again, never copied;
- cache poisoning: vectors another (damaged) export made are never served for this one's;
- non-finite vectors: a NaN row in the cache is encoded again, never published; an encoder giving one stops the
  build with one line; ``verify`` finds a NaN in a published vector file.

The ONNX encoder here is a real ONNX Runtime model, tiny (a word-embedding table, made in milliseconds), put in
the store by the build's own export step, so every path (store, copy, load, cache key, verify) is the product's.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from semsearch.core.fileio import file_sha256
from semsearch.encode import encoder_choice
from semsearch.encode.cache import encode_vector
from semsearch.encode.encoder_store import source_fingerprint, store_dir
from semsearch.encode.onnx_backend import (
    TOKENIZER_FILE,
    EncoderSpec,
    OnnxEmbedder,
    model_filename,
    write_spec,
)
from semsearch.store.layout import CACHE_DIR, CURRENT, ENCODER_DIR
from tests.helpers import PAPERS, FakeEmbedder, run

DIMENSION = 16
EXTRA = "Sparse attention patterns cut the quadratic cost of transformers on long documents."
WORDS = sorted({w for text in [*PAPERS.values(), EXTRA] for w in re.findall(r"[a-z0-9]+", text.lower())})


def _tiny_onnx(table: np.ndarray) -> bytes:
    """A word-embedding "transformer": token_embeddings = table[input_ids] * attention_mask."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["embedded"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "last"], ["mask_3d"]),
        helper.make_node("Mul", ["embedded", "mask_3d"], ["token_embeddings"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("token_embeddings", TensorProto.FLOAT, ["batch", "sequence", DIMENSION])],
        initializer=[numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([-1]), "last")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


def table() -> np.ndarray:
    """The tiny model's weights: one row per word of the test texts, [UNK] last."""
    return np.random.default_rng(7).standard_normal((len(WORDS) + 1, DIMENSION)).astype(np.float32)


def tiny_export(model: str, folder: Path, precision: str, weights: np.ndarray | None = None) -> None:
    """What ``semsearch index --backend onnx`` exports, for the tiny model (the build's ``_export``)."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(WordLevel({**{w: i for i, w in enumerate(WORDS)}, "[UNK]": len(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = Whitespace()
    tokenizer.save(str(folder / TOKENIZER_FILE))
    onnx_name = model_filename(precision)
    (folder / onnx_name).write_bytes(_tiny_onnx(table() if weights is None else weights))
    names = (onnx_name, TOKENIZER_FILE)
    files = {n: {"sha256": file_sha256(folder / n), "size": (folder / n).stat().st_size} for n in names}
    write_spec(
        folder,
        EncoderSpec(
            source_model=model,
            source_fingerprint=str(source_fingerprint(model)),
            dimension=DIMENSION,
            max_seq_length=64,
            pooling="mean",
            normalize_module=True,
            do_lower_case=True,
            inputs=("input_ids", "attention_mask"),
            pad_token_id=0,
            files=files,
            precisions={precision: onnx_name},
            versions={},
        ),
    )


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The tiny model's folder (its name for ``--model``), exported by builds into a private store."""
    folder = tmp_path / "tiny-model"
    folder.mkdir()
    (folder / "config.json").write_text('{"tiny": true}')  # what the model's fingerprint is taken over
    monkeypatch.setenv("SEMSEARCH_ENCODERS_DIR", str(tmp_path / "store"))
    monkeypatch.setattr(encoder_choice, "_export", tiny_export)
    # sentence-transformers cannot load the tiny model: no slow torch import on the way to saying so.
    monkeypatch.setattr(encoder_choice, "_torch_fallback", lambda info: None)
    yield str(folder)


def corpus(root: Path, *texts: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "papers.txt").write_text("Papers\n\n" + "\n\n".join(texts) + "\n", encoding="utf-8")
    return root


def build(index: Path, source: Path, model: str, *extra: str) -> str:
    args = ["index", str(source), "--index", str(index), "--model", model, "--backend", "onnx"]
    result = run([*args, "--reading", "truncated", "-q", "--json", *extra])
    assert result.exit_code == 0, result.output
    return result.output


def refresh(index: Path, *extra: str) -> str:
    result = run(["index", "--index", str(index), "-q", "--json", *extra])
    assert result.exit_code == 0, result.output
    return result.output


def live(index: Path) -> Path:
    return index / (index / CURRENT).read_text(encoding="utf-8").strip()


def model_file(index: Path) -> Path:
    return live(index) / ENCODER_DIR / model_filename("int8")


def damage_in_place(path: Path) -> None:
    """What rsync --inplace or dd conv=notrunc does: other bytes, same size, same inode (weights, not framing)."""
    data = bytearray(path.read_bytes())
    weights = table().tobytes()
    at = bytes(data).index(weights)
    data[at : at + len(weights)] = np.flip(table(), axis=0).tobytes()  # every word gets another word's vector
    with path.open("r+b") as fh:
        fh.write(bytes(data))


def answers(index: Path, query: str) -> list[str]:
    result = run(["query", query, "--index", str(index), "--json", "-k", "3"])
    assert result.exit_code == 0, result.output
    return [hit["id"] for hit in json.loads(result.output)]


def verify(index: Path) -> tuple[int, str]:
    result = run(["verify", "--index", str(index)])
    return result.exit_code, result.output


def vectors(index: Path) -> np.ndarray:
    return np.load(live(index) / "vectors.npy")


# ---------------------------------------------------------------- shared-store damage


def test_the_tiny_model_is_a_real_onnx_export(tmp_path: Path, tiny: str) -> None:
    index = tmp_path / "idx"
    build(index, corpus(tmp_path / "c", *PAPERS.values()), tiny)
    assert (store_dir() / next(p.name for p in store_dir().iterdir() if p.is_dir())).is_dir()
    embedder = OnnxEmbedder.load(live(index) / ENCODER_DIR, "int8")
    assert embedder.dimension == DIMENSION
    assert answers(index, PAPERS["graph"])[0] == answers(index, "graph neural networks oversmoothing")[0]
    assert verify(index)[0] == 0


def test_damage_in_one_index_never_reaches_another(tmp_path: Path, tiny: str) -> None:
    source = corpus(tmp_path / "c", *PAPERS.values())
    one, two = tmp_path / "one", tmp_path / "two"
    build(one, source, tiny)
    build(two, source, tiny)
    before = model_file(two).read_bytes()
    assert model_file(one).stat().st_ino != model_file(two).stat().st_ino  # never one inode between indexes
    damage_in_place(model_file(one))
    assert model_file(two).read_bytes() == before
    shared = [p / model_filename("int8") for p in store_dir().iterdir() if p.is_dir()]
    assert [file_sha256(p) for p in shared] == [file_sha256(model_file(two))]  # the store is untouched too
    assert verify(two)[0] == 0
    # A third index is made from the intact store: the damage is nowhere but in ``one``.
    three = tmp_path / "three"
    build(three, source, tiny)
    assert np.array_equal(vectors(three), vectors(two))


def test_a_query_refuses_a_model_changed_in_place(tmp_path: Path, tiny: str) -> None:
    index = tmp_path / "idx"
    build(index, corpus(tmp_path / "c", *PAPERS.values()), tiny)
    damage_in_place(model_file(index))
    result = run(["query", "graph neural networks", "--index", str(index)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert str(model_file(index)) in lines[0] and "sha256" in lines[0]
    assert "semsearch index --full" in lines[0]


@pytest.mark.parametrize("full", [False, True])
def test_a_refresh_never_reuses_a_damaged_model_nor_records_it(tmp_path: Path, tiny: str, full: bool) -> None:
    source = corpus(tmp_path / "c", *PAPERS.values())
    index, clean = tmp_path / "idx", tmp_path / "clean"
    build(index, source, tiny)
    damage_in_place(model_file(index))
    corpus(source, *PAPERS.values(), EXTRA)  # a refresh has something to encode
    refresh(index, *(["--full"] if full else []))
    build(clean, source, tiny)
    assert file_sha256(model_file(index)) == file_sha256(model_file(clean))  # taken from the store, intact
    assert np.allclose(vectors(index), vectors(clean), atol=1e-6)  # the new text encoded by the intact model
    assert verify(index)[0] == 0
    assert answers(index, "sparse attention transformers")[0] == answers(clean, "sparse attention transformers")[0]


def test_a_full_rebuild_takes_the_export_a_newer_recipe_made(
    tmp_path: Path, tiny: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new export recipe (7-bit int8 weights) reaches an index on --full; a plain refresh keeps its encoder."""
    from semsearch.encode import encoder_store

    source = corpus(tmp_path / "c", *PAPERS.values())
    index = tmp_path / "idx"
    build(index, source, tiny)
    old = file_sha256(model_file(index))

    def newer_export(model: str, folder: Path, precision: str) -> None:
        tiny_export(model, folder, precision, table()[::-1].copy())  # other weights: other bytes

    monkeypatch.setattr(encoder_store, "EXPORT_RECIPE", "a-newer-recipe")
    monkeypatch.setattr(encoder_choice, "_export", newer_export)
    corpus(source, *PAPERS.values(), EXTRA)
    refresh(index)
    assert file_sha256(model_file(index)) == old  # an appended refresh encodes as its vectors were encoded
    refresh(index, "--full")
    assert file_sha256(model_file(index)) != old
    assert verify(index)[0] == 0


def test_verify_names_a_model_whose_damage_the_manifest_recorded(tmp_path: Path, tiny: str) -> None:
    index = tmp_path / "idx"
    build(index, corpus(tmp_path / "c", *PAPERS.values()), tiny)
    path = model_file(index)
    damage_in_place(path)
    # What a writer that took the damaged bytes for sound recorded: the manifest agrees with the damage.
    manifest = live(index) / "manifest.json"
    data = json.loads(manifest.read_text())
    data["files"][f"{ENCODER_DIR}/{path.name}"]["sha256"] = file_sha256(path)
    manifest.write_text(json.dumps(data))
    status, output = verify(index)
    assert status != 0, output
    assert str(path) in output and "encoder.json" in output


def test_a_damaged_shared_export_is_made_again_never_copied(tmp_path: Path, tiny: str) -> None:
    source = corpus(tmp_path / "c", *PAPERS.values())
    build(tmp_path / "one", source, tiny)
    (shared,) = [p / model_filename("int8") for p in store_dir().iterdir() if p.is_dir()]
    damage_in_place(shared)
    result = run(
        ["index", str(source), "--index", str(tmp_path / "two"), "--model", tiny, "--backend", "onnx"]
        + ["--reading", "truncated", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert "is damaged; exporting" in result.output
    assert file_sha256(model_file(tmp_path / "two")) == file_sha256(model_file(tmp_path / "one"))
    assert np.array_equal(vectors(tmp_path / "two"), vectors(tmp_path / "one"))


# ---------------------------------------------------------------- cache poisoning


def cache_files(index: Path) -> list[Path]:
    return sorted((index / CACHE_DIR).glob("embeddings-*.sqlite"))


def test_the_cache_is_keyed_by_the_exact_export(tmp_path: Path, tiny: str) -> None:
    index = tmp_path / "idx"
    build(index, corpus(tmp_path / "c", *PAPERS.values()), tiny)
    (cache,) = cache_files(index)
    digest = file_sha256(model_file(index))[:16]
    assert cache.name.endswith(f"-{digest}.sqlite"), cache.name


def test_vectors_a_damaged_model_cached_are_never_served(tmp_path: Path, tiny: str) -> None:
    """The cache of a build that ran a damaged export (the key before this one named none) is not reused."""
    source = corpus(tmp_path / "c", *PAPERS.values())
    index, clean = tmp_path / "idx", tmp_path / "clean"
    build(index, source, tiny)
    (cache,) = cache_files(index)
    # Poison every row (as a damaged model's vectors), under the key the cache had before it named the export.
    legacy = cache.with_name(re.sub(r"-[0-9a-f]{16}\.sqlite$", ".sqlite", cache.name))
    conn = sqlite3.connect(cache)
    rows = conn.execute("SELECT key FROM codes").fetchall()
    conn.close()
    cache.rename(legacy)
    conn = sqlite3.connect(legacy)
    junk = encode_vector(np.ones(DIMENSION, dtype=np.float32) / np.sqrt(DIMENSION))
    conn.executemany("UPDATE codes SET code = ? WHERE key = ?", [(junk, k) for (k,) in rows])
    conn.commit()
    conn.close()
    out = json.loads(refresh(index, "--full"))
    assert out["encoded"] == len(PAPERS), out
    build(clean, source, tiny)
    assert np.allclose(vectors(index), vectors(clean), atol=1e-6)
    assert not legacy.exists()  # vectors of unknown provenance are dropped, not kept to be served later


# ---------------------------------------------------------------- non-finite vectors


def _poison(index: Path, text: str, dimension: int) -> None:
    """Put NaN in the cached vector of the document whose text is ``text``."""
    from semsearch import Index
    from semsearch.encode.cache import cache_key, embedding_key

    with Index.open(index, embedder=FakeEmbedder()) as idx:
        key = cache_key(embedding_key(next(d for d in idx.store.iter_documents() if d.text == text).embedding_text()))
    (cache,) = cache_files(index)
    conn = sqlite3.connect(cache)
    assert conn.execute("SELECT count(*) FROM codes WHERE key = ?", (key,)).fetchone() == (1,)
    nan = np.asarray([np.nan], dtype="<f4").tobytes() + bytes(dimension)  # a NaN scale: every value NaN
    conn.execute("UPDATE codes SET code = ? WHERE key = ?", (nan, key))
    conn.commit()
    conn.close()


def all_vectors(index: Path) -> np.ndarray:
    """Every vector file of the live version (its base and each appended segment's)."""
    return np.concatenate([np.load(p) for p in sorted(live(index).rglob("vectors.npy"))])


@pytest.mark.parametrize("kind", ["build", "full", "optimize", "append"])
def test_a_nan_in_the_cache_is_encoded_again_never_published(tmp_path: Path, kind: str) -> None:
    """Every writer that takes vectors from the cache: a rewrite, --full, --optimize, and an appended segment."""
    from tests.helpers import synthetic_abstracts

    fake = FakeEmbedder()
    source = corpus(tmp_path / "corpus", *PAPERS.values())
    (source / "bulk.txt").write_text("Papers\n\n" + "\n\n".join(synthetic_abstracts(20, seed=22)) + "\n")
    arriving = source / "c.txt"
    arriving.write_text(f"Papers\n\n{EXTRA}\n", encoding="utf-8")
    index = tmp_path / "idx"
    assert run(["index", str(source), "--index", str(index), "-q"], fake).exit_code == 0
    _poison(index, EXTRA if kind == "append" else PAPERS["graph"], fake.dimension)
    args = ["index", "--index", str(index), "-q", "--json"]
    if kind == "append":  # the paper leaves, then comes back: its vector is the cache's
        arriving.unlink()
        assert run(args, fake).exit_code == 0
        arriving.write_text(f"Papers\n\n{EXTRA}\n", encoding="utf-8")
    elif kind == "build":
        corpus(source, *PAPERS.values(), "A new paper on sparse attention for long documents.")
    result = run([*args, *{"full": ["--full"], "optimize": ["--optimize"]}.get(kind, [])], fake)
    assert result.exit_code == 0, result.output
    if kind == "append":
        assert json.loads(result.output)["segments"], result.output  # it took the append path
    assert np.isfinite(all_vectors(index)).all()
    assert run(["verify", "--index", str(index)], fake).exit_code == 0
    for paper in (*PAPERS.values(), EXTRA):
        got = run(["query", paper, "--index", str(index), "--json", "-k", "1"], fake)
        assert json.loads(got.output), paper  # every paper finds itself: none matches nothing


class NanEmbedder(FakeEmbedder):
    """An encoder that returns NaN for one text (a broken model, an overflow)."""

    def encode(self, texts: list[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:  # type: ignore[override]
        out = super().encode(texts, batch_size=batch_size, progress=progress)
        out[[i for i, t in enumerate(texts) if "quadratic" in t]] = np.nan
        return out


def test_an_encoder_giving_nan_stops_the_build_with_one_line(tmp_path: Path, small_corpus: Path) -> None:
    index = tmp_path / "idx"
    assert run(["index", str(small_corpus), "--index", str(index), "-q"], FakeEmbedder()).exit_code == 0
    before = (index / CURRENT).read_text()
    corpus(small_corpus.parent, *PAPERS.values(), EXTRA)
    result = run(["index", "--index", str(index), "-q"], NanEmbedder())
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.output, result.output
    assert "non-finite" in lines[0] and "quadratic" in lines[0]
    assert (index / CURRENT).read_text() == before
    assert run(["verify", "--index", str(index)], FakeEmbedder()).exit_code == 0


def test_verify_finds_a_nan_in_a_published_vector_file(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    index = tmp_path / "idx"
    assert run(["index", str(small_corpus), "--index", str(index), "-q"], fake).exit_code == 0
    path = live(index) / "vectors.npy"
    matrix = np.load(path)
    matrix[2] = np.nan
    np.save(path, matrix)
    manifest = live(index) / "manifest.json"
    data = json.loads(manifest.read_text())
    data["files"]["vectors.npy"]["sha256"] = file_sha256(path)  # recorded so: only the values tell
    manifest.write_text(json.dumps(data))
    result = run(["verify", "--index", str(index)], fake)
    assert result.exit_code != 0, result.output
    assert "vectors.npy" in result.output and "not finite" in result.output


# ---------------------------------------------------------------- every writer against a damaged encoder


def writer_args(kind: str, index: Path, source: Path) -> list[str]:
    """Prepare the sources for a writer (as the fault matrix does) and return its ``semsearch`` arguments."""
    idx = ["--index", str(index)]
    if kind == "build":  # a kept source changed: the refresh rewrites the index whole
        (source / "a.txt").write_text(f"Papers\n\n{PAPERS['fed']}\n\n{PAPERS['rl']}\n\n{EXTRA}\n", encoding="utf-8")
        return ["index", *idx, "-q"]
    if kind == "append":  # a file arrived: the refresh appends a segment
        (source / "c.txt").write_text(f"Papers\n\n{EXTRA}\n", encoding="utf-8")
        return ["index", *idx, "-q"]
    if kind == "remove":
        return ["remove", "--source", str(source / "b.txt"), *idx]
    return ["index", *idx, "--optimize", "-q"]


@pytest.mark.parametrize("kind", ["build", "append", "remove", "optimize"])
def test_every_writer_against_a_damaged_encoder(tmp_path: Path, tiny: str, kind: str) -> None:
    """Each writer either heals the export from the store or stops with one line; none publishes the damage."""
    from tests.helpers import assert_versions_intact, synthetic_abstracts, versions_snapshot

    source = tmp_path / "corpus"
    source.mkdir()
    (source / "a.txt").write_text(f"Papers\n\n{PAPERS['fed']}\n\n{PAPERS['rl']}\n", encoding="utf-8")
    (source / "b.txt").write_text(f"Papers\n\n{PAPERS['graph']}\n\n{PAPERS['llm']}\n", encoding="utf-8")
    # Enough documents that one arriving file is a small change (appended as a segment).
    (source / "bulk.txt").write_text("Papers\n\n" + "\n\n".join(synthetic_abstracts(20, seed=22)) + "\n")
    index = tmp_path / "idx"
    build(index, source, tiny)
    pristine = file_sha256(model_file(index))
    damage_in_place(model_file(index))
    before = versions_snapshot(index)
    result = run(writer_args(kind, index, source))
    assert_versions_intact(index, before)  # no published version changed, the damaged one included
    if result.exit_code != 0:
        assert result.exit_code == 2, result.output
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.output, result.output
        assert str(model_file(index)) in lines[0] and "semsearch index --full" in lines[0], lines[0]
        refresh(index, "--full")
    assert file_sha256(model_file(index)) == pristine
    assert verify(index)[0] == 0
    assert answers(index, PAPERS["graph"])


# ---------------------------------------------------------------- the real export (slow: loads the model)


@pytest.mark.slow
def test_the_real_export_damaged_in_one_index_is_caught_and_healed(
    tmp_path: Path, small_corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """all-MiniLM-L6-v2's int8 export (made once per test session's store): dd conv=notrunc into one index."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    one, two = tmp_path / "one", tmp_path / "two"
    for index in (one, two):
        result = run(["index", str(small_corpus), "--index", str(index), "-q"])
        assert result.exit_code == 0, result.output
    pristine = file_sha256(model_file(two))
    with model_file(one).open("r+b") as fh:  # bytes deep in the weights, same size, same inode
        fh.seek(model_file(one).stat().st_size // 2)
        fh.write(b"\x7f" * 4096)
    assert file_sha256(model_file(two)) == pristine
    query = ["query", "privacy of federated clients", "-k", "1", "--json"]
    clean = run([*query, "--index", str(two)])
    assert clean.exit_code == 0 and "does not match" not in clean.output, clean.output
    # The damaged export is refused at load; the source model at hand answers instead, and says why.
    damaged = run([*query, "--index", str(one)])
    assert damaged.exit_code == 0, damaged.output
    assert f"{model_file(one)} does not match the sha256" in damaged.output
    assert "semsearch index --full" in damaged.output
    status, output = verify(one)
    assert status != 0 and str(model_file(one)) in output, output
    refresh(one, "--full")
    assert file_sha256(model_file(one)) == pristine
    assert verify(one)[0] == 0
