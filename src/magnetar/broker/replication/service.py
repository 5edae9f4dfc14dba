"""The broker's replication service: which topics replicate where, and their replicators.

Theory of operation: one :class:`ReplicationService` per broker, owned by the
BrokerService.  A persistent topic replicates to every cluster in its
replication clusters other than the local one: the topic-level policy
(``replicationClusters`` in the topic's override document) if set, else the
namespace's ``replication_clusters`` (both live in the configuration store
when one is configured).  System namespaces and ``__``-prefixed system topics
never replicate.

* :meth:`topic_loaded` runs inside the topic's load, before any producer can
  attach, so no message is published before its replicator cursors exist
  (a new cursor starts at the earliest entry: nothing written under a
  replication policy is missed).
* :meth:`run` checks topics when something changed, not every topic on a
  timer: the replication clusters are read from the broker's cached, watched
  policy documents (``broker.service.policy_documents``), whose change
  notifications name the namespace whose topics are checked next; a
  replicator that died, or a topic whose replication could not start, asks
  for its topic to be checked again (:meth:`recheck`).  Checks are at least
  ``magnetarReplicationPolicyCheckIntervalMs`` (1 s by default) apart, and
  every ``FULL_CHECK_INTERVAL_S`` every loaded topic is checked anyway (a
  lost notification).  A check starts the replicators of clusters added,
  closes those of clusters removed and deletes their cursors (Pulsar's
  removeReplicator); a topic whose replication clusters are set and no
  longer name the local cluster is deleted here, forcefully (Pulsar's
  checkReplication: removing a cluster from a namespace's clusters removes
  that namespace's topics in it), and :meth:`check_creation_allowed` keeps
  it from being created again.  An idle broker's idle topics cost nothing.
* A topic owns its replicators (``topic.replicators``) and closes them before
  its managed ledger (``PersistentTopic.close``).

A replicator sends at most at the topic's ``replicatorDispatchRate`` (topic
level, else namespace), else at the broker's defaults
``dispatchThrottlingRatePerReplicatorInMsg``/``InByte`` (0: unlimited).

Each replicator's task is the service's: it is spawned on the broker's
supervisor with ``on_error`` pointing back here, so a replicator that dies of
an unexpected error is logged, counted and restarted by the next check.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.broker.config import ConfigError
from magnetar.broker.errors import BrokerError, PreconditionFailedError
from magnetar.broker.replication.replicator import REPLICATOR_PREFIX, Replicator, cursor_name
from magnetar.broker.replication.subscriptions import ReplicatedSubscriptions
from magnetar.broker.resources.base import JsonStore
from magnetar.broker.schema import SchemaNotFoundError
from magnetar.broker.schema.wire import to_wire_schema
from magnetar.broker.service.dispatch_rate import DispatchRate
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerError
from magnetar.metadata.api import MetadataError
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.markers import REPLICATED_SUBSCRIPTION_MARKERS
from magnetar.protocol.payload import parse_headers_and_payload
from magnetar.protocol.wire import WireSchema
from magnetar.runtime import wait_for

if TYPE_CHECKING:
    from magnetar.broker.service.api import ReplicationHost
    from magnetar.broker.service.names import TopicRef
    from magnetar.broker.service.topic import PersistentTopic

log = logging.getLogger(__name__)

SYSTEM_NAMESPACES = frozenset({"pulsar/system"})
DEFAULT_CHECK_INTERVAL_MS = 1000
FULL_CHECK_INTERVAL_S = 60.0
DEFAULT_SNAPSHOT_FREQUENCY_MS = 1000
DEFAULT_SNAPSHOT_TIMEOUT_S = 30


def default_replicator_rate(props: dict[str, Any]) -> DispatchRate:
    """The broker-wide replicator rate (``dispatchThrottlingRatePerReplicatorInMsg`` and
    ``...InByte``, per second; 0 or less: unlimited); ConfigError names a bad value."""
    values = {}
    for key, field_ in (
        ("dispatchThrottlingRatePerReplicatorInMsg", "dispatchThrottlingRateInMsg"),
        ("dispatchThrottlingRatePerReplicatorInByte", "dispatchThrottlingRateInByte"),
    ):
        raw = str(props.get(key) or "0").strip()
        try:
            values[field_] = int(raw)
        except ValueError:
            raise ConfigError(f"{key}={raw!r}: expected a whole number (per second; 0 = unlimited)") from None
    return DispatchRate.from_policy({**values, "ratePeriodInSecond": 1})


class InboundReplication(Protocol):
    """What a topic calls for entries stored by another cluster's replicator."""

    producer_prefix: str

    def entry_stored(self, topic: PersistentTopic, data: bytes, fut: asyncio.Future[Any]) -> None: ...


