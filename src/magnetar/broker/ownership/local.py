"""The standalone's namespace service: one broker that owns every bundle.

Theory of operation: with a local metadata store there is exactly one broker,
so nothing is locked or registered: every lookup answers ``Connect`` to this
broker, every topic may load here, the broker list and the leader are this
broker, and its owned namespaces are every bundle of every namespace.  Unload
closes the bundle's topics (their clients reconnect, here again).  This is
the behaviour the standalone had before bundles existed, kept bit for bit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from magnetar.broker.ownership.api import (
    BrokerFace,
    LookupResult,
    close_bundle_topics,
    find_bundle,
    self_owner_data,
)
from magnetar.broker.ownership.bundles import NamespaceBundle, boundaries_of, ranges_of
from magnetar.broker.ownership.ownership import OwnerData

if TYPE_CHECKING:
    from magnetar.broker.service.names import TopicRef


class LocalNamespaceService:
    may_redirect = False  # the web layer never needs to look for another owner

    def __init__(self, svc: BrokerFace) -> None:
        self._svc = svc

    async def start(self) -> None:
        return None

    async def prepare_shutdown(self) -> None:
        return None  # nobody to hand the bundles to

    async def aclose(self) -> None:
        return None

    def broker_id(self) -> str:
        return self._svc.web_service_url().split("://", 1)[-1]

    def self_data(self) -> OwnerData:
        return self_owner_data(self._svc)

    async def bundle_of(self, ref: TopicRef) -> NamespaceBundle:
        return await find_bundle(self._svc, ref)

    async def lookup(self, ref: TopicRef, authoritative: bool = False) -> LookupResult:
        await find_bundle(self._svc, ref)  # NamespaceNotFound for an unknown namespace
        return LookupResult(self.self_data(), redirect=False)

    async def check_owned(self, ref: TopicRef) -> None:
        return None

    async def owner_of(self, bundle: NamespaceBundle) -> OwnerData | None:
        return self.self_data()

    async def unload_bundle(self, bundle: NamespaceBundle, destination: str | None = None) -> int:
        return await close_bundle_topics(self._svc, bundle)

    async def split_bundle(
        self, bundle: NamespaceBundle, write_policies: Callable[[], Awaitable[None]]
    ) -> None:
        await close_bundle_topics(self._svc, bundle)
        await write_policies()

    async def owned_bundles(self, broker_id: str) -> list[NamespaceBundle]:
        if broker_id != self.broker_id():
            return []
        res = self._svc.resources
        out = []
        for tenant in await res.tenants.list():
            for ns in await res.namespaces.list(tenant):
                bounds = boundaries_of(await res.namespaces.get(ns) or {}, 1)
                out.extend(NamespaceBundle(ns, r) for r in ranges_of(bounds))
        return out

    async def list_brokers(self) -> list[str]:
        return [self.broker_id()]

    async def leader(self) -> dict | None:
        return {"serviceUrl": self._svc.web_service_url(), "brokerId": self.broker_id()}
