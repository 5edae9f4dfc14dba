"""Admin operations on a partitioned topic whose partitions other brokers own: per-partition fan-out.

Theory of operation: a partitioned topic's partitions hash to different
bundles, so in a cluster different brokers own them.  An admin call on the
base name (partitioned-stats, subscriptions, skip-all, expire, reset,
unload, terminate, delete, ...) is metadata-level and may reach any broker
(``web/ownership.py`` never redirects it).  That broker does what Pulsar's
does: for each partition it asks the namespace service who owns it -- a
lookup, which places an unowned bundle as a client's lookup would.
Partitions owned here run in-process (the caller's ``local`` function);
each of the others is one HTTP call of the same REST operation on the
partition's name, sent to its owner's web service with
``authoritative=true`` (the owner takes the bundle if it was only chosen)
and the broker's own client credentials (``brokerClientAuthentication*``;
the receiving broker has already authorized the caller, as Pulsar's
internal admin client does).  All partitions run concurrently; a 307 (the
bundle moved meanwhile) is followed.

:meth:`PartitionFanOut.each` answers, per partition, either the result or
the exception -- a remote error carries the owner's status and reason
(404 becomes ``TopicNotFoundError`` or ``SubscriptionNotFoundError``), so
the caller keeps one rule for "found on no partition".  A standalone (a
namespace service that never redirects) never leaves the process.
:func:`for_each_topic_of` does the same topic by topic for the
namespace-wide clear-backlog and unsubscribe.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from magnetar.broker import errors
from magnetar.broker.service.api import BrokerServiceView
from magnetar.broker.service.names import TopicRef, parse_topic
from magnetar.common.lazy_import import lazy_import

httpx = lazy_import("httpx")  # imported by the first fan-out call (issue 15 start-up)

T = TypeVar("T")
HTTP_TIMEOUT_S = 30.0
MAX_REDIRECTS = 3
NAMESPACE_FANOUT = 16  # topics handled at once by a namespace-wide operation


class RemotePartitionError(errors.BrokerError):
    """A partition's owner answered an error; its status goes back to the caller."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.http_status = status


def _error_of(status: int, reason: str) -> errors.BrokerError:
    if status == 404:
        if "ubscription" in reason:
            return errors.SubscriptionNotFoundError(reason)
        return errors.TopicNotFoundError(reason)
    return RemotePartitionError(status, reason)


def broker_client_headers(props: dict[str, Any]) -> dict[str, str]:
    """The Authorization header of ``brokerClientAuthenticationPlugin`` / ``...Parameters``
    (token or basic), or none."""
    plugin = str(props.get("brokerClientAuthenticationPlugin") or "")
    params = str(props.get("brokerClientAuthenticationParameters") or "").strip()
    if plugin.endswith("AuthenticationToken"):
        if params.startswith("token:"):
            return {"Authorization": f"Bearer {params[len('token:') :]}"}
        if params.startswith("file:"):
            from pathlib import Path

            token = Path(params[len("file:") :].removeprefix("//")).read_text().strip()
            return {"Authorization": f"Bearer {token}"}
        if params.startswith("{"):
            return {"Authorization": f"Bearer {json.loads(params).get('token', '')}"}
    if plugin.endswith("AuthenticationBasic") and params.startswith("{"):
        import base64

        d = json.loads(params)
        raw = f"{d.get('userId', '')}:{d.get('password', '')}".encode()
        return {"Authorization": "Basic " + base64.b64encode(raw).decode()}
    return {}


_ssl_context: Any = None


def _verify() -> Any:
    """One TLS context for every client (loading the CA bundle per client costs ~0.1 s of CPU)."""
    global _ssl_context
    if _ssl_context is None:
        _ssl_context = httpx.create_ssl_context()
    return _ssl_context


