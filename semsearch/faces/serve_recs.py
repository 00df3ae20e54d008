"""HTTP routes for recommendations, arrivals and tags (``semsearch serve``).

Reads are always allowed. Tag writes (the page's like / not-for-me buttons) need ``semsearch serve
--allow-tags``, an index folder the server can write (else 409 with the reason, which GET /api/tags gives too)
and a same-origin JSON POST: the body must be ``application/json`` (which a cross-site form
cannot send without a CORS preflight, and the server answers none); a foreign Host or Origin never reaches a
route (``local_hosts``). A write is all or nothing: an unknown id in ``add`` or ``remove`` changes nothing.
"""

from __future__ import annotations

from typing import Annotated, Any

# Imported only by serve.create_app (the 'serve' extra). Route signatures are read by FastAPI at run time,
# so the types they name must be module globals.
from fastapi import APIRouter, Body, Depends, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from semsearch.core.errors import QueryError
from semsearch.faces import operations as ops
from semsearch.faces.http_ops import live_index, route
from semsearch.query.live import LiveIndex
from semsearch.reader.recommend import recommend as recommend_papers
from semsearch.reader.tags import TagStore

MAX_KEYS = ops.MAX_KEYS  # ids or tags per request
LIKED_TAG = "liked"
NOT_TAG = "not-for-me"
TAG_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"  # tags.check_name's rule, stated in the schema
Key = Annotated[str, Field(min_length=1, max_length=ops.MAX_ID_CHARS, pattern=ops.KEY_PATTERN)]

router = APIRouter()


class TagEdit(BaseModel):
    """A tag write: ids (or external ids, DOIs) to add to the tag and to remove from it."""

    model_config = ConfigDict(extra="forbid")

    add: list[Key] = Field(default=[], max_length=MAX_KEYS)
    remove: list[Key] = Field(default=[], max_length=MAX_KEYS)


def _since(since: str | None) -> str | None:
    """The request's since, empty meaning the default; "last" follows a CLI bookmark, which a server has not."""
    since = (since or "").strip() or None
    if since == "last":
        raise QueryError("since=last is for the command line (it follows a bookmark); give a version or a date")
    return since


def recommend(live: LiveIndex, r: ops.Recommend) -> dict[str, Any]:
    from semsearch.reader.tags import TagStore

    since = _since(r.since)
    with live.use() as loaded:
        recs = recommend_papers(
            loaded.index,
            r.like,
            r.k,
            not_like=r.not_like,
            where=r.where,
            since=since,
            include_tagged=r.include_tagged,
            method=r.method,
        )
        # The negative tags count against whether or not the request names them (the page's "For you").
        against = list(dict.fromkeys([*r.not_like, *TagStore(loaded.index.path).negative_names()]))
    return {
        "like": list(r.like),
        "not": against,
        "k": r.k,
        "version": loaded.name,
        "method": recs[0].method if recs else r.method,
        "hits": [rec.to_dict() for rec in recs],
    }


def new(live: LiveIndex, r: ops.New) -> dict[str, Any]:
    from semsearch.reader.arrivals import new_since
    from semsearch.reader.whats_new import ranked_new

    since = _since(r.since)
    with live.use() as loaded:
        papers = ranked_new(loaded.index, new_since(loaded.index, since), k=r.k, where=r.where)
    return {"since": since, "k": r.k, "version": loaded.name, "hits": [p.to_dict() for p in papers]}


READ_ONLY_SERVER = "this server is read-only; start it with semsearch serve --allow-tags"


def read_only_reason(request: Request) -> str | None:
    """Why this server writes no tags: started without ``--allow-tags``, or an index folder it cannot write
    (a read-only filesystem, permissions); None when it writes them."""
    from semsearch.reader.tags import write_problem

    if not request.app.state.allow_tags:
        return READ_ONLY_SERVER
    live: LiveIndex = request.app.state.live
    return write_problem(live.path)


def tag_list(live: LiveIndex, _: ops.Tags, read_only: str | None, store: TagStore | None = None) -> dict[str, Any]:
    """The tags and their papers; ``store``: the server's own, which parses ``tags.json`` again only once replaced."""
    from semsearch.reader.tags import all_members

    with live.use() as loaded:
        store = store or TagStore(loaded.index.path)
        found = all_members(loaded.index, store, repoint=False)  # one read of tags.json, however many tags
        polarity = store.polarities()
    return {
        "writable": read_only is None,
        "read_only_reason": read_only,
        "tags": {
            n: {
                "polarity": polarity.get(n, "positive"),
                "papers": len(ms),
                "dangling": sum(m.dangling for m in ms),
                "ids": [m.live_id or m.entry.id for m in ms],
            }
            for n, ms in found.items()
        },
    }


route(router, "recommend", recommend)
route(router, "new", new)


@router.get("/api/tags", summary=ops.operation("tags").help.rstrip("."), response_model=dict[str, Any])
def tags(
    request: Request, live: LiveIndex = Depends(live_index), read_only: str | None = Depends(read_only_reason)
) -> JSONResponse:
    # json.dumps directly: FastAPI's generic encoder took 0.76 s of 50,000 tags' listing, json 0.25 s.
    state = request.app.state
    if getattr(state, "tag_store", None) is None:
        state.tag_store = TagStore(live.path)  # kept: a listing parses tags.json again only when it was replaced
    return JSONResponse(tag_list(live, ops.Tags(), read_only, state.tag_store))


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


@router.post(
    "/api/tags/{name}",
    dependencies=[Depends(writable)],
    summary="Add or remove papers of a tag (needs serve --allow-tags)",
    responses={
        400: {"description": "A malformed JSON body"},
        403: {"description": "The server is read-only (no --allow-tags), or the request is cross-site"},
        404: {"description": "An id names no paper (add) or no entry of the tag (remove); nothing changed"},
        409: {"description": "The index folder cannot be written (read-only filesystem, permissions)"},
        415: {"description": "The body is not JSON"},
    },
)
def edit_tag(
    name: str = PathParam(..., max_length=64, pattern=TAG_NAME_PATTERN),
    body: TagEdit = Body(..., examples=[{"add": ["6a24ce769ac8de0d"], "remove": []}]),
    live: LiveIndex = Depends(live_index),
) -> dict[str, Any]:
    from semsearch.reader.tags import TagStore, resolve_papers

    if len(body.add) + len(body.remove) > MAX_KEYS or not (body.add or body.remove):
        raise QueryError(f"add, remove: give 1..{MAX_KEYS} ids in all")
    with live.use() as loaded:
        docs = resolve_papers(loaded.index, body.add)  # an unknown id: 404 before anything is written
        added, removed, size = TagStore(loaded.index.path).edit(name, docs, body.remove)
    return {"tag": name, "added": added, "removed": removed, "papers": size}
