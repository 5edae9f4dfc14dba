"""Error translation for the HTTP surface: one place, Pulsar's shapes.

Theory of operation: the service layer raises typed broker errors that carry
``http_status`` and ``message`` (``magnetar.broker.errors``).  The exception
handlers installed here turn them, and FastAPI's own request-validation errors,
into Pulsar's error body ``{"reason": "..."}`` with ``application/json``.  An
unexpected exception becomes a 500 with its text, never a dropped connection.
Handlers that need to refuse a request themselves raise :class:`WebError`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: web.front and web.paths import this module before FastAPI
    from fastapi import FastAPI, Request
    from starlette.responses import JSONResponse

log = logging.getLogger(__name__)


class WebError(Exception):
    """A refusal decided at the HTTP edge (bad body, bad domain) with a Pulsar status."""

    def __init__(self, http_status: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.message = message


def reason(status: int, message: str) -> JSONResponse:
    from starlette.responses import JSONResponse

    return JSONResponse(status_code=status, content={"reason": message})


def _broker_error_types() -> tuple[type[BaseException], ...]:
    try:
        from magnetar.broker.errors import BrokerError
    except ImportError:  # the broker package is built concurrently; keep the web layer importable
        return ()
    return (BrokerError,)


def install_error_handlers(app: FastAPI) -> None:
    from fastapi.exceptions import RequestValidationError
    from starlette.exceptions import HTTPException as StarletteHTTPException

    async def on_web_error(_req: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, WebError)
        return reason(exc.http_status, exc.message)

    async def on_broker_error(_req: Request, exc: Exception) -> JSONResponse:
        status = int(getattr(exc, "http_status", 500) or 500)
        message = str(getattr(exc, "message", "") or exc)
        return reason(status, message)

    async def on_validation(_req: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errs = exc.errors()
        first = errs[0] if errs else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        return reason(400, f"invalid request: {where}: {first.get('msg', 'bad input')}")

    async def on_http(_req: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return reason(exc.status_code, str(exc.detail))

    async def on_unexpected(req: Request, exc: Exception) -> JSONResponse:
        log.exception("internal error serving %s %s", req.method, req.url.path, exc_info=exc)
        return reason(500, f"internal error: {exc}")

    app.add_exception_handler(WebError, on_web_error)
    for cls in _broker_error_types():
        app.add_exception_handler(cls, on_broker_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
