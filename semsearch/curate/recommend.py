"""Recommendations: papers like the ones you liked (and unlike the ones you did not), each hit explained.

The scorers work on plain matrices, so that a benchmark scores exactly what the library runs. Each takes the
candidates' unit vectors ``X`` (rows), the positives' vectors ``P`` and the negatives' vectors ``N`` and returns
one score per candidate row, higher is better:

- ``centroid`` (Rocchio): cosine to mean(P) − ``NEGATIVE_SHARE``·mean(N).
- ``maxsim``: cosine to the nearest positive, minus ``NEGATIVE_SHARE`` times the cosine to the nearest negative.
- ``svm``: a linear SVM trained for this request (positives against the rest of the corpus, a sample of at
  most ``SVM_BACKGROUND`` documents, and the negatives with extra weight), as arxiv-sanity-lite does per user;
  the score is its decision value. ``svm-bm25`` is the same over the documents' BM25 term weights
  (arxiv-sanity-lite's tf-idf features) instead of the embeddings.
- ``fused``: 0.5·z(svm) + 0.5·z(svm-bm25), each z-scored over the candidates (the hybrid search's recipe).
- ``related``: cosine to the first positive only (what ``semsearch related`` gives): the floor.

``DEFAULT_METHOD`` is the one that recommends best on the collections docs/explanation/quality.md reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from semsearch.core.errors import QueryError
from semsearch.core.records import Document, GivenPaper, Hit

if TYPE_CHECKING:
    from scipy.sparse import spmatrix

    from semsearch.query.search import Index

METHODS = ("centroid", "maxsim", "svm", "svm-bm25", "fused", "related")
DEFAULT_METHOD = "fused"
NEGATIVE_SHARE = 0.5  # how much the negatives pull (Rocchio's gamma relative to beta = 1)
SVM_C = 0.1  # embeddings; arxiv-sanity-lite uses 0.01 on tf-idf
SVM_C_SPARSE = 0.01
SVM_BACKGROUND = 20_000  # unlabelled documents (sampled) that stand as the rest of the corpus
NEGATIVE_WEIGHT = 5.0  # an explicit "not for me" counts as much as this many unlabelled documents
SEED = 0


@dataclass
class Because:
    """The positive a recommendation is nearest to (cosine of the two embeddings)."""

    id: str | None  # None for a --like-text abstract
    label: str
    cosine: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "label": self.label, "cosine": round(self.cosine, 6)}


@dataclass
class Recommendation:
    """A recommended paper: the hit, and which of the liked papers it is nearest to."""

    hit: Hit
    because: Because
    method: str = DEFAULT_METHOD
    added: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = self.hit.to_dict()
        out["method"] = self.method
        out["because"] = self.because.to_dict()
        if self.added:
            out["added"] = self.added
        return out


# ---------------------------------------------------------------- scorers (matrices in, scores out)


def zscore(scores: np.ndarray) -> np.ndarray:
    """Scores centred and scaled over the candidates (0 = average candidate)."""
    scores = np.asarray(scores, dtype=np.float64)
    sd = float(scores.std())
    return (scores - scores.mean()) / sd if sd > 0 else np.zeros_like(scores)


def centroid_scores(X: np.ndarray, P: np.ndarray, N: np.ndarray | None = None) -> np.ndarray:
    q = P.mean(axis=0)
    if N is not None and len(N):
        q = q - NEGATIVE_SHARE * N.mean(axis=0)
    norm = float(np.linalg.norm(q))
    return np.asarray(X @ (q / norm if norm > 0 else q))


def maxsim_scores(X: np.ndarray, P: np.ndarray, N: np.ndarray | None = None) -> np.ndarray:
    out = np.asarray(X @ P.T).max(axis=1)
    if N is not None and len(N):
        out = out - NEGATIVE_SHARE * np.asarray(X @ N.T).max(axis=1)
    return np.asarray(out)


def svm_scores(
    X: Any,
    pos_rows: Sequence[int],
    neg_rows: Sequence[int] = (),
    *,
    extra_pos: Any = None,
    C: float = SVM_C,
    background: int = SVM_BACKGROUND,
    seed: int = SEED,
) -> np.ndarray:
    """Decision values of a linear SVM: the positives (rows of X, plus ``extra_pos`` rows) against the rest.

    ``X`` is dense or scipy-sparse; the unlabelled background is a seeded sample of at most ``background``
    rows (all of them on small corpora); negatives weigh ``NEGATIVE_WEIGHT`` each.
    """
    from sklearn.svm import LinearSVC

    n = X.shape[0]
    pos = np.unique(np.asarray(pos_rows, dtype=np.int64))
    neg = np.setdiff1d(np.unique(np.asarray(neg_rows, dtype=np.int64)), pos)
    labelled = np.union1d(pos, neg)
    rest = np.setdiff1d(np.arange(n), labelled)
    if len(rest) > background:
        rest = np.sort(np.random.default_rng(seed).choice(rest, background, replace=False))
    rows = np.concatenate([pos, neg, rest])
    y = np.concatenate([np.ones(len(pos)), np.zeros(len(neg) + len(rest))])
    w = np.concatenate([np.ones(len(pos)), np.full(len(neg), NEGATIVE_WEIGHT), np.ones(len(rest))])
    train = X[rows]
    if extra_pos is not None and extra_pos.shape[0]:
        train = _stack(train, extra_pos)
        y = np.concatenate([y, np.ones(extra_pos.shape[0])])
        w = np.concatenate([w, np.ones(extra_pos.shape[0])])
    if y.min() == y.max():
        raise QueryError("a recommendation needs at least one liked paper and one other paper in the index")
    # liblinear shuffles its coordinates at random: a fixed seed makes a request answer the same every time.
    clf = LinearSVC(class_weight="balanced", C=C, max_iter=10_000, tol=1e-6, random_state=0)
    clf.fit(train, y, sample_weight=w)
    return np.asarray(clf.decision_function(X), dtype=np.float64)


def _stack(a: Any, b: Any) -> Any:
    from scipy import sparse

    if sparse.issparse(a) or sparse.issparse(b):
        return sparse.vstack([sparse.csr_matrix(a), sparse.csr_matrix(b)]).tocsr()
    return np.vstack([a, b])


def method_scores(
    method: str,
    X: np.ndarray,
    pos_rows: Sequence[int],
    neg_rows: Sequence[int] = (),
    *,
    extra_pos: np.ndarray | None = None,
    sparse_features: Any = None,
    sparse_extra_pos: Any = None,
    background: int = SVM_BACKGROUND,
) -> np.ndarray:
    """One score per row of ``X`` under a method (see the module docstring).

    ``pos_rows``/``neg_rows`` are rows of X (and of ``sparse_features``, the rows' BM25 term weights);
    ``extra_pos`` holds positives that are not rows (a --like-text abstract).
    """
    if method not in METHODS:
        raise QueryError(f"unknown method {method!r} (choose from {', '.join(METHODS)})")
    P = X[np.asarray(pos_rows, dtype=np.int64)] if len(pos_rows) else np.zeros((0, X.shape[1]), np.float32)
    if extra_pos is not None and len(extra_pos):
        P = np.vstack([P, extra_pos])
    if not len(P):
        raise QueryError("name at least one liked paper (--like) or abstract (--like-text)")
    N = X[np.asarray(neg_rows, dtype=np.int64)] if len(neg_rows) else None
    if method == "centroid":
        return centroid_scores(X, P, N)
    if method == "maxsim":
        return maxsim_scores(X, P, N)
    if method == "related":
        return np.asarray(X @ P[0])
    if method == "svm":
        return svm_scores(X, pos_rows, neg_rows, extra_pos=extra_pos, background=background)
    if sparse_features is None:
        raise QueryError(f"method {method!r} needs the BM25 index")
    bm25 = svm_scores(
        sparse_features, pos_rows, neg_rows, extra_pos=sparse_extra_pos, C=SVM_C_SPARSE, background=background
    )
    if method == "svm-bm25":
        return bm25
    dense = svm_scores(X, pos_rows, neg_rows, extra_pos=extra_pos, background=background)
    return 0.5 * zscore(dense) + 0.5 * zscore(bm25)


def bm25_features(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, n_docs: int) -> spmatrix:
    """The documents' BM25 term weights as an L2-normalised CSR matrix (row = the lexical index's row)."""
    from scipy import sparse
    from sklearn.preprocessing import normalize

    csc = sparse.csc_matrix((data, indices, indptr), shape=(n_docs, len(indptr) - 1))
    return normalize(csc.tocsr().astype(np.float32), norm="l2", copy=False)


# ---------------------------------------------------------------- the library call: recommend(index, ...)


def resolve_liked(index: Index, keys: Sequence[str]) -> list[Document]:
    """Documents named by tags (their live members) or by ids / external ids / prefixes / DOIs."""
    from semsearch.core.errors import UnknownDocumentError
    from semsearch.curate.tags import TagStore, all_members, resolve_papers

    store = TagStore(index.path)
    tags = store.read()
    # Reading only: a recommendation never rewrites the tags file (a read-only server calls this). One read for
    # all the named tags, not one each.
    named = all_members(index, store, list(dict.fromkeys(k for k in keys if k in tags)), repoint=False)
    out: list[Document] = []
    for key in keys:
        if key in tags:
            live = [m.live_id for m in named[key] if m.live_id is not None]
            out.extend(index.store.find(i) or _missing(i) for i in live)
        else:
            try:
                out.extend(resolve_papers(index, [key]))
            except UnknownDocumentError as exc:
                known = ", ".join(sorted(tags)) or "none yet"
                raise UnknownDocumentError(
                    f"{key!r} is neither a tag (tags: {known}) nor a paper of {index.path} (an id, external id or DOI)"
                ) from exc
    seen: set[str] = set()
    return [d for d in out if not (d.id in seen or seen.add(d.id))]  # type: ignore[func-returns-value]


def _missing(doc_id: str) -> Document:
    from semsearch.core.errors import UnknownDocumentError

    raise UnknownDocumentError(f"no document {doc_id!r}")


def since_clause(since: str | None, index: Index) -> list[str]:
    """``--since VERSION|DATE|last`` as a ``--where`` clause on the arrival fields (see semsearch.curate.arrivals)."""
    if since is None:
        return []
    from semsearch.curate.arrivals import since_where

    return since_where(index, since)


def recommend(
    index: Index,
    like: Sequence[str] = (),
    k: int = 10,
    *,
    not_like: Sequence[str] = (),
    like_texts: Sequence[str] = (),
    like_papers: Sequence[GivenPaper] = (),
    where: Sequence[str] = (),
    since: str | None = None,
    include_tagged: bool = False,
    method: str | None = None,
) -> list[Recommendation]:
    """Papers like the liked ones and unlike ``not_like``; each names the liked paper it is nearest to.

    Args:
        like: tag names (their papers) and paper ids, external ids, id prefixes or DOIs.
        not_like: the same, for papers you do not want more of.
        like_texts: abstracts you have that are not in the index.
        like_papers: the files some of them were read from (``paper_of_file``): the documents that are those
            papers (a PDF with the same content, the same DOI or arXiv id: ``query.given``) are never recommended.
        where: metadata filters, as for ``Index.search``; ``since``: a version, a date or "last" (arrived since).
        include_tagged: also return papers that are in any tag (left out by default).
        method: see ``METHODS``; the default is ``DEFAULT_METHOD``, the best in docs/explanation/quality.md.
    """
    method = method or DEFAULT_METHOD
    from semsearch.core.limits import check_k, check_text
    from semsearch.curate.tags import TagStore
    from semsearch.store.layout import doc_num

    check_k(k)
    if method not in METHODS:
        raise QueryError(f"unknown method {method!r} (choose from {', '.join(METHODS)})")
    texts = [check_text(t, "liked abstract") for t in like_texts]
    store = TagStore(index.path)
    negative_tags = store.negative_names()
    for key in like:
        if key in negative_tags:
            raise QueryError(
                f"tag {key!r} is a negative tag (papers not for you): name it in --not, or make it an interest "
                f"with: semsearch tag create {key} --positive"
            )
    # A negative tag always counts against: a dislike recorded once steers every recommendation.
    not_like = list(dict.fromkeys([*not_like, *negative_tags]))
    pos_docs = resolve_liked(index, like)
    neg_docs = resolve_liked(index, not_like)
    if not pos_docs and not texts:
        raise QueryError(
            "name at least one liked paper (--like TAG|ID) or abstract (--like-text); "
            "a tag whose papers all left the index likes nothing"
        )
    clauses = list(where) + since_clause(since, index)
    allowed = index.allowed_rows(clauses)
    vectors = index.vectors
    X = np.asarray(vectors.matrix, dtype=np.float32)
    nums = vectors.ids
    pos_rows = vectors.rows_of([doc_num(d.id) for d in pos_docs]).tolist()
    neg_rows = vectors.rows_of([doc_num(d.id) for d in neg_docs]).tolist()
    extra = index.encode_abstracts(texts) if texts else None
    sparse_x = sparse_extra = None
    if method in ("svm-bm25", "fused"):
        sparse_x, sparse_extra = _sparse_inputs(index, nums, texts)
    scores = method_scores(
        method, X, pos_rows, neg_rows, extra_pos=extra, sparse_features=sparse_x, sparse_extra_pos=sparse_extra
    )
    # Candidates: what the filters allow, never the request's own papers, and no tagged paper unless asked.
    keep = np.ones(len(nums), dtype=bool)
    if allowed is not None:
        keep &= np.isin(nums, allowed)
    leave_out = {d.id for d in pos_docs} | {d.id for d in neg_docs}
    if not include_tagged:
        leave_out |= store.tagged_ids()
    if leave_out:
        keep &= ~np.isin(nums, [doc_num(i) for i in leave_out])
    if texts:
        keep &= ~_copies_of(X, extra, nums, index, texts)
    rows = np.flatnonzero(keep)
    order = _without_papers(index, rows[np.lexsort((nums[rows], -scores[rows]))], nums, like_papers, k)
    docs = index.store.get_many([int(nums[r]) for r in order])
    P = np.vstack([X[pos_rows]] + ([extra] if extra is not None else [])) if pos_rows else extra
    labels: list[tuple[str | None, str]] = [(d.id, d.label()) for d in pos_docs] + [(None, _opening(t)) for t in texts]
    out = []
    for rank, row in enumerate(order, start=1):
        doc = docs[int(nums[row])]
        hit = Hit.of(rank, float(scores[row]), doc, f"recommend:{method}")
        cos = np.asarray(P @ X[row]) if P is not None else np.zeros(0)
        best = int(cos.argmax())
        hit.scores = {"dense": round(float(cos[best]), 6)}
        out.append(Recommendation(hit, Because(labels[best][0], labels[best][1], float(cos[best])), method))
    return out


def _opening(text: str, words: int = 12) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


def _copies_of(X: np.ndarray, extra: np.ndarray | None, nums: np.ndarray, index: Index, texts: Sequence[str]) -> Any:
    """Rows holding a copy of a --like-text abstract (checked among its 5 nearest), which are not news."""
    from semsearch.dedup.duplicates import same_paper, text_hash

    out = np.zeros(len(nums), dtype=bool)
    if extra is None:
        return out
    for vec, text in zip(extra, texts, strict=True):
        near = np.argsort(-(X @ vec))[:5]
        docs = index.store.get_many([int(nums[r]) for r in near])
        own = text_hash(text)
        for r in near:
            if same_paper(docs[int(nums[r])].text, own, text):
                out[r] = True
    return out


def _without_papers(
    index: Index, order: np.ndarray, nums: np.ndarray, papers: Sequence[GivenPaper], k: int
) -> np.ndarray:
    """The first ``k`` rows of ``order`` that are none of the liked files' papers (``query.given``)."""
    if not papers:
        return order[:k]
    from semsearch.query.given import GivenMatch

    matches = [m for m in (GivenMatch(p, index.manifest.sources) for p in papers) if m]
    if not matches:
        return order[:k]
    out: list[int] = []
    start = 0
    while len(out) < k and start < len(order):
        chunk = order[start : start + k + 5]  # a few more than k: those papers are few
        docs = index.store.get_many([int(nums[r]) for r in chunk])
        out.extend(int(r) for r in chunk if not any(m(docs[int(nums[r])]) for m in matches))
        start += len(chunk)
    return np.asarray(out[:k], dtype=np.int64)


def _sparse_inputs(index: Index, nums: np.ndarray, texts: Sequence[str]) -> tuple[Any, Any]:
    """BM25 features in the vector rows' order, and rows for --like-text abstracts (their BM25 query weights)."""
    from scipy import sparse

    lex = index.lexical

    def build() -> Any:
        rows = lex.rows_of(nums)
        if (rows < 0).any():
            raise QueryError("the BM25 index lacks some documents; rebuild with: semsearch index --full")
        return bm25_features(*lex.csc(), len(lex))[rows]

    feats = index.memo("recommend.bm25", build)
    extra = None
    if texts:
        from sklearn.preprocessing import normalize

        weights = [lex.query_weights(t) for t in texts]
        data = [v for w in weights for v in w.values()]
        cols = [c for w in weights for c in w]
        indptr = np.cumsum([0] + [len(w) for w in weights])
        extra = normalize(sparse.csr_matrix((data, cols, indptr), shape=(len(texts), feats.shape[1]), dtype=np.float32))
    return feats, extra
