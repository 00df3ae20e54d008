"""The application: one typed method per operation of the table, over the index it opens.

Every face runs an operation the same way: it parses its own input into the operation's request (the table's
dataclass), calls ``run(op, request)`` (the table's ``call`` names the method) and prints what comes back, the
library's own result. The rules that belong to an operation rather than a face live here once: what ``since``
means on a face with no bookmark, how a page of a longer list is asked for, which tags a recommendation steers
away from. The library is imported inside the methods, so a command that runs one operation loads only its part.

One class, longer than most modules, on purpose: it is the one place where the faces reach the library, a method
per operation of the table, so that a reader sees every operation's call, and every rule of an operation, here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semsearch.app import operations as ops
from semsearch.core.errors import QueryError, UnknownDocumentError
from semsearch.core.options import DEFAULT_INDEX, MAX_K

if TYPE_CHECKING:
    from semsearch.core.records import Document, Hit
    from semsearch.curate.tags import TagStore
    from semsearch.encode.embedder import Embedder
    from semsearch.query.live import LiveIndex
    from semsearch.query.search import Index
    from semsearch.query.spelling import Spelling
    from semsearch.query.syntax import ParsedQuery

LAST = "last"  # a `since` that follows a bookmark: only a face with one (the command line) has it


def check_page(k: int, offset: int) -> None:
    """k and offset for one page, or a one-line QueryError."""
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
        raise QueryError(f"k must be an integer from 1 to {MAX_K}, got {k!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
        raise QueryError(f"offset must be a non-negative integer, got {offset!r}")
    if offset + k > MAX_K:
        raise QueryError(f"offset + k must be at most {MAX_K} (a ranked list ends there), got {offset + k}")


def _wanted(k: int, offset: int | None) -> int:
    """How many ranks to ask for: ``k``; for a page, the ranks up to its end and one more (whether more exist).

    Without --diverse the first ranks do not depend on how many are asked for, so pages neither repeat nor skip.
    """
    if offset is None:
        return k
    check_page(k, offset)
    return min(offset + k + 1, MAX_K)


@dataclass
class Found:
    """A ranked list (search, related): the hits asked for, what the query was read as, and what a face says."""

    hits: list[Hit]
    version: str
    more: bool = False  # a page: ranks past it exist
    warnings: list[str] = field(default_factory=list)  # why a filter matched nothing
    parsed: ParsedQuery | None = None
    spelling: Spelling | None = None
    catalogued: bool = True

    @property
    def order(self) -> str:
        """ "diverse" when the order is no longer by score, else "relevance"."""
        return "diverse" if any(h.relevance_rank is not None for h in self.hits) else "relevance"


@dataclass
class Got:
    """One document of the index, and the version it was read from."""

    document: Document
    version: str


@dataclass
class Recommended:
    """Recommendations, the tags and ids they steer away from, and the version."""

    recommendations: list[Any]
    against: list[str]
    version: str
    more: bool = False


@dataclass
class Arrived:
    """Papers that arrived, ranked for the user's interests."""

    papers: list[Any]
    since: str | None
    version: str
    more: bool = False


@dataclass
class Exported:
    """Documents as citations: the documents, their text, and whether a catalogue titled them."""

    documents: list[Any]
    text: str
    format: str
    catalogued: bool = True
    warnings: list[str] = field(default_factory=list)


@dataclass
class TagListing:
    """The tags' members by name, their polarities, and whether (and why not) the index takes tag writes."""

    members: dict[str, list[Any]]
    polarities: dict[str, str]
    version: str


@dataclass
class Opened:
    """The index an operation reads, and its version's name."""

    index: Index
    name: str


