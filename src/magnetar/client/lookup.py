"""Finding topics: partitioned metadata, the owner broker, namespace topic lists, schemas.

Theory of operation: two implementations of one small interface, chosen by
the service URL's scheme.

* :class:`BinaryLookup` (``pulsar://``, ``pulsar+ssl://``) asks over the
  pooled connection to the service URL: PARTITIONED_METADATA for the
  partition count, LOOKUP for the owner. A *Redirect* answer sends the next
  LOOKUP to the broker named in it (``authoritative`` copied from the answer),
  at most ``MAX_REDIRECTS`` times; *Connect* gives the owner. With
  ``proxy_through_service_url`` the socket stays on the service URL (physical)
  and the owner becomes the logical address (the proxy case).
* :class:`HttpLookup` (``http://``, ``https://``) does the same through the
  broker's REST API with httpx: ``/admin/v2/.../partitions``,
  ``/lookup/v2/topic/...``, ``/admin/v2/namespaces/.../topics``,
  ``/admin/v2/schemas/.../schema``; HTTP redirects are followed.

A service URL may list several hosts (``pulsar://a:6650,b:6650``):
:class:`ServiceHosts` starts each request at the next host in turn and, when a
host cannot be reached (connection refused, connect timeout), passes the
request on to the following ones, as the official clients do; a host that
failed goes to the back of the order until it answers again. Only when every
host failed does the request fail (``ConnectError``, naming each host). Both
return plain values: the partition count, a
(logical, physical) pair of ``pulsar://`` URLs, topic names, a WireSchema.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from magnetar.client.auth import Authentication
from magnetar.client.connection import ClientCnx
from magnetar.client.errors import ConnectError, LookupError_, PulsarException, TopicNotFound, error_from_code
from magnetar.client.pool import ConnectionPool
from magnetar.common.naming import TopicName
from magnetar.protocol import client_commands
from magnetar.protocol.enums import CommandType, LookupType, TopicDomainMode
from magnetar.protocol.wire import WireSchema

MAX_REDIRECTS = 20
R = TypeVar("R")


class LookupService(Protocol):
    async def partitions(self, topic: str) -> int: ...
    async def lookup(self, topic: str) -> tuple[str, str]: ...
    async def topics_of_namespace(self, namespace: str, mode: TopicDomainMode) -> list[str]: ...
    async def get_schema(
        self, topic: str, version: bytes | None = None
    ) -> tuple[WireSchema, bytes] | None: ...
    async def close(self) -> None: ...


def service_hosts(service_url: str) -> list[str]:
    """``scheme://a:1,b:2/`` -> [``scheme://a:1``, ``scheme://b:2``]."""
    scheme, sep, rest = service_url.rstrip("/").partition("://")
    if not sep or not rest:
        raise LookupError_(f"bad service URL {service_url!r}")
    return [f"{scheme}://{host.strip()}" for host in rest.split(",") if host.strip()]


class ServiceHosts:
    """The hosts of a service URL, in round-robin order, unreachable ones tried last."""

    def __init__(self, service_url: str) -> None:
        self.hosts = service_hosts(service_url)
        self._turn = 0
        self._down: set[str] = set()

    def order(self) -> list[str]:
        """Every host once, starting at the next in turn; hosts that failed last come last."""
        i = self._turn % len(self.hosts)
        self._turn += 1
        ring = self.hosts[i:] + self.hosts[:i]
        return [h for h in ring if h not in self._down] + [h for h in ring if h in self._down]

    async def first_reachable(
        self, attempt: Callable[[str], Awaitable[R]], unreachable: tuple[type, ...]
    ) -> R:
        """``attempt(host)`` on each host in :meth:`order` until one does not raise ``unreachable``."""
        failures: list[str] = []
        for host in self.order():
            try:
                result = await attempt(host)
            except unreachable as exc:
                self._down.add(host)
                failures.append(f"{host}: {exc}")
                continue
            self._down.discard(host)
            return result
        raise ConnectError("no host of the service URL could be reached: " + "; ".join(failures))


