"""The HTTP face of the operation table: each operation's route, with FastAPI parameters made from its request.

``route`` reads the operation's fields (``operations``), turns each into a ``Query`` or ``Path`` parameter
with the table's bounds, default and help, and hands the route's handler the typed request and the live index
(a ``Depends``), so ``/openapi.json`` states exactly what the table declares. Needs the 'serve' extra.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import Field

from semsearch.faces.operations import HTTP, Operation, Param, operation
from semsearch.query.live import LiveIndex


def live_index(request: Request) -> LiveIndex:
    """The app's live index (``serve.create_app`` puts it on the app's state)."""
    live: LiveIndex = request.app.state.live
    return live


def http_type(param: Param) -> Any:
    """The Python type FastAPI validates the parameter as (lists of bounded items where the table bounds them)."""
    if not param.is_list:
        return param.type
    spec = param.spec
    if spec.item_min_length is None and spec.item_max_length is None and spec.item_pattern is None:
        return list[str]
    item = Field(min_length=spec.item_min_length, max_length=spec.item_max_length, pattern=spec.item_pattern)
    return list[Annotated[str, item]]


def http_parameter(param: Param) -> inspect.Parameter:
    """The FastAPI parameter of one request field: its name, alias, bounds, default and help."""
    spec = param.spec
    default = ... if spec.required else (list(spec.default) if param.is_list else spec.default)
    bounds = spec.bounds()
    if spec.schema:
        bounds["json_schema_extra"] = dict(spec.schema)
    if param.finite:  # no float a request carries means nan or an infinity (Param.finite)
        bounds["allow_inf_nan"] = False
    if spec.path:  # a path parameter is named as the path names it
        return inspect.Parameter(
            param.name, inspect.Parameter.KEYWORD_ONLY, default=PathParam(default, **bounds), annotation=param.type
        )
    if param.name != param.field:
        bounds["alias"] = param.name
    return inspect.Parameter(
        param.field, inspect.Parameter.KEYWORD_ONLY, default=Query(default, **bounds), annotation=http_type(param)
    )


def route(router: APIRouter, name: str | Operation, handler: Callable[[LiveIndex, Any], Any], **more: Any) -> None:
    """Add the operation's route (by name, or an ``Operation``) to ``router``: ``handler(live, request)`` answers it."""
    op = operation(name) if isinstance(name, str) else name
    params = op.params(HTTP)
    by_argument = {p.name if p.spec.path else p.field: p.field for p in params}

    def endpoint(live: LiveIndex, **values: Any) -> Any:
        fields = {by_argument[key]: tuple(v) if isinstance(v, list) else v for key, v in values.items()}
        return handler(live, op.request(**fields))

    live = inspect.Parameter("live", inspect.Parameter.KEYWORD_ONLY, default=Depends(live_index))
    returns = inspect.signature(handler, eval_str=True).return_annotation  # the response's schema
    endpoint.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [live, *map(http_parameter, params)], return_annotation=returns
    )
    endpoint.__name__ = handler.__name__  # the OpenAPI operationId
    assert op.http is not None, f"{op.name} has no HTTP route"
    router.add_api_route(op.http, endpoint, methods=[op.method], summary=op.help.rstrip("."), **more)
