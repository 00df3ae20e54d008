"""The ray engine: encoding on a local Ray gives the single-process build's index; every failure is one line."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from semsearch import BuildOptions, Index, SemsearchError, build_index
from semsearch.core.errors import ModelLoadError
from semsearch.encode import encoding
from semsearch.encode.cache import EmbeddingCache, embedding_key
from semsearch.encode.encoder_choice import EncoderChoice
from semsearch.encode.ray_engine import RayEngineError, ray_failure, write_shard
from semsearch.encode.ray_worker import EncoderActor, encoder_payload, from_text
from semsearch.store.layout import CACHE_DIR, CURRENT, doc_num
from tests.helpers import PAPERS, SEEDS, FakeEmbedder, needs_ray, run

QUERIES = ("federated privacy", "diffusion models for images", "graph neural networks", "reinforcement learning")


def opts(**kw: Any) -> BuildOptions:
    return BuildOptions(progress=False, **kw)


def contents(index: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The live version's vectors by document id, and its manifest."""
    version = index / (index / CURRENT).read_text().strip()
    with Index.open(index) as idx:
        ids = [row[0] for row in idx.store._query("SELECT id FROM documents")]
        vectors = {i: idx.vectors.get_one(doc_num(i)) for i in ids}
    return vectors, json.loads((version / "manifest.json").read_text())


