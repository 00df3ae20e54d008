"""The choices and defaults every face offers (library, CLI, server, MCP), in one leaf module.

The modules that own a behaviour import their choice list from here, and the CLI builds its options from the
same names, so a new mode or backend is one edit and ``semsearch --help`` never imports numpy to learn them.
"""

from __future__ import annotations

MODES = ("hybrid", "dense", "lexical")  # search.py: how hits are scored; the first is the default
BACKENDS = ("onnx", "torch")  # encoder_choice.py: the runtime that encodes; the first is the default
PRECISIONS = ("fp32", "int8")  # onnx_backend.py: ONNX weights
DEFAULT_PRECISION = "int8"
# How the ONNX runtime computes a vector (onnx_backend.py): "alone", each text in its own unpadded run, so a
# vector depends on its text only. Recorded in the manifest and the embedding cache's key, so vectors of the
# earlier batched regime (whose int8 activation scales depended on batch-mates) are never taken for these.
ONNX_REGIME = "alone"


def encoder_regime(backend: str) -> str:
    """The regime a backend's vectors are computed under ("" where none is promised: torch)."""
    return ONNX_REGIME if backend == "onnx" else ""


# How a document's vector reads an abstract longer than the encoder's window (encode/windows.py): "truncated", the
# encoder's first window only; "pooled", the unit mean of the whole-text vector and its sentence windows past the
# cut. Recorded in the manifest (ModelInfo.reading; none recorded means truncated). Truncated stays the default:
# on SciFact train pooling moved dense nDCG@10 by +0.0005 +- 0.0071 (paired), at 1.3-2x the encoding.
READINGS = ("truncated", "pooled")
DEFAULT_READING = "truncated"


ANN_KINDS = ("flat", "ivf", "ivfpq", "hnsw")  # ann.py
ANN_CHOICES = ("auto", *ANN_KINDS)
ENGINES = ("local", "ray")  # where a build encodes (ray_engine.py)
DEFAULT_INDEX = "indexes/default"
INDEX_ENV = "SEMSEARCH_INDEX"
DEFAULT_K = 10
# One bound for every face: a ranked list is read by a person or an agent, and past a thousand hits it is an
# export, not a search.
MAX_K = 1000
# corpus_map.py: a refresh places arrivals on the last map layout until the documents added plus removed since it
# exceed this share of those it laid out; then the map is laid out again (see RELAYOUT_SHARE there).
MAP_RELAYOUT_SHARE = 0.2
DEFAULT_BATCH_SIZE = 32  # texts per torch encoder batch (ONNX encodes each text alone: one text, one vector)
DEFAULT_HOST = "127.0.0.1"  # a server listens on this machine only unless told otherwise
DEFAULT_PORT = 8000
