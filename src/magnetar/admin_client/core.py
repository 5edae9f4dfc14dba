"""Request building and response decoding shared by the sync and async admin clients.

Theory of operation: an admin operation is described, without any I/O, as a
:class:`Call` (method, path, query, JSON body or raw content, and what the
answer should decode to).  Resource classes (``clusters``, ``tenants``, ...)
only build calls and hand them to an *executor*; the sync :class:`PulsarAdmin`
executor runs them on ``httpx.Client`` and returns the value, the async one
runs them on ``httpx.AsyncClient`` and returns an awaitable.  So each resource
method is written once and serves both facades.

Decoding follows Pulsar's conventions (``pulsar-admin-rest.md`` 0.4/0.5):
2xx with a JSON body -> the parsed value; 204 or an empty 200 -> None (an
unset policy reads as None); non-2xx -> a typed :class:`AdminError` from the
``{"reason": ...}`` body.  307/308 redirects to the owner broker are followed
here, not by httpx, because httpx drops ``Authorization`` on a cross-origin
redirect and Pulsar's redirects always cross origins; the hop count is
bounded by ``redirects_max``.  Responses are bounded too: a body larger than
``response_bytes_max`` is refused rather than buffered without limit.
"""

from __future__ import annotations

import enum
import json
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urljoin

import httpx

from magnetar.admin_client.auth import AuthProvider
from magnetar.admin_client.errors import (
    AdminConnectionError,
    TooManyRedirects,
    UnexpectedResponse,
    error_from_response,
)
from magnetar.common.errors import InvalidArgument
from magnetar.common.naming import NamespaceName, TopicName

DEFAULT_ADMIN_URL = "http://localhost:8080"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "magnetar-admin"


class Expect(enum.Enum):
    """How a successful answer is decoded."""

    JSON = "json"  # parsed JSON, None for an empty body
    NONE = "none"  # nothing (the body is ignored)
    TEXT = "text"  # the body as text (health check's "ok")
    RAW = "raw"  # RawResponse: status, headers, bytes (peek / examine)


@dataclass(frozen=True)
class TlsOptions:
    """TLS settings (client.conf names: tlsTrustCertsFilePath, tlsAllowInsecureConnection, ...)."""

    trust_certs_file_path: str | None = None
    allow_insecure_connection: bool = False
    enable_hostname_verification: bool = False  # Pulsar's default


@dataclass(frozen=True)
class AdminConfig:
    """Everything a PulsarAdmin needs; one frozen object instead of many arguments."""

    service_url: str = DEFAULT_ADMIN_URL
    auth: AuthProvider | None = None
    timeout_s: float = 30.0
    tls: TlsOptions = field(default_factory=TlsOptions)
    redirects_max: int = 10
    response_bytes_max: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        if not self.service_url.startswith(("http://", "https://")):
            raise InvalidArgument(f"admin service URL must be http:// or https://, got '{self.service_url}'")
        if self.timeout_s <= 0 or self.redirects_max < 0:
            raise InvalidArgument("timeout_s must be > 0 and redirects_max >= 0")


@dataclass(frozen=True)
class RawResponse:
    """A binary answer with its headers (peek, examine, get-message-by-id)."""

    status: int
    headers: Mapping[str, str]
    content: bytes


_NO_BODY: Any = object()


@dataclass(frozen=True)
class Call:
    """One admin REST request, described without doing it."""

    method: str
    path: str  # already percent-encoded, starting with '/'
    params: tuple[tuple[str, str], ...] = ()
    body: Any = _NO_BODY  # JSON-serialisable value, sent as application/json
    content: bytes | None = None  # raw body (with content_type)
    content_type: str | None = None
    expect: Expect = Expect.JSON
    transform: Callable[[Any], Any] | None = None  # applied to the decoded value


def call(
    method: str,
    path: str,
    *,
    params: Mapping[str, Any] | None = None,
    body: Any = _NO_BODY,
    expect: Expect = Expect.JSON,
    transform: Callable[[Any], Any] | None = None,
    content: bytes | None = None,
    content_type: str | None = None,
) -> Call:
    """Build a :class:`Call`; None-valued params are dropped, bools become 'true'/'false'."""
    items: list[tuple[str, str]] = []
    for key, value in (params or {}).items():
        if value is None:
            continue
        values = value if isinstance(value, list | tuple) else [value]
        for v in values:
            items.append((key, _param_str(v)))
    return Call(method, path, tuple(items), to_json(body), content, content_type, expect, transform)


def _param_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def to_json(value: Any) -> Any:
    """Models (anything with ``to_json()``), enums, sets and tuples to plain JSON values."""
    if value is _NO_BODY or value is None or isinstance(value, str | int | float | bool):
        return value
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [to_json(v) for v in value]
        return sorted(items) if isinstance(value, set | frozenset) else items
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


# ------------------------------------------------------------------ paths


def seg(value: str | int) -> str:
    """One path segment, percent-encoded (subscription, role, cluster, config names)."""
    return quote(str(value), safe="")


def ns_path(namespace: str | NamespaceName) -> str:
    """``tenant/ns`` (or v1 ``tenant/cluster/ns``) validated, for a path."""
    ns = namespace if isinstance(namespace, NamespaceName) else NamespaceName.get(namespace)
    return str(ns)


