"""The HTTP face of the operation table: each operation's route, with FastAPI parameters made from its request.

``route`` reads the operation's fields (``app.operations``), turns each into a ``Query``, ``Path`` or JSON body
parameter with the table's bounds, default and help, runs the operation on the application (a ``Depends``) and
hands its result to the route's presenter, so ``/openapi.json`` states exactly what the table declares. Needs
the 'serve' extra.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Query, Request
from fastapi import Path as PathParam
from pydantic import ConfigDict, Field, create_model

from semsearch.app.application import Application
from semsearch.app.operations import HTTP, Operation, Param, operation

# A route's presenter: the operation's result, its request and the HTTP request, to the response.
Presenter = Callable[[Any, Any, Request], Any]


def application(request: Request) -> Application:
    """The server's application (``serve.create_app`` puts it on the app's state); it owns the live index."""
    app: Application = request.app.state.application
    return app


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


def body_model(op: Operation, params: list[Param], about: str = "") -> Any:
    """The JSON body of an operation whose fields travel in it: a model refusing any other key (``about``: what
    its schema says it is, default the operation's help)."""
    fields: dict[str, Any] = {
        p.field: (http_type(p), Field(default=list(p.spec.default), max_length=p.spec.max_length)) for p in params
    }
    model = create_model(op.request.__name__, __config__=ConfigDict(extra="forbid"), **fields)
    model.__doc__ = about or op.help
    return model


def route(
    router: APIRouter,
    entry: str | Operation,
    present: Presenter | None = None,
    *,
    parse: Callable[[Any], Any] | None = None,
    returns: Any = dict[str, Any],
    **more: Any,
) -> None:
    """Add the operation's route (by name, or an ``Operation``) to ``router``.

    The route reads the request's fields, ``parse`` (when given) checks or normalises the typed request, the
    application runs it, and ``present(result, request, http_request)`` makes the response (default: the result).
    """
    op = operation(entry) if isinstance(entry, str) else entry
    params = [p for p in op.params(HTTP) if not p.spec.body]
    body = [p for p in op.params(HTTP) if p.spec.body]
    by_argument = {p.name if p.spec.path else p.field: p.field for p in params}

    def endpoint(http: Request, app: Application, **values: Any) -> Any:
        given = values.pop("body", None)
        fields = {by_argument[key]: tuple(v) if isinstance(v, list) else v for key, v in values.items()}
        if given is not None:
            fields.update({key: tuple(v) for key, v in given.model_dump().items()})
        request = op.request(**fields)
        if parse is not None:
            request = parse(request)
        http.state.started = time.perf_counter()
        result = app.run(op, request)
        return present(result, request, http) if present is not None else result

    signature = [
        inspect.Parameter("http", inspect.Parameter.KEYWORD_ONLY, annotation=Request),
        inspect.Parameter("app", inspect.Parameter.KEYWORD_ONLY, default=Depends(application)),
        *map(http_parameter, params),
    ]
    if body:
        model = body_model(op, body, more.pop("body_help", ""))
        example = more.pop("example", None)
        signature.append(
            inspect.Parameter(
                "body",
                inspect.Parameter.KEYWORD_ONLY,
                default=Body(..., examples=[example] if example else None),
                annotation=model,
            )
        )
    endpoint.__signature__ = inspect.Signature(signature, return_annotation=returns)  # type: ignore[attr-defined]
    endpoint.__name__ = more.get("name", op.name)  # the OpenAPI operationId
    assert op.http is not None, f"{op.name} has no HTTP route"
    router.add_api_route(op.http, endpoint, methods=[op.method], summary=op.help.rstrip("."), **more)
