"""Deduplication: merge records whose abstracts are identical or near-identical into one Document each.

Exact duplicates share the sha256 of their normalized text. Near duplicates (the same abstract re-wrapped,
marked up, or with a few words changed) are found with MinHash signatures over word 3-shingles of an
aggressively canonicalized text, banded LSH to propose candidate pairs, and the true Jaccard similarity of
the shingle sets to confirm each candidate before anything is merged. A PDF and another source's record of the
paper it shows the DOI or arXiv id of are merged too, whatever their abstracts say (``paper_ids.py``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.records import DedupResult, Document, NearKeys, Provenance, Record
from semsearch.core.textnorm import canonical_for_near, canonical_normalized, doc_id_for, normalize_text, text_hash
from semsearch.dedup.paper_ids import same_paper_links

if TYPE_CHECKING:
    from semsearch.dedup.identity import PreviousIdentity

# Verified Jaccard (word 3-shingles of canonical_for_near) at or above which two abstracts are merged: high
# enough that a paper and its rewritten workshop or journal version stay apart, low enough that a copy with a
# few words changed (a typo fixed, a sentence reworded) still merges.
DEFAULT_THRESHOLD = 0.7
NUM_PERM = 128
# Banding is derived from the threshold: the fewest bands (each of as many rows as possible, so fewest
# false candidates) for which a pair at exactly the threshold becomes a candidate with this probability.
LSH_RECALL = 0.995
SHINGLE = 3  # words per shingle
# Texts with fewer canonical words are never near-merged: placeholders such as "Abstract unavailable."
# and "No abstract available" belong to different papers however similar they look.
MIN_NEAR_WORDS = 10
MINHASH_SEED = 1
# Shingles per signature block: bounds the (NUM_PERM, block) uint32 scratch array.
_BLOCK = 32_768
# Characters of canonical text hashed at once; bounds the shingle-hashing scratch arrays.
_CHUNK_CHARS = 4_000_000
# Buckets larger than this emit only pairs with their first member, so a pathological bucket cannot
# produce a quadratic number of candidates.
_MAX_BUCKET = 64

_MASK63 = (1 << 63) - 1
_U64 = np.uint64
_K1 = _U64(0x9E3779B97F4A7C15)
_K2 = _U64(0xC2B2AE3D27D4EB4F)
_POLY_INT = 0x100000001B3  # the FNV-1 64-bit prime: odd, so it has an inverse modulo 2**64
_POLY = _U64(_POLY_INT)
_POLY_INV = _U64(pow(_POLY_INT, -1, 1 << 64))


def _fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finalizer, element-wise (wrapping arithmetic is intended)."""
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xFF51AFD7ED558CCD)
    h = h ^ (h >> _U64(33))
    h = h * _U64(0xC4CEB9FE1A85EC53)
    return h ^ (h >> _U64(33))


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer, element-wise; datasketch's affine32 scheme pre-mixes with it."""
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


@dataclass
class ShingleSets:
    """Per-text 64-bit shingle hashes, concatenated: text i owns hashes[offsets[i]:offsets[i + 1]]."""

    hashes: np.ndarray  # uint64, in text order, with repeats
    offsets: np.ndarray  # int64, len(texts) + 1

    def unique(self, i: int) -> np.ndarray:
        """The sorted set of shingle hashes of text i."""
        return np.unique(self.hashes[self.offsets[i] : self.offsets[i + 1]])


def shingle_texts(texts: Sequence[str], *, min_words: int = MIN_NEAR_WORDS) -> ShingleSets:
    """Hashed word 3-shingles of canonical_for_near of each text; texts under min_words words get none."""
    return _shingle_canonical([canonical_for_near(t) for t in texts], min_words=min_words)


