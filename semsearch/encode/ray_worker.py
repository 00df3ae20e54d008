"""What runs on the Ray nodes: the build's encoder as it travels (``encoder_payload``), rebuilt in an actor
(``load_payload``), the actor that encodes a chunk at a time, and what comes back (vectors, or an error as text).

The nodes of a real cluster need ``semsearch[ray]`` (same version) installed: Ray imports this module there.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from semsearch.core.errors import ModelLoadError, RayEngineError, SemsearchError
from semsearch.core.version import __version__
from semsearch.encode.embedder import Embedder
from semsearch.encode.encoder_choice import EncoderChoice
from semsearch.encode.onnx_backend import first_line
from semsearch.encode.sentence_runs import SentenceText
from semsearch.store.manifest import ModelInfo

SENTENCES_MARK = "\0sentences:"  # a row that is a document to read by sentences (JSON after the mark), not a text
ACTOR_THREADS = 1


def encoder_payload(choice: EncoderChoice) -> dict[str, Any]:
    """What an actor needs to rebuild the build's encoder on any node, as plain picklable data."""
    from semsearch.encode.onnx_backend import SPEC_FILE, TOKENIZER_FILE, OnnxEmbedder, model_filename
    from semsearch.encode.torch_backend import SentenceTransformerEmbedder

    enc = choice.embedder
    base = {"semsearch": __version__, "fingerprint": enc.fingerprint, "dimension": enc.dimension}
    if isinstance(enc, OnnxEmbedder):
        # Only the files this precision loads: the other precision's model would travel to every actor for nothing.
        names = (SPEC_FILE, TOKENIZER_FILE, model_filename(enc.precision))
        files = {name: (enc.folder / name).read_bytes() for name in names}
        return {**base, "kind": "onnx", "precision": enc.precision, "files": files}
    if isinstance(enc, SentenceTransformerEmbedder):
        # A model name resolves on each node (the bundled MiniLM comes with semsearch's dependencies);
        # a local path must exist on every node.
        return {**base, "kind": "torch", "model": enc.name}
    # A custom encoder travels pickled (Ray uses cloudpickle): its class must be importable on the
    # workers, or be defined in __main__.
    return {**base, "kind": "object", "embedder": enc}


def load_payload(payload: dict[str, Any], threads: int = ACTOR_THREADS) -> Embedder:
    """Rebuild an encoder from ``encoder_payload`` output (runs inside an actor)."""
    if payload["semsearch"] != __version__:
        raise RayEngineError(
            f"a Ray worker has semsearch {__version__}, the driver {payload['semsearch']}: "
            "install the same semsearch[ray] on every node"
        )
    embedder: Embedder
    if payload["kind"] == "onnx":
        from semsearch.encode.onnx_backend import OnnxEmbedder

        folder = Path(tempfile.mkdtemp(prefix="semsearch-encoder-"))
        try:
            for name, data in payload["files"].items():
                (folder / name).write_bytes(data)
            embedder = OnnxEmbedder.load(folder, payload["precision"], threads=threads)
        finally:
            # ONNX Runtime and tokenizers hold their own copies once loaded.
            shutil.rmtree(folder, ignore_errors=True)
    elif payload["kind"] == "torch":
        import torch

        from semsearch.encode.torch_backend import SentenceTransformerEmbedder

        torch.set_num_threads(threads)
        embedder = SentenceTransformerEmbedder(payload["model"])
    else:
        embedder = payload["embedder"]
    driver = ModelInfo(embedder.name, payload["fingerprint"], payload["dimension"])
    if not driver.matches(embedder.fingerprint, embedder.dimension):
        raise ModelLoadError(
            f"model {embedder.name!r} on a Ray worker (fingerprint {embedder.fingerprint}) differs from the "
            f"driver's ({payload['fingerprint']}): install the same model files on every node"
        )
    return embedder