def assert_same_index(a: Path, b: Path, embedder: FakeEmbedder | None = None) -> None:
    """Same ids, counts, model and bitwise-equal vectors, and the same top 10 for a few queries."""
    va, ma = contents(a)
    vb, mb = contents(b)
    assert sorted(va) == sorted(vb)
    assert ma["counts"] == mb["counts"] and ma["model"] == mb["model"]
    for doc_id, vector in va.items():
        assert np.array_equal(vector, vb[doc_id]), doc_id
    with Index.open(a, embedder=embedder) as ia, Index.open(b, embedder=embedder) as ib:
        for query in QUERIES:
            for mode in ("dense", "hybrid"):
                hits_a = [(h.id, round(h.score, 5)) for h in ia.search(query, k=10, mode=mode)]
                hits_b = [(h.id, round(h.score, 5)) for h in ib.search(query, k=10, mode=mode)]
                assert hits_a == hits_b, (query, mode)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Chunks of 2 texts, so the five-paper corpus spans three chunks (and several actor calls)."""
    monkeypatch.setattr(encoding, "ENCODE_CHUNK", 2)
    return 2


# --- without Ray ----------------------------------------------------------------------------------------


def test_missing_ray_is_one_line_and_leaves_no_index(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    index = tmp_path / "idx"
    result = run(["index", str(small_corpus), "--index", str(index), "--engine", "ray"], fake)
    assert result.exit_code == 2
    needs = "the ray engine needs the 'ray' extra (ray is missing): pip install 'semsearch[ray]'"
    assert result.output == f"Error: {needs}\n"
    assert not index.exists() and fake.calls == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--address", "ray://head:10001"], "--address and --actors apply to the ray engine only: add --engine ray"),
        (["--actors", "2"], "--address and --actors apply to the ray engine only: add --engine ray"),
        (["--engine", "ray", "--actors", "0"], "--actors must be a positive integer, got 0"),
    ],
)
def test_bad_engine_options_are_one_line(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, args: list[str], message: str
) -> None:
    index = tmp_path / "idx"
    result = run(["index", str(small_corpus), "--index", str(index), *args], fake)
    assert result.exit_code == 2
    assert result.output == f"Error: {message}\n"
    assert not index.exists()


def test_unknown_engine_in_the_library(tmp_path: Path, small_corpus: Path, fake: FakeEmbedder) -> None:
    with pytest.raises(SemsearchError, match=r"^unknown engine 'spark' \(choose from local, ray\)$"):
        build_index([str(small_corpus)], tmp_path / "idx", opts(engine="spark"), embedder=fake)
    assert not (tmp_path / "idx").exists()


def choice_of(embedder: FakeEmbedder) -> EncoderChoice:
    return EncoderChoice(embedder, embedder.backend, embedder.precision)


def test_actor_encodes_each_build_chunk_on_its_own(fake: FakeEmbedder) -> None:
    actor = EncoderActor([encoder_payload(choice_of(fake))], batch_size=8)
    texts = list(PAPERS.values())
    batch = {"chunk": np.array([3, 3, 4, 4, 4]), "key": np.array([embedding_key(t) for t in texts]), "text": texts}
    out = actor(batch)
    # The actor's encoder is a copy; the chunks reach it as two separate calls, in the build's order.
    assert actor.embedder.calls == [texts[:2], texts[2:]]  # type: ignore[attr-defined]
    assert list(out["key"]) == list(batch["key"])
    assert np.array_equal(out["vector"], fake.encode(texts))


class Short(FakeEmbedder):
    """Returns one vector too few."""

    def encode(self, texts: Sequence[str], *, batch_size: int = 32, progress: bool = False) -> np.ndarray:
        return super().encode(texts)[:-1]


class Drifting(FakeEmbedder):
    """Unpickles (on a Ray worker) as another model: what a node with other model files would load."""

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, fingerprint="drifted")


def test_actor_errors_travel_back_as_data(fake: FakeEmbedder) -> None:
    actor = EncoderActor([encoder_payload(choice_of(Short()))], batch_size=8)
    out = actor({"chunk": np.array([0, 0]), "key": np.array(["a", "b"]), "text": ["one text", "another"]})
    assert list(out["error"]) == ["SemsearchError: encoder returned shape (1, 64), expected (2, 64)"] * 2
    payload = encoder_payload(choice_of(fake))
    for bad, expected in [
        ({**payload, "semsearch": "0.0.1"}, "the driver 0.0.1: install the same semsearch[ray] on every node"),
        (
            {**payload, "fingerprint": "other"},
            "differs from the driver's (other): install the same model files on every node",
        ),
    ]:
        # A failure to load is kept and reported with the first batch, so Ray does not restart the actor.
        text = EncoderActor([bad], batch_size=8)({"chunk": np.array([0]), "key": np.array(["a"]), "text": ["x"]})[
            "error"
        ][0]
        assert text.endswith(expected), text
    assert type(from_text("ModelLoadError: gone")) is ModelLoadError
    assert type(from_text("RayEngineError: a Ray worker has ...")) is RayEngineError
    assert str(from_text("NotOurs: odd")) == "odd"


def test_crashes_inside_ray_become_one_line() -> None:
    remote = RuntimeError(
        'ray::MapWorker(MapBatches(EncoderActor)).submit() (pid=1)\n  File "x.py", line 1, in f\n'
        "ModuleNotFoundError: No module named 'semsearch'\n\nThe above exception was the direct cause of the "
        "following exception:\n\nray.exceptions.UserCodeException: UDF failed to process a data block."
    )
    wrapped = RuntimeError("outer")
    wrapped.__cause__ = remote
    assert str(ray_failure(wrapped)) == (
        "encoding on Ray failed: ModuleNotFoundError: No module named 'semsearch' "
        "(install semsearch[ray] on every Ray node)"
    )
    assert str(ray_failure(ValueError("boom\nmore"))) == "encoding on Ray failed: ValueError: boom"


@needs_ray
def test_bad_ray_address_is_one_line_within_seconds(
    tmp_path: Path, small_corpus: Path, fake: FakeEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    # As in a fresh process (this module's tests may share a local Ray, which a build would reuse as it is).
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:9")  # honoured like --address; nothing listens on port 9
    started = time.perf_counter()
    result = run(["index", str(small_corpus), "--index", str(tmp_path / "idx"), "--engine", "ray"], fake)
    assert result.exit_code == 2
    assert result.output == (
        "Error: cannot reach Ray at 127.0.0.1:9: [Errno 111] Connection refused "
        "(start one with `ray start --head`, then pass ray://HEAD:10001 or HEAD:6379)\n"
    )
    assert time.perf_counter() - started < 30 and not (tmp_path / "idx").exists()
    bad_port = ["--engine", "ray", "--address", "ray://127.0.0.1:notaport"]
    result = run(["index", str(small_corpus), "--index", str(tmp_path / "idx"), *bad_port], fake)
    assert result.exit_code == 2 and result.output.startswith("Error: cannot reach Ray at ray://127.0.0.1:notaport: ")


# --- on a local Ray, with the fake encoder ---------------------------------------------------------------


@needs_ray
def test_ray_build_equals_local_build(
    local_ray: ModuleType, tmp_path: Path, small_corpus: Path, small_chunks: int
) -> None:
    local = build_index([str(small_corpus)], tmp_path / "local", opts(), embedder=FakeEmbedder())
    shipped = FakeEmbedder()
    on_ray = build_index([str(small_corpus)], tmp_path / "ray", opts(engine="ray", actors=2), embedder=shipped)
    assert shipped.calls == []  # every text was encoded by the actors' copies, none in this process
    assert (on_ray.engine, local.engine) == ("ray", "local")
    same = ("read", "documents", "duplicates", "encoded", "cached", "added", "removed", "model", "backend")
    assert {k: getattr(on_ray, k) for k in same} == {k: getattr(local, k) for k in same}
    assert on_ray.encoded == 5
    assert_same_index(tmp_path / "local", tmp_path / "ray", embedder=FakeEmbedder())
    assert not list((tmp_path / "ray" / CACHE_DIR).glob("shards-*"))  # removed once the cache holds them

    again = build_index([str(small_corpus)], tmp_path / "ray", opts(engine="ray"), embedder=shipped)
    assert (again.encoded, again.cached) == (0, 5)

    small_corpus.write_text(small_corpus.read_text() + "\nA new abstract about protein folding with diffusion.\n")
    more = build_index([str(small_corpus)], tmp_path / "ray", opts(engine="ray"), embedder=shipped)
    assert (more.encoded, more.cached, more.added) == (1, 5, 1)


@needs_ray
def test_ray_build_through_the_cli(
    local_ray: ModuleType, tmp_path: Path, small_corpus: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    capfd.readouterr()
    index = tmp_path / "idx"
    args = ["index", str(small_corpus), "--index", str(index), "--engine", "ray", "--actors", "1"]
    result = run(args, FakeEmbedder())
    assert result.exit_code == 0, result.output
    assert "encoded: 5, from cache: 0" in result.output and ", encoded on ray) in " in result.output
    summary = json.loads(run(["index", "--index", str(index), "--engine", "ray", "--json"], FakeEmbedder()).output)
    assert (summary["engine"], summary["encoded"], summary["cached"]) == ("ray", 0, 5)
    assert capfd.readouterr().err == ""  # no Ray or Ray Data log lines on the terminal


@pytest.mark.parametrize("engine", [pytest.param("ray", marks=needs_ray), "local"])
def test_leftover_shards_are_loaded_into_the_cache_and_removed(
    request: pytest.FixtureRequest, tmp_path: Path, small_corpus: Path, small_chunks: int, engine: str
) -> None:
    if engine == "ray":
        request.getfixturevalue("local_ray")
    fake = FakeEmbedder()
    index = tmp_path / "idx"
    cache = EmbeddingCache(index / CACHE_DIR, fake.fingerprint, "fake-fp32", fake.dimension)
    # What a build killed between writing a shard and committing it leaves: one good shard, one torn one,
    # and the shards of another model.
    killed = cache.path.parent / "shards-v-000001-killed"
    killed.mkdir()
    (killed / "meta.json").write_text(json.dumps({"cache": cache.path.name, "dimension": fake.dimension}))
    marker = np.zeros(fake.dimension, dtype=np.float32)
    marker[0] = 1.0  # not what the fake would compute: proves the vector came from the shard
    write_shard(killed, 0, [embedding_key(PAPERS["vision"])], marker[None, :])
    (killed / "shard-000001.keys.json").write_text(json.dumps([embedding_key(PAPERS["rl"])]))
    (killed / "shard-000001.npy").write_bytes(b"torn")
    other = cache.path.parent / "shards-v-000001-other-model"
    other.mkdir()
    (other / "meta.json").write_text(json.dumps({"cache": "embeddings-other.sqlite", "dimension": 8}))
    write_shard(other, 0, [embedding_key(PAPERS["rl"])], np.ones((1, 8), dtype=np.float32))
    cache.close()

    summary = build_index([str(small_corpus)], index, opts(engine=engine), embedder=fake)
    assert (summary.encoded, summary.cached) == (4, 1)
    vectors, _ = contents(index)
    assert sum(np.array_equal(v, marker) for v in vectors.values()) == 1
    assert not list((index / CACHE_DIR).glob("shards-*"))


@needs_ray
def test_encoder_failure_on_ray_is_one_line_and_leaves_no_index(
    local_ray: ModuleType, tmp_path: Path, small_corpus: Path
) -> None:
    with pytest.raises(SemsearchError, match=r"^encoder returned shape \(4, 64\), expected \(5, 64\)$"):
        build_index([str(small_corpus)], tmp_path / "idx", opts(engine="ray"), embedder=Short())
    assert not (tmp_path / "idx").exists()
    with pytest.raises(ModelLoadError, match=r"^model 'fake-bow' on a Ray worker \(fingerprint drifted\) differs"):
        build_index([str(small_corpus)], tmp_path / "idx", opts(engine="ray"), embedder=Drifting())
    assert not (tmp_path / "idx").exists()


@needs_ray
def test_an_encoder_that_cannot_travel_is_one_line(local_ray: ModuleType, tmp_path: Path, small_corpus: Path) -> None:
    fake = FakeEmbedder()
    fake.lock = threading.Lock()  # type: ignore[attr-defined]
    with pytest.raises(RayEngineError, match=r"^encoder 'fake-bow' cannot be shipped to Ray workers: "):
        build_index([str(small_corpus)], tmp_path / "idx", opts(engine="ray"), embedder=fake)
    assert not (tmp_path / "idx").exists()


# --- on a local Ray, with the real model ------------------------------------------------------------------


@needs_ray
@pytest.mark.slow
def test_real_model_on_ray_equals_the_single_process_build(
    local_ray: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One text, one vector: the local build encodes the 91 seed documents as one chunk on two threads, the
    # Ray actors as chunks of 32 on one thread each, and every vector still comes out the same bytes.
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    local = build_index([str(SEEDS)], tmp_path / "local", opts())
    monkeypatch.setattr(encoding, "ENCODE_CHUNK", 32)
    # The Ray index starts as a copy without the cache: --full re-encodes everything yet reuses the export.
    shutil.copytree(tmp_path / "local", tmp_path / "ray", ignore=shutil.ignore_patterns(CACHE_DIR))
    on_ray = build_index([str(SEEDS)], tmp_path / "ray", opts(engine="ray", full=True))
    assert (local.encoded, on_ray.encoded, on_ray.documents, on_ray.backend) == (91, 91, 91, "onnx")
    assert_same_index(tmp_path / "local", tmp_path / "ray")
    again = build_index([str(SEEDS)], tmp_path / "ray", opts(engine="ray"))
    assert (again.encoded, again.cached) == (0, 91)


@needs_ray
@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (
            lambda keys: [(keys[:1], np.ones((1, 64), np.float32))],
            r"^Ray returned no vector for 4 texts; run the build",
        ),
        (lambda keys: [(keys, np.ones((len(keys), 3), np.float32))], r"^Ray returned vectors of shape \(5, 3\) for 5 "),
    ],
)
def test_incomplete_or_malformed_answers_from_ray_are_one_line(
    local_ray: ModuleType,
    tmp_path: Path,
    small_corpus: Path,
    monkeypatch: pytest.MonkeyPatch,
    answer: Any,
    message: str,
) -> None:
    from semsearch.encode import ray_engine

    def fake_run(ray: ModuleType, choice: EncoderChoice, chunks: list[list[tuple[str, str]]], *_: Any) -> Any:
        return iter(answer([k for c in chunks for k, _ in c]))

    monkeypatch.setattr(ray_engine, "_run", fake_run)
    with pytest.raises(RayEngineError, match=message):
        build_index([str(small_corpus)], tmp_path / "idx", opts(engine="ray"), embedder=FakeEmbedder())
    assert not (tmp_path / "idx").exists()


@needs_ray
def test_ray_that_will_not_start_or_connect_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    import ray

    from semsearch.encode.ray_engine import ray_session

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("Failed to connect to Ray cluster at 10.0.0.1:6379\nmore")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", refuse)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    with socket.create_server(("127.0.0.1", 0)) as listener:  # something listens, as a GCS would
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        with pytest.raises(RayEngineError) as caught, ray_session(address):
            pass
    assert str(caught.value) == (
        f"cannot connect to Ray at {address}: Failed to connect to Ray cluster at 10.0.0.1:6379 (a cluster with "
        "token authentication needs RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN or ~/.ray/auth_token)"
    )
    local = pytest.raises(RayEngineError, match=r"^cannot start a local Ray: Failed to connect to Ray cluster at ")
    with local, ray_session():
        pass