def _shingle_canonical(canon: Sequence[str], *, min_words: int = MIN_NEAR_WORDS) -> ShingleSets:
    """Hashed word 3-shingles of canonical texts (words joined by single spaces)."""
    n_words = np.array([c.count(" ") + 1 if c else 0 for c in canon], dtype=np.int64)
    used = np.flatnonzero(n_words >= max(min_words, SHINGLE))
    counts = np.zeros(len(canon), dtype=np.int64)
    counts[used] = n_words[used] - (SHINGLE - 1)
    offsets = np.zeros(len(canon) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    parts: list[np.ndarray] = []
    powers = inverse = np.zeros(0, dtype=np.uint64)
    i = 0
    while i < len(used):
        j, size = i, 0
        while j < len(used) and (j == i or size + len(canon[used[j]]) < _CHUNK_CHARS):
            size += len(canon[used[j]]) + 1
            j += 1
        data = np.frombuffer((" ".join([canon[k] for k in used[i:j]]) + " ").encode("utf-8"), dtype=np.uint8)
        if len(data) > len(powers):
            # Sized to fit a single small input exactly; with headroom when more chunks will follow.
            powers, inverse = _powers(len(data) if j == len(used) else len(data) + len(data) // 4)
        parts.append(_span_hashes(data, n_words[used[i:j]], powers, inverse))
        i = j
    hashes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)
    return ShingleSets(hashes, offsets)


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    """_POLY**k and _POLY**-k modulo 2**64 for k < n."""
    powers = np.full(n, _POLY, dtype=np.uint64)
    powers[0] = 1
    np.cumprod(powers, out=powers)
    inverse = np.full(n, _POLY_INV, dtype=np.uint64)
    inverse[0] = 1
    np.cumprod(inverse, out=inverse)
    return powers, inverse


def _span_hashes(
    data: np.ndarray,
    n_words: np.ndarray,
    powers: np.ndarray,
    inverse: np.ndarray,
) -> np.ndarray:
    """64-bit hashes of every SHINGLE-word run of the texts in data (UTF-8, each text followed by a space)."""
    # A polynomial hash over all texts at once: with prefix sums H and inverse powers, the hash of any byte
    # span is (H[end] - H[start]) * B**-start (mod 2**64), all in numpy, with no Python-level work per
    # word. It depends only on the span's bytes, so it is the same in every run and any input order.
    prefix = np.zeros(len(data) + 1, dtype=np.uint64)
    np.cumsum(data * powers[: len(data)], out=prefix[1:])
    spaces = np.flatnonzero(data == 32)
    word_start = np.concatenate(([0], spaces[:-1] + 1))
    # Shingles start at every word but the last SHINGLE - 1 of each text.
    per_text = n_words - (SHINGLE - 1)
    text_first_word = np.cumsum(n_words) - n_words
    ordinal = np.arange(int(per_text.sum())) - np.repeat(np.cumsum(per_text) - per_text, per_text)
    starts_w = np.repeat(text_first_word, per_text) + ordinal
    lo = word_start[starts_w]
    hi = spaces[starts_w + SHINGLE - 1]
    h = (prefix[hi] - prefix[lo]) * inverse[lo]
    return _fmix64(h ^ (hi - lo).astype(np.uint64) * _K2)


def affine32_permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """datasketch 2's affine32 MinHash parameters (odd a, any b), drawn as it draws them.

    Drawn here rather than read from ``datasketch.MinHash``: importing datasketch pulls in scipy (seconds on a
    loaded machine, paid by every build and refresh). tests/dedup/test_dedup.py checks they equal datasketch's.
    """
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def minhash_signatures(
    shingles: ShingleSets,
    *,
    num_perm: int = NUM_PERM,
    seed: int = MINHASH_SEED,
) -> np.ndarray:
    """(texts, num_perm) uint32 MinHash signatures of the shingle sets; all-0xFFFFFFFF for empty ones."""
    # Bit-identical to datasketch MinHash(num_perm, seed) (scheme "affine32") updated with the top 32 bits
    # of each shingle hash, but vectorised over all texts at once instead of a Python call per shingle.
    perm_a, perm_b = affine32_permutations(num_perm, seed)
    a = perm_a[:, None]
    b = perm_b[:, None]
    n_texts = len(shingles.offsets) - 1
    sig = np.full((n_texts, num_perm), np.uint32(0xFFFFFFFF), dtype=np.uint32)
    nonempty = np.flatnonzero(np.diff(shingles.offsets) > 0)
    hv = _fmix32((shingles.hashes >> _U64(32)).astype(np.uint32))
    # Whole texts in blocks of about _BLOCK shingles; (num_perm, block) layout so that reduceat runs
    # along contiguous rows, which is several times faster than reducing down columns.
    ends = shingles.offsets[nonempty + 1]
    start = 0
    while start < len(nonempty):
        lo = int(shingles.offsets[nonempty[start]])
        stop = int(np.searchsorted(ends, lo + _BLOCK, side="right"))
        stop = max(stop, start + 1)
        rows = nonempty[start:stop]
        hi = int(shingles.offsets[rows[-1] + 1])
        phv = a * hv[None, lo:hi] + b
        sig[rows] = np.minimum.reduceat(phv, shingles.offsets[rows] - lo, axis=1).T
        start = stop
    return sig


def lsh_bands(threshold: float, num_perm: int = NUM_PERM) -> int:
    """Number of bands that proposes pairs of Jaccard >= threshold with probability >= LSH_RECALL."""
    for rows in range(num_perm, 0, -1):
        bands = num_perm // rows
        if 1.0 - (1.0 - threshold**rows) ** bands >= LSH_RECALL:
            return bands
    return num_perm


def band_keys(signatures: np.ndarray, *, bands: int) -> np.ndarray:
    """(rows, bands) uint64: one hash per LSH band of each signature; rows sharing a band key are candidates."""
    rows = signatures.shape[1] // bands
    out = np.zeros((signatures.shape[0], bands), dtype=np.uint64)
    for band in range(bands):
        cols = signatures[:, band * rows : (band + 1) * rows].astype(np.uint64)
        key = np.zeros(len(cols), dtype=np.uint64)
        for c in range(rows):
            key = _fmix64(key * _K1 + cols[:, c])
        out[:, band] = key
    return out


def lsh_candidates(signatures: np.ndarray, active: np.ndarray, *, bands: int) -> np.ndarray:
    """Sorted unique (i, j) pairs, i < j, of active rows that share at least one band of their signature."""
    idx = np.flatnonzero(active)
    keys = band_keys(signatures[idx], bands=bands)
    found: list[np.ndarray] = []
    for band in range(bands):
        key = keys[:, band]
        order = np.argsort(key, kind="stable")
        sk = key[order]
        same = sk[1:] == sk[:-1]
        if not same.any():
            continue
        # Runs of equal keys are the buckets; pair every member with every later one.
        bounds = np.flatnonzero(np.diff(np.concatenate(([False], same, [False])).astype(np.int8)))
        for lo, hi in zip(bounds[::2], bounds[1::2] + 1, strict=True):
            members = np.sort(idx[order[lo:hi]])
            if len(members) > _MAX_BUCKET:
                pairs = np.stack([np.full(len(members) - 1, members[0]), members[1:]], axis=1)
            else:
                ii, jj = np.triu_indices(len(members), k=1)
                pairs = np.stack([members[ii], members[jj]], axis=1)
            found.append(pairs)
    if not found:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(found).astype(np.int64), axis=0)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Jaccard similarity of two sorted unique arrays."""
    if len(a) == 0 and len(b) == 0:
        return 0.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def near_duplicate_pairs(
    texts: Sequence[str],
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[tuple[int, int, float]]:
    """(i, j, jaccard) for each LSH-proposed pair of texts, i < j, whose shingle Jaccard >= threshold."""
    return _verified_pairs(shingle_texts(texts), threshold)


def _verified_pairs(
    shingles: ShingleSets, threshold: float, sig: np.ndarray | None = None
) -> list[tuple[int, int, float]]:
    """LSH candidate pairs of the shingle sets, kept only if their true Jaccard reaches the threshold."""
    sig = minhash_signatures(shingles) if sig is None else sig
    cands = lsh_candidates(sig, np.diff(shingles.offsets) > 0, bands=lsh_bands(threshold, sig.shape[1]))
    sets: dict[int, np.ndarray] = {}
    out: list[tuple[int, int, float]] = []
    for i, j in cands.tolist():
        si = sets.get(i)
        if si is None:
            si = sets[i] = shingles.unique(i)
        sj = sets.get(j)
        if sj is None:
            sj = sets[j] = shingles.unique(j)
        sim = jaccard(si, sj)
        if sim >= threshold:
            out.append((i, j, sim))
    return out


def near_similarity(a: str, b: str) -> float:
    """Jaccard similarity of the word 3-shingle sets of two texts (0.0 when either is too short)."""
    shingles = shingle_texts([a, b])
    return jaccard(shingles.unique(0), shingles.unique(1))


def is_near_duplicate(a: str, b: str, *, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """Whether two abstracts are the same text up to wrapping, markup and a few changed words."""
    return normalize_text(a) == normalize_text(b) or near_similarity(a, b) >= threshold


def _find(parent: list[int], x: int) -> int:
    """Union-find root of x, halving the path on the way."""
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def rep_key(rec: Record, norm_len: int, thash: str) -> tuple[Any, ...]:
    """Sort key whose minimum is the representative: titled, longest, smallest hash, then stable fields."""
    p = rec.provenance
    return (
        rec.title is None,
        -norm_len,
        thash,
        rec.title or "",
        rec.external_id or "",
        p.file,
        p.kind,
        p.number,
    )


def same_paper(other: str, own_hash: str, text: str) -> bool:
    """Whether ``other`` is the abstract ``text`` (whose normalized hash is ``own_hash``) or a near copy of it."""
    return text_hash(other) == own_hash or is_near_duplicate(other, text)


def deduplicate(
    records: Sequence[Record],
    *,
    near: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
    previous: PreviousIdentity | None = None,
) -> DedupResult:
    """Merge exact and (if near) near-duplicate records into one Document per group.

    With ``previous`` (the live version's documents, on a refresh), a text that created a document stays
    its representative, so the document keeps its id and vector when copies join it; see identity.py.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold}")
    # Exact groups, keyed by the hash of the normalized text, in order of first appearance.
    hashes: list[str] = []
    norm_lens: list[int] = []
    group_of_hash: dict[str, int] = {}
    exact_members: list[list[int]] = []
    group_norm: list[str] = []  # the normalized text each exact group shares
    for i, rec in enumerate(records):
        norm = normalize_text(rec.text)
        h = hashlib.sha256(norm.encode("utf-8")).hexdigest()
        hashes.append(h)
        norm_lens.append(len(norm))
        g = group_of_hash.get(h)
        if g is None:
            group_of_hash[h] = g = len(exact_members)
            exact_members.append([])
            group_norm.append(norm)
        exact_members[g].append(i)
    n_groups = len(exact_members)

    origins = previous.origins if previous is not None else frozenset()

    def rep_of(members: Sequence[int]) -> int:
        # A text some live document was derived from stays that document's representative.
        return min(members, key=lambda i: (hashes[i] not in origins, *rep_key(records[i], norm_lens[i], hashes[i])))

    exact_reps = [rep_of(m) for m in exact_members]
    # Texts of live documents that no source provides any more: near copies of them inherit their ids.
    ghosts = previous.vanishing(set(group_of_hash)) if previous is not None and near else []
    n_nodes = n_groups + len(ghosts)
    parent = list(range(n_nodes))
    shingles: ShingleSets | None = None
    sig: np.ndarray | None = None
    if near and n_nodes > 0:
        canon = [canonical_normalized(n) for n in group_norm] + [canonical_for_near(text) for _, text in ghosts]
        shingles = _shingle_canonical(canon)
        sig = minhash_signatures(shingles)
        for gi, gj, _sim in _verified_pairs(shingles, threshold, sig):
            ri, rj = _find(parent, gi), _find(parent, gj)
            if ri != rj:
                # Keep the smaller (earlier) root so roots stay in first-appearance order.
                parent[max(ri, rj)] = min(ri, rj)
    if near:
        # A PDF and another source's record of the paper it shows the DOI or arXiv id of: one paper, whatever
        # their abstracts say (see paper_ids.py).
        for i, j in same_paper_links(records):
            ri, rj = _find(parent, group_of_hash[hashes[i]]), _find(parent, group_of_hash[hashes[j]])
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    # Final groups: lists of exact-group indices, ordered by first appearance (root is the earliest group).
    final: dict[int, list[int]] = {}
    for g in range(n_nodes):
        final.setdefault(_find(parent, g), []).append(g)

    documents: list[Document] = []
    touched: list[set[str]] = []  # per document, the previous ids whose texts it holds
    near_pairs: list[tuple[str, str, float]] = []
    for nodes in final.values():
        groups = [g for g in nodes if g < n_groups]
        if not groups:
            continue  # a vanished document that nothing resembles: it is removed
        members = sorted(i for g in groups for i in exact_members[g])
        rep = rep_of([exact_reps[g] for g in groups])
        doc = make_document(records, members, rep, hashes[rep], hashes)
        documents.append(doc)
        if previous is not None:
            held = {previous.owner[h] for h in [doc.text_hash, *doc.texts] if h in previous.owner}
            touched.append(held | {ghosts[g - n_groups][0] for g in nodes if g >= n_groups})
        if len(groups) > 1 and shingles is not None:
            rep_group = group_of_hash[hashes[rep]]
            rep_set = shingles.unique(rep_group)
            for g in groups:
                if g != rep_group:
                    # Similarity to the kept text itself, which in a chain A~B~C can be below the threshold.
                    sim = round(jaccard(rep_set, shingles.unique(g)), 4)
                    near_pairs.append((doc.id, records[exact_members[g][0]].provenance.label(), sim))
    if previous is not None:
        previous.assign_aliases(documents, touched)
    keys = None
    if sig is not None and shingles is not None:
        keys = _near_keys(sig, shingles, documents, n_groups, group_of_hash, lsh_bands(threshold, sig.shape[1]))
    return DedupResult(
        documents=documents,
        read=len(records),
        exact_duplicates=len(records) - n_groups,
        near_duplicates=n_groups - len(documents),
        near_pairs=near_pairs,
        near_keys=keys,
    )


