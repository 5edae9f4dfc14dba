"""What the rest of the broker sees of bundle ownership: lookup answers and the service face.

Theory of operation: the binary LOOKUP handler, the HTTP lookup, the admin
layer and the topic registry ask one :class:`NamespaceService` -- the local
one in a standalone (this broker owns every bundle, lookups always Connect)
or the cluster one (bundle locks in the metadata store; see
:mod:`.cluster`).  Both answer with a :class:`LookupResult`: the owner's URLs
and whether the client must go there (``redirect``) or may stay
(``Connect``), plus Pulsar's ``authoritative`` flag, which the client copies
into its next lookup and which tells the receiving broker "you were chosen:
take the bundle instead of redirecting again".

A bundle operation (unload, split) asked of a broker that does not own the
bundle raises :class:`NotOwnedHere` carrying the owner; the web layer turns it
into a 307 to the owner's HTTP URL, as Pulsar's admin API does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.broker import errors
from magnetar.broker.ownership.bundles import (
    NamespaceBundle,
    boundaries_of,
    bundle_of_topic,
    ranges_of,
    topic_hash,
)
from magnetar.broker.ownership.ownership import OwnerData

if TYPE_CHECKING:
    from magnetar.broker.service.names import TopicRef


@dataclass(frozen=True, slots=True)
class LookupResult:
    owner: OwnerData
    redirect: bool
    authoritative: bool = True

    def as_lookup_data(self) -> dict[str, Any]:
        """Pulsar's LookupData JSON (every key present: the cpp client insists)."""
        return {
            "brokerUrl": self.owner.native_url,
            "brokerUrlTls": self.owner.native_url_tls,
            "httpUrl": self.owner.http_url,
            "httpUrlTls": self.owner.http_url_tls,
            "nativeUrl": self.owner.native_url,
        }


class NotOwnedHere(errors.BrokerError):
    """A bundle operation reached a broker that is not the bundle's owner."""

    http_status = 307

    def __init__(self, message: str, owner: OwnerData | None) -> None:
        super().__init__(message)
        self.owner = owner


class NamespaceService(Protocol):
    may_redirect: bool  # a topic (or a partition) may be owned by another broker: look before acting

    async def start(self) -> None: ...
    async def prepare_shutdown(self) -> None: ...
    async def aclose(self) -> None: ...
    async def bundle_of(self, ref: TopicRef) -> NamespaceBundle: ...
    async def lookup(self, ref: TopicRef, authoritative: bool = False) -> LookupResult: ...
    async def check_owned(self, ref: TopicRef) -> None: ...
    async def owner_of(self, bundle: NamespaceBundle) -> OwnerData | None: ...
    async def unload_bundle(self, bundle: NamespaceBundle, destination: str | None = None) -> int: ...
    async def split_bundle(
        self, bundle: NamespaceBundle, write_policies: Callable[[], Awaitable[None]]
    ) -> None: ...
    async def owned_bundles(self, broker_id: str) -> list[NamespaceBundle]: ...
    async def list_brokers(self) -> list[str]: ...
    async def leader(self) -> dict | None: ...
    def broker_id(self) -> str: ...
    def self_data(self) -> OwnerData: ...


class BrokerFace(Protocol):
    """The little of BrokerService the namespace services use."""

    config: Any
    resources: Any
    topics: Any
    metadata_store: Any
    clock: Any
    supervisor: Any
    transactions: Any  # TransactionService, or None: its coordinators close with their bundle

    def broker_service_url(self, listener: str | None = None) -> str: ...
    def broker_service_url_tls(self) -> str | None: ...
    def web_service_url(self) -> str: ...
    def web_service_url_tls(self) -> str | None: ...


async def find_bundle(svc: BrokerFace, ref: TopicRef, *, fresh: bool = False) -> NamespaceBundle:
    """The bundle of a topic, from its namespace's policies (NamespaceNotFound when absent).

    Read through the broker's namespace cache unless ``fresh``: the cache may lag a split
    made on another broker, so whoever *takes* a bundle on the strength of this answer
    checks it against the store first (:func:`bundle_exists`)."""
    policies = await svc.resources.namespaces.get(ref.namespace, fresh=fresh)
    if policies is None:
        raise errors.NamespaceNotFoundError("Namespace does not exist")
    bounds = boundaries_of(policies, svc.config.default_number_of_namespace_bundles)
    return bundle_of_topic(ref.namespace, bounds, ref.full_name)


async def bundle_exists(svc: BrokerFace, bundle: NamespaceBundle) -> bool:
    """Whether ``bundle`` is one of its namespace's bundles in the store right now.

    Called after a bundle's lock was won and before it counts as owned: a split writes the
    new boundaries *before* it releases the parent's lock, so a lock won on the parent
    afterwards is always seen as stale here (the split's write happened before our win)."""
    policies = await svc.resources.namespaces.get(bundle.namespace, fresh=True)
    if policies is None:
        return False
    bounds = boundaries_of(policies, svc.config.default_number_of_namespace_bundles)
    return bundle.range in ranges_of(bounds)


def self_owner_data(svc: BrokerFace) -> OwnerData:
    return OwnerData(
        native_url=svc.broker_service_url(),
        native_url_tls=svc.broker_service_url_tls(),
        http_url=svc.web_service_url(),
        http_url_tls=svc.web_service_url_tls(),
    )


async def close_bundle_topics(svc: BrokerFace, bundle: NamespaceBundle) -> int:
    """Unloads every loaded topic of ``bundle`` (clients get CLOSE_PRODUCER/CLOSE_CONSUMER),
    and the transaction coordinators whose partition is in it."""
    txns = svc.transactions
    if txns is not None:
        await txns.bundle_released(bundle)
    closed = 0
    for topic in list(svc.topics.loaded()):
        ref = topic.ref
        if ref.namespace != bundle.namespace or not bundle.range.contains(topic_hash(ref.full_name)):
            continue
        if await svc.topics.unload(ref):
            closed += 1
    return closed
