"""HTTP routes for recommendations, arrivals and tags (``semsearch serve``).

Reads are always allowed. Tag writes (the page's like / not-for-me buttons) need ``semsearch serve
--allow-tags``, an index folder the server can write (else 409 with the reason, which GET /api/tags gives too)
and a same-origin JSON POST: the body must be ``application/json`` (which a cross-site form
cannot send without a CORS preflight, and the server answers none); a foreign Host or Origin never reaches a
route (``local_hosts``). A write is all or nothing: an unknown id in ``add`` or ``remove`` changes nothing.
"""

from __future__ import annotations

from typing import Any

# Imported only by serve.create_app (the 'serve' extra). Route signatures are read by FastAPI at run time,
# so the types they name must be module globals.
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from semsearch.app import operations as ops
from semsearch.app.application import Application, Arrived, Recommended, TagListing
from semsearch.faces.http_ops import route

MAX_KEYS = ops.MAX_KEYS  # ids or tags per request
LIKED_TAG = "liked"
NOT_TAG = "not-for-me"
TAG_NAME_PATTERN = ops.TAG_NAME_PATTERN

router = APIRouter()


def recommend(done: Recommended, r: ops.Recommend, _: Request) -> dict[str, Any]:
    recs = done.recommendations
    return {
        "like": list(r.like),
        "not": done.against,  # the negative tags count against whether or not the request names them
        "k": r.k,
        "version": done.version,
        "method": recs[0].method if recs else r.method,
        "hits": [rec.to_dict() for rec in recs],
    }


def new(done: Arrived, r: ops.New, _: Request) -> dict[str, Any]:
    return {"since": done.since, "k": r.k, "version": done.version, "hits": [p.to_dict() for p in done.papers]}


READ_ONLY_SERVER = "this server is read-only; start it with semsearch serve --allow-tags"


def read_only_reason(request: Request) -> str | None:
    """Why this server writes no tags: started without ``--allow-tags``, or an index folder it cannot write
    (a read-only filesystem, permissions); None when it writes them."""
    if not request.app.state.allow_tags:
        return READ_ONLY_SERVER
    app: Application = request.app.state.application
    return app.tag_write_problem()


def tag_list(listing: TagListing, read_only: str | None) -> dict[str, Any]:
    """The tags and their papers, and whether (and why not) this server writes them."""
    return {
        "writable": read_only is None,
        "read_only_reason": read_only,
        "tags": {
            n: {
                "polarity": listing.polarities.get(n, "positive"),
                "papers": len(ms),
                "dangling": sum(m.dangling for m in ms),
                "ids": [m.live_id or m.entry.id for m in ms],
            }
            for n, ms in listing.members.items()
        },
    }


def tags(listing: TagListing, _: ops.Tags, http: Request) -> JSONResponse:
    # json.dumps directly: FastAPI's generic encoder is pure Python, slow on a long listing.
    return JSONResponse(tag_list(listing, read_only_reason(http)))


def writable(request: Request) -> None:
    """Refuse a write to a read-only server (403), a read-only index (409) or one that is not JSON (415) before the
    body is read."""
    if not request.app.state.allow_tags:
        raise HTTPException(403, READ_ONLY_SERVER)
    problem = read_only_reason(request)
    if problem is not None:
        raise HTTPException(409, problem)
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise HTTPException(415, "tag writes are JSON: Content-Type: application/json")


route(router, "recommend", recommend)
route(router, "new", new)
route(router, "tags", tags, response_model=dict[str, Any])
route(
    router,
    "tag_edit",
    None,
    name="edit_tag",
    dependencies=[Depends(writable)],
    example={"add": ["6a24ce769ac8de0d"], "remove": []},
    body_help="A tag write: ids (or external ids, DOIs) to add to the tag and to remove from it.",
    responses={
        400: {"description": "A malformed JSON body"},
        403: {"description": "The server is read-only (no --allow-tags), or the request is cross-site"},
        404: {"description": "An id names no paper (add) or no entry of the tag (remove); nothing changed"},
        409: {"description": "The index folder cannot be written (read-only filesystem, permissions)"},
        415: {"description": "The body is not JSON"},
    },
)
