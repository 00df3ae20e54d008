"""``semsearch serve``: a read-only JSON API and a search page over an index that follows new versions live."""

from __future__ import annotations

import contextlib
import importlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexNotFoundError,
    InputError,
    ModelLoadError,
    ModelMismatchError,
    QueryError,
    SemsearchError,
    UnknownDocumentError,
)
from .search import Index
from .store import CURRENT, current_version, read_manifest

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .embed import Embedder
    from .records import Document

WEB_DIR = Path(__file__).resolve().parent / "web"
MAX_QUERY_CHARS = 1000  # longer text is an abstract, not a query: use `semsearch related --file`
MAX_K = 1000
MAX_WHERE = 20
MAX_WHERE_CHARS = 500
RETRY_FAILED_S = 5.0  # a version that failed to open is tried again after this long, not on every request
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

log = logging.getLogger("semsearch.serve")

# What each library error means to an HTTP client: its own mistake (4xx) or the server's index (503).
STATUS: dict[type[SemsearchError], int] = {
    QueryError: 422,
    UnknownDocumentError: 404,
    InputError: 400,
    IndexNotFoundError: 503,
    IndexCorruptError: 503,
    IndexFormatError: 503,
    ModelMismatchError: 503,
    ModelLoadError: 503,
}


def status_of(exc: SemsearchError) -> int:
    """The HTTP status of a library error (500 for kinds a read-only server should never see)."""
    for kind, status in STATUS.items():
        if isinstance(exc, kind):
            return status
    return 500


@dataclass
class _Loaded:
    """One opened index version with the requests now using it."""

    index: Index
    name: str
    info: dict[str, Any]
    refs: int = 0
    retired: bool = False
    corpus_map: Any = field(default=None)
    map_loaded: bool = False


def _pointer(index_dir: Path) -> str:
    """The version name in CURRENT ('' when there is none, e.g. a bare version folder)."""
    try:
        return (index_dir / CURRENT).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""


def _reusable_encoder(previous: _Loaded | None, manifest: dict[str, Any]) -> Embedder | None:
    """The previous version's query encoder when the new version was built with the same model and runtime."""
    if previous is None:
        return None
    old, new = previous.index.manifest["model"], manifest["model"]
    same = all(old.get(key) == new.get(key) for key in ("name", "fingerprint", "dimension", "backend", "precision"))
    return previous.index.embedder if same else None  # loaded when that version was opened


class LiveIndex:
    """The index a server answers from: follows CURRENT, swaps in new versions, closes old ones when idle.

    Every request reads CURRENT (a few bytes). When it names a new version, that request opens it (reusing
    the loaded query encoder when the model is the same) while the others keep answering from the old one;
    the swap is atomic, and the old version is closed once its last request has finished.
    """

    def __init__(self, path: str | Path, *, embedder: Embedder | None = None) -> None:
        self.path = Path(path)
        self._embedder = embedder
        self._lock = threading.Lock()  # guards _live and the reference counts
        self._opening = threading.Lock()  # one thread opens a new version; the rest keep serving
        self._failed: tuple[str, float] | None = None
        version = current_version(self.path)
        self._live = self._open(version)

    @property
    def version(self) -> str:
        """The name of the version requests are answered from."""
        return self._live.name

    def _open(self, version: Path, previous: _Loaded | None = None) -> _Loaded:
        manifest = read_manifest(version)
        embedder = self._embedder or _reusable_encoder(previous, manifest)
        index = Index(self.path, version, manifest, embedder=embedder)
        try:
            # Load everything now: no request pays for it, and the files may be pruned while this version serves.
            _ = index.lexical
            _ = index.embedder
            info = index.info().to_dict()
        except BaseException:
            index.close()
            raise
        return _Loaded(index=index, name=version.name, info=info)

    def refresh(self) -> None:
        """Swap in the version CURRENT names, if it is new and opens; otherwise keep the live one."""
        name = _pointer(self.path)
        if not name or name == self._live.name:
            return
        if self._failed and self._failed[0] == name and time.monotonic() - self._failed[1] < RETRY_FAILED_S:
            return
        if not self._opening.acquire(blocking=False):
            return  # another request is opening it; answer from the live version meanwhile
        try:
            if name == self._live.name:
                return
            try:
                loaded = self._open(self.path / name, self._live)
            except (SemsearchError, OSError) as exc:
                # A version pruned or replaced mid-open, or a damaged one: keep serving the live version.
                log.warning("cannot open %s (%s); still serving %s", name, exc, self._live.name)
                self._failed = (name, time.monotonic())
                return
            with self._lock:
                old, self._live = self._live, loaded
                old.retired = True
                idle = old.refs == 0
            if idle:
                old.index.close()
            log.info("now serving %s (was %s)", loaded.name, old.name)
        finally:
            self._opening.release()

    @contextlib.contextmanager
    def use(self) -> Iterator[_Loaded]:
        """The live version, held open until the block ends."""
        self.refresh()
        with self._lock:
            loaded = self._live
            loaded.refs += 1
        try:
            yield loaded
        finally:
            with self._lock:
                loaded.refs -= 1
                idle = loaded.retired and loaded.refs == 0
            if idle:
                loaded.index.close()

    def close(self) -> None:
        """Close the live version (server shutdown)."""
        with self._lock:
            self._live.retired = True
            idle = self._live.refs == 0
        if idle:
            self._live.index.close()