def _near_keys(
    sig: np.ndarray,
    shingles: ShingleSets,
    documents: Sequence[Document],
    n_groups: int,
    group_of_hash: dict[str, int],
    bands: int,
) -> NearKeys:
    """The LSH band keys of every text the documents hold, for a later refresh to check arrivals against."""
    owner = np.full(n_groups, -1, dtype=np.int64)
    origin = np.zeros(n_groups, dtype=bool)
    for doc in documents:
        num = int(doc.id, 16)
        for h in (doc.text_hash, *doc.texts):
            g = group_of_hash.get(h)
            if g is not None:
                owner[g] = num
                origin[g] = h == doc.text_hash
    groups = np.flatnonzero((np.diff(shingles.offsets)[:n_groups] > 0) & (owner >= 0))
    return NearKeys(band_keys(sig[groups], bands=bands), owner[groups], origin[groups])


def make_document(
    records: Sequence[Record], members: list[int], rep: int, rep_hash: str, hashes: Sequence[str]
) -> Document:
    """One Document from its members (in input order) and its representative."""
    r = records[rep]
    title = r.title
    if title is None:
        # A titled copy lends its title to an untitled representative.
        title = next((records[i].title for i in members if records[i].title is not None), None)
    sources: list[Provenance] = []
    seen_sources: set[Provenance] = set()
    external_ids: list[str] = []
    seen_ids: set[str] = set()
    metadata: dict[str, Any] = dict(r.metadata)
    collection = r.collection
    for i in members:
        rec = records[i]
        if rec.provenance not in seen_sources:
            seen_sources.add(rec.provenance)
            sources.append(rec.provenance)
        if rec.external_id is not None and rec.external_id not in seen_ids:
            seen_ids.add(rec.external_id)
            external_ids.append(rec.external_id)
        for key, value in rec.metadata.items():
            metadata.setdefault(key, value)
        if collection is None:
            collection = rec.collection
    if collection is not None:
        metadata["collection"] = collection
    return Document(
        id=doc_id_for(rep_hash),
        text=r.text,
        title=title,
        sources=sources,
        external_ids=external_ids,
        metadata=metadata,
        text_hash=rep_hash,
        title_only=r.title_only,
        texts=sorted({hashes[i] for i in members} - {rep_hash}),
        # The full text's passages (--full-text) of the first copy read from a PDF: the kept one's when it has them.
        passages=next((records[i].passages for i in [rep, *members] if records[i].passages), []),
    )
