"""Query an index: nearest abstracts to a text, or to a paper already in the index."""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from semsearch.core import options
from semsearch.core.errors import IndexCorruptError, NoMatchWarning, QueryError, UnknownDocumentError
from semsearch.core.latex import latex_to_text
from semsearch.core.limits import check_finite, check_k, check_text
from semsearch.core.options import MODES
from semsearch.core.paperinfo import year_of
from semsearch.core.records import Document, Hit, SourceFile
from semsearch.dedup.duplicates import same_paper, text_hash
from semsearch.encode.embedder import Embedder
from semsearch.encode.encoder_choice import check_requested_model, open_query_encoder
from semsearch.query.fusion import (
    DEFAULT_DEPTH,
    DEFAULT_NORM,
    FusionChoice,
    FusionPolicy,
    QuerySignal,
    convex_arrays,
    diversify,
)
from semsearch.query.highlight import best_sentences, matched_terms
from semsearch.query.neighbours import SUBJECT_POOL, subject_order
from semsearch.query.spelling import Spelling, Vocabulary, correct
from semsearch.query.syntax import ParsedQuery, admits, parse_query, searchable
from semsearch.store.ann import VECTORS, open_version_vectors
from semsearch.store.documents import open_documents
from semsearch.store.filter_columns import FilterColumns
from semsearch.store.filters import evaluate, parse_where
from semsearch.store.layout import current_version, doc_id_from_num, doc_num, with_point_back
from semsearch.store.lexical import Analyzer, BM25Index
from semsearch.store.manifest import Manifest
from semsearch.store.windows_part import RESCORE_DEPTH, open_windows

T = TypeVar("T")
DEFAULT_INDEX = Path(options.DEFAULT_INDEX)
# --diverse, chosen on SciFact train by scripts/study_diverse.py: MMR's λ (nDCG@10 0.655 vs 0.660 by relevance,
# intra-list cosine 0.450 vs 0.475), and the relevance floor: a candidate whose cosine is below this fraction of the
# best candidate's is never promoted (see fusion.diversify); on SciFact it gives back 9% of the diversity gained.
DIVERSITY_LAMBDA = 0.6
DIVERSITY_FLOOR = 0.5
FILTER_CACHE = 32  # --where answers an open Index remembers
MAX_NAMED = 5000  # a name query's papers read to order them (a name shared that widely is no one person)


def default_index_path() -> Path:
    """The index used when none is named: $SEMSEARCH_INDEX, else indexes/default."""
    env = os.environ.get(options.INDEX_ENV, "").strip()
    return Path(env) if env else DEFAULT_INDEX


@dataclass
class IndexInfo:
    """What ``semsearch info`` shows: the manifest plus what is measured on disk."""

    path: str
    version: str
    format_version: int
    model: str
    fingerprint: str
    dimension: int
    backend: str
    precision: str
    documents: int
    read: int
    exact_duplicates: int
    near_duplicates: int
    faiss: str
    ann: str
    ann_spec: dict[str, Any]
    built_at: str
    build_seconds: float
    size_bytes: int
    sources: list[SourceFile] = field(default_factory=list)
    title_only: int = 0  # documents indexed by their title alone (no abstract)
    aliases: int = 0  # former ids that still resolve to a document
    catalogue: dict[str, Any] | None = None  # the build's catalogue join (semsearch.write.catalogue), if any
    map: dict[str, Any] = field(default_factory=dict)  # the manifest's map entry: method, clusters, when laid out
    segments: int = 0  # segments appended since the index was last written whole (segments.py)
    hidden: int = 0  # rows of its segments the version no longer holds
    reading: str = "truncated"  # how vectors read long abstracts (options.READINGS)
    windows: int = 0  # window (or sentence) vectors kept beside the documents' vectors
    fusion: str = ""  # how hybrid weighs its two sides, in words (FusionPolicy.describe)

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["sources"] = [s.to_dict() for s in self.sources]
        return out


@dataclass
class Ranking:
    """One request's candidates, best first, with the scores seen on the way and what was asked."""

    ranked: list[tuple[int, float]]  # (FAISS id, score in the mode's units)
    dense: dict[int, float]  # cosines of the dense candidates
    lexical: dict[int, float]  # BM25 scores of the lexical candidates
    vector: np.ndarray | None  # the query (or paper) vector; None for a lexical search without MMR
    text: str  # the query text ("" for related)
    mode: str
    fusion: FusionChoice | None = None  # hybrid only: the weight its two sides got, and why


@dataclass(frozen=True)
class QueryReading:
    """A parsed query read against an index (``Index.read_query``)."""

    where: tuple[str, ...]  # --where clauses: its year:/title:/venue: and the author: values that name no one
    authored: dict[int, str]  # papers of the people author: names, each with the name as the paper gives it
    people: np.ndarray | None  # those papers' numbers, in every author: value's (None: no author: names someone)
    rank_text: str  # the words to rank by: the text, else the title:/venue: values and the unresolved names