class EncoderActor:
    """A Ray Data actor: loads the encoder once, then encodes each batch it is given chunk by chunk.

    A SemsearchError (in loading or encoding) comes back as data in the ``error`` column: Ray wraps raised
    exceptions in its own types, and some Ray versions drop the original from the chain.
    """

    def __init__(self, payload_box: list[Any], batch_size: int, threads: int = ACTOR_THREADS) -> None:
        self.batch_size = batch_size
        self.failure = ""
        # The payload comes boxed in a list so that Ray passes the ObjectRef through unresolved (a
        # top-level ref would be fetched before the actor starts, by the worker that schedules it).
        payload = payload_box[0]
        try:
            if not isinstance(payload, dict):
                import ray

                payload = ray.get(payload)
            self.embedder: Embedder | None = load_payload(payload, threads)
        except SemsearchError as exc:
            self.embedder, self.failure = None, as_text(exc)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        keys = np.asarray(batch["key"])
        texts = [str(t) for t in batch["text"]]
        try:
            if texts and texts[0].startswith(SENTENCES_MARK):
                keys, vectors = self._read_sentences(keys, texts)
            else:
                vectors = self._encode(np.asarray(batch["chunk"]), texts)
            failure = ""
        except SemsearchError as exc:
            vectors, failure = np.zeros((len(keys), 1), dtype=np.float32), as_text(exc)
        return {"key": keys, "vector": vectors, "error": np.full(len(keys), failure or self.failure, dtype=object)}

    def _read_sentences(self, keys: np.ndarray, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each document's vector and its sentences' (``--reading sentences``), keyed as the cache is."""
        if self.embedder is None:
            return keys, np.zeros((len(keys), 1), dtype=np.float32)
        read = getattr(self.embedder, "encode_sentences", None)
        if not callable(read):
            raise SemsearchError(f"encoder {self.embedder.name!r} on a Ray worker cannot read sentences")
        items = [_sentence_item(t) for t in texts]
        out_keys: list[str] = []
        out_vectors: list[np.ndarray] = []
        for key, item, (document, sentences) in zip(keys.tolist(), items, read(items), strict=True):
            out_keys.extend([str(key), *item.keys()])
            out_vectors.extend([np.asarray(document, dtype=np.float32), *np.asarray(sentences, dtype=np.float32)])
        return np.asarray(out_keys, dtype=object), np.stack(out_vectors)

    def _encode(self, chunks: np.ndarray, texts: list[str]) -> np.ndarray:
        if self.embedder is None:
            return np.zeros((len(texts), 1), dtype=np.float32)
        vectors = np.zeros((len(texts), self.embedder.dimension), dtype=np.float32)
        # Encode each build chunk on its own, so an encoder that batches (torch) sees a local build's batch-mates.
        for chunk in dict.fromkeys(chunks.tolist()):
            rows = np.flatnonzero(chunks == chunk)
            got = self.embedder.encode([texts[i] for i in rows], batch_size=self.batch_size)
            if got.shape != (len(rows), self.embedder.dimension):
                raise SemsearchError(
                    f"encoder returned shape {got.shape}, expected ({len(rows)}, {self.embedder.dimension})"
                )
            vectors[rows] = got
        return vectors


def sentence_row(item: SentenceText) -> str:
    """A document read by sentences as an actor gets it: its text and spans as JSON after ``SENTENCES_MARK``."""
    return SENTENCES_MARK + json.dumps({"text": item.text, "spans": item.spans, "title_end": item.title_end})


def _sentence_item(text: str) -> SentenceText:
    """The document a ``sentence_row`` carries."""
    data = json.loads(text[len(SENTENCES_MARK) :])
    spans = tuple((int(a), int(b)) for a, b in data["spans"])
    return SentenceText(str(data["text"]), spans, int(data["title_end"]))


def as_text(exc: SemsearchError) -> str:
    """An error as ``ClassName: first line``, to travel back from an actor as data."""
    return f"{type(exc).__name__}: {first_line(exc)}"


def from_text(text: str) -> SemsearchError:
    """The error ``as_text`` described, as its own class where semsearch defines it."""
    from semsearch.core import errors

    name, _, message = text.partition(": ")
    cls = getattr(errors, name, None) or globals().get(name)
    if isinstance(cls, type) and issubclass(cls, SemsearchError):
        try:
            return cls(message)
        except TypeError:  # a class whose message is built from parts (ExtraNotInstalledError): keep the text
            pass
    return SemsearchError(message)
