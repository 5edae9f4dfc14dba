"""Shared helpers of the admin routers: the admin service, bodies, empty answers.

Theory of operation: ``create_app`` stores one ``AdminService`` on
``app.state.admin``; handlers fetch it with :func:`admin`, and the broker
service itself -- only as the narrow ``WebBrokerView`` -- with :func:`broker`.  Pulsar answers
``void`` with 204 and an unset optional policy with 204 and no body
(:func:`value_or_204`).  Raw JSON bodies (scalars, lists, objects) are
decoded by :func:`json_body`, which answers 400 for malformed JSON.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from starlette.requests import HTTPConnection

from magnetar.broker.admin.policies import load_json
from magnetar.broker.service.api import WebBrokerView
from magnetar.web.paths import check_path_names


async def validate_path_names(request: HTTPConnection) -> None:
    """Every route's dependency (``create_app``): ``paths.check_path_names`` on its path parameters."""
    check_path_names(request.path_params)


def admin(request: Request) -> Any:
    return request.app.state.admin


def broker(conn: HTTPConnection) -> WebBrokerView:
    """The broker service as the web layer may see it (``broker.service.api.WebBrokerView``)."""
    return conn.app.state.broker_service


def no_content() -> Response:
    return Response(status_code=204)


def value_or_204(value: Any) -> Response:
    if value is None:
        return Response(status_code=204)
    return JSONResponse(content=value)


async def json_body(request: Request, *, optional: bool = False, allow_bare_string: bool = False) -> Any:
    body = await request.body()
    if optional and not body.strip():
        return None
    return load_json(body, allow_bare_string=allow_bare_string)


def with_signature(fn: Callable[..., Any], params: list[inspect.Parameter]) -> Callable[..., Any]:
    """Give a generated handler the typed signature FastAPI reads (path params, typed body)."""
    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return fn


def path_param(name: str) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=str)


def request_param() -> inspect.Parameter:
    return inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=Request)