class BinaryLookup:
    def __init__(
        self, pool: ConnectionPool, service_url: str, use_tls: bool, listener_name: str = ""
    ) -> None:
        self.pool = pool
        self.use_tls = use_tls
        self.listener_name = listener_name
        self._hosts = ServiceHosts(service_url)

    async def _service(self) -> tuple[str, ClientCnx]:
        """A service host and its connection: the next host that accepts a connection."""

        async def connect(host: str) -> tuple[str, ClientCnx]:
            return host, await self.pool.get(host, host)

        return await self._hosts.first_reachable(connect, (ConnectError,))

    async def _service_cnx(self) -> ClientCnx:
        return (await self._service())[1]

    async def partitions(self, topic: str) -> int:
        cnx = await self._service_cnx()
        frame = await cnx.request(
            CommandType.PARTITIONED_METADATA, lambda rid: client_commands.partitioned_metadata(topic, rid)
        )
        return frame.command.partitions

    async def lookup(self, topic: str) -> tuple[str, str]:
        service, cnx = await self._service()
        logical, physical, authoritative = service, service, False
        for hop in range(MAX_REDIRECTS):
            if hop:
                cnx = await self.pool.get(logical, physical)
            frame = await cnx.request(
                CommandType.LOOKUP,
                lambda rid, a=authoritative: client_commands.lookup(topic, rid, a, self.listener_name),
            )
            resp: Any = frame.command
            url = (
                resp.brokerServiceUrlTls
                if self.use_tls and resp.brokerServiceUrlTls
                else resp.brokerServiceUrl
            )
            if not url:
                raise LookupError_(f"lookup of {topic} answered without a broker URL")
            proxy = resp.proxy_through_service_url
            logical, physical = url, (service if proxy else url)
            if resp.response == LookupType.Connect:
                return logical, physical
            authoritative = resp.authoritative
        raise LookupError_(f"lookup of {topic}: more than {MAX_REDIRECTS} redirects")

    async def topics_of_namespace(self, namespace: str, mode: TopicDomainMode) -> list[str]:
        cnx = await self._service_cnx()
        frame = await cnx.request(
            CommandType.GET_TOPICS_OF_NAMESPACE,
            lambda rid: client_commands.get_topics_of_namespace(rid, namespace, mode),
        )
        return list(frame.command.topics)

    async def get_schema(self, topic: str, version: bytes | None = None) -> tuple[WireSchema, bytes] | None:
        cnx = await self._service_cnx()
        try:
            frame = await cnx.request(
                CommandType.GET_SCHEMA, lambda rid: client_commands.get_schema(rid, topic, version)
            )
        except TopicNotFound:
            return None
        resp: Any = frame.command
        if not resp.HasField("schema"):
            return None
        return WireSchema.from_pb(resp.schema), resp.schema_version

    async def close(self) -> None:
        pass


class HttpLookup:
    def __init__(self, service_url: str, authentication: Authentication, verify: Any = True) -> None:
        import httpx

        self._hosts = ServiceHosts(service_url)
        self._auth = authentication
        self._http = httpx.AsyncClient(follow_redirects=True, verify=verify, timeout=30.0)

    async def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        import httpx

        headers = self._auth.http_headers(await self._auth.auth_data())

        async def get(host: str) -> Any:
            return await self._http.get(host + path, params=params, headers=headers)

        try:
            resp = await self._hosts.first_reachable(get, (httpx.ConnectError, httpx.ConnectTimeout))
        except httpx.HTTPError as exc:
            raise LookupError_(f"HTTP lookup failed: {exc}") from None
        if resp.status_code == 404:
            raise TopicNotFound(f"{path}: 404 {resp.text[:200]}")
        if resp.status_code in (401, 403):
            raise error_from_code(3 if resp.status_code == 401 else 4, resp.text[:200])
        if resp.status_code >= 300:
            raise PulsarException(f"{path}: HTTP {resp.status_code} {resp.text[:200]}")
        return resp.json()

    @staticmethod
    def _path(topic: str) -> str:
        return TopicName.get(topic).lookup_name

    async def partitions(self, topic: str) -> int:
        body = await self._get(
            f"/admin/v2/{self._path(topic)}/partitions", {"checkAllowAutoCreation": "true"}
        )
        return int(body.get("partitions", 0))

    async def lookup(self, topic: str) -> tuple[str, str]:
        body = await self._get(f"/lookup/v2/topic/{self._path(topic)}")
        url = body.get("brokerUrl")
        if not url:
            raise LookupError_(f"HTTP lookup of {topic}: no brokerUrl in {body}")
        return url, url

    async def topics_of_namespace(self, namespace: str, mode: TopicDomainMode) -> list[str]:
        body = await self._get(f"/admin/v2/namespaces/{namespace}/topics", {"mode": mode.name})
        return list(body)

    async def get_schema(self, topic: str, version: bytes | None = None) -> tuple[WireSchema, bytes] | None:
        from magnetar.protocol.enums import SchemaType

        try:
            body = await self._get(f"/admin/v2/schemas/{self._path(topic)}/schema")
        except TopicNotFound:
            return None
        name = body.get("type", "NONE")
        stype = SchemaType[name] if name in SchemaType.__members__ else SchemaType.NONE
        ver = int(body.get("version", 0)).to_bytes(8, "big", signed=True)
        schema = WireSchema("", body.get("data", "").encode(), stype, dict(body.get("properties") or {}))
        return schema, ver

    async def close(self) -> None:
        await self._http.aclose()
