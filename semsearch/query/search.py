"""Query an index: nearest abstracts to a text, or to a paper already in the index.

``Index`` is the entry: it finds a request's candidates with ``retrieve.Retriever``, its filters with
``where.WhereFilters``, and turns the ranking into hits with ``hits.HitMaker``.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from semsearch.core import options
from semsearch.core.errors import IndexCorruptError, NoMatchWarning, QueryError, UnknownDocumentError
from semsearch.core.limits import check_k, check_text
from semsearch.core.options import MODES
from semsearch.core.paperinfo import year_of
from semsearch.core.records import Document, GivenPaper, Hit
from semsearch.encode.embedder import Embedder
from semsearch.encode.encoder_choice import check_requested_model, open_query_encoder
from semsearch.query.fusion import DEFAULT_DEPTH
from semsearch.query.hits import HitMaker
from semsearch.query.retrieve import DIVERSITY_LAMBDA, QueryReading, Ranking, Retriever, Shape
from semsearch.query.retrieve import Candidates as Candidates  # re-exported: what Index.hybrid_candidates returns
from semsearch.query.spelling import Spelling, Vocabulary, correct
from semsearch.query.syntax import ParsedQuery, admits, parse_query, searchable
from semsearch.query.weighting import FusionPolicy, QuerySignal
from semsearch.store.ann import open_version_vectors
from semsearch.store.documents import open_documents
from semsearch.store.layout import current_version, doc_num, with_point_back
from semsearch.store.lexical import BM25Index
from semsearch.store.manifest import Manifest
from semsearch.store.windows_part import open_windows

if TYPE_CHECKING:
    from semsearch.query.given import GivenMatch
    from semsearch.query.index_info import IndexInfo
    from semsearch.query.where import WhereFilters
    from semsearch.store.passages_part import PassageIndex

T = TypeVar("T")
DEFAULT_INDEX = Path(options.DEFAULT_INDEX)
MAX_NAMED = 5000  # a name query's papers read to order them (a name shared that widely is no one person)


def default_index_path() -> Path:
    """The index used when none is named: $SEMSEARCH_INDEX, else indexes/default."""
    env = os.environ.get(options.INDEX_ENV, "").strip()
    return Path(env) if env else DEFAULT_INDEX


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
        self._memo: dict[str, Any] = {}  # what features derive from this version, built once (see memo)
        self.fusion = FusionPolicy.from_entry(manifest.fusion)  # how hybrid weighs its sides (none recorded: 0.5)
        manifest.check_file_sizes(version)
        self.ann, self.vectors = open_version_vectors(version, manifest)
        self.store = open_documents(version, manifest)
        self._where: WhereFilters | None = None  # --where answers, remembered (made by the first filter)
        self._where_made = threading.Lock()  # a server's threads filtering at once share one memo
        # --reading windows: each long abstract's tail windows, which re-score a search's dense candidates.
        self.windows = open_windows(version, manifest)
        # --full-text: the papers' passages, which the dense side and each hit's passage read.
        self.passages: PassageIndex | None = None
        if manifest.extra.get("full_text"):
            from semsearch.store.passages_part import open_passages  # a full-text index's only

            self.passages = open_passages(version, manifest)
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
        self.passages = None
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
        from semsearch.query.index_info import IndexInfo  # ``semsearch info`` only: a search never loads it

        windows = self.windows.count() if self.windows is not None else 0
        aliases, fusion = self.store.alias_count(), self.fusion.describe()
        return IndexInfo.of(
            self.path, self.version, self.manifest, spec=self.ann.spec, aliases=aliases, windows=windows, fusion=fusion
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
            diversity: MMR λ (1 = relevance only; the default leans on relevance: see ``retrieve.DIVERSITY_LAMBDA``).
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
        return QueryReading.of(parsed, self.store.people)

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
            ranking = self._retrieval().rank(
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
        hits = self._hits().finish(person, Shape(len(first), explain=False))
        name_of = {n: name for name, ns in named.items() for n in ns}
        for hit in hits:
            hit.by = name_of[doc_num(hit.id)]
        if rest.k > 0 and ranking.ranked:
            more = self._hits().finish(ranking, rest)
            for hit in more:
                hit.by = authored.get(doc_num(hit.id))
            hits += more
        for rank, hit in enumerate(hits, start=1):
            hit.rank = rank
        if self.passages is not None and shape.explain:
            from semsearch.query.passages import attach

            attach(hits, self.passages, ranking.vector, rank_text)
        return hits

    def search_passages(
        self, text: str, k: int = 10, *, where: Sequence[str] = (), min_score: float | None = None
    ) -> list[Hit]:
        """The k passages of a full-text index nearest a text, best first, each as its paper's hit with ``passage``.

        Scored by cosine (the dense side); ``where`` filters the papers as for ``search``. An index built without
        ``--full-text`` has none: QueryError says how to build one.
        """
        check_k(k)
        text = check_text(text)
        if self.passages is None:
            raise QueryError(
                f"{self.path} holds no passages: rebuild it with --full-text (semsearch index --full-text)"
            )
        from semsearch.query.passages import passage_hits

        parsed = parse_query(text)
        reading = self.read_query(parsed)
        filters = [*where, *reading.where]
        allowed = self.allowed_rows(filters)
        self._say_why_nothing_matched(filters, allowed, stacklevel=2)
        if reading.people is not None:
            allowed = reading.people if allowed is None else np.intersect1d(allowed, reading.people)
        if not reading.rank_text:
            raise QueryError(f"the query {parsed.raw.strip()!r} has no words to rank passages by")
        vector = self.encode_query(reading.rank_text)
        return passage_hits(self.passages, self.store, vector[0], k, allowed=allowed, min_score=min_score)

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

    def hybrid_candidates(self, text: str) -> Candidates:
        """The two lists hybrid search fuses for ``text`` (no filter), for weighing fusions offline (eval --tune)."""
        text = check_text(text)
        vector = self.encode_query(text)
        pool = len(self)
        depth = min(pool, DEFAULT_DEPTH)
        if depth == 0:
            empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
            return Candidates(empty, empty, 0)
        retriever = self._retrieval()
        dense_top = retriever.dense_list(vector, depth, None, frozenset(), pool, windows=True)
        lexical_top = retriever.lexical_top(text, depth, None, frozenset())
        signal = QuerySignal.measure(self.lexical, text, lexical_top[0])
        return Candidates(dense_top, lexical_top, depth, signal)

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

        A version's column index answers a filter without reading the documents; a version written before it
        existed is scanned, every document once. The last few answers are remembered (``where.WhereFilters``).
        """
        if not where:
            return None
        return self._filters().answer(where)[0]

    def where_warnings(self, where: Sequence[str]) -> list[str]:
        """Why ``where`` matches no document (a field none has, a clause matching nothing); empty when it matches."""
        return self._filters().answer(where)[1] if where else []

    def _say_why_nothing_matched(self, where: Sequence[str], allowed: np.ndarray | None, *, stacklevel: int) -> None:
        """A NoMatchWarning per reason ``where`` matches nothing, at the library caller's line (``stacklevel``)."""
        if allowed is None or len(allowed):
            return
        for line in self.where_warnings(where):
            # The caller passed where=[...], not the --where flag the shared wording names.
            warnings.warn(line.replace("--where", "where"), NoMatchWarning, stacklevel=stacklevel + 1)

    def _filters(self) -> WhereFilters:
        """This version's --where answers, remembered (made by the first filter: a plain search never needs it)."""
        with self._where_made:
            if self._where is None:
                from semsearch.query.where import WhereFilters

                self._where = WhereFilters(self.store)
            return self._where

    def _retrieval(self) -> Retriever:
        """What finds this version's candidates (the dense list, BM25's, and their fusion)."""
        return Retriever(self.ann, self.windows, lambda: self.lexical, self.fusion, self.passages)

    def _hits(self) -> HitMaker:
        """What turns this version's ranked document numbers into hits."""
        return HitMaker(self.store, self.vectors, self.windows, self.manifest.model.reading, self.version)

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
        from semsearch.query.neighbours import SUBJECT_POOL, subject_order  # ``related`` only: a search never needs it

        check_k(k)
        doc = self.get(doc_id)
        num = doc_num(doc.id)
        vector = self.vectors.get_one(num).reshape(1, -1)
        allowed = self.allowed_rows(where)
        self._say_why_nothing_matched(where, allowed, stacklevel=2)
        shape = Shape(k, min_score, diverse, diversity, explain=False)
        # Nearest by cosine, the first SUBJECT_POOL held to the paper's own subject words (query.neighbours).
        ranking = self._retrieval().rank("", vector, "dense", allowed, max(shape.want, SUBJECT_POOL), frozenset([num]))
        ranking = replace(ranking, ranked=subject_order(self.lexical, doc, ranking.ranked))
        hits = self._hits().finish(ranking, shape)
        return self._hits().highlight_near(hits, vector, doc.embedding_text()) if explain else hits

    def highlight_related(self, hits: list[Hit], doc_id: str) -> list[Hit]:
        """Give each hit its sentence nearest the paper ``doc_id`` as its highlight (what ``related`` explains).

        Nearest by the stored sentence vectors where the index keeps them (``--reading sentences``); by the words
        the two share otherwise. For a caller that shows a page of a longer list (MCP's related cards).
        """
        doc = self.get(doc_id)
        vector = self.vectors.get_one(doc_num(doc.id)).reshape(1, -1)
        return self._hits().highlight_near(hits, vector, doc.embedding_text())

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
        paper: GivenPaper | None = None,
    ) -> list[Hit]:
        """The k papers nearest to an abstract given as text (cosine), leaving out copies of that abstract.

        ``paper``: the file the text was read from (``related --file``); the documents that are that paper (a PDF
        with its content, or its DOI or arXiv id: ``query.given``) are left out too, whatever their abstract.
        ``explain``: give each hit its sentence nearest the text as its highlight (as ``highlight_related``).
        """
        from semsearch.dedup.duplicates import same_paper, text_hash  # ``related --text`` only: a search never needs it

        check_k(k)
        text = check_text(text, "text")
        vector = self.encode_abstracts([text])
        allowed = self.allowed_rows(where)
        self._say_why_nothing_matched(where, allowed, stacklevel=2)
        own = text_hash(text)
        is_it: GivenMatch | None = None
        if paper is not None:  # only a file's paper reads the recorded sources' names
            from semsearch.query.given import GivenMatch

            is_it = GivenMatch(paper, self.manifest.sources)
        shape = Shape(k, min_score, diverse, diversity, explain=False)
        # Copies of the given abstract rank first: look a little deeper, and deeper still if that was not enough.
        for extra in (5, len(self)):
            ranking = self._retrieval().rank(text, vector, "dense", allowed, shape.want + extra)
            docs = self.store.get_many([n for n, _ in ranking.ranked])
            copies = frozenset(
                n for n, _ in ranking.ranked if same_paper(docs[n].text, own, text) or (is_it and is_it(docs[n]))
            )
            kept = [(n, s) for n, s in ranking.ranked if n not in copies]
            if len(kept) >= shape.want or len(ranking.ranked) < shape.want + extra:
                break
        hits = self._hits().finish(replace(ranking, ranked=kept), shape)
        return self._hits().highlight_near(hits, vector, text) if explain else hits