def corpus_map(loaded: _Loaded) -> dict[str, Any] | None:
    """The version's corpus map (semsearch.corpus_map), read once per version; None when it has none."""
    if not loaded.map_loaded:
        try:
            module: Any = importlib.import_module(".corpus_map", __package__)
        except ImportError:
            loaded.corpus_map = None
        else:
            loaded.corpus_map = module.load_map(loaded.index.version)
        loaded.map_loaded = True
    return loaded.corpus_map


def add_highlight_spans(rows: list[dict[str, Any]], query: str) -> None:
    """Give each hit ``highlight_spans``: per highlighted sentence, the [start, end) of each word to <mark>.

    The words are those whose stem is a query stem, as the terminal highlights them; the page cannot stem.
    """
    from .lexical import Analyzer

    analyzer = Analyzer()
    wanted = set(analyzer(query))
    for row in rows:
        row["highlight_spans"] = [
            [[s, e] for s, e, stem in analyzer.spans(text) if stem in wanted] for text in row["highlights"]
        ]


def document_dict(doc: Document, version: str) -> dict[str, Any]:
    """A document as the API returns it."""
    return {
        "id": doc.id,
        "title": doc.title,
        "label": doc.label(),
        "text": doc.text,
        "sources": [s.to_dict() for s in doc.sources],
        "external_ids": doc.external_ids,
        "metadata": doc.metadata,
        "version": version,
    }


def _error(status: int, message: str, **extra: Any) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse({"status": status, "error": message, **extra}, status_code=status)


def _docs_routes(app: FastAPI) -> None:
    """/docs (Swagger UI) and /redoc from assets installed with fastapi-offline, else a small local page."""
    from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
    from fastapi.responses import HTMLResponse
    from fastapi.staticfiles import StaticFiles

    try:
        assets = Path(importlib.import_module("fastapi_offline").__file__ or "").parent / "static"
    except ImportError:
        assets = Path()
    if (assets / "swagger-ui-bundle.js").is_file():
        # FastAPI's own pages load Swagger UI from a CDN; these load it from this server (it may have no internet).
        app.mount("/docs-assets", StaticFiles(directory=assets), name="docs-assets")

        @app.get("/docs", include_in_schema=False)
        def swagger() -> HTMLResponse:
            return get_swagger_ui_html(
                openapi_url="/openapi.json",
                title="semsearch API",
                swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                swagger_css_url="/docs-assets/swagger-ui.css",
                swagger_favicon_url="/docs-assets/favicon.png",
            )

        @app.get("/redoc", include_in_schema=False)
        def redoc() -> HTMLResponse:
            return get_redoc_html(
                openapi_url="/openapi.json",
                title="semsearch API",
                redoc_js_url="/docs-assets/redoc.standalone.js",
                redoc_favicon_url="/docs-assets/favicon.png",
                with_google_fonts=False,
            )

        return

    @app.get("/docs", include_in_schema=False)
    def plain_docs() -> HTMLResponse:
        from html import escape

        rows = []
        for path, methods in app.openapi()["paths"].items():
            for method, op in methods.items():
                rows.append(
                    f"<tr><td>{escape(method.upper())}</td><td><code>{escape(path)}</code></td>"
                    f"<td>{escape(op.get('summary', ''))}</td></tr>"
                )
        return HTMLResponse(
            "<!doctype html><meta charset=utf-8><title>semsearch API</title>"
            "<h1>semsearch API</h1><p>The full description: <a href=/openapi.json>/openapi.json</a> "
            "(install fastapi-offline for the interactive Swagger UI here).</p>"
            f"<table>{''.join(rows)}</table>"
        )


