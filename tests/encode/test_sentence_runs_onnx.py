"""The ONNX sentence reading's runs and pooling (encode/onnx_sentences.py), on a tiny tokenizer and a fake runner."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers, processors

from semsearch.core.errors import ExportUnsupportedError
from semsearch.encode.onnx_sentences import encode_sentences, untruncated
from semsearch.encode.sentence_runs import RUN_TOKENS, SentenceText, sentence_text

WORDS = [f"w{i}" for i in range(40)]
DIM = 16


def _tokenizer(template: bool = True) -> Tokenizer:
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, ".": 4, **{w: 5 + i for i, w in enumerate(WORDS)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    if template:
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
        )
    tok.enable_truncation(max_length=256)
    return tok


class Runner:
    """A TokenRunner whose token outputs depend on the token and on the run's length (a stand-in for context)."""

    name, dimension, threads, parallel = "fake-runs", DIM, 1, "texts"
    spec = SimpleNamespace(do_lower_case=True, max_seq_length=256)

    def __init__(self) -> None:
        self.table = np.random.default_rng(0).normal(size=(64, DIM)).astype(np.float32)
        self.runs: list[int] = []

    def token_outputs(self, ids: Sequence[int], type_ids: Sequence[int] | None = None) -> np.ndarray:
        self.runs.append(len(ids))
        return self.table[np.asarray(ids)] + 0.01 * len(ids)

    def pooled(self, hidden: np.ndarray) -> np.ndarray:
        mean = hidden.mean(axis=0)
        return (mean / np.linalg.norm(mean)).astype(np.float32)


def _read(items: Sequence[SentenceText], tok: Tokenizer | None = None) -> tuple[Runner, list]:
    runner, tok = Runner(), tok or _tokenizer()
    return runner, encode_sentences(runner, tok, untruncated(tok), items)


def test_a_long_abstract_is_read_in_runs_of_at_most_run_tokens_and_its_vector_is_its_sentences_mean() -> None:
    # 60 sentences of 7 tokens; the encoder lower-cases (the vocabulary has "w3", the text "W3").
    text = " ".join(" ".join(WORDS[(3 * s + j) % 40] for j in range(6)).capitalize() + "." for s in range(60))
    item = sentence_text(f"W1 w2 {text}", "W1 w2", text)
    runner, [(document, sentences)] = _read([item])
    assert len(runner.runs) >= 4 and max(runner.runs) <= RUN_TOKENS  # [CLS] and [SEP] included
    assert sentences.shape == (60, DIM)
    np.testing.assert_allclose(np.linalg.norm(sentences, axis=1), 1.0, rtol=1e-5)
    mean = sentences.mean(axis=0)
    np.testing.assert_allclose(document, mean / np.linalg.norm(mean), atol=1e-6)
    # Later runs repeat the title first: every run after the first starts [CLS] w1 w2.
    assert all(n > 3 for n in runner.runs)


def test_a_one_sentence_text_has_the_vector_encode_gives_it() -> None:
    item = sentence_text("w3 w4 w5 w6", "", "w3 w4 w5 w6")
    assert item.spans == ()
    runner, [(document, sentences)] = _read([item])
    tok = _tokenizer()
    ids = tok.encode("w3 w4 w5 w6").ids
    np.testing.assert_array_equal(document, runner.pooled(runner.token_outputs(ids)))
    assert sentences.shape == (0, DIM) and runner.runs[0] == len(ids) == 6


def test_a_span_with_no_token_of_its_own_takes_the_documents_vector() -> None:
    text = "W1 w2 w3. W4 w5."
    _, [(document, sentences)] = _read([SentenceText(text, ((0, 9), (9, 10), (10, 16)))])  # (9, 10): a space
    np.testing.assert_array_equal(sentences[1], document)
    assert not np.allclose(sentences[0], sentences[2])
    runner, [(only, none)] = _read([SentenceText(text, ((9, 10), (3, 3)))])  # no span holds a token
    assert none.shape == (2, DIM) and (none == only).all()
    np.testing.assert_array_equal(only, runner.pooled(runner.token_outputs(_tokenizer().encode(text.lower()).ids)))


def test_a_tokenizer_that_does_not_wrap_texts_in_cls_and_sep_is_refused() -> None:
    item = sentence_text("W1 w2. W3 w4.", "", "W1 w2. W3 w4.")
    assert len(item.spans) == 2
    with pytest.raises(ExportUnsupportedError, match=r"does not wrap a text as \[CLS\] text \[SEP\]"):
        _read([item], _tokenizer(template=False))
