"""Tests for semsearch.dedup.duplicates: normalization, ids, exact and near-duplicate merging."""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from datasketch import MinHash

from semsearch.core.records import Document, Provenance, Record
from semsearch.dedup.duplicates import (
    DEFAULT_THRESHOLD,
    canonical_for_near,
    deduplicate,
    doc_id_for,
    is_near_duplicate,
    lsh_bands,
    minhash_signatures,
    near_duplicate_pairs,
    near_similarity,
    normalize_text,
    shingle_texts,
    text_hash,
)
from tests.helpers import REPO, SHARED

NEURIPS = SHARED / "data" / "mlanthology" / "neurips2025.jsonl.gz"

# Three abstracts on one topic (private federated learning): much shared vocabulary, different papers.
FL_A = (
    "Federated learning allows many clients to train a shared model without sending their raw data to a "
    "central server. However, the model updates themselves can leak private information about the "
    "training examples. In this paper we propose a client-level differentially private aggregation rule "
    "that clips each update adaptively and adds calibrated Gaussian noise. We prove convergence under "
    "heterogeneous data and show on image and text benchmarks that our method improves accuracy over "
    "prior private baselines at the same privacy budget."
)
FL_B = (
    "Differential privacy is the standard way to protect participants in federated learning, but the noise "
    "it requires often destroys model utility when clients hold heterogeneous data. We study secure "
    "aggregation combined with shuffling and show that amplification by shuffling yields much tighter "
    "privacy accounting for federated averaging. Our analysis covers partial participation, and "
    "experiments on language modelling tasks show that the same privacy budget now supports far larger "
    "models and fewer communication rounds."
)
FL_C = (
    "We consider federated learning in which an untrusted server coordinates many clients that each hold "
    "private data. Existing defences against gradient inversion attacks either add noise that harms "
    "accuracy or require expensive cryptography. We introduce a lightweight defence that mixes the updates "
    "of randomly paired clients before upload, provably preventing reconstruction of individual training "
    "examples while leaving the aggregate update unchanged, and we evaluate it on image classification "
    "benchmarks with heterogeneous clients."
)


def rec(
    text: str,
    file: str = "a.txt",
    number: int = 1,
    *,
    title: str | None = None,
    external_id: str | None = None,
    collection: str | None = None,
    metadata: Mapping[str, Any] | None = None,
) -> Record:
    kind = "line" if file.endswith(".jsonl") else "paragraph"
    return Record(
        text=text,
        provenance=Provenance(file, kind, number),
        title=title,
        external_id=external_id,
        collection=collection,
        metadata=dict(metadata or {}),
    )