def create_app(index_dir: str | Path, *, embedder: Embedder | None = None, allow_tags: bool = False) -> FastAPI:
    """The web app over the index at ``index_dir``; raises IndexNotFoundError when there is none."""
    from fastapi import FastAPI, Query, Request
    from fastapi import Path as PathParam
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse
    from fastapi.staticfiles import StaticFiles
    from pydantic import BaseModel
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from . import __version__

    class ApiError(BaseModel):
        """Every error: the HTTP status, one readable line, and the kind of error."""

        status: int
        error: str
        type: str | None = None

    errors: dict[int | str, dict[str, Any]] = {
        404: {"model": ApiError, "description": "No such document"},
        422: {"model": ApiError, "description": "A bad parameter (the message names it)"},
        503: {"model": ApiError, "description": "The index cannot be read"},
    }
    live = LiveIndex(index_dir, embedder=embedder)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        live.close()

    app = FastAPI(
        title="semsearch",
        version=__version__,
        description="Semantic search over research-paper abstracts (read-only). Errors are JSON: "
        "`{status, error}` with a 4xx status for bad parameters.",
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
        responses=errors,
    )
    app.state.live = live

    @app.exception_handler(SemsearchError)
    async def library_error(_: Request, exc: SemsearchError) -> Any:
        return _error(status_of(exc), str(exc), type=type(exc).__name__)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(_: Request, exc: RequestValidationError) -> Any:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ())[1:]) or "request"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return _error(422, "; ".join(problems), type="ValidationError")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Any:
        return _error(exc.status_code, str(exc.detail), type="HTTPError")

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> Any:
        log.exception("unexpected error")
        return _error(500, f"internal error: {type(exc).__name__}")

    def check_where(where: list[str]) -> None:
        for clause in where:
            if len(clause) > MAX_WHERE_CHARS:
                raise QueryError(f"a where clause is {len(clause)} characters; the limit is {MAX_WHERE_CHARS}")

    @app.get("/api/search", summary="Papers that best answer a query")
    def search(
        q: str = Query(
            ..., max_length=MAX_QUERY_CHARS, description=f"The question in plain words (≤ {MAX_QUERY_CHARS} chars)."
        ),
        k: int = Query(10, ge=1, le=MAX_K, description="How many hits."),
        mode: Literal["hybrid", "dense", "lexical"] = Query("hybrid", description="How hits are scored."),
        where: list[str] = Query(
            [], max_length=MAX_WHERE, description="FIELD OP VALUE filters (repeat; all must hold), e.g. year>=2024."
        ),
        diverse: bool = Query(False, description="Re-rank with maximal marginal relevance."),
        min_score: float | None = Query(None, allow_inf_nan=False, description="Drop hits scoring below this."),
    ) -> dict[str, Any]:
        check_where(where)
        start = time.perf_counter()
        with live.use() as loaded:
            hits = loaded.index.search(q, k, mode=mode, where=where, diverse=diverse, min_score=min_score)
            rows = [h.to_dict() for h in hits]
        add_highlight_spans(rows, q)
        return {
            "query": q,
            "k": k,
            "mode": mode,
            "where": where,
            "diverse": diverse,
            "version": loaded.name,
            "took_ms": round((time.perf_counter() - start) * 1000, 2),
            "hits": rows,
        }

    @app.get("/api/related/{doc_id}", summary="Papers nearest to one in the index (cosine), never itself")
    def related(
        doc_id: str = PathParam(..., max_length=200),
        k: int = Query(10, ge=1, le=MAX_K),
        where: list[str] = Query([], max_length=MAX_WHERE),
    ) -> dict[str, Any]:
        check_where(where)
        with live.use() as loaded:
            hits = loaded.index.related(doc_id, k, where=where)
        return {"id": doc_id, "k": k, "version": loaded.name, "hits": [h.to_dict() for h in hits]}

    @app.get("/api/documents/{doc_id}", summary="One document: text, title, metadata, sources")
    def document(doc_id: str = PathParam(..., max_length=200)) -> dict[str, Any]:
        with live.use() as loaded:
            return document_dict(loaded.index.get(doc_id), loaded.name)

    @app.get("/api/info", summary="What the index holds: model, documents, sources, size, build time")
    def info() -> dict[str, Any]:
        with live.use() as loaded:
            return loaded.info

    @app.get("/api/health", summary="Liveness, and the version being served")
    def health() -> dict[str, Any]:
        with live.use() as loaded:
            return {"status": "ok", "version": loaded.name, "documents": len(loaded.index)}

    @app.get("/api/map", summary="The corpus map (2-d layout of the documents) of the served version")
    def corpus_map_endpoint() -> dict[str, Any]:
        with live.use() as loaded:
            data = corpus_map(loaded)
        if data is None:
            raise StarletteHTTPException(404, "this index has no map; rebuild it with semsearch index")
        return data

    from .serve_recs import add_routes

    add_routes(app, live, allow_tags=allow_tags, max_k=MAX_K, max_where=MAX_WHERE)
    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html")

    _docs_routes(app)
    return app


def run_server(
    index_dir: str | Path,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    embedder: Embedder | None = None,
    access_log: bool = False,
    ready: Any = None,
    allow_tags: bool = False,
) -> None:
    """Serve the app with uvicorn until interrupted; ``ready(url)`` is called once the socket listens."""
    import socket

    import uvicorn

    app = create_app(index_dir, embedder=embedder, allow_tags=allow_tags)
    with contextlib.suppress(ImportError):
        import faiss

        # Many one-query searches run at once on threads: an OpenMP team per search only oversubscribes the cores.
        faiss.omp_set_num_threads(1)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    if ready is not None:
        ready(f"http://{shown}:{bound}/")
    config = uvicorn.Config(app, log_level="warning", access_log=access_log, timeout_graceful_shutdown=5)
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
