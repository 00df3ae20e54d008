"""Distributed encoding on Ray Data: a pool of encoder actors over ``map_batches``, results written as shards.

The driver sends only the texts the embedding cache lacks, in the very chunks ``encode_with_cache`` would
encode (``ENCODE_CHUNK`` texts, same order). The ONNX encoder runs each text alone, so its vectors are
bitwise a local build's whatever the chunking (and the actors' single thread); keeping the chunks gives a
torch or custom encoder, whose vectors may depend on batch-mates, a local build's batches too. Vectors
stream back (``iter_batches``), are written as a shard (``.npy`` + ``.keys.json``) under
``<index>/cache/shards-<build>/`` and committed to the cache as they arrive; the index is then assembled
from the cache, exactly as a local build does. A killed build resumes from the cache; the next build loads
any shard it left behind and deletes the folder.

The encoder reaches the actors through the object store (the ONNX export's bytes, or the model name for
torch, or the pickled embedder object), so no shared filesystem is needed; what runs on the nodes is
``ray_worker.py``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import socket
import sys
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from semsearch.core.errors import ExtraNotInstalledError, RayEngineError, SemsearchError
from semsearch.core.errors import RayUnavailableError as RayUnavailableError  # the old name, still importable here
from semsearch.core.options import ENGINES
from semsearch.core.records import Document
from semsearch.encode.cache import EmbeddingCache
from semsearch.encode.encoder_choice import EncoderChoice
from semsearch.encode.encoding import CachePlan, progress_bar
from semsearch.encode.onnx_backend import first_line
from semsearch.encode.ray_worker import ACTOR_THREADS, EncoderActor, encoder_payload, from_text, sentence_row

# Ray reserves this many CPUs per actor (each runs one ONNX thread). With whole CPUs, a pool of one actor
# per CPU leaves Ray Data's own tasks none, which stalls a local Ray on a small machine.
ACTOR_CPUS = 0.5
SHARDS_PREFIX = "shards-"
_META = "meta.json"
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


def import_ray() -> ModuleType:
    """The ``ray`` module with Ray Data loaded, or a one-line error naming the extra to install."""
    try:
        import ray
        import ray.data  # noqa: F401  - the engine needs Ray Data, not just Ray Core
    except ImportError as exc:
        raise ExtraNotInstalledError("ray", "the ray engine", exc.name) from exc
    return ray


def check_options(engine: str, address: str | None, actors: int | None) -> None:
    """Reject engine settings that cannot work, before a build touches the index (ray must be importable)."""
    if engine not in ENGINES:
        raise SemsearchError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    if engine != "ray" and (address is not None or actors is not None):
        raise SemsearchError("--address and --actors apply to the ray engine only: add --engine ray")
    if actors is not None and actors < 1:
        raise SemsearchError(f"--actors must be a positive integer, got {actors}")
    if engine == "ray":
        import_ray()


@contextlib.contextmanager
def ray_session(address: str | None = None) -> Iterator[ModuleType]:
    """Ray, connected: to ``address`` (or ``RAY_ADDRESS``), else a quiet local Ray; shuts down what it started."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    target = address or os.environ.get("RAY_ADDRESS") or None
    if target:
        check_reachable(target)
    try:
        if target:
            ray.init(address=target, logging_level=logging.ERROR, log_to_driver=False)
        else:
            from semsearch.encode.onnx_backend import default_threads

            # Local workers import what this process imports (a source checkout, the tests' fake encoder).
            path = os.pathsep.join(p for p in sys.path if p and os.path.exists(p))
            ray.init(
                num_cpus=default_threads(),
                include_dashboard=False,
                # ERROR, not WARNING: a throwaway local Ray otherwise prints a token-auth notice on every build.
                logging_level=logging.ERROR,
                log_to_driver=False,
                runtime_env={"env_vars": {"PYTHONPATH": path}},
            )
    except Exception as exc:  # ConnectionError, ValueError, RuntimeError, ... depending on the address kind
        if not target:
            raise RayEngineError(f"cannot start a local Ray: {first_line(exc)}") from exc
        # Ray logs the real cause (often a missing auth token) only as retry warnings, then raises a bare
        # "failed to connect"; name the usual fix.
        raise RayEngineError(
            f"cannot connect to Ray at {target}: {first_line(exc)} (a cluster with token authentication "
            "needs RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN or ~/.ray/auth_token)"
        ) from exc
    try:
        yield ray
    finally:
        ray.shutdown()


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds when nothing listens at a Ray address (ray.init retries a dead one for minutes)."""
    if address in ("auto", "local"):
        return
    client = address.startswith("ray://")
    hostport = address.removeprefix("ray://").split("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    if not host:
        host, port = hostport, ""
    try:
        # The defaults of `ray start --head`: Ray Client on 10001, the GCS on 6379.
        with socket.create_connection((host.strip("[]"), int(port or (10001 if client else 6379))), timeout=timeout):
            pass
    except (OSError, ValueError) as exc:
        raise RayEngineError(
            f"cannot reach Ray at {address}: {first_line(exc)} (start one with `ray start --head`, "
            "then pass ray://HEAD:10001 or HEAD:6379)"
        ) from exc


def encode_with_ray(
    choice: EncoderChoice,
    documents: Sequence[Document],
    cache: EmbeddingCache,
    *,
    batch_size: int,
    progress: bool,
    address: str | None = None,
    actors: int | None = None,
    build: str = "build",
) -> tuple[np.ndarray, int]:
    """Like ``encode_with_cache``, with the missing texts encoded on Ray; returns (vectors, encoded)."""
    enc = choice.embedder
    recover_shards(cache)
    # The same plan and chunks as encode_with_cache, so even a batching encoder's vectors match a local build.
    plan = CachePlan.make(
        documents, cache, choice.read_chars(), every=choice.every_window, sentences=choice.reads_sentences
    )
    touched = plan.touched()
    if plan.missing:
        # With a sentence reading a document's runs give its vector and its sentences': one row per document.
        chunks = list(plan.document_chunks() if plan.sentences else plan.chunks())
        shards = cache.path.parent / f"{SHARDS_PREFIX}{build}"
        shards.mkdir(parents=True, exist_ok=True)
        (shards / _META).write_text(json.dumps({"cache": cache.path.name, "dimension": enc.dimension}))
        bar = progress_bar(len(plan.missing), progress)
        try:
            with ray_session(address) as ray:
                rows = [[(plan.keys[i], _row_text(plan, i)) for i in c] for c in chunks]
                for seq, (got_keys, vectors) in enumerate(_run(ray, choice, rows, batch_size, actors)):
                    if vectors.shape != (len(got_keys), enc.dimension):
                        raise RayEngineError(f"Ray returned vectors of shape {vectors.shape} for {len(got_keys)} texts")
                    write_shard(shards, seq, got_keys, vectors)
                    cache.put_many(zip(got_keys, vectors, strict=True))
                    bar(len(got_keys))
        finally:
            bar(0, close=True)
            # Every shard written is committed to the cache by now; only a killed process leaves shards behind.
            shutil.rmtree(shards, ignore_errors=True)
        plan.known = cache.get_many(plan.keys)
    lost = plan.absent()
    if lost:
        raise RayEngineError(f"Ray returned no vector for {lost} texts; run the build again to encode them")
    return plan.matrix(enc.dimension), touched


def _row_text(plan: CachePlan, row: int) -> str:
    """What an actor gets for a row: its text, or with a sentence reading the document's text and spans as JSON."""
    return sentence_row(plan.sentences[row]) if plan.sentences else plan.texts[row]


