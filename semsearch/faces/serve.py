"""``semsearch serve``: a read-only JSON API and a search page over an index that follows new versions live."""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from semsearch.app.application import Application
from semsearch.app.operations import HTTP, face_name
from semsearch.app.operations import MAX_QUERY_CHARS as MAX_QUERY_CHARS  # a query's bound, as tests read it
from semsearch.core.errors import (
    IndexCorruptError,
    IndexFormatError,
    IndexNotFoundError,
    IndexReadError,
    IndexReadOnlyError,
    InputError,
    ModelLoadError,
    ModelMismatchError,
    QueryError,
    SemsearchError,
    ServeUnavailableError,
    TagError,
    UnknownDocumentError,
)
from semsearch.core.options import DEFAULT_HOST, DEFAULT_PORT
from semsearch.faces.local_hosts import MAX_BODY, ScreenedApp, TrustedHosts
from semsearch.query.live import LiveIndex

if TYPE_CHECKING:
    from fastapi import FastAPI

    from semsearch.encode.embedder import Embedder
    from semsearch.faces.workers import WorkerSpec

WEB_DIR = Path(__file__).resolve().parent / "web"
# Swagger UI and ReDoc start from one inline script and inject their own styles: /docs and /redoc allow exactly
# that script (by hash) and inline styles; every other response carries local_hosts.PAGE_CSP.
DOCS_CSP = (
    "default-src 'self'; script-src 'self' {hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "worker-src 'self' blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


def check_installed() -> None:
    """Raise a one-line error naming the extra when the server's packages are missing."""
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ServeUnavailableError("serve", "semsearch serve", exc.name) from exc


log = logging.getLogger("semsearch.faces.serve")

# What each library error means to an HTTP client: its own mistake (4xx) or the server's index (503).
STATUS: dict[type[SemsearchError], int] = {
    QueryError: 422,
    UnknownDocumentError: 404,
    IndexReadOnlyError: 409,  # a tag write to an index folder this server cannot write
    TagError: 503,  # tags.json cannot be read (the message says to fix or delete it)
    InputError: 400,
    IndexNotFoundError: 503,
    IndexCorruptError: 503,
    IndexReadError: 503,  # an index file cannot be read now (an I/O error): no damage, no rebuild
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


def _error(status: int, message: str, **extra: Any) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse({"status": status, "error": message, **extra}, status_code=status)


def with_docs_csp(page: Any) -> Any:
    """The docs page with a CSP that allows its own inline scripts (by sha256) and nothing else inline."""
    import base64
    import hashlib

    html = bytes(page.body).decode("utf-8")
    inline = re.findall(r"<script>(.*?)</script>", html, flags=re.DOTALL)
    hashes = " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()}'" for code in inline
    )
    page.headers["Content-Security-Policy"] = DOCS_CSP.format(hashes=hashes)
    return page


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
            return with_docs_csp(
                get_swagger_ui_html(
                    openapi_url="/openapi.json",
                    title="semsearch API",
                    swagger_js_url="/docs-assets/swagger-ui-bundle.js",
                    swagger_css_url="/docs-assets/swagger-ui.css",
                    swagger_favicon_url="/docs-assets/favicon.png",
                )
            )

        @app.get("/redoc", include_in_schema=False)
        def redoc() -> HTMLResponse:
            return with_docs_csp(
                get_redoc_html(
                    openapi_url="/openapi.json",
                    title="semsearch API",
                    redoc_js_url="/docs-assets/redoc.standalone.js",
                    redoc_favicon_url="/docs-assets/favicon.png",
                    with_google_fonts=False,
                )
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


def create_app(
    index_dir: str | Path,
    *,
    embedder: Embedder | None = None,
    allow_tags: bool = False,
    trusted: TrustedHosts | None = None,
    query_threads: int | None = None,
) -> FastAPI:
    """The web app over the index at ``index_dir``; raises IndexNotFoundError when there is none.

    It answers only requests whose Host and Origin are in ``trusted`` (default: a server on this machine only).
    ``query_threads``: the query encoder's ONNX threads (the server passes ``QUERY_THREADS``).
    """
    from starlette.middleware.body_limit import RequestBodyLimitMiddleware

    from semsearch.faces import serve_recs, serve_routes

    # Opened now: a missing index fails here, and no request pays for the first load.
    live = LiveIndex(index_dir, embedder=embedder, query_threads=query_threads)
    application = Application(index_dir, embedder=embedder, live=live, own=True)
    app = _new_app(application)
    app.state.allow_tags = allow_tags
    # A body is counted as it arrives, chunked too (Starlette's own limit: 413 past it, answered by http_error);
    # inside the screen, which refuses a declared length past it unread, as JSON.
    app.add_middleware(RequestBodyLimitMiddleware, max_body_size=MAX_BODY)
    app.add_middleware(ScreenedApp, trusted=trusted or TrustedHosts.for_bind(DEFAULT_HOST))
    _error_handlers(app)
    # The operations' routes (their parameters from the operation table), each getting the application by Depends.
    app.include_router(serve_routes.router)
    app.include_router(serve_recs.router)
    _page_routes(app)
    _docs_routes(app)
    return app


def _new_app(application: Application) -> FastAPI:
    """The FastAPI application, its documented error shape, and the live index closed at shutdown."""
    from fastapi import FastAPI
    from pydantic import BaseModel

    from semsearch.core.version import __version__

    class ApiError(BaseModel):
        """Every error: the HTTP status, one readable line, and the kind of error."""

        status: int
        error: str
        type: str | None = None

    errors: dict[int | str, dict[str, Any]] = {
        404: {"model": ApiError, "description": "No such document"},
        422: {"model": ApiError, "description": "A bad parameter (the message names it)"},
        403: {"model": ApiError, "description": "The request came from another site's page (Origin)"},
        413: {"model": ApiError, "description": "The request body is too large"},
        421: {"model": ApiError, "description": "The Host is not one of this server's names (see --allow-host)"},
        503: {"model": ApiError, "description": "The index cannot be read"},
    }

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        application.close()

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
    app.state.application = application
    app.state.live = application.live  # the version being served, for whoever watches the server
    return app


def _error_handlers(app: FastAPI) -> None:
    """Every error as JSON {status, error, type}: library errors by kind, bad parameters 422, never a traceback."""
    from fastapi import Request
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(SemsearchError)
    async def library_error(_: Request, exc: SemsearchError) -> Any:
        # A message about a request field names it as the API does (q, not), never as a CLI flag.
        return _error(status_of(exc), exc.message_for(lambda f: face_name(HTTP, f)), type=type(exc).__name__)

    @app.exception_handler(RequestValidationError)
    async def bad_parameter(_: Request, exc: RequestValidationError) -> Any:
        problems = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ())[1:]) or "request"
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return _error(422, "; ".join(problems), type="ValidationError")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> Any:
        if exc.status_code != 413:
            return _error(exc.status_code, str(exc.detail), type="HTTPError")
        # The body limit stopped reading: the rest of the body is never read, so the connection ends here.
        response = _error(413, f"the request body is over {MAX_BODY} bytes", type="HTTPError")
        response.headers["connection"] = "close"
        return response

    @app.exception_handler(Exception)
    async def unexpected(_: Request, exc: Exception) -> Any:
        log.exception("unexpected error")
        return _error(500, f"internal error: {type(exc).__name__}")


