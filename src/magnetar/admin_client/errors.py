"""Typed errors of the admin REST client.

Theory of operation: every non-2xx answer of a Pulsar admin endpoint becomes
one :class:`AdminError` whose class is chosen by the HTTP status, as Pulsar
uses them (``pulsar-admin-rest.md`` section 0.5): 404 -> :class:`NotFound`,
409 -> :class:`Conflict`, 412 -> :class:`PreconditionFailed`, 401/403 ->
:class:`NotAuthorized`, 405 -> :class:`NotAllowed`, other 4xx ->
:class:`BadRequest`, 5xx -> :class:`ServerError`.  The ``reason`` comes from
Pulsar's ``{"reason": "..."}`` body; when the body is not that JSON (a proxy's
HTML page, plain text), the text itself (bounded) or the HTTP reason phrase is
used.  Network failures (refused, timed out, TLS) become
:class:`AdminConnectionError` with the URL, so the CLI can print Pulsar's
"Error connecting to: <url>".  ``retriable`` follows the common base: 5xx,
429 and connection errors may succeed later; 4xx never do.
"""

from __future__ import annotations

import json
from typing import ClassVar

from magnetar.common.errors import MagnetarError

# How much of a non-JSON error body we keep as the reason.
REASON_CHARS_MAX = 2000


class AdminError(MagnetarError):
    """The admin REST API answered with an error status."""

    def __init__(self, status: int, reason: str, *, method: str = "", url: str = "") -> None:
        super().__init__(f"{status} {reason}" if reason else str(status))
        self.status = status
        self.reason = reason
        self.method = method
        self.url = url


class BadRequest(AdminError):
    """400 / 406 / 422 and other 4xx not listed below: the request itself is wrong."""

    client_error = True


class NotAuthorized(AdminError):
    """401 (not authenticated) or 403 (not authorized)."""

    client_error = True


class NotFound(AdminError):
    """404: tenant / namespace / topic / subscription / schema / cluster not found."""

    client_error = True


class NotAllowed(AdminError):
    """405: not allowed here (topic policies disabled, partitioned topic, non-persistent topic)."""

    client_error = True


class Conflict(AdminError):
    """409: already exists, not empty, concurrent modification."""

    client_error = True


class PreconditionFailed(AdminError):
    """412: invalid name, active clients, cluster not empty, ..."""

    client_error = True


class TooManyRequests(AdminError):
    """429: the broker's HTTP rate limit."""

    retriable = True


class ServerError(AdminError):
    """5xx: the broker failed (500), is not ready (503), or authorization is disabled (501)."""

    retriable = True


class AdminConnectionError(MagnetarError):
    """The request never got an HTTP answer (refused, reset, timed out, TLS failure)."""

    retriable: ClassVar[bool] = True

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class UnexpectedResponse(AdminError):
    """A 2xx answer whose body is not the shape the endpoint returns."""


class TooManyRedirects(AdminError):
    """The broker kept redirecting (307) past the client's bound."""


_BY_STATUS: dict[int, type[AdminError]] = {
    401: NotAuthorized,
    403: NotAuthorized,
    404: NotFound,
    405: NotAllowed,
    409: Conflict,
    412: PreconditionFailed,
    429: TooManyRequests,
}


def error_class_for(status: int) -> type[AdminError]:
    if status in _BY_STATUS:
        return _BY_STATUS[status]
    if status >= 500:
        return ServerError
    return BadRequest


def parse_reason(body: bytes, content_type: str, reason_phrase: str) -> str:
    """Pulsar's ``reason`` from an error body, else the (bounded) text, else the phrase."""
    text = body.decode("utf-8", errors="replace").strip()
    if text and ("json" in content_type or text[:1] == "{"):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("reason", "message", "error"):
                value = data.get(key)
                if isinstance(value, str) and value:
                    return value
    if text:
        return text[:REASON_CHARS_MAX]
    return reason_phrase


def error_from_response(
    status: int, body: bytes, content_type: str, reason_phrase: str, *, method: str = "", url: str = ""
) -> AdminError:
    cls = error_class_for(status)
    return cls(status, parse_reason(body, content_type, reason_phrase), method=method, url=url)