class ReplicationService:
    def __init__(self, service: ReplicationHost) -> None:
        self._svc = service
        props = service.config.as_properties()
        self.local_cluster: str = service.config.cluster_name
        self.prefix = props.get("replicatorPrefix") or REPLICATOR_PREFIX
        self.max_pending = int(props.get("replicationProducerQueueSize") or 1000)
        self.check_interval_s = (
            int(props.get("magnetarReplicationPolicyCheckIntervalMs") or DEFAULT_CHECK_INTERVAL_MS) / 1000.0
        )
        self.metrics_enabled = str(props.get("replicationMetricsEnabled", "true")).lower() != "false"
        self.failures = 0
        # (auth method, auth data) replicators present to remote clusters: the composition root
        # sets it from brokerClientAuthenticationPlugin/Parameters (None: no authentication).
        self.credentials: tuple[str, bytes] | None = None
        self.producer_prefix = f"{self.prefix}."
        self.replicated_subscriptions_enabled = (
            str(props.get("enableReplicatedSubscriptions", "true")).lower() != "false"
        )
        self.snapshot_frequency_s = (
            int(props.get("replicatedSubscriptionsSnapshotFrequencyMillis") or DEFAULT_SNAPSHOT_FREQUENCY_MS)
            / 1000.0
        )
        self.snapshot_timeout_s = float(
            props.get("replicatedSubscriptionsSnapshotTimeoutSeconds") or DEFAULT_SNAPSHOT_TIMEOUT_S
        )
        self.default_replicator_rate = default_replicator_rate(props)
        # What the next check looks at: namespaces whose documents changed, single topics,
        # or everything (the first check, and when no change notifications can be had).
        self._dirty_namespaces: set[str] = set()
        self._dirty_topics: weakref.WeakSet[PersistentTopic] = weakref.WeakSet()
        self._check_all = True
        self._wake = asyncio.Event()
        # Topics that have had a replicator: the only ones the snapshot step looks at.
        self._replicating: weakref.WeakSet[PersistentTopic] = weakref.WeakSet()
        docs = service.policy_documents
        if docs is not None:
            docs.on_change.append(self._documents_changed)
        self._documents = docs

    def _documents_changed(self, path: str) -> None:
        from magnetar.broker.service.policy_documents import namespace_of  # service imports us

        ns = namespace_of(path)
        if ns is None:
            return
        self._dirty_namespaces.add(ns)
        self._wake.set()

    def recheck(self, topic: PersistentTopic) -> None:
        """Check ``topic`` at the next check (its replication could not start, or a replicator
        died)."""
        self._dirty_topics.add(topic)
        self._wake.set()

    def replicator_rate(self, topic: PersistentTopic) -> DispatchRate:
        """The rate a replicator of ``topic`` sends at: the topic's ``replicatorDispatchRate``
        (topic level, else namespace), else the broker's
        ``dispatchThrottlingRatePerReplicatorInMsg``/``InByte`` (0: unlimited), as Pulsar."""
        doc = topic.policies.replicator_dispatch_rate
        return DispatchRate.from_policy(doc) if doc else self.default_replicator_rate

    # ------------------------------------------------------------ policy
    async def configured_clusters(self, topic: PersistentTopic, *, cached: bool = False) -> list[str]:
        """The replication clusters set for ``topic`` (topic level, else namespace), local
        included; empty when none are set (or for system topics).  ``cached``: both documents
        as the policy documents last saw them (the periodic check); otherwise (a topic's load)
        the namespace's through the resources, which drop an entry as soon as this broker
        writes it.  Both caches are watched, so another broker's change arrives within a
        notification's delay."""
        return await self.configured_clusters_for(topic.ref, cached=cached)

    async def configured_clusters_for(self, ref: TopicRef, *, cached: bool = False) -> list[str]:
        from magnetar.broker.service.policies import topic_policies_path  # service imports us

        if ref.namespace in SYSTEM_NAMESPACES or ref.local_name.startswith("__"):
            return []
        if cached and self._documents is not None:
            topic_doc, ns_doc = await self._documents.raw(ref)
            clusters = (topic_doc or {}).get("replicationClusters") or (ns_doc or {}).get(
                "replication_clusters"
            )
            return sorted(set(clusters or []))
        if self._documents is not None:  # the topic's overrides, cached and watched (most have none)
            doc = (await self._documents.raw(ref))[0] or {}
        else:
            doc = await JsonStore(self._svc.metadata_store).get(topic_policies_path(ref)) or {}
        clusters = doc.get("replicationClusters")
        if not clusters:
            policies = await self._svc.resources.namespaces.get(ref.namespace) or {}
            clusters = policies.get("replication_clusters") or []
        return sorted(set(clusters))

    async def check_creation_allowed(self, ref: TopicRef) -> None:
        """Before a new persistent topic is created here: refused (412 / NotAllowed) when its
        replication clusters are set and do not name this cluster, as Pulsar refuses it -- so a
        copy deleted because this cluster left the namespace's (or the topic's) clusters is not
        created again by a client that reconnects, or by the remote cluster's replicator."""
        clusters = await self.configured_clusters_for(ref)
        if clusters and self.local_cluster not in clusters:
            raise PreconditionFailedError(
                f"Namespace missing local cluster name in clusters list: local_cluster="
                f"{self.local_cluster} ns={ref.namespace} clusters={clusters}"
            )

    async def clusters_of(self, topic: PersistentTopic) -> list[str]:
        """The remote clusters ``topic`` replicates to (empty: none)."""
        return [c for c in await self.configured_clusters(topic) if c != self.local_cluster]

    async def broker_url_of(self, cluster: str) -> str | None:
        data = await self._svc.resources.clusters.get(cluster)
        return (data or {}).get("brokerServiceUrl") or None

    # ------------------------------------------------------------ topics
    async def topic_loaded(self, topic: PersistentTopic) -> None:
        if not topic.ref.persistent:
            return
        await self.reconcile(topic, await self.clusters_of(topic))

    async def reconcile(self, topic: PersistentTopic, clusters: list[str]) -> None:
        for remote in clusters:
            if remote not in topic.replicators and topic.active:
                await self._start(topic, remote)
        for remote in [c for c in topic.replicators if c not in clusters]:
            replicator = topic.replicators.pop(remote)
            await replicator.close()
            await self._delete_cursor(topic, remote)
            log.info("replication of %s to %s stopped", topic.name, remote)
        head = f"{self.prefix}."
        for name in [n for n in topic.ml.cursors if n.startswith(head)]:
            remote = name[len(head) :]
            if remote not in clusters and remote not in topic.replicators:
                # left by an earlier policy while the topic was not loaded: it would hold the
                # backlog (and the ledgers) forever
                await self._delete_cursor(topic, remote)

    async def _delete_cursor(self, topic: PersistentTopic, remote: str) -> None:
        try:
            await topic.ml.delete_cursor(cursor_name(remote, self.prefix))
        except ManagedLedgerError:
            log.debug("deleting the replicator cursor of %s on %s failed", remote, topic.name, exc_info=True)

    async def _start(self, topic: PersistentTopic, remote: str) -> None:
        cursor = await topic.ml.open_cursor(cursor_name(remote, self.prefix), InitialPosition.EARLIEST)
        replicator = Replicator(
            topic_name=topic.name,
            local_cluster=self.local_cluster,
            remote_cluster=remote,
            cursor=cursor,
            url_of=self.broker_url_of,
            clock=self._svc.clock,
            max_pending=self.max_pending,
            prefix=self.prefix,
            credentials=self.credentials,
            rate_of=lambda: self.replicator_rate(topic),
            schema_of=lambda version: self._schema_of(topic.name, version),
        )
        topic.replicators[remote] = replicator
        self._replicating.add(topic)
        replicator.task = self._svc.supervisor.spawn(
            replicator.run(), name=f"replicator:{topic.name}->{remote}", on_error=self._replicator_failed
        )
        log.info("replication of %s to %s started", topic.name, remote)

    async def _schema_of(self, topic_name: str, version: bytes) -> WireSchema | None:
        """The local registry's schema of ``version`` for a replicator (None: unknown here)."""
        try:
            rec = await self._svc.schemas.get_schema(topic_name, version)
        except SchemaNotFoundError:
            return None
        return to_wire_schema(rec.info)

    def _replicator_failed(self, name: str, exc: BaseException) -> None:
        self.failures += 1
        log.error("%s failed; the next policy check restarts it", name, exc_info=exc)
        topic = self._svc.topics.get_loaded(name.removeprefix("replicator:").rsplit("->", 1)[0])
        if topic is not None:
            self.recheck(topic)

    def _due(self) -> list[PersistentTopic]:
        """The topics the next check looks at (and forget what asked for them)."""
        if self._check_all or self._documents is None:
            self._check_all = False
            self._dirty_namespaces.clear()
            self._dirty_topics = weakref.WeakSet()
            return self._svc.topics.loaded()
        namespaces, self._dirty_namespaces = self._dirty_namespaces, set()
        due = list(self._dirty_topics)
        self._dirty_topics = weakref.WeakSet()
        if namespaces:
            due.extend(t for t in self._svc.topics.loaded() if t.ref.namespace in namespaces)
        return due

    async def _check_loop(self) -> None:
        clock = self._svc.clock
        next_full = clock.monotonic() + FULL_CHECK_INTERVAL_S
        while True:
            await clock.sleep(self.check_interval_s)  # checks at least this far apart
            if self._documents is not None:
                try:
                    await wait_for(clock, self._wake.wait(), max(0.0, next_full - clock.monotonic()))
                except TimeoutError:
                    pass
            self._wake.clear()
            if clock.monotonic() >= next_full:
                next_full = clock.monotonic() + FULL_CHECK_INTERVAL_S
                self._check_all = True
            for topic in self._due():
                await self._check(topic)

    async def _check(self, topic: PersistentTopic) -> None:
        if not topic.active or not topic.ref.persistent:
            return
        for remote, replicator in list(topic.replicators.items()):
            if replicator.task is not None and replicator.task.done():
                topic.replicators.pop(remote, None)  # died: started again below
        try:
            configured = await self.configured_clusters(topic, cached=True)
            if configured and self.local_cluster not in configured:
                await self._delete_local(topic, configured)
                return
            await self.reconcile(topic, [c for c in configured if c != self.local_cluster])
        except (MetadataError, ManagedLedgerError, BrokerError) as exc:
            log.info("replication check of %s failed: %s", topic.name, exc)
            self._dirty_topics.add(topic)  # tried again at the next check
            self._wake.set()

    async def _delete_local(self, topic: PersistentTopic, configured: list[str]) -> None:
        """The local cluster left the topic's replication clusters: delete the local copy
        (clients disconnected, replicators closed first, ledger and cursors deleted)."""
        log.warning(
            "deleting %s: the local cluster %s is not in its replication clusters %s",
            topic.name, self.local_cluster, configured,
        )  # fmt: skip
        await self._svc.delete_topic(topic.name, force=True)

    async def load_replicated_topics(self) -> int:
        """At start: load every local persistent topic of a namespace that replicates, so a
        backlog left by a restart drains without waiting for a client to touch the topic
        (Pulsar loads a replicated namespace's topics when it owns the bundle).  Returns how
        many topics were loaded."""
        from magnetar.broker.service.names import from_managed_ledger_name  # service imports us

        loaded = 0
        res = self._svc.resources
        for tenant in await res.tenants.list():
            try:
                namespaces = await res.namespaces.list(tenant)
            except BrokerError:
                continue  # deleted meanwhile
            for ns in namespaces:
                policies = await res.namespaces.get(ns) or {}
                if not [c for c in policies.get("replication_clusters") or [] if c != self.local_cluster]:
                    continue
                for ml_name in await self._svc.ml_factory.list_names(f"{ns}/persistent/"):
                    ref = from_managed_ledger_name(ml_name)
                    if ref is None or ref.is_system:
                        continue
                    try:
                        await self._svc.topics.get_topic(ref, create=False)
                        loaded += 1
                    except BrokerError as exc:
                        log.info("loading replicated topic %s failed: %s", ref.full_name, exc)
        return loaded

    async def run(self) -> None:
        """The periodic policy check (a task of the broker's supervisor); first, the topics of
        replicated namespaces are loaded."""
        try:
            n = await self.load_replicated_topics()
            if n:
                log.info("loaded %d topics of replicated namespaces", n)
        except (MetadataError, ManagedLedgerError, BrokerError) as exc:
            log.warning("loading the topics of replicated namespaces failed: %s", exc)
        await self._check_loop()

    def sample(self, topic: PersistentTopic, elapsed_s: float) -> None:
        for replicator in topic.replicators.values():
            replicator.sample(elapsed_s)

    # ------------------------------------------------------------ replicated subscriptions
    def controller_of(self, topic: PersistentTopic) -> ReplicatedSubscriptions:
        controller = topic.replicated_subscriptions
        if controller is None:
            controller = ReplicatedSubscriptions(
                topic, self.local_cluster, self._svc.clock, snapshot_timeout_s=self.snapshot_timeout_s
            )
            topic.replicated_subscriptions = controller
        return controller

    async def subscription_state(self, topic: PersistentTopic, name: str, replicated: bool) -> None:
        """SUBSCRIBE with ``replicate_subscription_state``: true makes the subscription
        replicated (false leaves it as it is, as Pulsar does)."""
        if replicated and self.replicated_subscriptions_enabled and topic.ref.persistent:
            await ReplicatedSubscriptions.mark(topic, name)

    def entry_stored(self, topic: PersistentTopic, data: bytes, fut: asyncio.Future[Any]) -> None:
        """Done-callback of an add by another cluster's replicator: hand its markers over."""
        if fut.cancelled() or fut.exception() is not None:
            return
        pos = fut.result()
        if pos.ledger_id < 0:  # a duplicate: stored before
            return
        try:
            parsed = parse_headers_and_payload(data, verify=False)
        except ProtocolError:
            return
        meta = parsed.metadata
        if not meta.HasField("marker_type") or meta.marker_type not in REPLICATED_SUBSCRIPTION_MARKERS:
            return
        controller = self.controller_of(topic)
        controller.inbound_markers += 1  # now, before the next snapshot check can count it as news
        self._svc.supervisor.spawn(
            controller.received(meta.marker_type, parsed.payload),
            name=f"marker:{topic.name}",
            on_error=self._marker_failed,
        )

    def _marker_failed(self, name: str, exc: BaseException) -> None:
        self.failures += 1
        log.warning("%s failed: %s", name, exc)

    async def run_snapshots(self) -> None:
        """Every replicatedSubscriptionsSnapshotFrequencyMillis: each replicating topic with a
        replicated subscription takes its step (a task of the broker's supervisor).  Only the
        topics that have replicators are looked at: idle, unreplicated topics cost nothing."""
        if not self.replicated_subscriptions_enabled:
            return
        while True:
            await self._svc.clock.sleep(self.snapshot_frequency_s)
            for topic in list(self._replicating):
                if not topic.active or not topic.replicators:
                    self._replicating.discard(topic)
                    continue
                if topic.replicated_subscriptions is None and not any(
                    c.properties.get("pulsar.replicated.subscription") == 1 for c in topic.ml.cursors.values()
                ):
                    continue
                try:
                    await self.controller_of(topic).tick()
                except (ManagedLedgerError, ProtocolError) as exc:
                    log.info("replicated-subscription snapshot of %s failed: %s", topic.name, exc)
