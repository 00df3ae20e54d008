"""The ONNX encoder's sentence reading: the runs of encode/sentence_runs.py, their token outputs pooled per sentence."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from semsearch.core.errors import ExportUnsupportedError
from semsearch.encode.sentence_runs import RUN_TOKENS, SentenceText, plan_runs, sentence_tokens

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
    run_tokens: int = RUN_TOKENS,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per text: (document vector, (sentences, dimension) unit vectors), each text's runs alone.

    The document vector is the unit mean of the sentences' vectors; a text of one sentence (no spans) is read as
    ``encode`` reads it, and that is its vector. ``tokenizer`` is the encoder's own, truncating at its window;
    ``whole`` the same without truncation (``untruncated``), which gives every token's offsets. ``run_tokens``
    (at most the encoder's window) is for studies: the cache keys name ``SCHEME``'s length only.
    """
    workers = min(emb.threads, len(items)) if emb.parallel == "texts" else 1

    def one(item: SentenceText) -> tuple[np.ndarray, np.ndarray]:
        return _read(emb, tokenizer, whole, item, run_tokens)

    if workers <= 1:
        return [one(item) for item in items]
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, items))


def untruncated(tokenizer: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
    """A copy of a tokenizer that neither truncates nor pads (made once per encoder: a copy parses the vocabulary)."""
    from tokenizers import Tokenizer

    out = Tokenizer.from_str(tokenizer.to_str())
    out.no_truncation()
    out.no_padding()
    return out


def _read(
    emb: TokenRunner,
    truncating: tokenizers.Tokenizer,
    untruncated: tokenizers.Tokenizer,
    item: SentenceText,
    run_tokens: int,
) -> tuple[np.ndarray, np.ndarray]:
    text, spans = item.text, item.spans
    model_text = text.lower() if emb.spec.do_lower_case else text
    if len(model_text) != len(text):  # a character that lowercases to two: map the spans onto the lowered text
        shift = np.concatenate([[0], np.cumsum([len(c.lower()) for c in text])])
        spans = tuple((int(shift[a]), int(shift[b])) for a, b in spans)
        title_end = int(shift[item.title_end])
    else:
        title_end = item.title_end
    if not spans:
        return _as_one_text(emb, truncating, model_text), np.zeros((0, emb.dimension), dtype=np.float32)
    body = untruncated.encode(model_text)
    if len(body.ids) < 2 or body.special_tokens_mask[0] != 1 or body.special_tokens_mask[-1] != 1:
        raise ExportUnsupportedError(
            f"encoder {emb.name!r} does not wrap a text as [CLS] text [SEP]: --reading sentences cannot use it"
        )
    cls_id, sep_id = body.ids[0], body.ids[-1]
    ids, offsets = body.ids[1:-1], body.offsets[1:-1]
    room = min(run_tokens, emb.spec.max_seq_length) - 2
    title_tokens = sum(1 for _, end in offsets if end <= title_end) if title_end else 0
    sums = np.zeros((len(spans), emb.dimension), dtype=np.float64)
    counts = np.zeros(len(spans), dtype=np.int64)
    for run in plan_runs(len(ids), sentence_tokens(offsets, spans), title_tokens, room):
        hidden = emb.token_outputs([cls_id, *(ids[p] for p in run.positions), sep_id])
        for s, (a, b) in run.held.items():
            if counts[s] == 0 and b > a:
                sums[s] = hidden[1 + a : 1 + b].sum(axis=0, dtype=np.float64)
                counts[s] = b - a
    vectors = sums / np.maximum(counts, 1)[:, None]
    norms = np.linalg.norm(vectors, axis=1)
    have = norms > 0
    if not have.any():  # no sentence has a token of its own: each is the text as ``encode`` reads it
        one = _as_one_text(emb, truncating, model_text)
        return one, np.repeat(one[None, :], len(spans), axis=0)
    vectors[have] /= norms[have, None]
    document = vectors[have].mean(axis=0)
    document /= max(float(np.linalg.norm(document)), 1e-12)
    vectors[~have] = document  # a sentence with no token of its own (only what the tokenizer drops)
    return document.astype(np.float32), vectors.astype(np.float32)


def _as_one_text(emb: TokenRunner, truncating: tokenizers.Tokenizer, model_text: str) -> np.ndarray:
    """The vector ``encode`` gives a text: its first window, pooled."""
    first = truncating.encode(model_text)
    return emb.pooled(emb.token_outputs(first.ids, first.type_ids))
