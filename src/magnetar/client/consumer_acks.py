"""Acknowledging and redelivering for one partition consumer: grouped acks, nacks, ack timeouts, DLQ.

Theory of operation: :class:`AckingMixin` is the ack half of
``consumer_impl.PartitionConsumer`` (a mixin: it works on the consumer's
``_acks`` grouper, ``_redeliver`` tracker, connection and conf). Acks are
grouped (``acks.AckGrouper``) and flushed as one ACK command by a tick task
every ``ack_group_time_ms`` (at most 100 ms), or at once when the group is
full; a write that fails because the connection just closed is dropped (the
broker redelivers what it did not get). Acks inside a transaction are sent
at once as a request with the transaction id (whole entries, or one index of a
batch with an ``ack_set``).

The same tick sends redeliveries that came due (negative acks after
``negative_ack_redelivery_delay_ms`` or the backoff's delay, ack timeouts
after ``ack_timeout_ms``). Shared and Key_Shared redeliver the listed entries;
Exclusive and Failover redeliver everything un-acked (the broker rewinds) and
the consumer's queued messages are dropped, their permits given back. With a
dead-letter policy a message already delivered ``max_redeliver_count`` times
is published to the dead-letter topic and acked instead of being redelivered.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from magnetar.client.acks import AckGrouper, RedeliveryTracker, ack_set_words
from magnetar.client.errors import PulsarException
from magnetar.client.message import Message
from magnetar.protocol import client_commands
from magnetar.protocol.enums import AckType, CommandType, SubType
from magnetar.protocol.message_id import MessageId

if TYPE_CHECKING:
    from magnetar.client.connection import ClientCnx
    from magnetar.client.consumer_conf import ConsumerConf

T = CommandType


class AckingMixin:
    """Acks and redeliveries (mixed into ``PartitionConsumer``, which owns the state below)."""

    parent: Any
    conf: ConsumerConf
    consumer_id: int
    _cnx: ClientCnx | None
    _ready: bool
    _closed: bool
    _acks: AckGrouper
    _redeliver: RedeliveryTracker

    def _require_cnx(self) -> ClientCnx:  # provided by the consumer
        raise NotImplementedError

    def _give_back(self, n: int) -> None:  # provided by the consumer
        raise NotImplementedError

    def acknowledge_raw(self, raw: tuple[int, int, int, int, int]) -> None:
        """Ack by (ledger, entry, partition, batch_index, batch_size) without a MessageId."""
        if len(self._redeliver):
            self._redeliver.cancel(MessageId(*raw))
        if self._acks.add_raw(raw[0], raw[1], raw[3], raw[4]):
            self.flush_acks()

    def acknowledge(self, msg_id: MessageId, chunk_ids: tuple[MessageId, ...] = ()) -> None:
        if len(self._redeliver):
            self._redeliver.cancel(msg_id)
        full = False
        for cid in chunk_ids or (msg_id,):
            full = self._acks.add_individual(cid) or full
        if full:
            self.flush_acks()

    async def acknowledge_in_txn(
        self, ids: list[MessageId], txnid: tuple[int, int], cumulative: bool
    ) -> None:
        for mid in ids:
            self._redeliver.cancel(mid)
        entries = []
        for m in ids:  # whole entries, or one index of a batch (ack_set: the other indexes)
            if m.batch_index >= 0 and m.batch_size > 1 and not cumulative:
                rest = [i for i in range(m.batch_size) if i != m.batch_index]
                entries.append(
                    MessageId(
                        m.ledger_id,
                        m.entry_id,
                        ack_set=ack_set_words(rest, m.batch_size),
                        batch_size=m.batch_size,
                    )
                )
            else:
                entries.append(MessageId(m.ledger_id, m.entry_id))
        kind = AckType.Cumulative if cumulative else AckType.Individual
        await self._require_cnx().request(
            T.ACK,
            lambda rid: client_commands.ack(
                self.consumer_id,
                kind,
                entries,
                txnid_most_bits=txnid[0],
                txnid_least_bits=txnid[1],
                request_id=rid,
            ),
        )

    def acknowledge_cumulative(self, msg_id: MessageId) -> None:
        self._redeliver.cancel_up_to(msg_id)
        self._acks.add_cumulative(msg_id)

    def flush_acks(self) -> None:
        if not len(self._acks) or not self._ready or self._cnx is None:
            return
        individual, cumulative = self._acks.take()
        try:
            if individual:
                self._cnx.write(client_commands.ack(self.consumer_id, AckType.Individual, individual))
            if cumulative is not None:
                self._cnx.write(client_commands.ack(self.consumer_id, AckType.Cumulative, [cumulative]))
        except PulsarException:
            pass  # the broker redelivers what it did not get

    def negative_acknowledge(self, msg: Message) -> None:
        backoff = self.conf.negative_ack_backoff
        delay_ms = backoff.next_ms(msg.redelivery_count()) if backoff else self.conf.negative_ack_delay_ms
        self._redeliver.schedule(msg.message_id(), time.monotonic() + delay_ms / 1000, msg)

    async def _tick_loop(self) -> None:
        period = max(0.01, min(self.conf.ack_group_time_ms, 100.0) / 1000.0)
        while not self._closed:
            await asyncio.sleep(period)
            self.flush_acks()
            if len(self._redeliver):
                due = self._redeliver.due(time.monotonic())
                if due:
                    await self._redeliver_messages(due)

    async def _redeliver_messages(self, msgs: list[Message]) -> None:
        c = self.conf
        if c.max_redeliver_count > 0:
            keep = []
            for m in msgs:
                if m.redelivery_count() >= c.max_redeliver_count:
                    await self.parent.send_to_dead_letter(self, m)
                    self.acknowledge(m.message_id(), m._chunk_ids)
                else:
                    keep.append(m)
            msgs = keep
            self.flush_acks()
        if not msgs or not self._ready or self._cnx is None:
            return
        if c.sub_type in (SubType.Shared, SubType.Key_Shared):
            ids = list(
                {(m.message_id().ledger_id, m.message_id().entry_id): m.message_id() for m in msgs}.values()
            )
            self._cnx.write(client_commands.redeliver_unacknowledged(self.consumer_id, ids))
        else:
            self.redeliver_all()

    def redeliver_all(self) -> None:
        if not self._ready or self._cnx is None:
            return
        dropped = self.parent.queue.remove_if(lambda m: m._consumer is self)
        self._cnx.write(client_commands.redeliver_unacknowledged(self.consumer_id))
        self._redeliver.clear()
        if dropped:
            self._give_back(dropped)
