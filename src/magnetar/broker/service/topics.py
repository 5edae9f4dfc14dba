"""The topic registry: get-or-create with the auto-creation policy, unload, delete.

Theory of operation: ``topics`` maps a full topic name to the *future* of its
loaded :class:`PersistentTopic`, so concurrent first users of a topic share one
load (one managed-ledger open).  A topic exists when its managed ledger exists
(or it is loaded).  Creating one on demand follows the broker policy
(``allowAutoTopicCreation``/``allowAutoTopicCreationType``, overridable per
namespace through ``autoTopicCreationOverride``):

* a partition ``x-partition-i`` may be created when ``x`` is a partitioned topic
  with more than ``i`` partitions -- whatever the auto-creation setting;
* a plain name may be auto-created when allowed and the type is
  ``non-partitioned``; when the type is ``partitioned`` the PARTITIONED_METADATA
  request that precedes every producer/consumer has already created the
  partitioned metadata, so the client never asks for the base name itself;
* a name that is the base of a partitioned topic is refused.

Unload closes the topic (clients get CLOSE_PRODUCER/CLOSE_CONSUMER and
reconnect); delete does the same and deletes the ledger and its cursors.

``on_loaded`` callbacks run (synchronously) for every topic once it is loaded
(persistent: after its ledger opened; non-persistent: when created), so
whoever acts on new topics (the policy enforcer) hears of them instead of
scanning the registry.

A topic's managed ledger is opened with the config ``ml_config_for(ref)`` gives
(the admin layer installs its policy resolution there: retention, persistence,
offload), as Pulsar opens it with ``getManagedLedgerConfig``; where no admin
layer runs, the broker's defaults with every ledger kept.  A failure to read the policies
fails the load (retried by the client) rather than open under the defaults.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from magnetar.broker import errors
from magnetar.broker.service.dedup import MessageDeduplication, deduplication_enabled
from magnetar.broker.service.names import TopicRef
from magnetar.broker.service.nonpersistent_topic import NonPersistentTopic
from magnetar.broker.service.topic import PersistentTopic
from magnetar.managed_ledger.api import ManagedLedgerConfig, ManagedLedgerError, shared_config
from magnetar.metadata.api import MetadataError
from magnetar.runtime import wait_for

if TYPE_CHECKING:
    from magnetar.broker.service.broker_service import BrokerService

log = logging.getLogger(__name__)

TOPIC_LOAD_TIMEOUT_S = 30.0


class TopicRegistry:
    def __init__(self, service: BrokerService) -> None:
        self._svc = service
        self._topics: dict[str, asyncio.Future[PersistentTopic]] = {}
        self.ml_config_for: Callable[[TopicRef], Awaitable[ManagedLedgerConfig]] | None = None
        self.on_loaded: list[Callable[[PersistentTopic | NonPersistentTopic], None]] = []

    def _loaded(self, topic: PersistentTopic | NonPersistentTopic) -> None:
        for callback in self.on_loaded:
            try:
                callback(topic)
            except Exception:
                log.exception("topic-loaded callback failed for %s", topic.name)

    def loaded(self) -> list[PersistentTopic]:
        out = []
        for fut in self._topics.values():
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                out.append(fut.result())
        return out

    def get_loaded(self, name: str) -> PersistentTopic | None:
        fut = self._topics.get(name)
        if fut is None or not fut.done() or fut.cancelled() or fut.exception() is not None:
            return None
        return fut.result()

    # ------------------------------------------------------------ policy
    async def auto_creation(self, ref: TopicRef) -> tuple[bool, str, int]:
        """(allowed, type, default partitions) for a namespace: broker config unless overridden."""
        cfg = self._svc.config
        allowed, kind, n = (
            cfg.allow_auto_topic_creation,
            cfg.allow_auto_topic_creation_type,
            cfg.default_num_partitions,
        )
        policies = await self._svc.resources.namespaces.get(ref.namespace)
        override = (policies or {}).get("autoTopicCreationOverride")
        if override:
            allowed = bool(override.get("allowAutoTopicCreation", allowed))
            kind = override.get("topicType", kind) or kind
            n = int(override.get("defaultNumPartitions") or n)
        return allowed, kind, n

    async def exists(self, ref: TopicRef) -> bool:
        if self.get_loaded(ref.full_name) is not None:
            return True
        return await self._svc.ml_factory.exists(ref.managed_ledger_name)

    async def may_create(self, ref: TopicRef) -> bool:
        if ref.is_partition:
            n = await self._svc.resources.partitioned_topics.partitions(
                ref.tenant, ref.namespace_portion, ref.domain, ref.base.local_name
            )
            if n is not None:
                return ref.partition_index < n
        if (
            await self._svc.resources.partitioned_topics.partitions(
                ref.tenant, ref.namespace_portion, ref.domain, ref.local_name
            )
            is not None
        ):
            return False
        allowed, kind, _ = await self.auto_creation(ref)
        return allowed and kind == "non-partitioned"

    # ------------------------------------------------------------ get or create
    async def get_topic(self, ref: TopicRef, create: bool, explicit: bool = False) -> PersistentTopic:
        """The loaded topic, loading (and if allowed/asked, creating) it first.

        ``explicit`` (admin creation) bypasses the auto-creation policy.
        """
        if not ref.persistent:
            if self._topics.get(ref.full_name) is None:
                await self._svc.namespace_service.check_owned(ref)  # only the bundle's owner loads it
            return await self._get_non_persistent(ref, create)
        fut = self._topics.get(ref.full_name)
        if fut is None:
            await self._svc.require_namespace(ref.namespace)
            await self._svc.namespace_service.check_owned(ref)  # only the bundle's owner loads it
            fut = self._topics.get(ref.full_name)  # re-check after the await
        if fut is None:
            if not await self._svc.ml_factory.exists(ref.managed_ledger_name):
                if not create or not (explicit or await self.may_create(ref)):
                    raise errors.TopicNotFoundError(f"Topic {ref.full_name} does not exist")
                await self._svc.replication.check_creation_allowed(ref)  # not replicated here: refused
                if not ref.is_partition:  # partitions were counted with their partitioned topic
                    await self._svc.check_max_topics(ref, 1)
            fut = self._topics.get(ref.full_name)
            if fut is None:
                fut = asyncio.get_running_loop().create_future()
                self._topics[ref.full_name] = fut
                self._svc.supervisor.spawn(self._load(ref, fut), name=f"load:{ref.full_name}")
        try:
            topic = await wait_for(self._svc.clock, asyncio.shield(fut), TOPIC_LOAD_TIMEOUT_S)
        except TimeoutError:
            raise errors.ServiceNotReadyError(f"Timed out loading topic {ref.full_name}") from None
        if not topic.active:
            raise errors.TopicFencedError(f"Topic {ref.full_name} is closing")
        return topic

    async def _get_non_persistent(self, ref: TopicRef, create: bool) -> NonPersistentTopic:
        """The loaded non-persistent topic, created on first use (it exists only while loaded)."""
        fut = self._topics.get(ref.full_name)
        if fut is None:
            await self._svc.require_namespace(ref.namespace)
            fut = self._topics.get(ref.full_name)
        if fut is None:
            if not create:
                raise errors.TopicNotFoundError(f"Topic {ref.full_name} does not exist")
            if not ref.is_partition:
                await self._svc.check_max_topics(ref, 1)
            fut = self._topics.get(ref.full_name)
        if fut is None:
            svc = self._svc
            fut = asyncio.get_running_loop().create_future()
            fut.set_result(NonPersistentTopic(ref, svc.config, svc.clock, svc.supervisor))
            self._topics[ref.full_name] = fut
            self._loaded(fut.result())
        topic = await fut
        if not topic.active:
            raise errors.TopicFencedError(f"Topic {ref.full_name} is closing")
        return topic

    async def _load(self, ref: TopicRef, fut: asyncio.Future[PersistentTopic]) -> None:
        try:
            # Opened with the effective storage policies (retention above all): the trim
            # that follows an open must not run under the broker's default retention (0),
            # which deleted consumed ledgers a retention policy keeps (seen after an unload
            # moved a topic with infinite retention).  With no policy resolver (no admin
            # layer), every ledger is kept until a config is applied.
            resolver = self.ml_config_for
            if resolver is not None:
                config = shared_config(await resolver(ref))
            else:
                config = shared_config(
                    dataclasses.replace(
                        self._svc.config.managed_ledger_config(), retention_time_ms=-1, retention_size_bytes=-1
                    )
                )
            ml = await self._svc.ml_factory.open(ref.managed_ledger_name, config)
            topic = PersistentTopic(ref, ml, self._svc.config, self._svc.clock, self._svc.supervisor)
            if resolver is not None:
                topic.applied_ml_config = config
            topic.on_fenced = self._unload_fenced
            if await deduplication_enabled(self._svc, topic):
                topic.dedup = await MessageDeduplication.load(topic)
            await self._start_replication(topic)
            if self._svc.transactions is not None:  # the topic's transaction buffer, recovered
                topic.txn_buffer = await self._svc.transactions.load_buffer(topic)
        except BaseException as exc:
            if self._topics.get(ref.full_name) is fut:
                del self._topics[ref.full_name]
            if not fut.done():
                fut.set_exception(errors.translate(exc))
                fut.exception()  # mark retrieved: waiters re-raise it themselves
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        fut.set_result(topic)
        self._loaded(topic)
        self._svc.topic_list_watchers.changed(ref.namespace)  # a topic may have been created

    async def _start_replication(self, topic: PersistentTopic) -> None:
        """Replicator cursors exist before the first producer attaches (broker.replication);
        a failure here is retried by the replication service's periodic check."""
        topic.inbound_replication = self._svc.replication
        try:
            await self._svc.replication.topic_loaded(topic)
        except (MetadataError, ManagedLedgerError) as exc:
            log.warning(
                "starting replication of %s failed (retried by the policy check): %s", topic.name, exc
            )
            self._svc.replication.recheck(topic)

    def _unload_fenced(self, topic: PersistentTopic) -> None:
        if topic.active:
            log.warning("managed ledger of %s is fenced or closed: unloading the topic", topic.name)
            self._svc.supervisor.spawn(
                self._close(topic.ref, topic, delete=False), name=f"unload:{topic.name}"
            )

    # ------------------------------------------------------------ unload / delete
    async def _close(self, ref: TopicRef, topic: PersistentTopic, delete: bool) -> None:
        # The closing topic stays registered until it is closed: meanwhile users get
        # "closing" (retried by clients) instead of a second instance over the same ledger.
        try:
            await topic.close(delete=delete)
        finally:
            fut = self._topics.get(ref.full_name)
            if fut is not None and fut.done() and not fut.cancelled() and fut.exception() is None:
                if fut.result() is topic:
                    del self._topics[ref.full_name]

    async def unload(self, ref: TopicRef) -> bool:
        topic = self.get_loaded(ref.full_name)
        if topic is None:
            return False
        await self._close(ref, topic, delete=False)
        return True

    async def delete(self, ref: TopicRef, force: bool) -> None:
        topic = self.get_loaded(ref.full_name)
        if topic is not None:
            if topic.has_clients and not force:
                raise errors.PreconditionFailedError("Topic has active producers/subscriptions")
            await self._close(ref, topic, delete=True)
        else:
            if not await self._svc.ml_factory.exists(ref.managed_ledger_name):
                raise errors.TopicNotFoundError("Topic not found")
            await self._svc.ml_factory.delete(ref.managed_ledger_name)
        self._svc.topic_list_watchers.changed(ref.namespace)

    async def close_all(self) -> None:
        topics = self.loaded()
        self._topics.clear()
        results = await asyncio.gather(*(t.close() for t in topics), return_exceptions=True)
        for topic, result in zip(topics, results, strict=True):
            if isinstance(result, BaseException):
                log.error("closing topic %s failed", topic.name, exc_info=result)