@dataclass(frozen=True)
class Candidates:
    """Hybrid's two candidate lists for one query, each (FAISS ids, scores) best first, of ``depth`` asked for."""

    dense: tuple[np.ndarray, np.ndarray]
    lexical: tuple[np.ndarray, np.ndarray]
    depth: int
    signal: QuerySignal | None = None  # what the query's words are worth in the index (adaptive fusion reads it)

    def fuse(self, policy: FusionPolicy, want: int) -> tuple[list[tuple[int, float]], FusionChoice]:
        """The best ``want`` as (FAISS id, fused score) under ``policy``, and the weight it chose."""
        choice = policy.choose(self.dense[1], self.lexical[1], self.depth, self.signal)
        # The z-scores take all 2 x 1000 candidates; the hits need only the best ``want``.
        ids, fused = convex_arrays(
            *self.dense,
            *self.lexical,
            alpha=choice.alpha,
            norm=DEFAULT_NORM,
            limit=want,
            lexical_depth=choice.lexical_depth,
        )
        return list(zip(ids.tolist(), fused.tolist(), strict=True)), choice


@dataclass(frozen=True)
class Shape:
    """How a ranking becomes hits: how many, a score floor, MMR, and whether to explain each hit."""

    k: int
    min_score: float | None = None
    diverse: bool = False
    diversity: float = DIVERSITY_LAMBDA
    explain: bool = True

    def __post_init__(self) -> None:
        check_finite(self.min_score, "min_score")  # NaN dropped every hit: "no results", as if none matched

    @property
    def want(self) -> int:
        """Candidates to rank: k, or MMR's pool when --diverse."""
        return _pool_size(self.k) if self.diverse else self.k