def _run(
    ray: ModuleType,
    choice: EncoderChoice,
    chunks: list[list[tuple[str, str]]],
    batch_size: int,
    actors: int | None,
) -> Iterator[tuple[list[str], np.ndarray]]:
    """Encode chunks on an actor pool; yields (keys, vectors) as results arrive, in any order."""
    import pyarrow as pa

    data = ray.data
    try:
        payload_ref = ray.put(encoder_payload(choice))
    except Exception as exc:  # cloudpickle raises TypeError, PicklingError, ... for objects it cannot ship
        raise RayEngineError(
            f"encoder {choice.embedder.name!r} cannot be shipped to Ray workers: {first_line(exc)}"
        ) from exc
    cpus = int(ray.cluster_resources().get("CPU", 1))
    pool = max(1, min(actors or max(1, cpus // ACTOR_THREADS), len(chunks)))
    # One Arrow block per build chunk, and map_batches batches of one chunk: each actor call gets exactly
    # one chunk (the actor still splits a batch by chunk id should Ray ever merge blocks).
    blocks = [
        pa.table({"chunk": [n] * len(c), "key": [k for k, _ in c], "text": [t for _, t in c]})
        for n, c in enumerate(chunks)
    ]
    ctx = data.DataContext.get_current()
    # Our own bar counts documents; Ray Data's bars and start-up banner would fight with it.
    saved = {
        name: getattr(ctx, name) for name in ("enable_progress_bars", "print_on_execution_start") if hasattr(ctx, name)
    }
    quiet = [logging.getLogger(name) for name in ("ray", "ray.data")]
    levels = [lg.level for lg in quiet]
    for name in saved:
        setattr(ctx, name, False)
    for lg in quiet:
        # Ray Data logs each failure it then raises; the build reports it once, as one line.
        lg.setLevel(logging.CRITICAL)
    try:
        args: dict[str, Any] = {
            "fn_constructor_args": ([payload_ref], batch_size, ACTOR_THREADS),
            "compute": data.ActorPoolStrategy(size=pool),
            "num_cpus": ACTOR_CPUS,
            "batch_size": max(len(c) for c in chunks),
            "batch_format": "numpy",
        }
        try:
            with warnings.catch_warnings():
                # Ray Data restarts actors by default, and Ray's C++ core then logs an error line per actor
                # on the terminal (ray-project/ray#53727). Without restarts a lost actor fails the build, and
                # the rerun resumes from the cache. Ray deprecates such remote args without a replacement yet.
                warnings.simplefilter("ignore", DeprecationWarning)
                ds = data.from_arrow(blocks).map_batches(EncoderActor, **args, max_restarts=0)
        except TypeError:  # a Ray that no longer takes remote args: its defaults, and its log lines
            ds = data.from_arrow(blocks).map_batches(EncoderActor, **args)
        for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
            failures = [str(e) for e in batch["error"] if e]
            if failures:
                raise from_text(failures[0])
            yield [str(k) for k in batch["key"]], np.asarray(batch["vector"], dtype=np.float32)
    except SemsearchError:
        raise
    except Exception as exc:  # a crash outside semsearch's errors, wrapped by Ray (RayTaskError, ...)
        raise ray_failure(exc) from exc
    finally:
        for name, value in saved.items():
            setattr(ctx, name, value)
        for lg, level in zip(quiet, levels, strict=True):
            lg.setLevel(level)


def ray_failure(exc: BaseException) -> SemsearchError:
    """One line for a failure inside Ray, named after the worker's own exception (not Ray's wrappers)."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = getattr(cur, "cause", None) or cur.__cause__ or cur.__context__
    # Ray's RayTaskError carries the worker's traceback as text: the first exception line that is not
    # Ray's own names the real failure.
    found = [m for m in _EXCEPTION_LINE.findall("\n".join(str(e) for e in seen)) if not m[0].startswith("ray.")]
    name, message = found[0] if found else (type(seen[-1]).__name__, first_line(seen[-1]))
    short = name.rsplit(".", 1)[-1]
    hint = " (install semsearch[ray] on every Ray node)" if "No module named 'semsearch" in message else ""
    return RayEngineError(f"encoding on Ray failed: {short}: {message.strip()}{hint}")


def write_shard(folder: Path, seq: int, keys: Sequence[str], vectors: np.ndarray) -> None:
    """Write one shard: keys as JSON, vectors as .npy (the .npy lands last, so its presence means complete)."""
    stem = f"shard-{seq:06d}"
    (folder / f"{stem}.keys.json").write_text(json.dumps(list(keys)), encoding="utf-8")
    tmp = folder / f".{stem}.npy.tmp"
    with tmp.open("wb") as fh:
        np.save(fh, np.asarray(vectors, dtype="<f4"), allow_pickle=False)
    os.replace(tmp, folder / f"{stem}.npy")


def recover_shards(cache: EmbeddingCache) -> int:
    """Put the vectors of shards a killed Ray build left behind into the cache, then delete them; returns count."""
    recovered = 0
    for folder in sorted(cache.path.parent.glob(f"{SHARDS_PREFIX}*")):
        try:
            meta = json.loads((folder / _META).read_text(encoding="utf-8"))
            matches = meta.get("cache") == cache.path.name and meta.get("dimension") == cache.dimension
        except (OSError, ValueError, AttributeError):
            matches = False
        # Shards of another model or precision are dropped: they only ever hold what was not yet cached.
        for npy in sorted(folder.glob("shard-*.npy")) if matches else []:
            try:
                keys = json.loads(npy.with_suffix(".keys.json").read_text(encoding="utf-8"))
                vectors = np.load(npy, allow_pickle=False)
            except (OSError, ValueError):
                continue  # a torn shard: its texts are simply encoded again
            if vectors.ndim == 2 and vectors.shape == (len(keys), cache.dimension):
                cache.put_many(zip((str(k) for k in keys), vectors.astype(np.float32), strict=True))
                recovered += len(keys)
        shutil.rmtree(folder, ignore_errors=True)
    return recovered