class PartitionFanOut:
    def __init__(self, svc: BrokerServiceView) -> None:
        self.svc = svc

    def client(self) -> httpx.AsyncClient:
        """A client for one admin call's remote requests, with the broker's credentials."""
        headers = broker_client_headers(self.svc.config.as_properties())
        return httpx.AsyncClient(timeout=HTTP_TIMEOUT_S, headers=headers, verify=_verify())

    def _clustered(self) -> bool:
        return self.svc.namespace_service.may_redirect

    async def owner_elsewhere(self, ref: TopicRef) -> Any:
        """The owner (OwnerData) of ``ref``'s bundle when it is another broker, else None."""
        if not self._clustered():
            return None
        answer = await self.svc.namespace_service.lookup(ref, False)
        return answer.owner if answer.redirect else None

    async def each(
        self,
        refs: list[TopicRef],
        local: Callable[[TopicRef], Awaitable[T]],
        method: str,
        suffix: str = "",
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        parse: Callable[[Any], T] = lambda v: v,
    ) -> list[T | BaseException]:
        """``local(ref)`` for partitions owned here, ``method`` on ``{partition path}{suffix}``
        at the owner for the others; one outcome (result or exception) per partition."""

        async with self.client() as http:

            async def one(ref: TopicRef) -> T:
                owner = await self.owner_elsewhere(ref)
                if owner is None:
                    return await local(ref)
                return parse(await self.call(owner, method, ref, suffix, params=params, body=body, http=http))

            outcomes = await asyncio.gather(*(one(r) for r in refs), return_exceptions=True)
        for o in outcomes:
            if isinstance(o, asyncio.CancelledError):
                raise o
        return list(outcomes)

    async def call(
        self,
        owner: Any,
        method: str,
        ref: TopicRef,
        suffix: str = "",
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        http: httpx.AsyncClient | None = None,
    ) -> Any:
        """One REST call on the partition's path at ``owner``; the decoded JSON answer (None
        for an empty one) or the owner's error."""
        base = owner.http_url or owner.http_url_tls
        path = f"/admin/v2/{ref.domain}/{ref.tenant}/{ref.namespace_portion}/{quote(ref.local_name, safe='')}"
        url = f"{base}{path}{suffix}"
        query = {**(params or {}), "authoritative": "true"}
        content = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json"} if content is not None else {}
        if http is None:
            async with self.client() as own:
                return await self.call(owner, method, ref, suffix, params=params, body=body, http=own)
        for _ in range(MAX_REDIRECTS + 1):
            try:
                resp = await http.request(method, url, params=query, content=content, headers=headers)
            except httpx.HTTPError as e:
                raise errors.ServiceNotReadyError(
                    f"partition {ref.full_name}: its owner {base} did not answer ({e!r})"
                ) from None
            if resp.status_code != 307:
                break
            url, query = resp.headers["location"], {}
        if resp.status_code >= 300:
            raise _error_of(resp.status_code, _reason(resp))
        return resp.json() if resp.content else None


async def for_each_topic_of(ops: Any, namespace: str, sub: str | None, what: str) -> None:
    """A namespace-wide clear-backlog (``what="skip_all"``) or unsubscribe (``"delete"``):
    every persistent topic of the namespace, on its owner (``ops`` is the TopicOps here);
    ``sub`` None: every subscription."""
    gate = asyncio.Semaphore(NAMESPACE_FANOUT)
    fanout: PartitionFanOut = ops.fanout

    async def one(name: str) -> None:
        ref = parse_topic(name)
        async with gate:
            owner = await fanout.owner_elsewhere(ref)
            if owner is None:
                subs = await ops.list_subscriptions(name)
            else:
                subs = await fanout.call(owner, "GET", ref, "/subscriptions", http=http)
            for s in subs:
                if sub is not None and s != sub:
                    continue
                if owner is None:
                    await (ops.skip_all(name, s) if what == "skip_all" else ops.delete_subscription(name, s))
                else:
                    suffix = f"/subscription/{quote(s, safe='')}" + (
                        "/skip_all" if what == "skip_all" else ""
                    )
                    await fanout.call(
                        owner, "POST" if what == "skip_all" else "DELETE", ref, suffix, http=http
                    )

    names = await fanout.svc.list_topics(namespace, mode="PERSISTENT")
    async with fanout.client() as http:
        outcomes = await asyncio.gather(*(one(n) for n in names), return_exceptions=True)
    for o in outcomes:
        if isinstance(o, errors.TopicNotFoundError | errors.SubscriptionNotFoundError):
            continue  # deleted meanwhile
        if isinstance(o, BaseException):
            raise o


def _reason(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:500]
    if isinstance(data, dict) and "reason" in data:
        return str(data["reason"])
    return str(data)[:500]