class Index:
    """An opened index version: search it by text or by document.

    The encoder is loaded on first use, so opening an index for ``info`` or ``related ID`` is cheap. Features
    (recommendations, digests, arrivals, export) build on its public parts only: ``allowed_rows`` (candidate
    filtering), ``where_warnings``, ``encode_query``, ``memo``, ``lexical``, ``get``, and the version's ``store``
    (documents), ``vectors`` (vectors by document number) and ``manifest``. Whether the sources changed since the
    build is the writer's question (``semsearch.write.freshness.stale_sources(index.manifest)``), not the index's.
    """

    def __init__(
        self,
        path: Path,
        version: Path,
        manifest: Manifest,
        *,
        embedder: Embedder | None = None,
        model: str | None = None,
        query_threads: int | None = None,
    ) -> None:
        self.path = path
        self.version = version
        self.manifest = manifest
        self._embedder = embedder
        self._query_threads = query_threads  # the query encoder's ONNX threads (None: open_query_encoder's default)
        self._lexical: BM25Index | None = None
        self._filters: dict[tuple[str, ...], tuple[np.ndarray, list[str]]] = {}
        self._filters_lock = threading.Lock()
        self._columns: FilterColumns | None = None  # the --where column index, read on the first filter
        self._memo: dict[str, Any] = {}  # what features derive from this version, built once (see memo)
        self.fusion = FusionPolicy.from_entry(manifest.fusion)  # how hybrid weighs its sides (none recorded: 0.5)
        manifest.check_file_sizes(version)
        self.ann, self.vectors = open_version_vectors(version, manifest)
        self.store = open_documents(version, manifest)
        # --reading windows: each long abstract's tail windows, which re-score a search's dense candidates.
        self.windows = open_windows(version, manifest)
        expected = manifest.counts.vectors
        if self.ann.ntotal != expected or self.store.count() != expected:
            raise IndexCorruptError(
                f"{version} holds {self.ann.ntotal} vectors and {self.store.count()} documents, expected {expected}"
            )
        # Fail at open, not at the first query, when the caller asked for another model.
        if model is not None:
            check_requested_model(manifest, model)
        if embedder is not None:
            manifest.model.check_embedder(embedder.name, embedder.fingerprint, embedder.dimension)

    @classmethod
    def open(
        cls, path: str | Path | None = None, *, embedder: Embedder | None = None, model: str | None = None
    ) -> Index:
        """Open the live version of the index at ``path`` (default: $SEMSEARCH_INDEX or indexes/default)."""
        index_path = Path(path) if path is not None else default_index_path()
        version = current_version(index_path)
        try:
            return cls(index_path, version, Manifest.read(version), embedder=embedder, model=model)
        except IndexCorruptError as exc:  # the live version is damaged: name an older intact one to point back to
            better = with_point_back(index_path, version, exc)
            if better is exc:
                raise
            raise better from exc

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the document store and the memory maps (a pruned version's files are freed with them)."""
        self.store.close()
        self.ann.index = None
        self.vectors.matrix = np.zeros((0, self.vectors.dimension), dtype=np.float32)
        self.windows = None
        self._lexical = None

    def __len__(self) -> int:
        return self.ann.ntotal

    @property
    def embedder(self) -> Embedder:
        """The query encoder (loaded on first use)."""
        if self._embedder is None:
            if self._query_threads is None:
                self._embedder = open_query_encoder(self.manifest, self.version)
            else:
                self._embedder = open_query_encoder(self.manifest, self.version, threads=self._query_threads)
        return self._embedder

    def info(self) -> IndexInfo:
        """The manifest's facts plus the version's size on disk."""
        m = self.manifest
        size = sum(p.stat().st_size for p in self.version.rglob("*") if p.is_file())
        return IndexInfo(
            path=str(self.path),
            version=self.version.name,
            format_version=m.format_version,
            model=m.model.name,
            fingerprint=m.model.fingerprint,
            dimension=m.model.dimension,
            backend=m.model.backend,
            precision=m.model.precision,
            documents=m.counts.documents,
            read=m.counts.read,
            exact_duplicates=m.counts.exact_duplicates,
            near_duplicates=m.counts.near_duplicates,
            faiss=str(m.faiss.get("type", "")),
            ann=self.ann.spec.describe(),
            ann_spec=self.ann.spec.to_dict(),
            built_at=m.built_at,
            build_seconds=m.build_seconds,
            size_bytes=size,
            sources=list(m.sources),
            title_only=m.counts.title_only,
            aliases=self.store.alias_count(),
            catalogue=m.catalogue,
            map=dict(m.map),
            segments=len(m.segments),
            hidden=m.hidden,
            reading=m.model.reading or "truncated",
            windows=self.windows.count() if self.windows is not None else 0,
            fusion=self.fusion.describe(),
        )

    def get(self, doc_id: str) -> Document:
        """A document by id, unambiguous id prefix, or external id (e.g. a BEIR ``_id``)."""
        doc = self.store.find(doc_id)
        if doc is None and len(doc_id.strip()) >= 6 and len(several := self.store.prefix_ids(doc_id)) > 1:
            raise UnknownDocumentError(
                f"id prefix {doc_id.strip()!r} matches several documents ({', '.join(several[:2])}, ...); "
                "give more digits of the id"
            )
        if doc is None:
            raise UnknownDocumentError(f"no document {doc_id!r} in {self.path} (ids appear in search results)")
        return doc

    def encode_query(self, text: str) -> np.ndarray:
        """The unit-length query vector of a text, shape (1, dimension)."""
        return self.embedder.encode([check_text(text)])[:1]

    def encode_abstracts(self, texts: Sequence[str]) -> np.ndarray:
        """Abstracts given as text, read as this index read its documents: shape (len(texts), dimension).

        With ``--reading sentences`` a document's vector is its sentences' mean (encode/sentence_runs.py), so an
        abstract compared with the documents (``related --file``, ``recommend --like-text``) is read so too.
        """
        read = getattr(self.embedder, "encode_sentences", None)
        if self.manifest.model.reading != "sentences" or not callable(read):
            return self.embedder.encode(list(texts))
        from semsearch.encode.sentence_runs import sentence_text

        got = read([sentence_text(t, "", t) for t in texts])
        return np.stack([np.asarray(vector, dtype=np.float32) for vector, _ in got])

    @property
    def lexical(self) -> BM25Index:
        """The BM25 index of this version, over all its segments (loaded on first use)."""
        if self._lexical is None:
            from semsearch.store.lexical_segments import load_segments

            self._lexical = load_segments(self.manifest.version_segments(self.version))
        return self._lexical

    def search(
        self,
        text: str,
        k: int = 10,
        *,
        mode: str = "hybrid",
        where: Sequence[str] = (),
        min_score: float | None = None,
        diverse: bool = False,
        diversity: float = DIVERSITY_LAMBDA,
        explain: bool = True,
        fusion: str | None = None,
        exact: bool = False,
    ) -> list[Hit]:
        """The k documents that best answer a text, best first.

        Args:
            text: the question, in plain words; a person's name (their papers first, each hit's ``by`` set), and
                fields ``author:"Zhouchen Lin" title:x venue:x year:>=2024 "exact phrase" -word`` (query/syntax.py).
            k: how many hits.
            mode: "hybrid" (default: BM25 and embeddings fused), "dense" (embeddings only; score = cosine)
                or "lexical" (BM25 only; score = BM25).
            where: metadata filters such as ``year>=2024`` (see ``semsearch.store.filters``); k hits are returned
                whenever k documents match. Filters (with the query's own year:, venue:, title:) that match no
                document warn NoMatchWarning, saying why (say, a field no document has), and return [].
            min_score: drop hits scoring below this (in the mode's score units).
            diverse: re-rank with maximal marginal relevance so near-identical papers do not crowd the list.
            diversity: MMR λ (1 = relevance only; the default 0.6 was chosen on SciFact train).
            explain: add each hit's best-matching sentence and the query words it contains.
            fusion: hybrid's weighting, "adaptive" or "fixed" (alpha 0.5); None: what the index records.
            exact: search the words as typed; by default BM25 searches a word the index barely knows as its
                nearest frequent word (``spell`` says what it searched).
        """
        check_k(k)
        text = check_text(text)
        if mode not in MODES:
            raise QueryError(f"unknown mode {mode!r} (choose from {', '.join(MODES)})")
        try:
            policy = self.fusion.with_method(fusion)
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        shape = Shape(k, min_score, diverse, diversity, explain)
        return self._search_parsed(parse_query(text), mode, list(where), shape, policy, exact)

    def spell(self, text: str, *, exact: bool = False) -> Spelling:
        """What BM25 searches for a query: its words to rank by, each word the index barely knows corrected.

        A word whose stem at least ``spelling.KNOWN`` documents hold is never changed; ``exact`` changes none.
        """
        parsed = parse_query(check_text(text))
        return self.spell_words(parsed.text, exact=exact, phrases=bool(parsed.phrases))

    def spell_words(self, words: str, *, exact: bool = False, phrases: bool = False) -> Spelling:
        """``spell`` for words already read out of a query (``phrases``: whether it quoted any).

        A person's name is no misspelling of a word: words that name someone, with no phrase, stay as they are.
        """
        named = bool(words) and not phrases and bool(self.store.people(words))
        return self._corrected(words, exact or named)

    def read_query(self, parsed: ParsedQuery) -> QueryReading:
        """A parsed query read against this index: its filters, the people ``author:`` names, its words to rank by.

        An ``author:`` value that names someone in the index narrows to their papers; one that names no one is an
        ``authors~`` filter and, with the fielded ``title:``/``venue:`` values, ranks when the query has no words.
        """
        where = list(parsed.where)
        authored: dict[int, str] = {}
        unresolved: list[str] = []
        people: np.ndarray | None = None
        for value in parsed.authors:
            found = self.store.people(value)
            if not found:
                where.append(f"authors~{value}")
                unresolved.append(value)
                continue
            nums = {n: name for name, ns in found.items() for n in ns}
            authored.update(nums)
            mine = np.array(sorted(nums), dtype=np.int64)
            people = mine if people is None else np.intersect1d(people, mine)
        fielded = [v for f in ("title", "venue") for v in parsed.fields.get(f, [])]
        return QueryReading(tuple(where), authored, people, parsed.text or " ".join([*fielded, *unresolved]))

    def _corrected(self, words: str, exact: bool) -> Spelling:
        """``words`` (a query's words to rank by, already parsed) as BM25 searches them."""
        if exact or not words:
            return Spelling(words)
        lex = self.lexical
        return correct(
            words,
            lambda word: lex.document_frequency(lex.analyzer.stem(word)),
            lambda: self.memo("spelling.vocabulary", self._vocabulary),
        )

    def _vocabulary(self) -> Vocabulary | None:
        """The words of this version's documents with their document frequencies (None: kept by no segment)."""
        from semsearch.store.lexical import LEXICAL_DIR
        from semsearch.store.words import read_words

        counts = read_words([s.folder / LEXICAL_DIR for s in self.manifest.version_segments(self.version)])
        return None if counts is None else Vocabulary.of(counts)

    def _search_parsed(
        self,
        parsed: ParsedQuery,
        mode: str,
        where: list[str],
        shape: Shape,
        policy: FusionPolicy,
        exact: bool = False,
    ) -> list[Hit]:
        """A parsed query's hits: the papers of the person it names first (a name query), then the ranking.

        ``author:`` values that name people narrow the candidates to their papers (else they are ``authors~``
        filters); phrases and -words are applied to every hit, lexical and dense alike.
        """
        reading = self.read_query(parsed)
        authored, rank_text = reading.authored, reading.rank_text
        filters = [*where, *reading.where]
        allowed = self.allowed_rows(filters)
        self._say_why_nothing_matched(filters, allowed, stacklevel=3)  # this, search, its caller
        if reading.people is not None:
            allowed = reading.people if allowed is None else np.intersect1d(allowed, reading.people)
        # A name query: the text (after any fields) is, as a whole, the name of someone in the index.
        named = self.store.people(parsed.text) if parsed.text and not parsed.phrases else {}
        if not named and not rank_text and authored:
            for num, name in authored.items():  # only author: given: their papers, newest first
                named.setdefault(name, []).append(num)
        if not rank_text and not named:
            raise QueryError(
                f"the query {parsed.raw.strip()!r} has no words to rank by (only fields or -words); add some, "
                'e.g. diffusion year:2025 or author:"Zhouchen Lin"'
            )
        first = self._named_first(named, allowed, parsed, shape.k)
        vector = self.encode_query(rank_text) if rank_text and (mode != "lexical" or shape.diverse) else None
        ranking = Ranking([], {}, {}, vector, rank_text, mode)
        scored: dict[int, float] = {}
        rest = replace(shape, k=shape.k - len(first))
        if rank_text:
            filtered = bool(parsed.phrases or parsed.exclude)
            want = min(len(self), DEFAULT_DEPTH) if filtered else rest.want + len(first)
            # Typos are corrected for BM25 only; the question's own text is what the dense side reads.
            lexical_text = self._corrected(rank_text, exact or bool(named)).text if mode != "dense" else None
            ranking = self._rank(
                rank_text, vector, mode, allowed, want, policy=policy, windows=True, lexical_text=lexical_text
            )
            scored = dict(ranking.ranked)
            placed = set(first)
            ranked = [(n, s) for n, s in ranking.ranked if n not in placed]  # no paper twice
            if filtered:
                docs = self.store.get_many([n for n, _ in ranked])
                ranked = [(n, s) for n, s in ranked if admits(parsed, searchable(docs[n]))]
            ranking = replace(ranking, ranked=ranked)
        # The person's papers are placed by name, not score: each keeps the score the ranking gave it (0 when it
        # was no candidate), and opens with its abstract (a sentence matching a name says nothing).
        person = replace(ranking, ranked=[(n, scored.get(n, 0.0)) for n in first])
        hits = self._finish(person, Shape(len(first), explain=False))
        name_of = {n: name for name, ns in named.items() for n in ns}
        for hit in hits:
            hit.by = name_of[doc_num(hit.id)]
        if rest.k > 0 and ranking.ranked:
            more = self._finish(ranking, rest)
            for hit in more:
                hit.by = authored.get(doc_num(hit.id))
            hits += more
        for rank, hit in enumerate(hits, start=1):
            hit.rank = rank
        return hits

    def _named_first(
        self, named: dict[str, list[int]], allowed: np.ndarray | None, parsed: ParsedQuery, k: int
    ) -> list[int]:
        """The named people's papers that pass the filters, phrases and -words: newest first, at most ``k``."""
        nums = sorted({n for ns in named.values() for n in ns})
        if allowed is not None:
            nums = np.intersect1d(np.array(nums, dtype=np.int64), allowed).tolist()
        docs = self.store.get_many(nums[:MAX_NAMED])
        kept = [n for n in nums[:MAX_NAMED] if admits(parsed, searchable(docs[n]))]
        kept.sort(key=lambda n: (-int(year_of(docs[n].metadata) or 0), n))
        return kept[:k]

    def _rank(
        self,
        text: str,
        vector: np.ndarray | None,
        mode: str,
        allowed: np.ndarray | None,
        want: int,
        exclude: frozenset[int] = frozenset(),
        *,
        policy: FusionPolicy | None = None,
        windows: bool = False,
        lexical_text: str | None = None,
    ) -> Ranking:
        """Candidates best first as (FAISS id, score), with the dense and lexical scores seen on the way.

        With ``windows`` and a windowed index the dense candidates are re-scored by their best window.
        ``lexical_text``: what BM25 searches instead of ``text`` (the query with its typos corrected).
        """
        words = text if lexical_text is None else lexical_text
        pool = len(self) if allowed is None else len(allowed)
        # Hybrid fuses deep lists (tuned on SciFact train: see semsearch.query.fusion); single modes need only k.
        depth = min(pool, max(DEFAULT_DEPTH, want) if mode == "hybrid" else want + len(exclude))
        dense: dict[int, float] = {}
        lexical: dict[int, float] = {}
        if depth == 0:
            return Ranking([], dense, lexical, vector, text, mode)
        empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        dense_top = lexical_top = empty
        if mode in ("dense", "hybrid") and vector is not None:
            dense_top = self._dense_list(vector, depth, allowed, exclude, pool, windows)
            dense = dict(zip(dense_top[0].tolist(), dense_top[1].tolist(), strict=True))
        if mode in ("lexical", "hybrid"):
            lexical_top = self._lexical_top(words, depth, allowed, exclude)
            lexical = dict(zip(lexical_top[0].tolist(), lexical_top[1].tolist(), strict=True))
        if mode == "dense":
            ranked = sorted(dense.items(), key=lambda item: (-item[1], item[0]))
        elif mode == "lexical":
            ranked = sorted(lexical.items(), key=lambda item: (-item[1], item[0]))
        else:
            signal = QuerySignal.measure(self.lexical, words, lexical_top[0], typed=text)
            ranked, choice = Candidates(dense_top, lexical_top, depth, signal).fuse(policy or self.fusion, want)
            return Ranking(ranked, dense, lexical, vector, words, mode, choice)
        return Ranking(ranked, dense, lexical, vector, words, mode)

    def hybrid_candidates(self, text: str) -> Candidates:
        """The two lists hybrid search fuses for ``text`` (no filter), for weighing fusions offline (eval --tune)."""
        text = check_text(text)
        vector = self.encode_query(text)
        pool = len(self)
        depth = min(pool, DEFAULT_DEPTH)
        if depth == 0:
            empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
            return Candidates(empty, empty, 0)
        dense_top = self._dense_list(vector, depth, None, frozenset(), pool, windows=True)
        lexical_top = self._lexical_top(text, depth, None, frozenset())
        signal = QuerySignal.measure(self.lexical, text, lexical_top[0])
        return Candidates(dense_top, lexical_top, depth, signal)

    def _dense_list(
        self,
        vector: np.ndarray,
        depth: int,
        allowed: np.ndarray | None,
        exclude: frozenset[int],
        pool: int,
        windows: bool,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The dense candidates a search ranks: with ``windows`` and a windowed index, re-scored by their windows."""
        rescored = self._dense_top_windows(vector, depth, allowed, exclude, pool) if windows else None
        return rescored or self._dense_top(vector, depth, allowed, exclude)

    def _dense_top(
        self, vector: np.ndarray, depth: int, allowed: np.ndarray | None, exclude: frozenset[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(FAISS ids, cosines) of the ``depth`` nearest documents, best first, leaving out ``exclude``."""
        nums, scores = self.ann.top(vector, min(depth + len(exclude), len(self)), allowed)
        if exclude:
            keep = ~np.isin(nums, np.fromiter(exclude, dtype=np.int64, count=len(exclude)))
            nums, scores = nums[keep], scores[keep]
        return nums[:depth], scores[:depth]

    def _dense_top_windows(
        self, vector: np.ndarray, depth: int, allowed: np.ndarray | None, exclude: frozenset[int], pool: int
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The dense top, at least RESCORE_DEPTH deep, its first RESCORE_DEPTH re-scored by their windows.

        None when the index keeps no windows.
        """
        if self.windows is None:
            return None
        nums, scores = self._dense_top(vector, min(pool, max(depth, RESCORE_DEPTH)), allowed, exclude)
        nums, scores = self.windows.rescore(nums, scores, vector[0])
        return nums[:depth], scores[:depth]

    def _lexical_top(
        self, text: str, depth: int, allowed: np.ndarray | None, exclude: frozenset[int]
    ) -> tuple[np.ndarray, np.ndarray]:
        """(FAISS ids, BM25 scores) of the ``depth`` best-scoring documents, best first, leaving out ``exclude``."""
        lex = self.lexical
        keep = None
        if allowed is not None or exclude:
            keep = np.zeros(len(lex), dtype=bool)
            if allowed is None:
                keep[:] = True
            else:
                rows = lex.rows_of(allowed)
                keep[rows[rows >= 0]] = True
            if exclude:
                rows = lex.rows_of(sorted(exclude))
                keep[rows[rows >= 0]] = False
        rows, scores = lex.top(text, depth, keep)
        return lex.ids[rows], scores

    def memo(self, key: str, build: Callable[[], T]) -> T:
        """``build()``'s result, computed once per open Index: a version never changes, so it cannot go stale.

        For what a feature derives from the whole version (say, recommend's BM25 feature rows), so that a
        long-lived Index (a server, a notebook) pays for it once. Keys are the feature's own (e.g. "recommend.bm25").
        """
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]

    def allowed_rows(self, where: Sequence[str]) -> np.ndarray | None:
        """Document numbers (FAISS ids) of the documents that meet every ``where`` clause (None: no filter).

        A version's column index answers a filter in milliseconds; a version written before it existed is
        scanned (every document once: seconds at 157k). A long-lived Index (a server, a notebook) keeps the
        last few filters' answers either way; a version never changes, so they cannot go stale.
        """
        if not where:
            return None
        return self._filter(where)[0]

    def where_warnings(self, where: Sequence[str]) -> list[str]:
        """Why ``where`` matches no document (a field none has, a clause matching nothing); empty when it matches."""
        return self._filter(where)[1] if where else []

    def _say_why_nothing_matched(self, where: Sequence[str], allowed: np.ndarray | None, *, stacklevel: int) -> None:
        """A NoMatchWarning per reason when ``where`` matches no document: what the command line says on stderr.

        ``stacklevel``, counted from the method that calls this one, points the warning at the library caller's line.
        """
        if allowed is None or len(allowed):
            return
        for line in self.where_warnings(where):
            # The caller passed where=[...], not the --where flag the shared wording names.
            warnings.warn(line.replace("--where", "where"), NoMatchWarning, stacklevel=stacklevel + 1)

    def _filter(self, where: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        key = tuple(where)
        with self._filters_lock:
            found = self._filters.pop(key, None)
        if found is None:
            found = self._evaluate(where)
        with self._filters_lock:  # a server's threads share the Index
            self._filters[key] = found  # most recently used last
            while len(self._filters) > FILTER_CACHE:
                self._filters.pop(next(iter(self._filters)))
        return found

    def _evaluate(self, where: Sequence[str]) -> tuple[np.ndarray, list[str]]:
        """The FAISS ids meeting ``where`` and the warnings, from the column index or else a scan."""
        clauses = parse_where(where)
        if self.store.has_filter_columns:
            if self._columns is None:
                self._columns = FilterColumns(self.store.rows, self.store.path, self.store.segment_tables)
            answer = self._columns.evaluate(clauses)
            return answer.nums, answer.warnings
        result = evaluate(self.store.iter_documents(), clauses)
        return np.array([doc_num(i) for i in result.ids], dtype=np.int64), result.warnings

    def _finish(self, ranking: Ranking, shape: Shape) -> list[Hit]:
        """Apply --min-score and MMR, fetch the documents, and explain each hit."""
        ranked, vector, k = ranking.ranked, ranking.vector, shape.k
        if shape.min_score is not None:
            ranked = [(n, s) for n, s in ranked if s >= shape.min_score]
        relevance_rank: dict[int, int] = {}
        if shape.diverse and vector is not None and len(ranked) > 1:
            pool = ranked[: _pool_size(k)]
            nums = [n for n, _ in pool]
            order = diversify(vector, self.vectors.get(nums), pool, k, shape.diversity, DIVERSITY_FLOOR)
            relevance_rank = {n: r for r, (n, _) in enumerate(pool, start=1)}
            score_of = dict(pool)
            ranked = [(n, score_of[n]) for n in order]
        ranked = ranked[:k]
        docs = self.store.get_many([n for n, _ in ranked])
        analyzer = Analyzer() if shape.explain else None
        terms = analyzer(ranking.text) if analyzer is not None else []
        sentence_vecs = self._sentence_vectors([n for n, _ in ranked], ranking.vector) if analyzer is not None else {}
        hits = []
        for rank, (num, score) in enumerate(ranked, start=1):
            doc = docs.get(num)
            if doc is None:
                raise IndexCorruptError(
                    f"{self.version / VECTORS} has id {doc_id_from_num(num)} that the document store lacks"
                )
            hit = Hit.of(rank, score, doc, ranking.mode)
            hit.relevance_rank = relevance_rank.get(num)
            hit.scores = self._breakdown(num, ranking)
            hit.fusion = ranking.fusion.to_dict() if ranking.fusion is not None else None
            if analyzer is not None:
                hit.highlights = best_sentences(
                    doc.embedding_parts()[2], terms, ranking.vector, sentence_vecs.get(num), n=1, analyzer=analyzer
                )
                hit.matched_terms = matched_terms(doc.embedding_text(), ranking.text, analyzer=analyzer)
            hits.append(hit)
        return hits

    def _sentence_vectors(self, nums: list[int], vector: np.ndarray | None) -> dict[int, np.ndarray]:
        """Per hit, its sentences' vectors (``--reading sentences``), so its highlight is the sentence that matched.

        Empty for other readings and for a search with no query vector (lexical).
        """
        if self.windows is None or self.manifest.model.reading != "sentences" or vector is None:
            return {}
        found = self.windows.get(nums)
        if not len(found.ids):
            return {}
        order = np.argsort(found.ids, kind="stable")  # each document's rows together, in their order
        ids, vectors = found.ids[order], np.asarray(found.vectors[order], dtype=np.float32)
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
        ends = np.r_[starts[1:], len(ids)]
        return {int(ids[a]): vectors[a:b] for a, b in zip(starts, ends, strict=True)}

    def _breakdown(self, num: int, ranking: Ranking) -> dict[str, float]:
        """The hit's dense and BM25 scores (what the fused score was made of).

        The dense score is the cosine, re-scored by the best sentence or window in an index that stores them.
        """
        out: dict[str, float] = {}
        if ranking.vector is not None:
            cosine = ranking.dense.get(num)
            if cosine is None:
                cosine = float(self.vectors.get_one(num) @ ranking.vector[0])
            out["dense"] = round(cosine, 6)
        if ranking.mode != "dense":
            out["lexical"] = round(ranking.lexical.get(num, 0.0), 6)
        return out

    def related(
        self,
        doc_id: str,
        k: int = 10,
        *,
        where: Sequence[str] = (),
        min_score: float | None = None,
        diverse: bool = False,
        diversity: float = DIVERSITY_LAMBDA,
        explain: bool = True,
    ) -> list[Hit]:
        """The k papers nearest to one in the index, never the paper itself or its merged duplicates.

        Scored by cosine; the 100 nearest ordered by the paper's own subject words too (``query.neighbours``).

        ``explain``: give each hit its sentence nearest the paper as its highlight (``highlight_related``).
        """
        check_k(k)
        doc = self.get(doc_id)
        num = doc_num(doc.id)
        vector = self.vectors.get_one(num).reshape(1, -1)
        allowed = self.allowed_rows(where)
        self._say_why_nothing_matched(where, allowed, stacklevel=2)
        shape = Shape(k, min_score, diverse, diversity, explain=False)
        # Nearest by cosine, the first SUBJECT_POOL held to the paper's own subject words (query.neighbours).
        ranking = self._rank("", vector, "dense", allowed, max(shape.want, SUBJECT_POOL), frozenset([num]))
        ranking = replace(ranking, ranked=subject_order(self.lexical, doc, ranking.ranked))
        hits = self._finish(ranking, shape)
        return self._highlight_near(hits, vector, doc.embedding_text()) if explain else hits

    def highlight_related(self, hits: list[Hit], doc_id: str) -> list[Hit]:
        """Give each hit its sentence nearest the paper ``doc_id`` as its highlight (what ``related`` explains).

        Nearest by the stored sentence vectors where the index keeps them (``--reading sentences``); by the words
        the two share otherwise. For a caller that shows a page of a longer list (MCP's related cards).
        """
        doc = self.get(doc_id)
        return self._highlight_near(hits, self.vectors.get_one(doc_num(doc.id)).reshape(1, -1), doc.embedding_text())

    def related_to_text(
        self,
        text: str,
        k: int = 10,
        *,
        where: Sequence[str] = (),
        min_score: float | None = None,
        diverse: bool = False,
        diversity: float = DIVERSITY_LAMBDA,
        explain: bool = True,
    ) -> list[Hit]:
        """The k papers nearest to an abstract given as text (cosine), leaving out copies of that abstract.

        ``explain``: give each hit its sentence nearest the text as its highlight (as ``highlight_related``).
        """
        check_k(k)
        text = check_text(text, "text")
        vector = self.encode_abstracts([text])
        allowed = self.allowed_rows(where)
        self._say_why_nothing_matched(where, allowed, stacklevel=2)
        own = text_hash(text)
        shape = Shape(k, min_score, diverse, diversity, explain=False)
        # Copies of the given abstract rank first: look a little deeper, and deeper still if that was not enough.
        for extra in (5, len(self)):
            ranking = self._rank(text, vector, "dense", allowed, shape.want + extra)
            docs = self.store.get_many([n for n, _ in ranking.ranked])
            copies = frozenset(n for n, _ in ranking.ranked if same_paper(docs[n].text, own, text))
            kept = [(n, s) for n, s in ranking.ranked if n not in copies]
            if len(kept) >= shape.want or len(ranking.ranked) < shape.want + extra:
                break
        hits = self._finish(replace(ranking, ranked=kept), shape)
        return self._highlight_near(hits, vector, text) if explain else hits

    def _highlight_near(self, hits: list[Hit], vector: np.ndarray, text: str) -> list[Hit]:
        """Give each related hit its sentence nearest the paper (or text) it was found from.

        By the sentence vectors where the index keeps them (``--reading sentences``): the cosine alone decides,
        since a source abstract shares some word with nearly every sentence; by the words the two share where it
        keeps none (the sentence covering most of them). A related hit's "why" is that sentence, not a word list:
        matched_terms stays empty.
        """
        if not hits:
            return hits
        analyzer = Analyzer()
        nums = [doc_num(h.id) for h in hits]
        sentence_vecs = self._sentence_vectors(nums, vector)
        terms: list[str] | None = None
        for hit, num in zip(hits, nums, strict=True):
            vecs = sentence_vecs.get(num)
            if vecs is not None:
                hit.highlights = best_sentences(latex_to_text(hit.text), [], vector, vecs, n=1, analyzer=analyzer)
            else:
                terms = analyzer(text) if terms is None else terms
                hit.highlights = best_sentences(latex_to_text(hit.text), terms, n=1, analyzer=analyzer)
        return hits


def _pool_size(k: int) -> int:
    """Candidates that MMR chooses k hits from when --diverse is on."""
    return max(3 * k, 30)
