"""HTTP routes for searching and reading the index (``semsearch serve``): an ``APIRouter`` over the live index.

The operations' parameters come from the operation table (``http_ops.route``); each handler is one call on the
live index. Imported only by ``serve.create_app`` (the 'serve' extra).
"""

from __future__ import annotations

import os
import time
from typing import Any

from fastapi import APIRouter, Depends
from starlette.exceptions import HTTPException

from semsearch.core.errors import QueryError
from semsearch.core.options import MAX_K
from semsearch.faces import operations as ops
from semsearch.faces.http_ops import live_index, route
from semsearch.query.highlight import highlight_spans
from semsearch.query.live import LiveIndex
from semsearch.query.syntax import parse_query

router = APIRouter()


def search(live: LiveIndex, r: ops.Search) -> dict[str, Any]:
    start = time.perf_counter()
    where = list(r.where)
    with live.use() as loaded:
        hits = loaded.index.search(
            r.query,
            r.k,
            mode=r.mode,
            where=where,
            diverse=r.diverse,
            min_score=r.min_score,
            fusion=r.fusion,
            exact=r.exact,
        )
        rows = [h.to_dict() for h in hits]
        parsed = parse_query(r.query)  # read without error: the search did
        spelling = loaded.index.spell(r.query, exact=r.exact or r.mode == "dense")
        warnings = loaded.index.where_warnings([*where, *parsed.where])  # year:, venue:, title: filter too
    for row in rows:
        row["highlight_spans"] = highlight_spans(row["highlights"], r.query)
    return {
        "query": r.query,
        "parsed": parsed.to_dict(),  # fields, phrases and -words read out of the text
        "spelling": spelling.to_dict(),  # what BM25 searched: the words with typos corrected, and each correction
        "k": r.k,
        "mode": r.mode,
        "where": where,
        "diverse": r.diverse,
        # The same word as each hit's and MCP's: "diverse" when the order is no longer by score.
        "order": "diverse" if any(h.relevance_rank is not None for h in hits) else "relevance",
        "version": loaded.name,
        "took_ms": round((time.perf_counter() - start) * 1000, 2),
        "hits": rows,
        "warnings": warnings,
    }


def related(live: LiveIndex, r: ops.Related) -> dict[str, Any]:
    where = list(r.where)
    with live.use() as loaded:
        hits = loaded.index.related(r.id, r.k, where=where)
        warnings = loaded.index.where_warnings(where)
    return {"id": r.id, "k": r.k, "version": loaded.name, "hits": [h.to_dict() for h in hits], "warnings": warnings}


def document(live: LiveIndex, r: ops.GetPaper) -> dict[str, Any]:
    with live.use() as loaded:
        return {**loaded.index.get(r.id).to_dict(), "version": loaded.name}


def export_endpoint(live: LiveIndex, r: ops.Export) -> Any:
    from fastapi.responses import Response

    from semsearch.reader.export import EXTENSIONS, MEDIA_TYPES, select_documents
    from semsearch.reader.export import export as citations

    wanted = [part.strip() for value in r.ids for part in value.split(",") if part.strip()]
    if not wanted or len(wanted) > MAX_K or any(len(w) > ops.MAX_ID_CHARS for w in wanted):
        raise QueryError(f"ids: give 1 to {MAX_K} ids, each of at most {ops.MAX_ID_CHARS} characters")
    with live.use() as loaded:
        docs = select_documents(loaded.index, wanted, [])
    name = f"semsearch-{len(docs)}.{EXTENSIONS[r.format]}"
    return Response(
        citations(docs, r.format),
        media_type=MEDIA_TYPES[r.format],
        headers={"Content-Disposition": f'inline; filename="{name}"'},
    )


def info(live: LiveIndex, _: ops.Info) -> dict[str, Any]:
    with live.use() as loaded:
        return loaded.info


route(router, "search", search)
route(router, "related", related)
route(router, "get_paper", document)
route(router, "export", export_endpoint)
route(router, "info", info)


@router.get("/api/health", summary="Liveness, and the version being served")
def health(live: LiveIndex = Depends(live_index)) -> dict[str, Any]:
    with live.use() as loaded:
        # worker: this process's id, so a client of `serve --workers N` sees which worker serves which version
        return {"status": "ok", "version": loaded.name, "documents": len(loaded.index), "worker": os.getpid()}


@router.get("/api/map", summary="The corpus map (2-d layout of the documents) of the served version")
def corpus_map_endpoint(live: LiveIndex = Depends(live_index)) -> dict[str, Any]:
    with live.use() as loaded:
        data = loaded.corpus_map()
    if data is None:
        raise HTTPException(404, "this index has no map; rebuild it with semsearch index")
    return data