def rewrap(text: str, width: int = 60) -> str:
    """The same words broken into lines of about `width` characters, with a stray indent."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    lines.append(line)
    return "\n  ".join(lines)


def edit_words(text: str, replacements: dict[int, str | None]) -> str:
    """Replace (or with None delete) the words at the given positions."""
    words = text.split()
    out = [replacements.get(i, w) if i in replacements else w for i, w in enumerate(words)]
    return " ".join(w for w in out if w is not None)


def markup(text: str) -> str:
    """The text with a few words wrapped in Markdown and LaTeX markup (not an exact duplicate any more)."""
    return (
        text.replace("learning", "*learning*", 1)
        .replace("private", r"$\texttt{private}$", 1)
        .replace("clients", r"\emph{clients}", 1)
    )


def doc_summary(d: Document) -> tuple[object, ...]:
    return (d.id, d.text, d.title, d.text_hash, tuple(sorted(d.sources, key=lambda p: p.label())))


# --- normalize_text, hashes, ids ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ＡＢＣ　１２３", "ABC 123"),  # full-width letters, digits and ideographic space
        ("ﬁne-tuning ﬂows", "fine-tuning flows"),  # ligatures
        ("non\u00a0breaking\u2009thin\u202fspace", "non breaking thin space"),
        ("windows\r\nline\rbreaks\n\n", "windows line breaks"),
        ("  tabs\tand   runs \x0b\x0c ", "tabs and runs"),
        ("x²", "x2"),
    ],
)
def test_normalize_text_nfkc_and_whitespace(raw: str, expected: str) -> None:
    assert normalize_text(raw) == expected


def test_normalize_text_keeps_case_and_punctuation() -> None:
    assert normalize_text(" Hello, World! ") == "Hello, World!"


def test_text_hash_is_sha256_of_normalized_text() -> None:
    assert text_hash("a\r\n b") == hashlib.sha256(b"a b").hexdigest()
    assert text_hash("ﬁne  print") == text_hash("fine print")
    assert text_hash("Fine print") != text_hash("fine print")


def test_doc_id_is_stable_and_fits_int64() -> None:
    h = text_hash("Hello  world")
    assert doc_id_for(h) == "64ec88ca00b268e5"  # pinned: ids are persisted in indexes
    masked = doc_id_for("f" * 64)
    assert masked == "7fffffffffffffff"
    assert len(masked) == 16 and int(masked, 16) < 2**63
    for text in ("a", "b", FL_A):
        doc_id = doc_id_for(text_hash(text))
        assert re.fullmatch(r"[0-9a-f]{16}", doc_id) and int(doc_id, 16) < 2**63


def test_canonical_for_near_strips_markup() -> None:
    plain = canonical_for_near("We use FooBar and bold words x y z code, here: Renyi naive quoted tag & fine")
    marked = canonical_for_near(
        r"We use $\texttt{FooBar}$ and \textbf{bold} \emph{words} *x* **y** _z_ `code`, here: "
        r"R\'{e}nyi na\"ive ``quoted'' <b>tag</b> &amp; ﬁne."
    )
    assert marked == plain == "we use foobar and bold words x y z code here renyi naive quoted tag fine"
    assert canonical_for_near("Rényi") == canonical_for_near(r"R\'enyi") == "renyi"
    assert canonical_for_near(r"\mathbf{x} and \textit{y}") == "x and y"


# --- MinHash machinery ------------------------------------------------------------------------------------


def test_signatures_equal_datasketch_minhash() -> None:
    texts = [FL_A, FL_B, "too short"]
    shingles = shingle_texts(texts)
    sig = minhash_signatures(shingles)
    for i in range(len(texts)):
        m = MinHash(num_perm=sig.shape[1], seed=1, hashfunc=lambda v: v)
        values = [int(v) >> 32 for v in shingles.hashes[shingles.offsets[i] : shingles.offsets[i + 1]]]
        if values:
            m.update_batch(values)
        assert np.array_equal(m.hashvalues, sig[i])


def test_shingle_hashes_do_not_depend_on_neighbours() -> None:
    alone = set(shingle_texts([FL_A]).unique(0).tolist())
    together = shingle_texts([FL_B, FL_A, FL_C])
    assert set(together.unique(1).tolist()) == alone
    assert near_similarity(FL_A, FL_A) == 1.0


def test_near_duplicate_pairs_finds_variants_only() -> None:
    texts = [FL_A, FL_B, rewrap(FL_A), FL_C, edit_words(FL_C, {3: "decentralized", 10: None})]
    pairs = {(i, j) for i, j, _ in near_duplicate_pairs(texts)}
    assert pairs == {(0, 2), (3, 4)}


# --- deduplicate: exact ------------------------------------------------------------------------------------


def test_exact_duplicates_merge_and_keep_all_provenance() -> None:
    records = [
        rec(FL_A, "seeds/a.txt", 1),
        rec(FL_B, "seeds/a.txt", 2),
        rec(FL_A.replace(". ", ".\n"), "seeds/b.txt", 7),
        rec("  " + FL_A + "\r\n", "seeds/c.txt", 3),
    ]
    result = deduplicate(records)
    assert (result.read, result.exact_duplicates, result.near_duplicates) == (4, 2, 0)
    assert len(result.documents) == 2
    first = result.documents[0]
    assert [p.label() for p in first.sources] == [
        "seeds/a.txt:paragraph 1",
        "seeds/b.txt:paragraph 7",
        "seeds/c.txt:paragraph 3",
    ]
    assert first.text_hash == text_hash(FL_A)
    assert first.id == doc_id_for(first.text_hash)
    assert result.documents[1].text == FL_B


def test_same_provenance_listed_once() -> None:
    same = Provenance("a.txt", "paragraph", 1)
    records = [Record(FL_A, same), Record(FL_A, same)]
    result = deduplicate(records)
    assert result.documents[0].sources == [same]
    assert result.exact_duplicates == 1


def test_empty_input() -> None:
    result = deduplicate([])
    assert (result.documents, result.read, result.exact_duplicates, result.near_duplicates) == ([], 0, 0, 0)


# --- deduplicate: representative and order ----------------------------------------------------------------


def test_title_is_preferred_over_length() -> None:
    longer = FL_A + " Code is available online."
    records = [rec(longer, "seeds/a.txt", 1), rec(FL_A, "cat.jsonl", 5, title="Private FL", external_id="x1")]
    result = deduplicate(records)
    assert len(result.documents) == 1
    doc = result.documents[0]
    assert doc.title == "Private FL" and doc.text == FL_A and doc.text_hash == text_hash(FL_A)
    assert result.near_duplicates == 1
    assert result.near_pairs == [(doc.id, "seeds/a.txt:paragraph 1", pytest.approx(result.near_pairs[0][2]))]
    assert result.near_pairs[0][2] >= DEFAULT_THRESHOLD


def test_longest_text_is_preferred_without_titles() -> None:
    longer = FL_A + " Code is available online."
    result = deduplicate([rec(FL_A, "a.txt", 1), rec(longer, "b.txt", 1)])
    assert result.documents[0].text == longer
    assert [p.file for p in result.documents[0].sources] == ["a.txt", "b.txt"]


def test_representative_independent_of_input_order() -> None:
    variants = [
        rec(FL_A, "a.txt", 1),
        rec(rewrap(FL_A), "b.txt", 1),
        rec(FL_A, "c.txt", 2, title="T1"),
        rec(FL_A + " ", "d.txt", 4, title="T0"),
        rec(edit_words(FL_A, {5: None}), "e.txt", 1, title="T2"),  # shorter, so never the representative
        rec(FL_B, "a.txt", 2),
        rec(rewrap(FL_B, 40), "f.txt", 9),
        rec(FL_C, "g.txt", 1),
    ]
    expected = sorted(doc_summary(d) for d in deduplicate(variants).documents)
    rng = random.Random(7)
    for _ in range(10):
        shuffled = variants[:]
        rng.shuffle(shuffled)
        assert sorted(doc_summary(d) for d in deduplicate(shuffled).documents) == expected
    titles = {d.title for d in deduplicate(variants).documents}
    assert "T0" in titles  # tie on title and text: the smallest title wins, whatever the order


def test_documents_in_order_of_first_appearance() -> None:
    records = [rec(FL_B, "a.txt", 1), rec(FL_C, "a.txt", 2), rec(FL_A, "a.txt", 3), rec(FL_C, "b.txt", 1)]
    texts = [d.text for d in deduplicate(records).documents]
    assert texts == [FL_B, FL_C, FL_A]


# --- deduplicate: near -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    [
        FL_A.replace("Federated learning", "*Federated learning*")
        .replace("Gaussian", r"$\texttt{Gaussian}$")
        .replace("private", r"\emph{private}"),
        edit_words(FL_A, {2: "lets", 14: None, 30: "new", 41: "algorithm"}),
        rewrap(edit_words(FL_A, {1: "Learning", 20: None, 50: "the"}).replace("noise", "**noise**"), 70),
    ],
    ids=["markup", "four-words", "combined"],
)
def test_near_duplicate_variants_are_merged(variant: str) -> None:
    records = [
        rec(FL_A, "cat.jsonl", 1, title="Private FL"),
        rec(FL_B, "cat.jsonl", 2),
        rec(variant, "s.txt", 1),
    ]
    result = deduplicate(records)
    assert len(result.documents) == 2
    assert result.near_duplicates == 1 and result.exact_duplicates == 0
    kept = result.documents[0]
    assert kept.title == "Private FL"
    assert [p.file for p in kept.sources] == ["cat.jsonl", "s.txt"]
    (pair,) = result.near_pairs
    assert pair[0] == kept.id and pair[1] == "s.txt:paragraph 1" and DEFAULT_THRESHOLD <= pair[2] < 1.0 + 1e-9
    assert is_near_duplicate(FL_A, variant)


def test_rewrapped_copy_is_an_exact_duplicate() -> None:
    records = [rec(FL_A, "cat.jsonl", 1), rec(rewrap(FL_A, 45).replace(" the ", " the\r\n"), "s.txt", 1)]
    result = deduplicate(records)
    assert (len(result.documents), result.exact_duplicates, result.near_duplicates) == (1, 1, 0)


def test_different_abstracts_on_same_topic_are_not_merged() -> None:
    result = deduplicate([rec(FL_A, "a.txt", 1), rec(FL_B, "a.txt", 2), rec(FL_C, "a.txt", 3)])
    assert len(result.documents) == 3
    assert result.near_duplicates == 0 and result.near_pairs == []
    assert near_similarity(FL_A, FL_B) < 0.2 and near_similarity(FL_A, FL_C) < 0.2
    assert not is_near_duplicate(FL_A, FL_C)


def test_heavily_rewritten_abstract_is_not_merged() -> None:
    half = " ".join(FL_A.split()[:40]) + " " + " ".join(FL_C.split()[40:])
    assert near_similarity(FL_A, half) < DEFAULT_THRESHOLD
    assert len(deduplicate([rec(FL_A, "a.txt", 1), rec(half, "a.txt", 2)]).documents) == 2


def test_short_placeholders_are_never_near_merged() -> None:
    records = [rec("Abstract unavailable.", "a.jsonl", 1), rec("abstract Unavailable", "a.jsonl", 2)]
    result = deduplicate(records)
    assert len(result.documents) == 2 and result.near_duplicates == 0


def test_near_false_disables_near_merging() -> None:
    records = [rec(FL_A, "a.txt", 1), rec(markup(FL_A), "b.txt", 1), rec(FL_A, "c.txt", 1)]
    result = deduplicate(records, near=False)
    assert (len(result.documents), result.exact_duplicates, result.near_duplicates) == (2, 1, 0)
    assert result.near_pairs == []
    merged = deduplicate(records)
    assert (len(merged.documents), merged.exact_duplicates, merged.near_duplicates) == (1, 1, 1)


def test_threshold_controls_merging() -> None:
    variant = edit_words(FL_A, {i: None for i in range(0, 70, 14)})
    sim = near_similarity(FL_A, variant)
    assert 0.6 < sim < 0.9
    records = [rec(FL_A, "a.txt", 1), rec(variant, "b.txt", 1)]
    assert len(deduplicate(records, threshold=sim - 0.01).documents) == 1
    assert len(deduplicate(records, threshold=min(1.0, sim + 0.01)).documents) == 2
    with pytest.raises(ValueError):
        deduplicate(records, threshold=0.0)


def test_low_threshold_widens_lsh() -> None:
    # At Jaccard ~0.5 the default banding (tuned for 0.7) would miss pairs; banding follows the threshold.
    variant = edit_words(FL_A, {i: None for i in range(0, 70, 7)})
    sim = near_similarity(FL_A, variant)
    assert 0.45 < sim < 0.6
    result = deduplicate([rec(FL_A, "a.txt", 1), rec(variant, "b.txt", 1)], threshold=sim - 0.01)
    assert len(result.documents) == 1
    assert lsh_bands(0.5) > lsh_bands(DEFAULT_THRESHOLD)


def test_counts_arithmetic() -> None:
    records = [
        rec(FL_A, "a.txt", 1),
        rec(FL_A, "a.txt", 2),
        rec(markup(FL_A), "a.txt", 3),
        rec(rewrap(markup(FL_A)), "a.txt", 4),
        rec(FL_B, "a.txt", 5),
        rec(FL_C, "a.txt", 6),
        rec(edit_words(FL_C, {4: "a"}), "a.txt", 7),
        rec(FL_C, "a.txt", 8),
    ]
    result = deduplicate(records)
    assert result.read == 8
    assert result.exact_duplicates == 3  # groups: A, marked-up A, B, C, edited C
    assert result.near_duplicates == 2
    assert len(result.documents) == result.read - result.exact_duplicates - result.near_duplicates == 3
    assert len(result.near_pairs) == result.near_duplicates
    assert sum(len(d.sources) for d in result.documents) == 8


# --- deduplicate: merged fields ----------------------------------------------------------------------------


def test_collection_external_ids_and_metadata_are_merged() -> None:
    records = [
        rec(FL_A, "seeds/a.txt", 1, collection="NeurIPS 2025 Papers"),
        rec(markup(FL_A), "cat.jsonl", 3, title="Private FL", external_id="id-1", metadata={"year": "2025"}),
        rec(FL_A, "other.jsonl", 9, external_id="id-2", metadata={"year": "2024", "venue": "neurips"}),
        rec(FL_A, "other.jsonl", 10, external_id="id-1", collection="Other"),
    ]
    result = deduplicate(records)
    (doc,) = result.documents
    assert doc.title == "Private FL"
    assert doc.external_ids == ["id-1", "id-2"]
    # Representative's values win; other members only fill in missing keys; its collection is the first seen.
    assert doc.metadata == {"year": "2025", "venue": "neurips", "collection": "NeurIPS 2025 Papers"}
    assert [p.label() for p in doc.sources] == [
        "seeds/a.txt:paragraph 1",
        "cat.jsonl:line 3",
        "other.jsonl:line 9",
        "other.jsonl:line 10",
    ]


def test_representative_collection_comes_first() -> None:
    records = [rec(FL_A, "a.txt", 1, collection="First"), rec(FL_A + " More.", "b.txt", 1, collection="Rep")]
    (doc,) = deduplicate(records).documents
    assert doc.metadata["collection"] == "Rep"
    (plain,) = deduplicate([rec(FL_B, "a.txt", 1)]).documents
    assert "collection" not in plain.metadata


def test_input_records_are_not_modified() -> None:
    meta = {"year": "2025"}
    records = [rec(FL_A, "a.txt", 1, metadata=meta, collection="C"), rec(FL_A, "b.txt", 1)]
    deduplicate(records)
    assert records[0].metadata == {"year": "2025"}


# --- real data ---------------------------------------------------------------------------------------------


def read_seed_dir(folder: Path) -> list[Record]:
    """Seed files: a header line, then abstracts separated by blank lines."""
    out: list[Record] = []
    for path in sorted(folder.glob("*.txt")):
        header, _, body = path.read_text(encoding="utf-8").partition("\n")
        paragraphs = [p.strip() for p in re.split(r"\n\s*\n", body) if p.strip()]
        for number, text in enumerate(paragraphs, 1):
            where = Provenance(f"seeds/{path.name}", "paragraph", number)
            out.append(Record(text, where, collection=header.strip()))
    return out


@pytest.mark.skipif(not (REPO / "seeds").is_dir(), reason="seed files not present")
def test_seeds_95_abstracts_91_documents() -> None:
    records = read_seed_dir(REPO / "seeds")
    result = deduplicate(records)
    assert (result.read, len(result.documents)) == (95, 91)
    assert (result.exact_duplicates, result.near_duplicates) == (4, 0)


@pytest.mark.slow  # reads a whole corpus from ../shared
@pytest.mark.skipif(not NEURIPS.is_file(), reason="shared data not present")
def test_seeds_merge_into_neurips_catalogue() -> None:
    catalogue: list[Record] = []
    with gzip.open(NEURIPS, "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            row = json.loads(line)
            catalogue.append(
                Record(row["text"], Provenance("neurips2025.jsonl", "line", number), row["title"], row["_id"])
            )
    alone = deduplicate(catalogue)
    assert alone.near_duplicates == 0
    combined = deduplicate(catalogue + read_seed_dir(SHARED / "seeds"))
    # One seed is an earlier, rewritten version of its catalogue abstract (Jaccard 0.29), not a near-copy.
    leftovers = [d for d in combined.documents if d.title is None]
    assert len(combined.documents) == len(alone.documents) + 1
    assert len(leftovers) == 1
    assert leftovers[0].text.startswith("Large language models (LLMs) have demonstrated")
    assert combined.near_duplicates == 4


def test_band_keys_kept_for_every_text_find_a_later_near_copy(tmp_path: Path) -> None:
    from semsearch.dedup.near_part import load_near_keys, save_near_keys, shared_bands

    rng = random.Random(7)
    words = [f"w{i}" for i in range(3000)]
    texts = [" ".join(rng.choices(words, k=60)) for _ in range(40)]
    copy = texts[3].split()
    copy[10] = "changed"
    records = [rec(t, number=i) for i, t in enumerate(texts)] + [rec(" ".join(copy), number=99)]
    result = deduplicate(records)
    keys = result.near_keys
    assert keys is not None and len(keys.keys) == 41  # one row per distinct text, the merged copy's too
    merged = next(d for d in result.documents if d.texts)
    rows = keys.nums == int(merged.id, 16)
    assert rows.sum() == 2 and keys.origin[rows].tolist().count(True) == 1
    save_near_keys(tmp_path, keys)
    kept = load_near_keys(tmp_path)
    assert kept is not None and np.array_equal(kept.keys, keys.keys)
    # Memory-mapped, not loaded: a refresh at 1M reads one band column at a time, not 256 MB up front.
    assert isinstance(kept.keys, np.memmap) and isinstance(kept.nums, np.memmap)
    # A refresh's arrivals: a near copy of text 7 shares a band with it; an unrelated text shares none.
    later = texts[7].split()
    later[20] = "edited"
    arrivals = deduplicate([rec(" ".join(later), "b.txt", 1), rec(" ".join(rng.choices(words, k=60)), "b.txt", 2)])
    assert arrivals.near_keys is not None
    hits = shared_bands(arrivals.near_keys, kept)
    doc7 = next(d for d in result.documents if d.text == texts[7])
    assert {(num, origin) for _, num, origin in hits} == {(int(doc7.id, 16), True)}
    assert load_near_keys(tmp_path / "missing") is None


def test_minhash_parameters_are_datasketchs_without_importing_it() -> None:
    import subprocess
    import sys

    from datasketch import MinHash

    from semsearch.dedup.duplicates import MINHASH_SEED, NUM_PERM, affine32_permutations

    for num_perm, seed in ((NUM_PERM, MINHASH_SEED), (7, 3)):
        theirs = MinHash(num_perm=num_perm, seed=seed).permutations
        ours = affine32_permutations(num_perm, seed)
        assert all(np.array_equal(t, o) and t.dtype == o.dtype for t, o in zip(theirs, ours, strict=True))
    # Deduplicating must not pull in datasketch (and scipy behind it): seconds of every build and refresh.
    code = (
        "import sys; from semsearch.dedup.duplicates import deduplicate; "
        "from semsearch.core.records import Record, Provenance; "
        "deduplicate([Record(text=f'some words of abstract number {i} ' * 5, provenance=Provenance('f', 'line', i))"
        " for i in range(3)]); print('datasketch' in sys.modules, 'scipy' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