class Application:
    """The operations over one index: opened on first use, kept open, closed with the application.

    ``served``: a server's application (HTTP, MCP), which follows new versions (a ``LiveIndex``), has no
    command-line bookmark (``since=last`` is refused, as with ``bookmarks=False``) and never rewrites the tag
    file while reading it.
    """

    def __init__(
        self,
        index_dir: str | Path | None,
        *,
        embedder: Embedder | None = None,
        model: str | None = None,
        served: bool = False,
        query_threads: int | None = None,
        live: LiveIndex | None = None,
        index: Index | None = None,
        bookmarks: bool | None = None,
        own: bool | None = None,
    ) -> None:
        self.given = index_dir is not None  # eval picks its own index when none is given
        if index_dir is None and live is not None:
            index_dir = getattr(live, "path", None)  # the live index's own folder
        self.path = Path(index_dir) if index_dir is not None else Path(DEFAULT_INDEX)
        self.embedder = embedder
        self.model = model
        self.served = served or live is not None
        # Whether ``since=last`` follows a bookmark: the command line's; a server and an agent keep none.
        self.bookmarks = not self.served if bookmarks is None else bookmarks
        self._query_threads = query_threads
        self._live = live
        self._index = index
        # What it opened itself it closes; a live index handed to it, when told to own it.
        self._owned = (live is None and index is None) if own is None else own
        self._tag_store: TagStore | None = None

    @classmethod
    def over(cls, index: Index, *, bookmarks: bool = True) -> Application:
        """An application over an index already open (the caller keeps and closes it)."""
        return cls(index.path, index=index, bookmarks=bookmarks)

    @property
    def live(self) -> LiveIndex:
        """The live index a server answers from, opened on first use."""
        if self._live is None:
            from semsearch.query.live import LiveIndex

            self._live = LiveIndex(self.path, embedder=self.embedder, query_threads=self._query_threads)
        return self._live

    def close(self) -> None:
        """Close what the application opened."""
        if not self._owned:
            return
        if self._live is not None:
            self._live.close()
        if self._index is not None:
            self._index.close()
        self._live = self._index = None

    def __enter__(self) -> Application:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _use(self) -> Iterator[Opened]:
        """The index to answer from, held open for the block (a server's: the live version of the moment)."""
        if self.served:
            with self.live.use() as loaded:
                yield Opened(loaded.index, loaded.name)
            return
        if self._index is None:
            from semsearch.query.search import Index

            self._index = Index.open(self.path, embedder=self.embedder, model=self.model)
        yield Opened(self._index, self._index.version.name)

    def run(self, op: ops.Operation | str, request: Any, **hooks: Any) -> Any:
        """Run an operation of the table: the method its ``call`` names, given the typed request (and a face's
        hooks, such as where an install says what it is doing)."""
        found = ops.operation(op) if isinstance(op, str) else op
        if not isinstance(request, found.request):
            raise TypeError(f"{found.name} takes a {found.request.__name__}, not a {type(request).__name__}")
        result: Any = found.bind(self)(request, **hooks)
        return result

    # ------------------------------------------------------------ rules of the operations

    def since(self, since: str | None) -> str | None:
        """A request's ``since``: ``last`` only where a bookmark is kept; where none is (a server, an agent), blank
        is the default (None), as their schemas say (an agent's text argument cannot be left null)."""
        if self.bookmarks:
            return since
        since = (since or "").strip() or None
        if since == LAST:
            raise QueryError("since=last follows a command-line bookmark; give a version (3) or a date (2026-12-01)")
        return since

    def stale_notice(self) -> str | None:
        """A line saying the index's sources changed since it was built, or None."""
        from semsearch.write.freshness import stale_notice, stale_sources

        with self._use() as v:
            return stale_notice(stale_sources(v.index.manifest, v.index.path), str(v.index.path))

    def tag_write_problem(self) -> str | None:
        """Why tags cannot be written in the index folder (read-only filesystem, permissions), or None."""
        from semsearch.curate.tags import write_problem

        return write_problem(self.path)

    def tag_store(self) -> TagStore:
        """The index's tags; a server keeps one, which parses the tag file again only once it is replaced."""
        from semsearch.curate.tags import TagStore

        if not self.served:
            return TagStore(self.path)
        if self._tag_store is None:
            self._tag_store = TagStore(self.path)
        return self._tag_store

    # ------------------------------------------------------------ reading operations

    def search(self, r: ops.Search) -> Found:
        from semsearch.query.syntax import parse_query

        want = _wanted(r.k, r.offset)
        if r.passages:
            return self._search_passages(r, want)
        with self._use() as v:
            hits = v.index.search(
                r.query,
                want,
                mode=r.mode,
                where=list(r.where),
                min_score=r.min_score,
                diverse=r.diverse,
                fusion=r.fusion,
                exact=r.exact,
            )
            parsed = parse_query(r.query)  # read without error: the search did
            spelling = v.index.spell(r.query, exact=r.exact or r.mode == "dense")  # dense reads no words
            warnings = v.index.where_warnings([*r.where, *parsed.where])  # year:, venue:, title: filter too
            catalogued = v.index.manifest.catalogue is not None
        hits, more = _page(hits, r)
        return Found(hits, v.name, more, warnings, parsed, spelling, catalogued)

    def _search_passages(self, r: ops.Search, want: int) -> Found:
        """A search's passages (``--passages``): each its paper's hit with that passage, best first."""
        from semsearch.query.syntax import parse_query

        with self._use() as v:
            hits = v.index.search_passages(r.query, want, where=list(r.where), min_score=r.min_score)
            spelling = v.index.spell(r.query, exact=True)  # the dense side reads the words as typed
            parsed = parse_query(r.query)
            warnings = v.index.where_warnings([*r.where, *parsed.where])
            catalogued = v.index.manifest.catalogue is not None
        hits, more = _page(hits, r)
        return Found(hits, v.name, more, warnings, parsed, spelling, catalogued)

    def related(self, r: ops.Related) -> Found:
        want = _wanted(r.k, r.offset)
        with self._use() as v:
            where = list(r.where)
            shape = dict(where=where, min_score=r.min_score, diverse=r.diverse)
            if r.text is not None:
                hits = v.index.related_to_text(
                    r.text,
                    want,
                    explain=r.explain,
                    paper=r.paper,
                    **shape,  # type: ignore[arg-type]
                )
            elif r.offset is not None:  # a page: only the hits shown are explained
                source = v.index.get(r.id or "")
                hits = v.index.related(source.id, want, explain=False, **shape)  # type: ignore[arg-type]
                more = len(hits) > r.offset + r.k
                hits = hits[r.offset : r.offset + r.k]
                hits = v.index.highlight_related(hits, source.id) if r.explain else hits
                return Found(hits, v.name, more, v.index.where_warnings(where))
            else:
                hits = v.index.related(r.id or "", want, explain=r.explain, **shape)  # type: ignore[arg-type]
            warnings = v.index.where_warnings(where)
            catalogued = v.index.manifest.catalogue is not None
        hits, more = _page(hits, r)
        return Found(hits, v.name, more, warnings, catalogued=catalogued)

    def get_paper(self, r: ops.GetPaper) -> Got:
        with self._use() as v:
            return Got(v.index.get(r.id), v.name)

    def paper_pdf(self, r: ops.PaperPdf) -> Path:
        """The PDF a paper was read from: the first PDF source of it the version records that is still a PDF file.

        Only a path the version's manifest records as a PDF source of this document is ever returned (the request
        names a paper, never a path); ``UnknownDocumentError`` when there is none.
        """
        from semsearch.dedup.paper_ids import is_pdf_file, pdf_files

        with self._use() as v:
            doc = v.index.get(r.id)
            sources = v.index.manifest.sources
            files = pdf_files(doc, sources)
        recorded = {s.path: s for s in sources}
        for name in files:
            if is_pdf_file(Path(name), recorded.get(name)):
                return Path(name)
        why = "its PDF is no longer the file the index read" if files else "it was not read from a PDF"
        raise UnknownDocumentError(f"paper {doc.id} has no PDF to open: {why}")

    def info(self, r: ops.Info) -> dict[str, Any]:
        """The index's facts (``IndexInfo.to_dict()``); a server's, read once per version."""
        if self.served:
            with self.live.use() as loaded:
                return loaded.info
        with self._use() as v:
            return v.index.info().to_dict()

    def recommend(self, r: ops.Recommend) -> Recommended:
        from semsearch.curate.recommend import recommend

        since = self.since(r.since)
        want = _wanted(r.k, r.offset)
        if r.offset is not None and not r.like:
            raise QueryError("name at least one liked paper id or tag in like")
        with self._use() as v:
            recs = recommend(
                v.index,
                r.like,
                want,
                not_like=r.not_like,
                like_texts=r.like_texts,
                like_papers=r.like_papers,
                where=r.where,
                since=since,
                include_tagged=r.include_tagged,
                method=r.method,
            )
            # The negative tags count against whether or not the request names them.
            against = list(dict.fromkeys([*r.not_like, *self.tag_store().negative_names()]))
        recs, more = _page(recs, r)
        return Recommended(recs, against, v.name, more)

    def new(self, r: ops.New) -> Arrived:
        from semsearch.core.limits import check_k
        from semsearch.curate.arrivals import NEW_BOOKMARK, live_seq, new_since, set_bookmark
        from semsearch.curate.whats_new import ranked_new

        since = self.since(r.since)
        check_k(r.k)
        want = _wanted(r.k, r.offset)
        with self._use() as v:
            papers = ranked_new(v.index, new_since(v.index, since), k=want, where=r.where)
            if since == LAST:  # the bookmark moves to what was just listed
                set_bookmark(v.index.path, NEW_BOOKMARK, live_seq(v.index))
        papers, more = _page(papers, r)
        return Arrived(papers, since, v.name, more)

    def export(self, r: ops.Export) -> Exported:
        from semsearch.curate.export import export, select_documents

        with self._use() as v:
            docs = select_documents(v.index, r.ids, r.where)
            warnings = v.index.where_warnings(r.where) if r.where and not docs else []
            catalogued = v.index.manifest.catalogue is not None
        return Exported(docs, export(docs, r.format), r.format, catalogued, warnings)

    def digest(self, r: ops.Digest) -> Any:
        """The digest of what arrived (the bookmark is moved apart, by ``mark_read``, once it is out)."""
        from semsearch.curate.digest import make_digest

        with self._use() as v:
            return make_digest(
                v.index,
                name=r.name,
                since=r.since,
                k=r.k,
                where=r.where,
                bookmark=False,
                min_fit=r.min_fit,
                also_max=r.also_max,
            )

    def mail_settings(self, to: Sequence[str], given: dict[str, Any], config: Path | None) -> Any:
        """The SMTP settings for mailing a digest to ``to`` (each address checked), from the options ``given``,
        the environment or the mail settings file ``config``."""
        from semsearch.curate.mail import check_address, resolve_settings

        for address in to:
            check_address(address)
        return resolve_settings(given, config=config)

    def mail_digest(self, made: Any, name: str, to: Sequence[str], settings: Any) -> None:
        """Mail a digest (text and HTML) to ``to``."""
        from semsearch.curate.digest import render
        from semsearch.curate.mail import build_message, send

        papers = sum(len(s.papers) for s in made.sections)
        subject = f"semsearch digest {name}: {made.arrived} new, {papers} for you"
        send(settings, build_message(subject, settings.sender, list(to), render(made, "md"), render(made, "html")))

    def mark_read(self, name: str) -> None:
        """Move digest ``name``'s bookmark to the live version."""
        from semsearch.curate.arrivals import live_seq, set_bookmark

        with self._use() as v:
            set_bookmark(v.index.path, name, live_seq(v.index))

    def tags(self, r: ops.Tags) -> TagListing:
        from semsearch.curate.tags import all_members

        store = self.tag_store()
        with self._use() as v:
            # One read of the tag file however many tags; a server never rewrites it while reading.
            found = all_members(v.index, store, [r.name] if r.name else None, repoint=not self.served)
            polarities = store.polarities()
        return TagListing(found, polarities, v.name)

    def watch(self, r: ops.Watch) -> Any:
        from semsearch.curate.arrivals import add_watch
        from semsearch.store.layout import current_version

        current_version(self.path)
        return add_watch(self.path, r.name, r.query)

    def watch_list(self, r: ops.WatchList) -> list[Any]:
        from semsearch.curate.arrivals import read_watches

        return read_watches(self.path)

    def watch_remove(self, r: ops.WatchRemove) -> None:
        from semsearch.curate.arrivals import remove_watch

        remove_watch(self.path, r.name)

    # ------------------------------------------------------------ tag writes

    def tag_add(self, r: ops.TagAdd) -> TagAdded:
        """Tag papers; returns how many were added of how many named."""
        from semsearch.curate.tags import check_name, resolve_papers

        check_name(r.name)
        with self._use() as v:
            docs = resolve_papers(v.index, r.ids)
        return TagAdded(self.tag_store().add(r.name, docs), len(docs), [])

    def tag_remove(self, r: ops.TagRemove) -> int:
        """Untag papers; returns how many were removed."""
        removed: int = self.tag_store().remove(r.name, r.ids)
        return removed

    def tag_create(self, r: ops.TagCreate) -> bool:
        """Create a tag or set its polarity; returns whether anything changed."""
        from semsearch.store.layout import current_version

        current_version(self.path)
        changed: bool = self.tag_store().create(r.name, negative=r.negative)
        return changed

    def tag_import(self, r: ops.TagImport) -> TagAdded:
        """Tag the papers a file names; unknown ones fail the import unless ``skip_unknown``."""
        from semsearch.core.errors import UnknownDocumentError
        from semsearch.curate.tags import check_name, read_id_file, resolve_papers

        check_name(r.name)
        keys = read_id_file(Path(r.file))
        docs: list[Any] = []
        unknown: list[str] = []
        with self._use() as v:
            for key in keys:
                try:
                    docs.extend(resolve_papers(v.index, [key]))
                except UnknownDocumentError:
                    unknown.append(key)
        if unknown and not r.skip_unknown:
            shown = ", ".join(unknown[:3]) + (f" and {len(unknown) - 3} more" if len(unknown) > 3 else "")
            raise QueryError(f"{r.file}: not in the index: {shown} (--skip-unknown tags the rest)")
        return TagAdded(self.tag_store().add(r.name, docs), len(docs), unknown)

    def tag_edit(self, r: ops.TagEdit) -> dict[str, Any]:
        """Add and remove papers of a tag at once: an unknown id in either changes nothing."""
        from semsearch.curate.tags import TagStore, resolve_papers

        if len(r.add) + len(r.remove) > ops.MAX_KEYS or not (r.add or r.remove):
            raise QueryError(f"add, remove: give 1..{ops.MAX_KEYS} ids in all")
        with self._use() as v:
            docs = resolve_papers(v.index, r.add)  # an unknown id fails before anything is written
            added, removed, size = TagStore(v.index.path).edit(r.name, docs, r.remove)
        return {"tag": r.name, "added": added, "removed": removed, "papers": size}

    # ------------------------------------------------------------ keeping the index

    def health(self, r: ops.Health) -> dict[str, Any]:
        import os

        with self._use() as v:
            # worker: this process's id, so a client of several server workers sees which serves which version
            return {"status": "ok", "version": v.name, "documents": len(v.index), "worker": os.getpid()}

    def corpus_map(self, r: ops.CorpusMap) -> dict[str, Any] | None:
        """The version's corpus map; None when it has none."""
        if self.served:
            with self.live.use() as loaded:
                return loaded.corpus_map()
        from semsearch.store.corpus_map import load_map

        with self._use() as v:
            found: dict[str, Any] | None = load_map(v.index.version)
            return found

    def build(self, r: ops.Build) -> Any:
        """Build or refresh the index (a ``BuildSummary``), or with ``recover`` re-point CURRENT (a ``Recovery``)."""
        if r.recover or r.recover_to is not None:
            from semsearch.store.versions import recover

            return recover(self.path, wait=r.wait, to=r.recover_to)
        from semsearch.store.ann_build import parse_size
        from semsearch.write.build import BuildOptions, build_index

        summary = build_index(
            list(r.sources) or None,
            self.path,
            BuildOptions(
                model=r.model,
                backend=r.backend,
                precision=r.precision,
                reading=r.reading,
                full=r.full,
                relayout=r.relayout,
                skip_bad=r.skip_bad,
                strict=r.strict,
                drop_unreadable=r.drop_unreadable,
                follow_links=r.follow_links,
                full_text=r.full_text,
                near=not r.no_near,
                batch_size=r.batch_size,
                progress=r.progress,
                wait=r.wait,
                ann=r.ann,
                memory_budget=parse_size(r.memory_budget) if r.memory_budget is not None else None,
                engine=r.engine,
                address=r.address,
                actors=r.actors,
                catalogues=[] if r.no_catalogue else (list(r.catalogues) or None),
                rewrite=r.optimize,
            ),
            embedder=self.embedder,
        )
        if summary.catalogue is not None and r.list_uncatalogued:
            # Read from the live version, so a refresh with nothing to do lists them without writing a version.
            summary.catalogue["uncatalogued"] = self._uncatalogued()
        if summary.catalogue is not None and not r.list_uncatalogued:
            summary.catalogue.pop("uncatalogued", None)
        return summary

    def _uncatalogued(self) -> list[dict[str, str]]:
        """The live version's documents that no catalogue record matched, as {id, label}."""
        from semsearch.query.search import Index
        from semsearch.write.catalogue import MATCH_KEY

        with Index.open(self.path) as idx:
            return [{"id": d.id, "label": d.label()} for d in idx.store.iter_documents() if MATCH_KEY not in d.metadata]

    def remove(self, r: ops.Remove) -> Any:
        from semsearch.write.remove import remove_documents

        return remove_documents(self.path, ids=r.ids, sources=r.sources, wait=r.wait)

    def verify(self, r: ops.Verify) -> list[str]:
        """The problems found (empty: the index is sound)."""
        from semsearch.write.verify import verify_index

        problems: list[str] = verify_index(self.path)
        return problems

    # ------------------------------------------------------------ models and quality

    def models(self, r: ops.ModelList) -> list[Any]:
        from semsearch.encode.catalogue import list_models

        return list(list_models())

    def install_model(self, r: ops.ModelInstall, notify: Any = None) -> Any:
        from semsearch.encode.install import install_model

        source = Path(r.source_dir) if r.source_dir is not None else None
        said = {} if notify is None else {"notify": notify}  # none: the installer's own quiet default
        return install_model(r.name, source_dir=source, use_pip=not r.no_pip, force=r.force, **said)

    def evaluate(self, r: ops.Evaluate) -> dict[str, Any]:
        """Retrieval quality per mode on a BEIR-format data set (its index built or reused at ``path``)."""
        from semsearch.core import options
        from semsearch.eval.evaluate import EVAL_MODES, EvalData, run_eval
        from semsearch.write.build import BuildOptions

        reading = r.reading
        if reading is None and self.embedder is None and r.backend == "onnx":
            reading = options.DEFAULT_READING  # as --help says, even for an eval index built under another reading
        where = EvalData.locate(_path(r.data), r.split, _path(r.corpus), _path(r.queries), _path(r.qrels))
        target = self.path if self.given else Path("indexes") / f"eval-{where.corpus.resolve().parent.name}"
        if not self.given:
            target = target.with_name(target.name + eval_suffix(r.model))
        results: dict[str, Any] = run_eval(
            where,
            target,
            modes=r.modes or EVAL_MODES,
            embedder=self.embedder,
            options=BuildOptions(
                model=r.model,
                backend=r.backend,
                precision=r.precision,
                reading=reading,
                progress=r.progress,
                wait=r.wait,
            ),
            progress=r.progress,
            fusion=r.fusion,
            tune=r.tune,
            split=r.split if r.data is not None else "",
        )
        return results


@dataclass
class TagAdded:
    """Papers tagged: how many were added, of how many named (the rest were already), and ids not found."""

    added: int
    named: int
    unknown: list[str]


def _path(value: str | None) -> Path | None:
    return None if value is None else Path(value)


def eval_suffix(model: str | None) -> str:
    """Another model gets its own default eval index (indexes/eval-scifact-all-mpnet-base-v2), so none rebuilds."""
    from semsearch.encode.catalogue import DEFAULT_MODEL

    return "" if model in (None, DEFAULT_MODEL) else "-" + "".join(c if c.isalnum() else "-" for c in Path(model).name)


def _page(rows: list[Any], r: Any) -> tuple[list[Any], bool]:
    """The ranks a request asked for, and whether more exist (a request without an offset asks for no page)."""
    if r.offset is None:
        return rows, False
    return rows[r.offset : r.offset + r.k], len(rows) > r.offset + r.k
