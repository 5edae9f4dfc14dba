"""HTTP redirects to a bundle's owner: 307 for topic admin calls and bundle operations.

Theory of operation: in a cluster, topic-scoped admin operations run on the
broker that owns the topic's bundle (Pulsar's rule, admin-REST reference
0.6).  :func:`install_ownership` adds

* a middleware that, for ``/admin/v2|v3/{domain}/{tenant}/{ns}/{topic}[/...]``,
  looks the topic up (taking the bundle if this broker is the chosen one) and
  answers **307 Temporary Redirect** with ``Location`` = the same path and
  query on the owner's web service, ``authoritative=true`` -- only when the
  namespace service can redirect at all (a standalone never does, and pays
  nothing).  Metadata-only calls stay here: ``.../partitions``, partitioned
  stats, and anything on the base name of a partitioned topic;
* an exception handler that turns :class:`NotOwnedHere` (a bundle unload or
  split asked of a non-owner) into the same 307.

Lookup or metadata failures in the middleware are not answered there: the
route runs and gives its own, more precise error.
"""

from __future__ import annotations

import logging
import re
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from magnetar.broker import errors
from magnetar.broker.ownership.api import NotOwnedHere
from magnetar.broker.ownership.ownership import OwnerData
from magnetar.web.deps import broker

log = logging.getLogger(__name__)

_TOPIC_PATH = re.compile(r"^/admin/v[23]/(persistent|non-persistent)/([^/]+)/([^/]+)/([^/]+)(/.*)?$")
_BUNDLE_RE = re.compile(r"^0x[0-9a-fA-F]{8}_0x[0-9a-fA-F]{8}$")
_LOCAL_SUFFIXES = (
    "/partitions",
    "/partitioned-stats",
    "/partitioned-internalStats",
    "/createMissedPartitions",
)


def redirect_to(request: Request, owner: OwnerData) -> Response:
    """307 to the same path and query on the owner, with ``authoritative=true``."""
    base = urlsplit(owner.http_url)
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "authoritative"]
    query.append(("authoritative", "true"))
    location = f"{base.scheme}://{base.netloc}{request.url.path}?{urlencode(query)}"
    return JSONResponse(
        status_code=307, content={"reason": f"redirected to {owner.http_url}"}, headers={"Location": location}
    )


def _topic_of(path: str) -> str | None:
    m = _TOPIC_PATH.match(path)
    if m is None:
        return None
    domain, tenant, ns, local, rest = m.groups()
    if _BUNDLE_RE.match(local) or (rest or "").endswith(_LOCAL_SUFFIXES):
        return None
    return f"{domain}://{tenant}/{ns}/{unquote(local)}"


def install_ownership(app: FastAPI) -> None:
    async def on_not_owned(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, NotOwnedHere)
        if exc.owner is None:
            return JSONResponse(status_code=412, content={"reason": str(exc)})
        return redirect_to(request, exc.owner)

    app.add_exception_handler(NotOwnedHere, on_not_owned)

    @app.middleware("http")
    async def to_the_owner(request: Request, call_next: Any) -> Response:
        svc = broker(request)
        ns_service = getattr(svc, "namespace_service", None)
        topic = _topic_of(request.url.path) if getattr(ns_service, "may_redirect", False) else None
        if topic is not None:
            answer = await _owner_elsewhere(svc, topic, request.query_params.get("authoritative") == "true")
            if answer is not None:
                return redirect_to(request, answer)
        return await call_next(request)


async def _owner_elsewhere(svc: Any, topic: str, authoritative: bool) -> OwnerData | None:
    from magnetar.broker.service.names import parse_topic

    try:
        ref = parse_topic(topic)
        if not ref.is_partition and await svc.partitions_of(ref):
            return None  # a partitioned topic's base name: metadata, served anywhere
        answer = await svc.lookup_topic(topic, authoritative)
    except errors.BrokerError:
        return None  # the route answers with its own error
    return answer.owner if answer.redirect else None


FORWARD_TIMEOUT_S = 30.0


async def forward_unload(request: Request, bundle: Any) -> None:
    """Asks the owner of ``bundle`` (another broker) to unload it, with the caller's credentials."""
    import httpx

    from magnetar.web.errors import WebError

    owner = await broker(request).namespace_service.owner_of(bundle)
    if owner is None:
        return  # released meanwhile: nothing to unload
    url = f"{owner.http_url}/admin/v2/namespaces/{bundle.name}/unload"
    headers = {k: v for k, v in request.headers.items() if k.lower() == "authorization"}
    async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S) as http:
        resp = await http.put(url, params={"authoritative": "true"}, headers=headers)
    if resp.status_code not in (200, 204, 307):  # 307: it moved again; the next unload finds it
        raise WebError(resp.status_code, f"unloading {bundle.name} on {owner.http_url} failed: {resp.text}")