def topic_name(topic: str | TopicName) -> TopicName:
    return topic if isinstance(topic, TopicName) else TopicName.get(topic)


def topic_path(topic: str | TopicName) -> str:
    """``/admin/v2/{domain}/{tenant}/{ns}/{encoded-local}`` for a short or full topic name."""
    return "/admin/v2/" + topic_name(topic).rest_path()


def schema_path(topic: str | TopicName) -> str:
    """``/admin/v2/schemas/{tenant}/{ns}/{local}``: schemas belong to the base (unpartitioned) name."""
    base = topic_name(topic).base()
    return "/admin/v2/schemas/" + base.rest_path(include_domain=False)


# ------------------------------------------------------------------ execution helpers


def request_headers(c: Call, auth: AuthProvider | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if c.content is not None:
        headers["Content-Type"] = c.content_type or "application/octet-stream"
    elif c.body is not _NO_BODY:
        headers["Content-Type"] = "application/json"
    if auth is not None:
        headers.update(auth.http_headers())
    return headers


def request_kwargs(c: Call, auth: AuthProvider | None) -> dict[str, Any]:
    """Arguments for ``httpx.Client.request`` / ``AsyncClient.request``."""
    kwargs: dict[str, Any] = {"method": c.method, "url": c.path, "headers": request_headers(c, auth)}
    if c.params:
        kwargs["params"] = list(c.params)
    if c.content is not None:
        kwargs["content"] = c.content
    elif c.body is not _NO_BODY:
        kwargs["content"] = json.dumps(c.body, separators=(",", ":")).encode()
    return kwargs


def redirect_kwargs(kwargs: dict[str, Any], response: httpx.Response) -> dict[str, Any] | None:
    """The next hop's request if ``response`` is a redirect with a Location, else None."""
    if response.status_code not in REDIRECT_STATUSES:
        return None
    location = response.headers.get("location")
    if not location:
        return None
    nxt = dict(kwargs)
    nxt["url"] = urljoin(str(response.request.url), location)
    nxt.pop("params", None)  # the Location carries the query
    if response.status_code == 303:
        nxt["method"] = "GET"
        nxt.pop("content", None)
    return nxt


def too_many_redirects(c: Call, limit: int) -> TooManyRedirects:
    return TooManyRedirects(310, f"more than {limit} redirects", method=c.method, url=c.path)


def connection_error(exc: httpx.HTTPError, url: str) -> AdminConnectionError:
    text = str(exc) or type(exc).__name__
    return AdminConnectionError(f"{text}", url=url)


class BodyLimit:
    """Collects a streamed response body, refusing it once it passes ``limit_bytes``."""

    def __init__(self, response: httpx.Response, limit_bytes: int) -> None:
        self._url = str(response.request.url)
        self._limit = limit_bytes
        self._parts: list[bytes] = []
        self._size = 0
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit_bytes:
            self._refuse(int(declared))

    def _refuse(self, size: int) -> None:
        raise AdminConnectionError(
            f"response of {size}+ bytes exceeds the {self._limit}-byte bound", url=self._url
        )

    def add(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._limit:
            self._refuse(self._size)
        self._parts.append(chunk)

    def content(self) -> bytes:
        return b"".join(self._parts)


def decode(c: Call, response: httpx.Response, content: bytes) -> Any:
    """The value of a finished (non-redirect) answer, or raise its typed error."""
    status = response.status_code
    if not 200 <= status < 300:
        raise error_from_response(
            status,
            content,
            response.headers.get("content-type", ""),
            response.reason_phrase,
            method=c.method,
            url=str(response.request.url),
        )
    value: Any
    if c.expect is Expect.NONE:
        value = None
    elif c.expect is Expect.TEXT:
        value = content.decode("utf-8", errors="replace")
    elif c.expect is Expect.RAW:
        value = RawResponse(status, dict(response.headers), content)
    elif status == 204 or not content.strip():
        value = None
    else:
        try:
            value = json.loads(content)
        except ValueError:
            # a few endpoints answer plain text (version, health); hand it back as text
            value = content.decode("utf-8", errors="replace")
    if c.transform is not None and value is not None:
        try:
            value = c.transform(value)
        except (TypeError, ValueError, AttributeError, KeyError) as e:
            raise UnexpectedResponse(
                status, f"cannot read the answer: {e}", method=c.method, url=str(response.request.url)
            ) from None
    return value


def ssl_context(tls: TlsOptions, auth: AuthProvider | None) -> ssl.SSLContext | bool:
    """``verify=`` for httpx: a context with the trust file / client cert, or True/False."""
    cert = auth.client_certificate() if auth is not None else None
    if not tls.trust_certs_file_path and not cert and not tls.allow_insecure_connection:
        if tls.enable_hostname_verification:
            return True
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        return ctx
    try:
        ctx = ssl.create_default_context(cafile=tls.trust_certs_file_path or None)
        if tls.allow_insecure_connection:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            ctx.check_hostname = tls.enable_hostname_verification
        if cert:
            ctx.load_cert_chain(cert[0], cert[1])
    except (OSError, ssl.SSLError) as e:
        raise InvalidArgument(f"cannot load the TLS trust or certificate files: {e}") from None
    return ctx


Executor = Callable[[Call], Any]


class Resource:
    """Base of the resource families: holds the executor that runs built calls."""

    def __init__(self, run: Executor) -> None:
        self._run = run
