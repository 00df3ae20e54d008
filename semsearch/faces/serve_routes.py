"""HTTP routes for searching and reading the index (``semsearch serve``): an ``APIRouter`` made from the table.

Each route runs its operation on the application (``http_ops.route``); what is here is how each answer reads as
JSON. Imported only by ``serve.create_app`` (the 'serve' extra).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse
from starlette.exceptions import HTTPException

from semsearch.app import operations as ops
from semsearch.app.application import Found, Got
from semsearch.core.errors import QueryError
from semsearch.core.options import MAX_K
from semsearch.faces.http_ops import route
from semsearch.query.highlight import highlight_spans

router = APIRouter()


def search(found: Found, r: ops.Search, http: Request) -> dict[str, Any]:
    rows = [h.to_dict() for h in found.hits]
    for row in rows:
        row["highlight_spans"] = highlight_spans(row["highlights"], r.query)
    return {
        "query": r.query,
        "parsed": found.parsed.to_dict() if found.parsed else None,  # fields, phrases and -words read out of it
        "spelling": found.spelling.to_dict() if found.spelling else None,  # what BM25 searched, typos corrected
        "k": r.k,
        "mode": r.mode,
        "where": list(r.where),
        "diverse": r.diverse,
        # The same word as each hit's and MCP's: "diverse" when the order is no longer by score.
        "order": found.order,
        "version": found.version,
        "took_ms": round((time.perf_counter() - http.state.started) * 1000, 2),
        "hits": rows,
        "warnings": found.warnings,
        **({"passages": True} if r.passages else {}),  # the hits are passages, each its paper's hit
    }


def related(found: Found, r: ops.Related, _: Request) -> dict[str, Any]:
    hits = [h.to_dict() for h in found.hits]
    return {"id": r.id, "k": r.k, "version": found.version, "hits": hits, "warnings": found.warnings}


def document(got: Got, r: ops.GetPaper, _: Request) -> dict[str, Any]:
    return {**got.document.to_dict(), "version": got.version}


# A PDF shown by the browser's own viewer: no script of ours, and the viewer is an embedded object of the page.
PDF_CSP = "default-src 'none'; object-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"


def paper_pdf(path: Path, r: ops.PaperPdf, _: Request) -> Any:
    """The file, streamed as the application named it (a recorded PDF source of the paper), shown inline."""
    return FileResponse(
        path,
        media_type="application/pdf",
        filename=path.name,
        content_disposition_type="inline",
        headers={"Content-Security-Policy": PDF_CSP, "Cache-Control": "no-store"},
    )


def export_ids(r: ops.Export) -> ops.Export:
    """The ids as sent: repeated, or comma-separated in one value; bounded once split."""
    import dataclasses

    wanted = [part.strip() for value in r.ids for part in value.split(",") if part.strip()]
    if not wanted or len(wanted) > MAX_K or any(len(w) > ops.MAX_ID_CHARS for w in wanted):
        raise QueryError(f"ids: give 1 to {MAX_K} ids, each of at most {ops.MAX_ID_CHARS} characters")
    return dataclasses.replace(r, ids=tuple(wanted))


def export(done: Any, r: ops.Export, _: Request) -> Any:
    from fastapi.responses import Response

    from semsearch.curate.export import EXTENSIONS, MEDIA_TYPES

    name = f"semsearch-{len(done.documents)}.{EXTENSIONS[r.format]}"
    return Response(
        done.text, media_type=MEDIA_TYPES[r.format], headers={"Content-Disposition": f'inline; filename="{name}"'}
    )


def corpus_map(data: dict[str, Any] | None, r: ops.CorpusMap, _: Request) -> dict[str, Any]:
    if data is None:
        raise HTTPException(404, "this index has no map; rebuild it with semsearch index")
    return data


route(router, "search", search)
route(router, "related", related)
route(router, "get_paper", document, name="document")
route(router, "paper_pdf", paper_pdf, returns=Any, name="paper_pdf_endpoint", response_class=FileResponse)
route(router, "export", export, parse=export_ids, returns=Any, name="export_endpoint")
route(router, "info", None)
route(router, "health", None)
route(router, "map", corpus_map, name="corpus_map_endpoint")
