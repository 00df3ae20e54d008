"""HTTP routes for recommendations, arrivals and tags (``semsearch serve``).

Reads are always allowed. Tag writes (the page's like / not-for-me buttons) need ``semsearch serve
--allow-tags`` and a same-origin JSON POST: the body must be ``application/json`` (which a cross-site form
cannot send without a CORS preflight, and the server answers none); a foreign Host or Origin never reaches a
route (``local_hosts``). A write is all or nothing: an unknown id in ``add`` or ``remove`` changes nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

# Imported only by serve.create_app (the 'serve' extra). Route signatures are read by FastAPI at run time,
# so the types they name must be module globals.
from fastapi import Body, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException

from semsearch.faces.api_schema import WHERE_SCHEMA
from semsearch.reader.arrivals import DATE_PATTERN, VERSION_PATTERN
from semsearch.reader.recommend import METHODS
from semsearch.reader.recommend import recommend as recommend_papers

if TYPE_CHECKING:
    from fastapi import FastAPI

    from semsearch.query.live import LiveIndex

MAX_KEYS = 200  # ids or tags per request
# --since in the API: a version (3, v-000003) or a date; empty means the default ("last" follows a CLI bookmark).
SINCE_SCHEMA: dict[str, Any] = {"pattern": f"^\\s*(|{VERSION_PATTERN}|{DATE_PATTERN})\\s*$"}
LIKED_TAG = "liked"
NOT_TAG = "not-for-me"
TAG_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"  # tags.check_name's rule, stated in the schema
Key = Annotated[str, Field(min_length=1, max_length=200, pattern=r"[^\s\x1c-\x1f\x85]")]


class TagEdit(BaseModel):
    """A tag write: ids (or external ids, DOIs) to add to the tag and to remove from it."""

    model_config = ConfigDict(extra="forbid")

    add: list[Key] = Field(default=[], max_length=MAX_KEYS)
    remove: list[Key] = Field(default=[], max_length=MAX_KEYS)


def add_routes(app: FastAPI, live: LiveIndex, *, allow_tags: bool, max_k: int, max_where: int) -> None:
    """Add /api/recommend, /api/new and /api/tags to the app."""
    from semsearch.core.errors import QueryError

    @app.get("/api/recommend", summary="Papers like the liked ones (tags or ids), unlike the `not` ones")
    def recommend(
        like: list[Key] = Query(
            ...,
            min_length=1,
            max_length=MAX_KEYS,
            description="Tag names or paper ids (repeat).",
        ),
        not_: list[Key] = Query(
            [],
            alias="not",
            max_length=MAX_KEYS,
            description="Tags or ids to steer away from (the negative tags, such as not-for-me, always are).",
        ),
        k: int = Query(10, ge=1, le=max_k),
        where: list[str] = Query([], max_length=max_where, json_schema_extra=WHERE_SCHEMA),
        since: str | None = Query(
            None, max_length=40, description="A version (v-000003 or 3) or a date.", json_schema_extra=SINCE_SCHEMA
        ),
        include_tagged: bool = Query(False, description="Also return papers that are in a tag."),
        method: str | None = Query(
            None,
            description=f"One of {', '.join(METHODS)} [default: the measured best]",
            json_schema_extra={"enum": list(METHODS)},
        ),
    ) -> dict[str, Any]:
        since = (since or "").strip() or None  # empty: the default
        if since == "last":
            raise QueryError("since=last is for the command line (it follows a bookmark); give a version or date")
        from semsearch.reader.tags import TagStore

        with live.use() as loaded:
            recs = recommend_papers(
                loaded.index,
                like,
                k,
                not_like=not_,
                where=where,
                since=since,
                include_tagged=include_tagged,
                method=method,
            )
            # The negative tags count against whether or not the request names them (the page's "For you").
            against = list(dict.fromkeys([*not_, *TagStore(loaded.index.path).negative_names()]))
        return {
            "like": like,
            "not": against,
            "k": k,
            "version": loaded.name,
            "method": recs[0].method if recs else method,
            "hits": [r.to_dict() for r in recs],
        }

    @app.get("/api/new", summary="Papers that arrived since a version or date, ranked for the tags and saved queries")
    def new(
        since: str | None = Query(
            None,
            max_length=40,
            description="A version or a date [default: the latest build that added papers].",
            json_schema_extra=SINCE_SCHEMA,
        ),
        k: int = Query(20, ge=1, le=max_k),
        where: list[str] = Query([], max_length=max_where, json_schema_extra=WHERE_SCHEMA),
    ) -> dict[str, Any]:
        from semsearch.reader.arrivals import new_since
        from semsearch.reader.whats_new import ranked_new

        since = (since or "").strip() or None  # empty: the default
        if since == "last":
            raise QueryError("since=last is for the command line; give a version or a date")
        with live.use() as loaded:
            papers = ranked_new(loaded.index, new_since(loaded.index, since), k=k, where=where)
        return {"since": since, "k": k, "version": loaded.name, "hits": [p.to_dict() for p in papers]}

    @app.get("/api/tags", summary="The tags: papers and dangling entries per tag; whether this server writes them")
    def tags() -> dict[str, Any]:
        from semsearch.reader.tags import TagStore, members

        with live.use() as loaded:
            store = TagStore(loaded.index.path)
            found = {n: members(loaded.index, store, n, repoint=False) for n in store.names()}
            polarity = store.polarities()
        return {
            "writable": allow_tags,
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

    def writable(request: Request) -> None:
        """Refuse a write to a read-only server (403) or one that is not JSON (415) before the body is read."""
        if not allow_tags:
            raise HTTPException(403, "this server is read-only; start it with semsearch serve --allow-tags")
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            raise HTTPException(415, "tag writes are JSON: Content-Type: application/json")

    @app.post(
        "/api/tags/{name}",
        dependencies=[Depends(writable)],
        summary="Add or remove papers of a tag (needs serve --allow-tags)",
        responses={
            400: {"description": "A malformed JSON body"},
            403: {"description": "The server is read-only (no --allow-tags), or the request is cross-site"},
            404: {"description": "An id names no paper (add) or no entry of the tag (remove); nothing changed"},
            415: {"description": "The body is not JSON"},
        },
    )
    def edit_tag(
        name: str = PathParam(..., max_length=64, pattern=TAG_NAME_PATTERN),
        body: TagEdit = Body(..., examples=[{"add": ["6a24ce769ac8de0d"], "remove": []}]),
    ) -> dict[str, Any]:
        from semsearch.reader.tags import TagStore, resolve_papers

        if len(body.add) + len(body.remove) > MAX_KEYS or not (body.add or body.remove):
            raise QueryError(f"add, remove: give 1..{MAX_KEYS} ids in all")
        with live.use() as loaded:
            docs = resolve_papers(loaded.index, body.add)  # an unknown id: 404 before anything is written
            added, removed, size = TagStore(loaded.index.path).edit(name, docs, body.remove)
        return {"tag": name, "added": added, "removed": removed, "papers": size}

    _ = edit_tag, tags, new, recommend  # registered by the decorators
