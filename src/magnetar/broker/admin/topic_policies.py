"""Topic-level policies: storage, effective-policy resolution, live enforcement.

Storage.  Each topic's overrides are one JSON document (Pulsar's
``TopicPolicies`` field names: ``messageTTLInSeconds``, ``retentionPolicies``,
``maxProducerPerTopic``...) at::

    /admin/topic-policies/{tenant}/{namespace}/{domain}/{percent-encoded local name}

Pulsar keeps these as events on the namespace's ``__change_events`` system
topic, read back by a reader per namespace, so a read right after a write may
briefly answer the old value.  We keep them in the metadata store instead:
the write is durable and visible to the next read at once, it is CAS-updated
like every other policy document, the metadata store already has watches for
change notification, and there is no system topic whose ledgers and readers
must be managed per namespace.  A partitioned topic's policies are stored
under its base name and apply to every partition.

Resolution.  :meth:`TopicPolicyAdmin.effective` computes the effective value
of a policy with Pulsar's precedence: topic override > namespace policy >
broker default (``BROKER_DEFAULTS`` from the broker config).

Enforcement.  :class:`PolicyEnforcer` runs a loop on the broker's task
supervisor every ``policy_check_interval_s``: for each loaded topic it
expires messages older than the effective message TTL on every subscription
(Pulsar's ``messageExpiryCheckIntervalInMinutes`` loop) and hands the topic
its effective policies as one typed value (``TopicPolicies``, replaced
atomically through ``topic.apply_policies``); a policy write triggers the
same pass at once, so changes reach live topics without a restart.  The
enforcer only writes what the topic declares (its policies, the storage
config it applied, idle times of subscriptions); the admission checks that
read them live beside the topic in ``broker.service.admission``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import weakref
from typing import Any

from magnetar.bookkeeper.isolation import placement_config
from magnetar.broker import errors
from magnetar.broker.admin.offload import effective_offload_policies
from magnetar.broker.admin.policies import BY_TOPIC_SUFFIX, PolicySpec, parse_value
from magnetar.broker.resources.base import JsonStore
from magnetar.broker.service.admission import QUOTA_BLOCKING, backlog_bytes
from magnetar.broker.service.api import BrokerServiceView
from magnetar.broker.service.names import TopicRef, parse_topic
from magnetar.broker.service.policies import (
    ADMISSION_POLICIES,
    TOPIC_POLICIES_ROOT,
    TopicPolicies,
    base_ref,
    topic_policies_path,
)
from magnetar.broker.service.policy_documents import PolicyDocuments
from magnetar.broker.service.topic import PersistentTopic
from magnetar.managed_ledger.api import ManagedLedgerConfig, ManagedLedgerError, shared_config

log = logging.getLogger(__name__)

ROOT = TOPIC_POLICIES_ROOT
NEW_TOPIC_TICK_S = 0.1
path_of = topic_policies_path


def broker_defaults(config: Any) -> dict[str, Any]:
    """Broker-level defaults of the policies the resolver answers for."""
    g = lambda name, default=None: getattr(config, name, default)  # noqa: E731
    return {
        "messageTTL": g("ttl_duration_default_in_seconds", 0) or 0,
        "maxProducers": g("max_producers_per_topic", 0) or 0,
        "maxConsumers": g("max_consumers_per_topic", 0) or 0,
        "maxConsumersPerSubscription": g("max_consumers_per_subscription", 0) or 0,
        "retention": {
            "retentionTimeInMinutes": g("default_retention_time_in_minutes", 0),
            "retentionSizeInMB": g("default_retention_size_in_mb", 0),
        },
        "deduplication": False,
        "schemaCompatibilityStrategy": "FULL",
        "subscriptionTypesEnabled": sorted(g("subscription_types_enabled", ()) or ()),
        "maxUnackedMessagesOnConsumer": g("max_unacked_messages_per_consumer", None),
    }


class TopicPolicyAdmin:
    def __init__(self, svc: BrokerServiceView) -> None:
        self._svc = svc
        self._js = JsonStore(svc.metadata_store)
        self.listeners: list[Any] = []

    async def _require_topic(self, topic: str) -> TopicRef:
        ref = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        if not await self._exists(ref):
            raise errors.TopicNotFoundError("Topic not found")
        return ref

    async def _exists(self, ref: TopicRef) -> bool:
        b = base_ref(ref)
        if await self._svc.partitions_of(b) is not None:
            return True
        return await self._svc.topics.exists(ref)

    async def document(self, ref: TopicRef) -> dict:
        return dict(await self._js.get(path_of(ref)) or {})

    async def get(self, topic: str, spec: PolicySpec, applied: bool = False) -> Any:
        ref = await self._require_topic(topic)
        value = (await self.document(ref)).get(spec.topic_field)
        if value is None and applied:
            return await self.effective(ref, spec)
        return value

    async def set(self, topic: str, spec: PolicySpec, raw: Any) -> None:
        value = parse_value(spec.kind, raw)
        ref = await self._require_topic(topic)
        await self._write(ref, lambda d: d.__setitem__(spec.topic_field, value))

    async def delete(self, topic: str, spec: PolicySpec) -> None:
        ref = await self._require_topic(topic)
        await self._write(ref, lambda d: d.pop(spec.topic_field, None))

    async def backlog_quota_map(self, topic: str, applied: bool = False) -> dict:
        ref = await self._require_topic(topic)
        value = (await self.document(ref)).get("backLogQuotaMap") or {}
        if not value and applied:
            ns = await self._svc.resources.namespaces.get(ref.namespace) or {}
            value = ns.get("backlog_quota_map") or {}
        return dict(value)

    async def set_backlog_quota(self, topic: str, qtype: str, raw: Any) -> None:
        from magnetar.common import rest_models as m

        t = parse_value(m.BacklogQuotaType, qtype or "destination_storage")
        value = parse_value(m.BacklogQuota, raw)
        ref = await self._require_topic(topic)
        await self._write(ref, lambda d: d.setdefault("backLogQuotaMap", {}).__setitem__(t, value))

    async def remove_backlog_quota(self, topic: str, qtype: str) -> None:
        from magnetar.common import rest_models as m

        t = parse_value(m.BacklogQuotaType, qtype or "destination_storage")
        ref = await self._require_topic(topic)
        await self._write(ref, lambda d: (d.get("backLogQuotaMap") or {}).pop(t, None))

    async def _write(self, ref: TopicRef, fn: Any) -> None:
        path = path_of(ref)

        def apply(doc: dict) -> dict:
            fn(doc)
            return doc

        if not await self._js.exists(path):
            await self._js.create(path, {})
        await self._js.update(path, apply)
        for listener in self.listeners:
            await listener(ref.namespace)

    async def delete_all(self, ref: TopicRef) -> None:
        await self._js.delete(path_of(ref))

    # ------------------------------------------------------------ resolution
    async def effective(self, ref: TopicRef, spec: PolicySpec, docs: tuple[dict, dict] | None = None) -> Any:
        """Topic override > namespace policy > broker default.  ``docs`` = (topic document,
        namespace Policies) already read by the caller (one read per enforcement pass)."""
        if docs is None:
            docs = await self.documents(ref)
        return self.resolve(spec, *docs)

    async def documents(self, ref: TopicRef) -> tuple[dict, dict]:
        return await self.document(ref), await self._svc.resources.namespaces.get(ref.namespace) or {}

    def resolve(self, spec: PolicySpec, topic_doc: dict, ns_doc: dict) -> Any:
        if spec.topic_field:
            value = topic_doc.get(spec.topic_field)
            if value is not None:
                return value
        if spec.ns_field:
            value = ns_doc.get(spec.ns_field)
            if spec.per_cluster:
                value = (value or {}).get(self._svc.config.cluster_name)
            if value not in (None, [], "UNDEFINED"):
                return value
        return broker_defaults(self._svc.config).get(spec.name)


def spec_for_suffix(suffix: str) -> PolicySpec:
    spec = BY_TOPIC_SUFFIX.get(suffix)
    if spec is None:
        raise errors.TopicNotFoundError(f"Unknown topic policy {suffix!r}")
    return spec


class PolicyEnforcer:
    """Applies effective policies to loaded topics: on load, on every change, and every
    interval to the topics whose policies act over time (TTL, expiry, quotas, snapshots).

    The documents come from :class:`PolicyDocuments` (cached, invalidated by the metadata
    store's notifications, so changes made through another broker count as changes too).  A
    pass skips a topic whose documents are the very objects it last applied and whose
    policies have nothing time-based: an idle topic costs a few dict lookups per pass, not
    two metadata reads."""

    def __init__(self, svc: BrokerServiceView, policies: TopicPolicyAdmin, interval_s: float) -> None:
        self._svc = svc
        self._policies = policies
        self._interval_s = max(0.05, interval_s)
        self._lock = asyncio.Lock()
        # the broker's cached, watched documents (broker.service.policy_documents); a service
        # view without them (a store without watches) reads the store every time
        self._docs: PolicyDocuments | None = getattr(svc, "policy_documents", None)
        if self._docs is not None:
            self._docs.on_change.append(self._documents_changed)
        # topic -> (topic document, namespace document, has time-based policies) last applied
        self._applied: weakref.WeakKeyDictionary[PersistentTopic, tuple[Any, Any, bool]] = (
            weakref.WeakKeyDictionary()
        )
        self._changed = False  # a policy document changed somewhere: pass at the next tick
        # Topics whose policies act over time (looked at every interval even when nothing
        # changed) and those with an inactive-topic policy that deletes, as last applied.
        self._timed: weakref.WeakSet[PersistentTopic] = weakref.WeakSet()
        self._inactive_policy: weakref.WeakKeyDictionary[PersistentTopic, dict] = weakref.WeakKeyDictionary()
        self._passed_generation = -1  # the documents' generation the last full pass saw
        # Topics loaded since the last tick (the registry's on_loaded hook): a tick looks at
        # these only, not at every loaded topic.  Without the hook, a tick scans the registry.
        self._new: list[PersistentTopic] = []
        topics = getattr(svc, "topics", None)
        self._hooked = topics is not None and isinstance(getattr(topics, "on_loaded", None), list)
        if self._hooked:
            topics.on_loaded.append(self._topic_loaded)

    def _documents_changed(self, path: str) -> None:
        self._changed = True

    def _topic_loaded(self, topic: PersistentTopic) -> None:
        self._new.append(topic)

    async def run(self) -> None:
        """Every interval: a pass over the topics (unchanged ones without time-based policies
        are skipped); newly loaded topics and changed documents within NEW_TOPIC_TICK_S.  An
        idle tick (nothing loaded, nothing changed) touches no topic."""
        tick_s = min(self._interval_s, NEW_TOPIC_TICK_S)
        next_full = self._svc.clock.monotonic() + self._interval_s
        while True:
            await self._svc.clock.sleep(tick_s)
            try:
                if self._svc.clock.monotonic() >= next_full:
                    next_full = self._svc.clock.monotonic() + self._interval_s
                    self._changed = False
                    if self._docs is not None:
                        self._docs.resync_if_due(self._svc.clock.monotonic())
                    await self._periodic_pass()
                    if self._new:
                        await self.apply_all(only_new=True)
                    await self._inactive_topics()
                elif self._changed:
                    self._changed = False
                    self._new.clear()
                    await self._pass()
                elif not self._hooked or self._new:
                    await self.apply_all(only_new=True)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("policy enforcement pass failed", exc_info=True)

    async def on_change(self, namespace: str) -> None:
        if self._docs is not None:
            self._docs.invalidate_namespace(namespace)
        await self.apply_all(namespace)

    async def apply_all(self, namespace: str | None = None, *, only_new: bool = False) -> None:
        """Apply now to every loaded topic (of ``namespace``), unchanged or not (``only_new``:
        to the topics that have never had policies applied)."""
        await self._pass(namespace, only_new=only_new, force=not only_new)

    async def _pass(
        self, namespace: str | None = None, *, only_new: bool = False, force: bool = False
    ) -> None:
        async with self._lock:
            if only_new and self._hooked and namespace is None:
                candidates, self._new = self._new, []
            else:
                candidates = list(self._svc.topics.loaded())
            for topic in candidates:
                if namespace is not None and topic.ref.namespace != namespace:
                    continue
                if not topic.active:
                    continue
                if only_new and topic.policies.resolved:
                    continue
                try:
                    await self._apply(topic, force)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.warning("applying policies to %s failed", topic.name, exc_info=True)
                    if only_new and self._hooked:
                        self._new.append(topic)  # tried again at the next tick

    async def _periodic_pass(self) -> None:
        """The interval's pass: every topic when a document changed (or could have) since the
        last one, else only the topics whose policies act over time."""
        if self._docs is None or self._docs.generation != self._passed_generation:
            if self._docs is not None:
                self._passed_generation = self._docs.generation  # a change meanwhile: next pass
            await self._pass()
            return
        async with self._lock:
            for topic in list(self._timed):
                if not topic.active:
                    continue
                try:
                    await self._apply(topic, False)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.warning("applying policies to %s failed", topic.name, exc_info=True)

    async def _documents(self, topic: PersistentTopic) -> tuple[Any, Any]:
        if self._docs is None:
            return await self._policies.documents(topic.ref)
        return await self._docs.raw(topic.ref)

    async def _apply(self, topic: PersistentTopic, force: bool = True) -> None:
        from magnetar.broker.admin.policies import BY_NAME
        from magnetar.broker.admin.topic_cursor_ops import publish_time_of
        from magnetar.broker.service.rates import expire_counted

        raw = await self._documents(topic)
        last = self._applied.get(topic)
        if not force and last is not None and not last[2] and last[0] is raw[0] and last[1] is raw[1]:
            return  # nothing changed and nothing acts over time
        docs = (raw[0] or {}, raw[1] or {})
        timed = self._acts_over_time(topic, docs)
        self._applied[topic] = (raw[0], raw[1], timed)
        if timed:
            self._timed.add(topic)
        else:
            self._timed.discard(topic)
        inactive = self._policies.resolve(BY_NAME["inactiveTopicPolicies"], *docs)
        if inactive and inactive.get("deleteWhileInactive") and not topic.ref.is_system:
            self._inactive_policy[topic] = inactive
        else:
            self._inactive_policy.pop(topic, None)
        ttl = self._policies.resolve(BY_NAME["messageTTL"], *docs)
        values = {name: self._policies.resolve(BY_NAME[name], *docs) for name in ADMISSION_POLICIES}
        quotas: dict = {}
        if topic.ref.persistent:  # no ledger, no backlog: quotas do not apply to non-persistent topics
            quotas = docs[0].get("backLogQuotaMap") or docs[1].get("backlog_quota_map") or {}
        topic.apply_policies(
            TopicPolicies.from_resolved(
                values,
                topic_document=docs[0],
                backlog_quota=quotas.get("destination_storage"),
                backlog_quota_age=quotas.get("message_age"),
            )
        )
        groups = getattr(self._svc, "resource_groups", None)  # broker.service.resource_groups
        if groups is not None:
            groups.attach(topic, docs[1].get("resource_group_name"))
        if not topic.ref.persistent:
            # A non-persistent topic has no ledger, cursors or backlog: of the policies only the
            # admission limits (producers, consumers, rates, sizes) and subscription expiry apply.
            await self._expire_subscriptions(
                topic, self._policies.resolve(BY_NAME["subscriptionExpirationTime"], *docs)
            )
            return
        await self._apply_storage(topic, docs)
        await self._apply_backlog_quota(topic)
        snapshot_s = self._policies.resolve(BY_NAME["deduplicationSnapshotInterval"], *docs)
        if snapshot_s and topic.dedup is not None:
            await topic.dedup.snapshot_if_due(int(snapshot_s), self._svc.clock.time_ms())
        await self._expire_subscriptions(
            topic, self._policies.resolve(BY_NAME["subscriptionExpirationTime"], *docs)
        )
        if ttl and ttl > 0:
            for name, cursor in list(topic.ml.cursors.items()):
                try:
                    if await expire_counted(
                        topic, name, cursor, int(ttl) * 1000, publish_time_of, self._svc.clock.time_ms()
                    ):
                        sub = topic.subscriptions.get(name)
                        if sub is not None and sub.dispatcher is not None:
                            sub.dispatcher.notify()
                except ManagedLedgerError:  # this cursor's storage; the next pass tries again
                    log.warning("TTL expiry on %s/%s failed", topic.name, name, exc_info=True)

    def _acts_over_time(self, topic: PersistentTopic, docs: tuple[dict, dict]) -> bool:
        """The topic's policies need a look every interval, not only when they change."""
        from magnetar.broker.admin.policies import BY_NAME

        resolve = self._policies.resolve
        if resolve(BY_NAME["messageTTL"], *docs) or resolve(BY_NAME["subscriptionExpirationTime"], *docs):
            return True
        if docs[0].get("backLogQuotaMap") or docs[1].get("backlog_quota_map"):
            return True
        if topic.dedup is not None and resolve(BY_NAME["deduplicationSnapshotInterval"], *docs):
            return True
        # state a time-based policy left behind is cleaned up by the next full apply
        return bool(topic.subscription_idle_since_ms) or topic.backlog_age_exceeded

    async def _apply_storage(self, topic: PersistentTopic, docs: tuple[dict, dict]) -> None:
        """Retention, persistence and the namespace's bookie affinity groups: a new
        managed-ledger config when the effective one changed.

        Retention takes effect at once (consumed ledgers beyond it are trimmed now); the
        ensemble/quorums apply to the ledgers created from now on, as in Pulsar.
        """
        cfg = self.storage_config(docs)
        if topic.applied_ml_config == cfg:
            return
        await topic.ml.set_config(cfg)
        topic.applied_ml_config = cfg
        await topic.ml.trim_consumed_ledgers()

    async def ml_config_for(self, ref: TopicRef) -> ManagedLedgerConfig:
        """The managed-ledger config a topic is *opened* with (Pulsar's
        ``BrokerService.getManagedLedgerConfig``): the effective retention, persistence,
        affinity and offload policies, read before the open.  Opening with the broker's
        defaults instead would let the trim that runs right after the open delete, under
        the default retention (0: consumed ledgers go), ledgers the namespace retains."""
        return self.storage_config(await self._policies.documents(ref))

    def storage_config(self, docs: tuple[dict, dict]) -> ManagedLedgerConfig:
        """The managed-ledger config from the broker's defaults and the (topic, namespace)
        policy documents ``docs``."""
        from magnetar.broker.admin.policies import BY_NAME

        base = self._svc.config.managed_ledger_config()
        ret = self._policies.resolve(BY_NAME["retention"], *docs) or {}
        pers = self._policies.resolve(BY_NAME["persistence"], *docs) or {}
        minutes = ret.get("retentionTimeInMinutes", 0)
        size_mb = ret.get("retentionSizeInMB", 0)
        changes = {
            "retention_time_ms": -1 if minutes < 0 else minutes * 60_000,
            "retention_size_bytes": -1 if size_mb < 0 else size_mb * 1024 * 1024,
        }
        if pers:
            changes.update(
                ensemble_size=pers["bookkeeperEnsemble"],
                write_quorum=pers["bookkeeperWriteQuorum"],
                ack_quorum=pers["bookkeeperAckQuorum"],
            )
        affinity = docs[1].get("bookieAffinityGroup") or {}
        primary = [g for g in str(affinity.get("bookkeeperAffinityGroupPrimary") or "").split(",") if g]
        secondary = [g for g in str(affinity.get("bookkeeperAffinityGroupSecondary") or "").split(",") if g]
        if primary or secondary:
            changes["placement_config"] = placement_config(primary, secondary)
        changes["offload_policies"] = effective_offload_policies(base.offload_policies, *docs)
        return shared_config(dataclasses.replace(base, **changes))

    async def _apply_backlog_quota(self, topic: PersistentTopic) -> None:
        """``destination_storage`` quota (in ``topic.policies``, read by producer admission):
        disconnect producers or evict when over it.  ``message_age`` (time limit): :mod:`.backlog_age`."""
        from magnetar.broker.admin.backlog_age import apply_message_age_quota
        from magnetar.broker.admin.topic_cursor_ops import publish_time_of

        await apply_message_age_quota(
            topic, topic.policies.backlog_quota_age, self._svc.clock.time_ms(), publish_time_of
        )
        quota = topic.policies.backlog_quota
        if not quota:
            return
        limit = quota.get("limitSize", -1)
        if limit is None or limit < 0:
            return
        if quota.get("policy") in QUOTA_BLOCKING:
            self._disconnect_producers_over_quota(topic, limit)
            return
        if quota.get("policy") != "consumer_backlog_eviction":
            return
        for name, cursor in list(topic.ml.cursors.items()):
            evicted = False
            while cursor.estimated_backlog_size_bytes() > limit and cursor.number_of_entries_in_backlog() > 0:
                await cursor.skip_entries(1)
                evicted = True
            sub = topic.subscriptions.get(name)
            if evicted and sub is not None and sub.dispatcher is not None:
                sub.dispatcher.notify()

    async def _expire_subscriptions(self, topic: PersistentTopic, minutes: int | None) -> None:
        """``subscription_expiration_time_minutes``: delete a durable subscription that has had
        no consumer for that long (idle time counted from when a pass first saw it idle;
        compaction and other ``pulsar.``/``__`` system cursors are kept)."""
        idle = topic.subscription_idle_since_ms
        if not minutes or minutes <= 0:
            idle.clear()
            return
        now_ms = self._svc.clock.time_ms()
        names = set(topic.stored_cursors) | set(topic.subscriptions)
        for name in list(idle):
            if name not in names:
                del idle[name]
        for name in names:
            if name.startswith(("pulsar.", "__")):
                continue
            sub = topic.subscriptions.get(name)
            if sub is not None and (sub.consumers or not sub.durable):
                idle.pop(name, None)
                continue
            since = idle.setdefault(name, now_ms)
            if now_ms - since < minutes * 60_000:
                continue
            log.info(
                "subscription %s on %s expired after %d min without consumers", name, topic.name, minutes
            )
            idle.pop(name, None)
            if sub is not None:
                await topic.unsubscribe(sub)
            else:
                await topic.ml.delete_cursor(name)

    @staticmethod
    def _disconnect_producers_over_quota(topic: PersistentTopic, limit: int) -> None:
        """producer_request_hold / producer_exception over the quota: drop the connected
        producers (as Pulsar does).  Their reconnect is refused by ``check_producer``: under
        ``producer_request_hold`` the client keeps retrying and holds its sends until the
        backlog is below the quota again (or they time out); under ``producer_exception`` the
        client fails its pending sends."""
        if not topic.producers or backlog_bytes(topic) <= limit:
            return
        for producer in list(topic.producers.values()):
            log.info(
                "backlog quota exceeded on %s: disconnecting producer %s", topic.name, producer.producer_name
            )
            producer.cnx.broker_closed_producer(producer)
            topic.remove_producer(producer)

    async def _inactive_topics(self) -> None:
        """Inactive topic policies: delete loaded topics idle longer than allowed.

        ``delete_when_no_subscriptions``: no producers, no consumers, no durable subscription;
        ``delete_when_subscriptions_caught_up``: no clients and every subscription caught up.
        """
        now_ms = self._svc.clock.time_ms()
        # the policy as last applied (the documents' every change is applied before this runs)
        for topic, pol in list(self._inactive_policy.items()):
            if not topic.active or topic.ref.is_system:
                continue
            max_s = pol.get("maxInactiveDurationSeconds", 60)
            if max_s < 0 or topic.idle_since_ms(now_ms) < max_s * 1000:
                continue
            cursors = {
                n: c
                for n, c in topic.stored_cursors.items()
                if getattr(c, "durable", True) and not n.startswith("pulsar.")
            }
            if pol.get("inactiveTopicDeleteMode") == "delete_when_subscriptions_caught_up":
                if any(c.number_of_entries_in_backlog() > 0 for c in cursors.values()):
                    continue
            elif cursors:
                continue
            log.info("deleting inactive topic %s (idle > %s s)", topic.name, max_s)
            try:
                await self._svc.delete_topic(topic.name, force=False)
            except errors.BrokerError as exc:
                log.info("inactive topic %s not deleted: %s", topic.name, exc)
