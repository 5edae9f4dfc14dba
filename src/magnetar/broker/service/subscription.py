"""A subscription: a cursor on the topic, its consumers and its dispatcher.

Theory of operation: a durable subscription is a named ManagedCursor that
survives restarts; a non-durable one (readers) is an in-memory cursor that
disappears with its last consumer.  The subscription type is fixed by the
first consumer: Exclusive and Failover get the single-active-consumer
dispatcher, Shared the round-robin one.  A consumer asking for another type
while consumers are attached is refused (ConsumerBusy), as is a second
consumer on an Exclusive subscription.

Acknowledgements go to the cursor (individual -> ``delete``, batch-index ->
``ack_batch_indexes``, cumulative -> ``mark_delete``) and take the positions
out of the consumer's in-flight map and the dispatcher's redelivery state.
Java ignores cumulative acks on Shared subscriptions; so do we.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from magnetar.broker import errors
from magnetar.broker.service.consumer import Consumer
from magnetar.broker.service.dispatch_rate import DispatchWindow
from magnetar.broker.service.dispatcher_base import Dispatcher
from magnetar.broker.service.dispatcher_multi import MultiConsumerDispatcher
from magnetar.broker.service.dispatcher_single import SingleActiveConsumerDispatcher
from magnetar.broker.transaction.pending_ack import bits_of
from magnetar.managed_ledger.api import ManagedCursor, ManagedLedgerError, Position
from magnetar.protocol.enums import SubType

if TYPE_CHECKING:
    from magnetar.broker.service.topic import PersistentTopic
    from magnetar.broker.transaction.model import TxnID
    from magnetar.broker.transaction.pending_ack import PendingAckHandle

log = logging.getLogger(__name__)

SUB_TYPE_NAMES = {t.value: t.name for t in SubType}  # Pulsar's names (stats, errors)


class Subscription:
    def __init__(self, topic: PersistentTopic, name: str, cursor: ManagedCursor, durable: bool) -> None:
        self.topic = topic
        self.name = name
        self.cursor = cursor
        self.durable = durable
        self.sub_type: int | None = None
        self.dispatcher: Dispatcher | None = None
        self.dispatch_window = DispatchWindow()  # subscriptionDispatchRate (dispatch_rate)
        self.closed = False
        # Set by compacted_dispatch.enable_read_compacted: builds the read_compacted dispatcher.
        self.read_compacted_factory: Callable[[Subscription, int], Dispatcher] | None = None
        # Acks held by open transactions (transaction.pending_ack), durable subscriptions of
        # topics with a transaction buffer; set by the topic when it creates the subscription.
        self.pending_ack: PendingAckHandle | None = None

    @property
    def consumers(self) -> list[Consumer]:
        return list(self.dispatcher.consumers) if self.dispatcher else []

    # ------------------------------------------------------------ consumers
    def add_consumer(self, consumer: Consumer) -> None:
        if self.closed:
            raise errors.TopicFencedError("Subscription is closed")
        st = consumer.sub_type
        current = self.consumers
        if current:
            if st != self.sub_type:
                raise errors.ConsumerBusyError("Subscription is of different type")
            if st == SubType.Exclusive:
                raise errors.ConsumerBusyError("Exclusive consumer is already connected")
        if self.dispatcher is None or (not current and st != self.sub_type):
            old = self.dispatcher
            self.dispatcher = self._new_dispatcher(st)
            if old is not None:
                # A new type: whatever the old dispatcher still meant to redeliver is re-read.
                self.dispatcher.redelivery_counts.update(old.redelivery_counts)
                self.topic.supervisor.spawn(old.close(), name="close-old-dispatcher")
                self.cursor.rewind()
            self.sub_type = st
        self.dispatcher.add_consumer(consumer)

    def _new_dispatcher(self, sub_type: int) -> Dispatcher:
        if sub_type in (SubType.Exclusive, SubType.Failover):
            if self.read_compacted_factory is not None:
                return self.read_compacted_factory(self, sub_type)
            return SingleActiveConsumerDispatcher(self, sub_type)
        if sub_type == SubType.Shared:
            return MultiConsumerDispatcher(self, sub_type)
        if sub_type == SubType.Key_Shared:
            from magnetar.broker.service.dispatcher_key_shared import KeySharedDispatcher

            return KeySharedDispatcher(self, sub_type)
        raise errors.NotAllowedError(
            f"Subscription type {SUB_TYPE_NAMES.get(sub_type, sub_type)} is not supported"
        )

    def remove_consumer(self, consumer: Consumer) -> None:
        consumer.closed = True
        if self.dispatcher is not None:
            self.dispatcher.remove_consumer(consumer)

    def flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits, self.topic.clock.time_ms())
        if self.dispatcher is not None:
            self.dispatcher.notify()

    # ------------------------------------------------------------ acks
    async def ack_individual(
        self, consumer: Consumer, acks: Sequence[tuple[Position, list[int] | None]]
    ) -> None:
        now = self.topic.clock.time_ms()
        whole: list[Position] = []
        for pos, ack_set in acks:
            if ack_set and any(ack_set):
                await self.cursor.ack_batch_indexes(pos, ack_set)
                if self.cursor.is_acknowledged(pos):
                    whole.append(pos)
            else:
                whole.append(pos)
        if whole:
            await self.cursor.delete(whole)
        self._acked(consumer, whole, now)

    def _acked(self, consumer: Consumer, positions: list[Position], now: int) -> None:
        for c in self.consumers:
            c.acked(positions, now)
        if self.dispatcher is not None:
            self.dispatcher.forget(positions)
            self.dispatcher.notify()

    async def ack_cumulative(self, consumer: Consumer, position: Position, ack_set: list[int] | None) -> None:
        if self.sub_type in (SubType.Shared, SubType.Key_Shared):
            return
        now = self.topic.clock.time_ms()
        if ack_set and any(ack_set):
            # Up to the entry before, plus the acked part of this batch.
            prev = Position(position.ledger_id, position.entry_id - 1)
            if prev.entry_id >= 0 and prev > self.cursor.mark_delete_position:
                await self.cursor.mark_delete(prev)
            await self.cursor.ack_batch_indexes(position, ack_set)
            upto = prev
        else:
            if position > self.cursor.mark_delete_position:
                await self.cursor.mark_delete(position)
            upto = position
        consumer.acked_up_to(upto, now)
        if self.dispatcher is not None:
            self.dispatcher.forget_up_to(upto)
            self.dispatcher.notify()

    async def ack_in_txn(
        self,
        consumer: Consumer,
        txnid: TxnID,
        acks: Sequence[tuple[Position, list[int] | None, int]],
        cumulative: bool,
    ) -> None:
        """An ACK carrying a transaction id: held until the transaction ends (transaction.pending_ack).

        ``acks``: (position, ack_set or None, batch size); an ack_set acknowledges the batch
        indexes whose bits are clear."""
        if self.pending_ack is None:
            raise errors.NotAllowedError(
                "Transactional acks need a durable subscription with transactions enabled"
            )
        if cumulative and self.sub_type in (SubType.Shared, SubType.Key_Shared):
            raise errors.NotAllowedError(
                "Cumulative acks are not allowed on Shared and Key_Shared subscriptions"
            )
        whole: list[Position] = []
        batch: list[tuple[Position, int, int]] = []
        for pos, ack_set, size in acks:
            if not ack_set or not any(ack_set) or cumulative:
                whole.append(pos)
                continue
            size = size or 64 * len(ack_set)
            acked = ((1 << size) - 1) & ~bits_of(ack_set)
            if acked == (1 << size) - 1:
                whole.append(pos)
            elif acked:
                batch.append((pos, acked, size))
        try:
            held = await self.pending_ack.ack(txnid, whole, cumulative, batch)
        except ManagedLedgerError as exc:  # the pending-ack log could not take it
            raise errors.translate(exc) from exc
        if held and not cumulative:
            self._acked(consumer, held, self.topic.clock.time_ms())

    # ------------------------------------------------------------ redelivery
    def redeliver_unacknowledged(self, consumer: Consumer, positions: list[Position] | None) -> None:
        if self.dispatcher is None:
            return
        if isinstance(self.dispatcher, SingleActiveConsumerDispatcher):
            if consumer is self.dispatcher.active:
                self.dispatcher.redeliver_all(consumer)
            return
        taken = consumer.take_pending(positions)
        self.dispatcher.redeliver(taken)

    # ------------------------------------------------------------ seek
    async def reset_to(self, position: Position) -> None:
        """Make ``position`` the next entry delivered (seek); consumers were disconnected first."""
        if self.dispatcher is not None:
            self.dispatcher.reset()
            for c in self.consumers:
                c.take_pending()
        await self.cursor.reset_cursor(position)
        if self.dispatcher is not None:
            self.dispatcher.notify()

    # ------------------------------------------------------------ close
    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.dispatcher is not None:
            await self.dispatcher.close()
        if self.pending_ack is not None:
            try:
                await self.pending_ack.close()
            except Exception:
                log.debug("closing the pending-ack log of %s failed", self.name, exc_info=True)
        try:
            await self.cursor.close()
        except Exception:
            log.debug("closing cursor %s failed", self.name, exc_info=True)

    # ------------------------------------------------------------ stats
    def backlog(self) -> int:
        try:
            return self.cursor.number_of_entries_in_backlog()
        except Exception:
            return 0

    def backlog_size(self) -> int:
        try:
            return self.cursor.backlog_size_bytes()
        except Exception:
            return 0

    def to_stats(self) -> dict:
        consumers = self.consumers
        expired = self.topic.expired.get(self.name)
        active = getattr(self.dispatcher, "active", None)
        out = {
            "msgRateOut": sum(c.rate_out.msg_rate for c in consumers),
            "msgThroughputOut": sum(c.rate_out.byte_rate for c in consumers),
            "bytesOutCounter": sum(c.bytes_out_counter for c in consumers),
            "msgOutCounter": sum(c.msg_out_counter for c in consumers),
            "msgRateRedeliver": sum(c.rate_redeliver.msg_rate for c in consumers),
            "messageAckRate": 0.0,
            "chunkedMessageRate": 0,
            "msgBacklog": self.backlog(),
            "backlogSize": self.backlog_size(),
            "earliestMsgPublishTimeInBacklog": 0,
            "msgBacklogNoDelayed": self.backlog(),
            "blockedSubscriptionOnUnackedMsgs": False,
            "msgDelayed": 0,
            "unackedMessages": sum(c.unacked_messages for c in consumers),
            "type": SUB_TYPE_NAMES.get(self.sub_type if self.sub_type is not None else 0, "Exclusive"),
            "msgRateExpired": expired.rate.msg_rate if expired is not None else 0.0,
            "totalMsgExpired": expired.total if expired is not None else 0,
            "lastExpireTimestamp": expired.last_ms if expired is not None else 0,
            "lastConsumedFlowTimestamp": max((c.last_flow_ms for c in consumers), default=0),
            "lastConsumedTimestamp": max((c.last_consumed_ms for c in consumers), default=0),
            "lastAckedTimestamp": max((c.last_acked_ms for c in consumers), default=0),
            "lastMarkDeleteAdvancedTimestamp": 0,
            "consumers": [c.to_stats() for c in consumers],
            "isDurable": self.durable,
            "isReplicated": self.cursor.properties.get("pulsar.replicated.subscription") == 1,
            "durable": self.durable,
            "replicated": self.cursor.properties.get("pulsar.replicated.subscription") == 1,
            "allowOutOfOrderDelivery": False,
            "consumersAfterMarkDeletePosition": {},
            "nonContiguousDeletedMessagesRanges": _ranges(self.cursor),
            "nonContiguousDeletedMessagesRangesSerializedSize": 0,
            "delayedMessageIndexSizeInBytes": 0,
            "subscriptionProperties": {},
            "filterProcessedMsgCount": 0,
            "filterAcceptedMsgCount": 0,
            "filterRejectedMsgCount": 0,
            "filterRescheduledMsgCount": 0,
        }
        if active is not None:
            out["activeConsumerName"] = active.consumer_name
        key_shared_stats = getattr(self.dispatcher, "key_shared_stats", None)
        if key_shared_stats is not None:
            out.update(key_shared_stats())
        delayed = getattr(self.dispatcher, "delayed", None)
        if delayed is not None:
            out.update(delayed.stats())
            out["msgBacklogNoDelayed"] = max(0, out["msgBacklog"] - delayed.size)
        return out


def _ranges(cursor: ManagedCursor) -> int:
    try:
        return len(cursor.individually_deleted_ranges())
    except Exception:
        return 0
