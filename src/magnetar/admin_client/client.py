"""``PulsarAdmin`` (sync) and ``AsyncPulsarAdmin`` (asyncio): the admin REST client.

Theory of operation: both facades own one httpx client (``httpx.Client`` or
``httpx.AsyncClient``, base URL = the admin service URL, bounded timeout, TLS
from :class:`TlsOptions`) and expose the same resource families --
``clusters``, ``tenants``, ``namespaces``, ``topics``, ``topic_policies``,
``brokers``, ``broker_stats``, ``bookies``, ``schemas`` -- built on their
``_execute`` method.  Resource methods only describe requests (``core.Call``);
``_execute`` runs one, following owner redirects itself (re-applying auth on
each hop, bounded by ``redirects_max``) and decoding the answer, so the sync
version returns values and the async version returns awaitables from the very
same resource code.  A ``transport`` may be injected (``httpx.MockTransport``
in tests, or any custom transport).  Both are context managers and
``close()`` / ``aclose()`` are idempotent.
"""

from __future__ import annotations

from typing import Any

import httpx

from magnetar.admin_client import core
from magnetar.admin_client.auth import AuthProvider
from magnetar.admin_client.brokers import Bookies, Brokers, BrokerStats
from magnetar.admin_client.clusters import Clusters
from magnetar.admin_client.core import AdminConfig, Call, TlsOptions
from magnetar.admin_client.namespaces import Namespaces
from magnetar.admin_client.resource_groups import ResourceGroups
from magnetar.admin_client.schemas import Schemas
from magnetar.admin_client.tenants import Tenants
from magnetar.admin_client.topic_policies import TopicPolicies
from magnetar.admin_client.topics import Topics
from magnetar.admin_client.transactions import Transactions


def _config(
    service_url: str | AdminConfig,
    auth: AuthProvider | None,
    timeout_s: float,
    tls: TlsOptions | None,
) -> AdminConfig:
    if isinstance(service_url, AdminConfig):
        return service_url
    return AdminConfig(service_url.rstrip("/"), auth, timeout_s, tls or TlsOptions())


def _client_kwargs(config: AdminConfig) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "base_url": config.service_url,
        "timeout": config.timeout_s,
        "follow_redirects": False,  # followed in _execute, keeping auth headers (see core)
    }
    # always set: a redirect may lead from http to an https owner
    kwargs["verify"] = core.ssl_context(config.tls, config.auth)
    return kwargs


class _Families:
    """The resource families, bound to an executor."""

    def _bind(self, run: core.Executor) -> None:
        self.clusters = Clusters(run)
        self.tenants = Tenants(run)
        self.namespaces = Namespaces(run)
        self.topics = Topics(run)
        self.topic_policies = TopicPolicies(run)
        self.brokers = Brokers(run)
        self.broker_stats = BrokerStats(run)
        self.bookies = Bookies(run)
        self.schemas = Schemas(run)
        self.transactions = Transactions(run)  # /admin/v3/transactions
        self.resource_groups = ResourceGroups(run)  # /admin/v2/resourcegroups


class PulsarAdmin(_Families):
    """Blocking admin client: ``PulsarAdmin("http://localhost:8080").tenants.list()``."""

    def __init__(
        self,
        service_url: str | AdminConfig = core.DEFAULT_ADMIN_URL,
        *,
        auth: AuthProvider | None = None,
        timeout_s: float = 30.0,
        tls: TlsOptions | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.config = _config(service_url, auth, timeout_s, tls)
        self._http = httpx.Client(transport=transport, **_client_kwargs(self.config))
        self._bind(self._execute)

    def _execute(self, c: Call) -> Any:
        kwargs = core.request_kwargs(c, self.config.auth)
        for _ in range(self.config.redirects_max + 1):
            try:
                response = self._http.send(self._http.build_request(**kwargs), stream=True)
                try:
                    body = core.BodyLimit(response, self.config.response_bytes_max)
                    for chunk in response.iter_bytes():
                        body.add(chunk)
                finally:
                    response.close()
            except httpx.HTTPError as e:
                raise core.connection_error(e, str(self._http.base_url.join(kwargs["url"]))) from e
            nxt = core.redirect_kwargs(kwargs, response)
            if nxt is None:
                return core.decode(c, response, body.content())
            kwargs = nxt
        raise core.too_many_redirects(c, self.config.redirects_max)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PulsarAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncPulsarAdmin(_Families):
    """Asyncio admin client: ``await AsyncPulsarAdmin(url).tenants.list()``."""

    def __init__(
        self,
        service_url: str | AdminConfig = core.DEFAULT_ADMIN_URL,
        *,
        auth: AuthProvider | None = None,
        timeout_s: float = 30.0,
        tls: TlsOptions | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = _config(service_url, auth, timeout_s, tls)
        self._http = httpx.AsyncClient(transport=transport, **_client_kwargs(self.config))
        self._bind(self._execute)

    async def _execute(self, c: Call) -> Any:
        kwargs = core.request_kwargs(c, self.config.auth)
        for _ in range(self.config.redirects_max + 1):
            try:
                response = await self._http.send(self._http.build_request(**kwargs), stream=True)
                try:
                    body = core.BodyLimit(response, self.config.response_bytes_max)
                    async for chunk in response.aiter_bytes():
                        body.add(chunk)
                finally:
                    await response.aclose()
            except httpx.HTTPError as e:
                raise core.connection_error(e, str(self._http.base_url.join(kwargs["url"]))) from e
            nxt = core.redirect_kwargs(kwargs, response)
            if nxt is None:
                return core.decode(c, response, body.content())
            kwargs = nxt
        raise core.too_many_redirects(c, self.config.redirects_max)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncPulsarAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
