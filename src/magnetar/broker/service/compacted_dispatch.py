"""Compaction in the broker: read_compacted dispatch, the compaction service, its hooks.

Theory of operation.  ``broker.compaction`` has the pieces (Compactor,
CompactionService, CompactedTopicReader); this module plugs them into a
running broker and holds no compaction logic of its own:

* :class:`BrokerCompaction` -- one per BrokerService.  Builds the Compactor over
  the managed-ledger factory's BookKeeper client (the compacted ledger gets the
  managed ledger's replication settings) and a CompactionService whose
  ``open_ledger`` loads the topic, so the ledger compacted is the one the topic
  writes.  ``start`` spawns the automatic-compaction check: every
  ``brokerServiceCompactionMonitorIntervalInSeconds`` each loaded persistent
  topic whose effective ``compactionThreshold`` (topic policy > namespace policy
  ``compaction_threshold`` > broker ``brokerServiceCompactionThresholdInBytes``)
  is positive and below its not-yet-compacted bytes is compacted (and a topic with a
  threshold gets its ``__compaction`` cursor at once, so its data waits for the first run).
  ``delete_state`` deletes a topic's compacted ledger before the topic itself
  goes (the ``__compaction`` cursor goes with the managed ledger).

* :class:`CompactedDispatcher` -- the single-active-consumer dispatcher of a
  subscription whose consumer asked for ``read_compacted`` (Exclusive and
  Failover only, as Pulsar): it reads through a CompactedTopicReader -- the
  compacted ledger up to the horizon, then the live topic -- instead of the
  cursor (it overrides only the round's read hook; rate limits, counting and
  sending are the common round of ``dispatcher_base``).  Acks still go to the cursor.  A rewind (active-consumer change,
  redeliver-all) restarts the view at the first unacknowledged position, or at
  the very beginning of the compacted ledger when nothing was acknowledged yet
  and the consumer started from the earliest message.  With transactions the live
  entries go through the topic's transaction buffer as a plain subscription's do (not
  past an open transaction; aborted entries and markers never delivered), and the
  compactor (``txn_view_of``) never compacts past the max-read position nor keeps an
  aborted message.

* :func:`enable_read_compacted` -- called by SUBSCRIBE when the command has
  ``read_compacted``; it installs the dispatcher factory on the subscription.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.compaction import (
    COMPACTION_SUBSCRIPTION,
    CompactedTopicReader,
    CompactionAlreadyRunning,
    CompactionService,
    Compactor,
    CompactorConfig,
    compaction_backlog_bytes,
)
from magnetar.broker.compaction.framing import decode_compacted_entry
from magnetar.broker.service.dispatcher_single import SingleActiveConsumerDispatcher
from magnetar.broker.service.names import parse_topic
from magnetar.managed_ledger.api import Entry, InitialPosition, Position
from magnetar.protocol import enums
from magnetar.protocol.enums import SubType
from magnetar.protocol.payload import is_batch, num_messages, peek_metadata

if TYPE_CHECKING:
    from magnetar.broker.service.broker_service import BrokerService
    from magnetar.broker.service.subscription import Subscription
    from magnetar.broker.service.topic import PersistentTopic

log = logging.getLogger(__name__)

MONITOR_INTERVAL_DEFAULT_S = 60
STATS_TOPICS_MAX = 10_000
EMPTY_COMPACTION_STATS = {
    "lastCompactionRemovedEventCount": 0,
    "lastCompactionSucceedTimestamp": 0,
    "lastCompactionFailedTimestamp": 0,
    "lastCompactionDurationTimeInMills": 0,
}


def _int_prop(props: dict, key: str, default: int) -> int:
    try:
        return int(str(props.get(key, default)).strip())
    except ValueError:
        log.warning("ignoring non-integer %s=%r", key, props.get(key))
        return default


class BrokerCompaction:
    def __init__(self, svc: BrokerService) -> None:
        self._svc = svc
        props = svc.config.as_properties()
        ml_cfg = svc.config.managed_ledger_config()
        self.bookkeeper = svc.ml_factory.ctx.bookkeeper
        self.password = ml_cfg.password
        self.compactor = Compactor(
            self.bookkeeper,
            svc.clock,
            CompactorConfig(
                ensemble_size=ml_cfg.ensemble_size,
                write_quorum=ml_cfg.write_quorum,
                ack_quorum=ml_cfg.ack_quorum,
                password=ml_cfg.password,
                retain_null_key=str(props.get("topicCompactionRetainNullKey", "false")).lower() == "true",
            ),
            txn_view_of=self._txn_view_of,
        )
        self.service = CompactionService(self.compactor, self._open_ledger, svc.supervisor)
        self.monitor_interval_s = max(
            1, _int_prop(props, "brokerServiceCompactionMonitorIntervalInSeconds", MONITOR_INTERVAL_DEFAULT_S)
        )
        self.default_threshold_bytes = _int_prop(props, "brokerServiceCompactionThresholdInBytes", 0)
        self._started = False
        self._stats: OrderedDict[str, dict] = OrderedDict()

    async def _open_ledger(self, topic: str) -> Any:
        return (await self._svc.topics.get_topic(parse_topic(topic), create=False)).ml

    def _txn_view_of(self, ml: Any) -> Any:
        """The transaction buffer of the loaded topic writing ``ml`` (None: no transactions)."""
        for t in self._svc.topics.loaded():
            if getattr(t, "ml", None) is ml:  # a non-persistent topic has none
                return t.txn_buffer
        return None

    # ------------------------------------------------------------ REST operations
    async def trigger(self, topic: str) -> None:
        """PUT .../compaction: the topic must exist; 409 while a run is in progress.

        A partitioned topic's name compacts every partition (as Pulsar); 409 if any of them
        is already running, and then none is started."""
        ref = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        if not ref.persistent:
            raise errors.NotAllowedError("Compaction is not supported on non-persistent topics")
        parts = await self._partitions(ref)
        if parts:
            running = [p for p in parts if self.service.status(p)["status"] == "RUNNING"]
            if running:
                raise CompactionAlreadyRunning(running[0])
            for p in parts:
                await self._svc.topics.get_topic(parse_topic(p), create=True)
                self._watch(p, self.service.trigger(p))
            return
        await self._svc.topics.get_topic(ref, create=False)  # 404 when absent
        self._watch(ref.full_name, self.service.trigger(ref.full_name))

    # ------------------------------------------------------------ stats
    def _watch(self, topic: str, task: asyncio.Task[Any]) -> None:
        started_ms = self._svc.clock.time_ms()

        def done(t: asyncio.Task[Any]) -> None:
            now_ms = self._svc.clock.time_ms()
            st = self._stats.pop(topic, None) or dict(EMPTY_COMPACTION_STATS)
            if t.cancelled() or t.exception() is not None:
                st["lastCompactionFailedTimestamp"] = now_ms
            else:
                result = t.result()
                st["lastCompactionSucceedTimestamp"] = now_ms
                st["lastCompactionRemovedEventCount"] = max(0, result.messages_read - result.messages_kept)
            st["lastCompactionDurationTimeInMills"] = now_ms - started_ms
            self._stats[topic] = st
            while len(self._stats) > STATS_TOPICS_MAX:
                self._stats.popitem(last=False)

        task.add_done_callback(done)

    def stats_of(self, topic: str) -> dict:
        """The ``compaction`` section of topic stats (Pulsar's CompactionStats fields)."""
        return dict(self._stats.get(topic) or EMPTY_COMPACTION_STATS)

    async def status(self, topic: str) -> dict:
        """GET .../compaction; for a partitioned topic the partitions' statuses folded into one
        (ERROR if any failed, RUNNING if any runs, SUCCESS if all succeeded, else NOT_RUN)."""
        ref = parse_topic(topic)
        await self._svc.require_namespace(ref.namespace)
        parts = await self._partitions(ref)
        if parts:
            states = [self.service.status(p) for p in parts]
            for want in ("ERROR", "RUNNING"):
                hit = next((s for s in states if s["status"] == want), None)
                if hit is not None:
                    return hit
            if all(s["status"] == "SUCCESS" for s in states):
                return {"status": "SUCCESS", "lastError": ""}
            return {"status": "NOT_RUN", "lastError": ""}
        if not await self._svc.topics.exists(ref):
            raise errors.TopicNotFoundError("Topic not found")
        return self.service.status(ref.full_name)

    async def _partitions(self, ref: Any) -> list[str]:
        if ref.is_partition:
            return []
        n = await self._svc.resources.partitioned_topics.partitions(
            ref.tenant, ref.namespace_portion, ref.domain, ref.local_name
        )
        return [ref.partition(i).full_name for i in range(n or 0)]

    # ------------------------------------------------------------ topic deletion
    async def delete_state(self, topic: str, force: bool) -> None:
        """Delete the compacted ledger of a topic about to be deleted (no-op if it will be refused)."""
        ref = parse_topic(topic)
        try:
            t = await self._svc.topics.get_topic(ref, create=False)
        except errors.BrokerError:
            return  # absent or not loadable: the deletion itself answers
        if t.has_clients and not force:
            return  # the deletion will be refused: keep everything
        await self.compactor.delete_compaction_state(t.ml)

    # ------------------------------------------------------------ automatic compaction
    def start(self) -> None:
        if not self._started:
            self._started = True
            self._svc.supervisor.spawn(self._monitor(), name="compaction-monitor")

    async def _monitor(self) -> None:
        while True:
            await self._svc.clock.sleep(self.monitor_interval_s)
            try:
                await self.check_thresholds()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("compaction threshold check failed")

    async def threshold_of(self, topic: PersistentTopic) -> int:
        from magnetar.broker.resources.base import JsonStore  # noqa: PLC0415
        from magnetar.broker.service.policies import topic_policies_path  # noqa: PLC0415

        docs = getattr(self._svc, "policy_documents", None)  # cached and watched: no store read
        ns: dict | None = None
        try:
            if docs is not None:
                doc, ns = await docs.raw(topic.ref)
                doc = doc or {}
            else:
                doc = await JsonStore(self._svc.metadata_store).get(topic_policies_path(topic.ref)) or {}
        except ValueError:  # a document that is not JSON: the namespace decides
            log.debug("reading topic policies of %s failed", topic.name, exc_info=True)
            doc, ns = {}, None
        # A metadata error (lost session, timeout) is no "no override": it fails this pass.
        if doc.get("compactionThreshold") is not None:
            return int(doc["compactionThreshold"])
        if ns is None:
            ns = await self._svc.resources.namespaces.get(topic.ref.namespace) or {}
        if ns.get("compaction_threshold") is not None:
            return int(ns["compaction_threshold"])
        return self.default_threshold_bytes

    async def check_thresholds(self) -> list[str]:
        """One pass of the automatic-compaction check; the topics triggered."""
        triggered = []
        for topic in self._svc.topics.loaded():
            if not topic.active or topic.ref.is_system or not topic.ref.persistent:
                continue
            threshold = await self.threshold_of(topic)
            if threshold > 0 and COMPACTION_SUBSCRIPTION not in topic.ml.cursors:
                # Hold the topic's data for its first compaction: with retention 0 and no
                # subscription, rolled-over ledgers would be trimmed before anyone compacts them.
                await topic.ml.open_cursor(COMPACTION_SUBSCRIPTION, InitialPosition.EARLIEST)
            if threshold > 0 and self.service.maybe_auto_compact(
                topic.name, compaction_backlog_bytes(topic.ml), threshold
            ):
                state_task = self.service._topics[topic.name].task  # noqa: SLF001 - the run just started
                if state_task is not None:
                    self._watch(topic.name, state_task)
                log.info("compacting %s: backlog over compactionThreshold %d", topic.name, threshold)
                triggered.append(topic.name)
        return triggered

    async def aclose(self) -> None:
        await self.service.aclose()


# ---------------------------------------------------------------- read_compacted dispatch


class CompactedDispatcher(SingleActiveConsumerDispatcher):
    def __init__(
        self, subscription: Subscription, sub_type: int, reader: CompactedTopicReader, *, from_earliest: bool
    ) -> None:
        super().__init__(subscription, sub_type)
        self.reader = reader
        self._from_earliest = from_earliest

    def rewind(self, counted: list[Position]) -> None:
        super().rewind(counted)
        self.reader.rewind()
        if self._from_earliest and self._nothing_acked():
            self.reader.next_position = Position.EARLIEST

    def _nothing_acked(self) -> bool:
        ledgers = self.subscription.topic.ml.ledgers()
        if not ledgers:
            return True
        return self.subscription.cursor.mark_delete_position < Position(ledgers[0].ledger_id, 0)

    def requeue(self, positions: list[Position]) -> None:
        # Read but not delivered: the view is re-read from the first unacknowledged position.
        if positions:
            self.rewind([])

    async def read_entries(self, budget: int, epoch: int) -> list[Entry] | None:
        """The round's read hook: the compacted view instead of the cursor (single-active
        redelivery is a rewind of the view, so there is nothing to replay)."""
        self._redeliver.clear()
        entries = await self.reader.read_entries(min(budget, self._max_read_entries), self._max_read_bytes)
        txn = getattr(self.subscription.topic, "txn_buffer", None)
        if txn is not None and entries:  # as read_new: stop at an open transaction, drop aborted
            entries, blocked = await txn.filter_entries(self.subscription, entries)
            if blocked:  # filter_entries moved the cursor back to the open transaction's entry
                self.reader.next_position = self.subscription.cursor.read_position
        return entries or None

    async def last_message_id(self, last: Position, batch_index: int) -> tuple[Position, int]:
        """GET_LAST_MESSAGE_ID for this view: when the topic's last entry is at or before the
        horizon, the last entry *of the compacted ledger* (as Pulsar answers read_compacted
        consumers).  The topic's own last batch may have lost messages or vanished in
        compaction, and a client waiting for its original last index would wait forever."""
        # ``last`` is the topic's answer: its last stored entry, or "(L, -1)" when no ledger
        # holds one (Topic.last_message_id already looks past a just-rolled-over ledger).
        horizon = self.reader.horizon
        if horizon is None:
            return last, batch_index
        if last > horizon.position and last.entry_id >= 0:
            return last, batch_index
        # Nothing stored after the horizon: either the topic ends at or before it, or every
        # ledger behind it was trimmed and the current one is empty -- the compacted ledger's
        # last message is the view's last.
        bk = self.reader._bk  # noqa: SLF001 - the reader's own BookKeeper client
        handle = await bk.open_ledger(horizon.ledger_id, password=self.reader._password, recovery=False)  # noqa: SLF001
        try:
            lac = handle.last_add_confirmed
            if lac < 0:
                return Position(-1, -1), -1  # everything was deleted: nothing to read
            (entry,) = await handle.read(lac, lac)
        finally:
            await handle.close()
        position, stored = decode_compacted_entry(entry.data)
        meta = peek_metadata(stored)
        return position, (num_messages(meta) - 1 if is_batch(meta) else -1)

    async def close(self) -> None:
        await super().close()
        try:
            await self.reader.close()
        except Exception:
            log.debug("closing the compacted reader failed", exc_info=True)


def enable_read_compacted(
    svc: BrokerService, sub: Subscription, sub_type: int, start: Position | None, initial_position: int
) -> None:
    """SUBSCRIBE with read_compacted: make the subscription's dispatcher read the compacted view."""
    if sub_type not in (SubType.Exclusive, SubType.Failover):
        raise errors.NotAllowedError("Read compacted is only allowed on Exclusive or Failover subscriptions")
    compaction: BrokerCompaction | None = getattr(svc, "compaction", None)
    if compaction is None:
        return  # a broker without compaction: the plain topic is the compacted view
    if start is not None:
        from_earliest = start.ledger_id < 0 or start.entry_id < 0
    else:
        from_earliest = initial_position == enums.InitialPosition.Earliest

    def factory(subscription: Subscription, st: int) -> CompactedDispatcher:
        topic = subscription.topic
        cursor = subscription.cursor
        view_start = None
        if from_earliest:
            ledgers = topic.ml.ledgers()
            first = Position(ledgers[0].ledger_id, 0) if ledgers else None
            if first is None or cursor.mark_delete_position < first:
                view_start = Position.EARLIEST
        reader = CompactedTopicReader(
            topic.ml, cursor, compaction.bookkeeper, start=view_start, password=compaction.password
        )
        return CompactedDispatcher(subscription, st, reader, from_earliest=from_earliest)

    sub.read_compacted_factory = factory
    old = sub.dispatcher
    if old is not None and not old.consumers and not isinstance(old, CompactedDispatcher):
        sub.dispatcher = None  # the next consumer gets a compacted dispatcher
        sub.topic.supervisor.spawn(old.close(), name="close-plain-dispatcher")
