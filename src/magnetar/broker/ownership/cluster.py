"""The cluster's namespace service: lookup, placement, unload and failover of bundles.

Theory of operation (the design section of docs/broker-house.md says more):

* Registration and leader: :class:`~.registry.BrokerRegistry` (ephemeral
  ``/loadbalance/brokers/{id}``, election on ``/loadbalance/leader``).
* Ownership: :class:`~.ownership.BundleOwnership` (ephemeral lock per bundle).
* Lookup of topic T on this broker, bundle B = crc32(T)'s range:
  1. we hold B -> ``Connect``;
  2. someone else holds B -> ``Redirect`` to the owner's URLs -- unless the
     owner refuses connections (killed): then the lookup waits for its lock
     to expire and goes on as 3. (:mod:`.dead_owner`);
  3. nobody holds B: unless the lookup is ``authoritative``, choose a live
     broker (:func:`.placement.choose_broker`: fewest owned bundles); another
     broker chosen -> ``Redirect`` with ``authoritative=true`` (the client
     copies the flag into its next lookup, and the chosen broker then takes B
     instead of redirecting again); we chosen, or told so -> take B's lock:
     won -> ``Connect``, lost the race -> ``Redirect`` to the winner.
* Topics load only on the owner (:meth:`check_owned`, called by the topic
  registry before a load): a producer/consumer reaching a non-owner gets
  ServiceNotReady and looks up again.  A broker asked directly for an
  unowned bundle (a WebSocket session, an admin call) takes it.
* Unload: the bundle is marked *unloading* (lookups of it wait, loads are
  refused), its topics close (clients get CLOSE_PRODUCER/CLOSE_CONSUMER),
  the lock is released; for ``UNLOAD_GRACE_S`` an ephemeral hint
  (``/loadbalance/unloaded/...``) makes every broker's placement avoid us (or
  pick the ``destinationBroker`` asked for), so the bundle moves.  Split does the same around the
  policy write, so no broker ever holds a lock on a range that no longer
  exists while another holds a lock on a piece of it.
* Loss: a LockLost (session expired, node deleted) closes the bundle's topics
  at once; whatever they still had in flight fails, because the next owner
  opens the managed ledgers with recovery, which fences their last ledgers.
  After the store re-creates its session, the registry registers again and
  lookups take bundles afresh (``zookeeperSessionExpiredPolicy=reconnect``).
* The broker's own health-check topic (``pulsar/system/healthcheck-{host}-{port}``)
  is served without a lock: no other broker ever uses that name.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.ownership.api import (
    BrokerFace,
    LookupResult,
    NotOwnedHere,
    bundle_exists,
    close_bundle_topics,
    find_bundle,
    self_owner_data,
)
from magnetar.broker.ownership.bundles import NamespaceBundle
from magnetar.broker.ownership.dead_owner import DeadOwnerWatch
from magnetar.broker.ownership.ownership import OWNERSHIP_ROOT, BundleOwnership, OwnerData
from magnetar.broker.ownership.placement import (
    choose_broker,
    drop_unload_hint,
    read_unload_hint,
    write_unload_hint,
)
from magnetar.broker.ownership.registry import BrokerInfo, BrokerRegistry
from magnetar.metadata.api import MetadataError
from magnetar.metadata.factory import DEFAULT_SESSION_TIMEOUT_MS
from magnetar.runtime import TaskSupervisor, wait_for

if TYPE_CHECKING:
    from magnetar.broker.service.names import TopicRef

log = logging.getLogger(__name__)

UNLOAD_GRACE_S = 10.0
UNLOAD_WAIT_S = 30.0
LOOKUP_ATTEMPTS = 3


class ClusterNamespaceService:
    may_redirect = True  # topic admin calls may belong to another broker (web/ownership.py)

    def __init__(self, svc: BrokerFace, *, version: str = "") -> None:
        self._svc = svc
        self._version = version
        self._supervisor = TaskSupervisor("ownership")
        self.ownership = BundleOwnership(
            svc.metadata_store,
            self.self_data,
            supervisor=self._supervisor,
            on_lost=self._on_lost,
            on_change=self._registration_changed,
            validate=lambda bundle: bundle_exists(svc, bundle),
        )
        self.registry = BrokerRegistry(
            svc.metadata_store, self._broker_info, clock=svc.clock, supervisor=self._supervisor
        )
        self.dead_owners = DeadOwnerWatch(
            svc.clock, getattr(svc.metadata_store, "session_timeout_ms", DEFAULT_SESSION_TIMEOUT_MS)
        )
        self._unloading: dict[NamespaceBundle, asyncio.Event] = {}
        self._update_pending = False
        self._draining = False  # shutting down: hand bundles over, take none
        self._closed = False
        # broker.loadbalance: set by the composition root; placement, load reports, shedding.
        self.load_manager: Any = None

    # -- identity ----------------------------------------------------------------------------------
    def broker_id(self) -> str:
        return self._svc.web_service_url().split("://", 1)[-1]

    def self_data(self) -> OwnerData:
        return self_owner_data(self._svc)

    def _broker_info(self) -> BrokerInfo:
        return BrokerInfo(
            broker_id=self.broker_id(),
            web_service_url=self._svc.web_service_url(),
            web_service_url_tls=self._svc.web_service_url_tls(),
            pulsar_service_url=self._svc.broker_service_url(),
            pulsar_service_url_tls=self._svc.broker_service_url_tls(),
            num_bundles=len(self.ownership.owned()),
            version=self._version,
            load=self.load_manager.registration_fields() if self.load_manager is not None else None,
        )

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        await self.registry.start()
        if self.load_manager is not None:
            await self.load_manager.start()

    async def refresh_registration(self) -> None:
        """Rewrites our registration (after a TLS listener came up)."""
        await self.registry.update()

    async def prepare_shutdown(self, max_unloads_per_s: float | None = None) -> None:
        """Graceful stop, before the connections close: leave the broker list (nobody places
        bundles here any more), then unload every owned bundle -- clients get CLOSE_PRODUCER /
        CLOSE_CONSUMER and look up again on another broker, which takes the bundle.
        ``max_unloads_per_s`` paces the unloads (``brokers shutdown -m``)."""
        self._draining = True
        if self.load_manager is not None:
            await self.load_manager.aclose()
        try:
            await self.registry.aclose()
        except MetadataError as e:
            log.warning("could not leave the broker list (%s)", e)
        for i, bundle in enumerate(self.ownership.owned()):
            if i and max_unloads_per_s:
                await self._svc.clock.sleep(1.0 / max_unloads_per_s)
            try:
                await self.unload_bundle(bundle)
            except (errors.BrokerError, MetadataError) as e:
                log.warning(
                    "unloading %s at shutdown failed (%s); its lock goes with the session", bundle.name, e
                )

    async def aclose(self) -> None:
        """Releases every bundle (call after the topics closed) and leaves the cluster."""
        if self._closed:
            return
        self._closed = True
        if self.load_manager is not None:
            await self.load_manager.aclose()
        try:
            await self.ownership.release_all()
            await self.registry.aclose()
        except MetadataError as e:
            log.warning("leaving the cluster cleanly failed (%s); the session's end does it", e)
        await self._supervisor.aclose()

    def _registration_changed(self) -> None:
        if self._update_pending or self._closed:
            return
        self._update_pending = True

        async def update() -> None:
            try:
                await self._svc.clock.sleep(0.05)  # coalesce a burst of acquisitions
                self._update_pending = False
                await self.registry.update()
            except MetadataError as e:
                log.info("could not update the broker registration (%s)", e)
            finally:
                self._update_pending = False

        self._supervisor.spawn(update(), name="registration-update")

    # -- lookup ------------------------------------------------------------------------------------
    def _own_health_topic(self, ref: TopicRef) -> bool:
        cfg = self._svc.config
        port = self._svc.broker_service_url().rsplit(":", 1)[-1]
        return ref.full_name == f"persistent://pulsar/system/healthcheck-{cfg.advertised_address}-{port}"

    async def bundle_of(self, ref: TopicRef) -> NamespaceBundle:
        return await find_bundle(self._svc, ref)

    async def lookup(self, ref: TopicRef, authoritative: bool = False) -> LookupResult:
        if self._own_health_topic(ref):
            return LookupResult(self.self_data(), redirect=False)
        bundle = await self.bundle_of(ref)
        await self._wait_unloaded(bundle)
        me = self.self_data()
        for _ in range(LOOKUP_ATTEMPTS):
            if self.ownership.is_owned(bundle):
                return LookupResult(me, redirect=False)
            owner = await self.ownership.owner_of(bundle)
            if owner is not None:
                if owner.http_url == me.http_url:
                    if await self.ownership.settled_here(bundle):  # our acquisition was under way
                        return LookupResult(me, redirect=False)
                    # an earlier session of ours (we were restarted): take the bundle over
                    if await self.ownership.reclaim_from_old_session(bundle):
                        return LookupResult(me, redirect=False)
                    raise errors.ServiceNotReadyError(f"bundle {bundle.name} is still held by an old session")
                if not await self.dead_owners.reachable(owner) and await self.dead_owners.wait_gone(
                    bundle, lambda b=bundle: self.ownership.owner_of(b), owner
                ):
                    continue  # the dead owner's lock went: place the bundle afresh (.dead_owner)
                return LookupResult(owner, redirect=True)
            if self._draining:  # never take a bundle while shutting down
                chosen = await self._choose(bundle, avoid_self=True)
                if chosen is None or chosen.broker_id == self.broker_id():
                    raise errors.ServiceNotReadyError("this broker is shutting down")
                return LookupResult(_owner_data(chosen), redirect=True)
            if not authoritative:
                chosen = await self._choose(bundle)
                if chosen is not None and chosen.broker_id != self.broker_id():
                    return LookupResult(_owner_data(chosen), redirect=True)
            if await self.ownership.try_acquire(bundle):
                return LookupResult(me, redirect=False)
            # Lost the race, or the range was gone (a split our cached boundaries had not
            # seen yet): look again with the store's boundaries.
            bundle = await find_bundle(self._svc, ref, fresh=True)
            await self._wait_unloaded(bundle)
        raise errors.ServiceNotReadyError(f"no owner could be settled for bundle {bundle.name}")

    async def _choose(self, bundle: NamespaceBundle, avoid_self: bool = False) -> BrokerInfo | None:
        brokers = await self.registry.live_brokers()
        mine = self._broker_info()
        brokers = [mine if b.broker_id == mine.broker_id else b for b in brokers]  # our count is fresher
        if avoid_self:
            brokers = [b for b in brokers if b.broker_id != mine.broker_id]
        alive = [b for b in brokers if not self.dead_owners.seen_dead(b.pulsar_service_url)]
        brokers = alive or brokers
        hint = await read_unload_hint(self._svc.metadata_store, bundle)
        if hint.destination is not None:
            for b in brokers:
                if b.broker_id == hint.destination:
                    return b
        if self.load_manager is not None:
            decision = await self.load_manager.select_broker(bundle, brokers, hint.avoid)
            if decision is not None:
                if decision.destination is None:  # no broker may take it (isolation): never self
                    raise errors.ServiceNotReadyError(f"no broker may own {bundle.name}: {decision.reason}")
                return next((b for b in brokers if b.broker_id == decision.destination), None)
        return choose_broker(bundle.name, brokers, avoid=hint.avoid)

    async def check_owned(self, ref: TopicRef) -> None:
        """Refuses (ServiceNotReady) to load a topic whose bundle another broker owns."""
        if self._own_health_topic(ref):
            return
        bundle = await self.bundle_of(ref)
        if self.ownership.is_owned(bundle) and bundle not in self._unloading:
            return  # the cache may only lag a split of a bundle we never held: ours is current
        fresh = await find_bundle(self._svc, ref, fresh=True)
        await self._check_owned(fresh)

    async def _check_owned(self, bundle: NamespaceBundle) -> None:
        if bundle in self._unloading:
            raise errors.ServiceNotReadyError(f"Namespace bundle {bundle.name} is being unloaded")
        if self.ownership.is_owned(bundle):
            return
        owner = await self.ownership.owner_of(bundle)
        if owner is not None and owner.http_url == self.self_data().http_url:
            if await self.ownership.settled_here(bundle):  # our acquisition was under way
                return
        elif owner is None and not self._draining and await self.ownership.try_acquire(bundle):
            return
        raise errors.ServiceNotReadyError(f"Namespace bundle {bundle.name} is not owned by this broker")

    async def owner_of(self, bundle: NamespaceBundle) -> OwnerData | None:
        return await self.ownership.owner_of(bundle)

    # -- unload / split ----------------------------------------------------------------------------
    async def _wait_unloaded(self, bundle: NamespaceBundle) -> None:
        event = self._unloading.get(bundle)
        if event is not None:
            await wait_for(self._svc.clock, event.wait(), UNLOAD_WAIT_S)

    async def unload_bundle(self, bundle: NamespaceBundle, destination: str | None = None) -> int:
        """Unloads a bundle we own; the next placement avoids us, or picks ``destination``
        (Pulsar's ``destinationBroker``) when that broker is alive."""
        return await self._while_unloading(bundle, None, destination)

    async def split_bundle(
        self, bundle: NamespaceBundle, write_policies: Callable[[], Awaitable[None]]
    ) -> None:
        await self._while_unloading(bundle, write_policies)

    async def _while_unloading(
        self,
        bundle: NamespaceBundle,
        then: Callable[[], Awaitable[None]] | None,
        destination: str | None = None,
    ) -> int:
        if not self.ownership.is_owned(bundle):
            owner = await self.ownership.owner_of(bundle)
            if owner is not None:
                raise NotOwnedHere(f"bundle {bundle.name} is owned by {owner.http_url}", owner)
            if then is not None:
                await then()
            return 0
        await self._wait_unloaded(bundle)
        event = asyncio.Event()
        self._unloading[bundle] = event
        try:
            closed = await close_bundle_topics(self._svc, bundle)
            if then is not None:
                await then()
            else:  # before the release: whoever places the bundle next sees it
                await write_unload_hint(self._svc.metadata_store, bundle, self.broker_id(), destination)
                self._supervisor.spawn(self._drop_hint_later(bundle), name=f"unload-hint:{bundle.name}")
            await self.ownership.release(bundle)
            log.info("bundle %s unloaded (%d topics closed)", bundle.name, closed)
            return closed
        finally:
            del self._unloading[bundle]
            event.set()

    async def _drop_hint_later(self, bundle: NamespaceBundle) -> None:
        await self._svc.clock.sleep(UNLOAD_GRACE_S)
        await drop_unload_hint(self._svc.metadata_store, bundle)

    def _on_lost(self, bundle: NamespaceBundle, reason: str) -> None:
        if self._supervisor.closed:
            return
        self._supervisor.spawn(self._close_lost(bundle), name=f"lost:{bundle.name}")

    async def _close_lost(self, bundle: NamespaceBundle) -> None:
        n = await close_bundle_topics(self._svc, bundle)
        log.warning("bundle %s: ownership lost, %d topics closed", bundle.name, n)

    # -- the cluster's view ------------------------------------------------------------------------
    async def list_brokers(self) -> list[str]:
        return sorted(b.broker_id for b in await self.registry.live_brokers())

    async def leader(self) -> dict | None:
        return await self.registry.leader()

    async def owned_bundles(self, broker_id: str) -> list[NamespaceBundle]:
        if broker_id == self.broker_id():
            return self.ownership.owned()
        from magnetar.broker.ownership.bundles import BundleRange

        store = self._svc.metadata_store
        out = []
        for tenant in await store.children(OWNERSHIP_ROOT):
            for ns in await store.children(f"{OWNERSHIP_ROOT}/{tenant}"):
                for rng in await store.children(f"{OWNERSHIP_ROOT}/{tenant}/{ns}"):
                    got = await store.get(f"{OWNERSHIP_ROOT}/{tenant}/{ns}/{rng}")
                    data = OwnerData.from_json(got.value) if got is not None else None
                    if data is not None and data.http_url.split("://", 1)[-1] == broker_id:
                        out.append(NamespaceBundle(f"{tenant}/{ns}", BundleRange.parse(rng)))
        return sorted(out)


def _owner_data(info: BrokerInfo) -> OwnerData:
    return OwnerData(
        native_url=info.pulsar_service_url,
        native_url_tls=info.pulsar_service_url_tls,
        http_url=info.web_service_url,
        http_url_tls=info.web_service_url_tls,
    )