def _page_routes(app: FastAPI) -> None:
    """The search page and its static files."""
    from fastapi.responses import FileResponse
    from fastapi.staticfiles import StaticFiles

    app.mount("/static", StaticFiles(directory=WEB_DIR), name="static")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(WEB_DIR / "index.html", media_type="text/html")


def server_config(app: Any, *, access_log: bool = False, **more: Any) -> Any:
    """uvicorn's settings for the app, with the bounds that keep it up (``http_guard``; ``more``: host and port when
    uvicorn binds the socket itself, ``limits``)."""
    from semsearch.faces.http_guard import guarded_config

    return guarded_config(app, log_level="warning", access_log=access_log, timeout_graceful_shutdown=5, **more)


# Each server process encodes a query on one thread: concurrent requests already spread over the cores, and an
# operator thread pool spin-waits after every query, spending CPU that the other requests need. The vectors are
# the same on any thread count.
QUERY_THREADS = 1


def server_app(
    index_dir: str | Path,
    *,
    host: str,
    allow_hosts: Sequence[str] = (),
    embedder: Embedder | None = None,
    allow_tags: bool = False,
) -> Any:
    """The app one server process (or worker) serves: screened for ``host``'s names, its threads set for serving."""
    trusted = TrustedHosts.for_bind(host, allow_hosts)
    app = create_app(index_dir, embedder=embedder, allow_tags=allow_tags, trusted=trusted, query_threads=QUERY_THREADS)
    quiet_faiss()
    return app


def quiet_faiss() -> None:
    """One OpenMP thread per FAISS search: many one-query searches run at once on threads, a team per search only
    oversubscribes the cores."""
    with contextlib.suppress(ImportError):
        import faiss

        faiss.omp_set_num_threads(1)


def serve_worker(spec: WorkerSpec, ready: Any) -> None:
    """One worker of ``serve --workers N`` (a spawned process): the same app and settings as one process, on its
    own listening socket of the shared port, until SIGTERM."""
    import uvicorn

    from semsearch.faces.workers import listening_socket

    try:
        app = server_app(
            spec.index_dir,
            host=spec.host,
            allow_hosts=spec.allow_hosts,
            embedder=spec.embedder,
            allow_tags=spec.allow_tags,
        )
        sock = listening_socket(spec.host, spec.port)
    except (SemsearchError, OSError) as exc:
        ready.put((os.getpid(), str(exc)))
        raise SystemExit(2) from None
    ready.put((os.getpid(), ""))
    try:
        uvicorn.Server(server_config(app, access_log=spec.access_log)).run(sockets=[sock])
    finally:
        sock.close()


def run_server(
    index_dir: str | Path,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    embedder: Embedder | None = None,
    access_log: bool = False,
    ready: Any = None,
    allow_tags: bool = False,
    allow_hosts: Sequence[str] = (),
    workers: int = 1,
) -> None:
    """Serve the app with uvicorn until interrupted; ``ready(url)`` is called once the socket listens.

    The server answers to the names of ``host`` (see ``local_hosts``) and to ``allow_hosts``. ``workers`` above 1
    runs that many processes on the port (``workers.run_workers``), each following CURRENT.
    """
    import socket

    import uvicorn

    if workers != 1:
        from semsearch.faces.workers import run_workers

        run_workers(
            index_dir,
            workers,
            serve_worker,
            host=host,
            port=port,
            embedder=embedder,
            access_log=access_log,
            ready=ready,
            allow_tags=allow_tags,
            allow_hosts=allow_hosts,
        )
        return
    app = server_app(index_dir, host=host, allow_hosts=allow_hosts, embedder=embedder, allow_tags=allow_tags)
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
    try:
        uvicorn.Server(server_config(app, access_log=access_log)).run(sockets=[sock])
    finally:
        sock.close()
