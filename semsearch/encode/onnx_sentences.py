"""The ONNX encoder's sentence reading: the runs of encode/sentence_runs.py, their token outputs pooled per sentence."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from semsearch.core.errors import ExportUnsupportedError
from semsearch.encode.sentence_runs import SentenceText, plan_runs, sentence_tokens

if TYPE_CHECKING:
    import tokenizers


class TokenRunner(Protocol):
    """What the sentence reading needs of the ONNX encoder (onnx_backend.OnnxEmbedder)."""

    name: str
    dimension: int
    threads: int
    parallel: str
    spec: Any  # EncoderSpec: do_lower_case, max_seq_length

    def token_outputs(self, ids: Sequence[int], type_ids: Sequence[int] | None = None) -> np.ndarray: ...

    def pooled(self, hidden: np.ndarray) -> np.ndarray: ...


def encode_sentences(
    emb: TokenRunner,
    tokenizer: tokenizers.Tokenizer,
    whole: tokenizers.Tokenizer,
    items: Sequence[SentenceText],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per text: (whole-text vector, (sentences, dimension) unit vectors), each text's runs alone.

    ``tokenizer`` is the encoder's own, truncating at its window (the first run is exactly what it reads);
    ``whole`` the same without truncation (``untruncated``), which gives every token's offsets.
    """
    workers = min(emb.threads, len(items)) if emb.parallel == "texts" else 1

    def one(item: SentenceText) -> tuple[np.ndarray, np.ndarray]:
        return _read(emb, tokenizer, whole, item)

    if workers <= 1:
        return [one(item) for item in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, items))


def untruncated(tokenizer: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """A copy of a tokenizer that neither truncates nor pads (about 30 ms: made once per encoder)."""
    from tokenizers import Tokenizer

    out = Tokenizer.from_str(tokenizer.to_str())
    out.no_truncation()
    out.no_padding()
    return out


def _read(
    emb: TokenRunner, truncating: tokenizers.Tokenizer, untruncated: tokenizers.Tokenizer, item: SentenceText
) -> tuple[np.ndarray, np.ndarray]:
    text, spans = item.text, item.spans
    model_text = text.lower() if emb.spec.do_lower_case else text
    if len(model_text) != len(text):  # a character that lowercases to two: map the spans onto the lowered text
        shift = np.concatenate([[0], np.cumsum([len(c.lower()) for c in text])])
        spans = tuple((int(shift[a]), int(shift[b])) for a, b in spans)
        title_end = int(shift[item.title_end])
    else:
        title_end = item.title_end
    first = truncating.encode(model_text)
    whole_hidden = emb.token_outputs(first.ids, first.type_ids)
    whole = emb.pooled(whole_hidden)
    if not spans:
        return whole, np.zeros((0, emb.dimension), dtype=np.float32)
    body = untruncated.encode(model_text, add_special_tokens=False)
    room = emb.spec.max_seq_length - 2
    if list(first.ids[1:-1]) != list(body.ids[:room]):
        raise ExportUnsupportedError(
            f"encoder {emb.name!r} does not wrap a text as [CLS] text [SEP]: --reading sentences cannot use it"
        )
    cls_id, sep_id = first.ids[0], first.ids[-1]
    ids, offsets = body.ids, body.offsets
    title_tokens = sum(1 for _, end in offsets if end <= title_end) if title_end else 0
    sums = np.zeros((len(spans), emb.dimension), dtype=np.float64)
    counts = np.zeros(len(spans), dtype=np.int64)
    for number, run in enumerate(plan_runs(len(ids), sentence_tokens(offsets, spans), title_tokens, room)):
        # The first run is the truncated text itself: its outputs are the whole vector's, already computed.
        hidden = whole_hidden if number == 0 else emb.token_outputs([cls_id, *(ids[p] for p in run.positions), sep_id])
        for s, (a, b) in run.held.items():
            if counts[s] == 0 and b > a:
                sums[s] = hidden[1 + a : 1 + b].sum(axis=0, dtype=np.float64)
                counts[s] = b - a
    vectors = np.repeat(whole[None, :], len(spans), axis=0).astype(np.float64)  # a sentence with no token: whole
    have = counts > 0
    vectors[have] = sums[have] / counts[have, None]
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return whole, np.asarray(vectors / norms, dtype=np.float32)
