"""A consumer: permits, messages in flight, acknowledgements it still owes.

Theory of operation: the client grants permits with FLOW (its receiver queue
size, then half of it at a time as the application drains).  The dispatcher
hands a consumer entries only while it has permits; each entry costs the
number of messages in it (``num_messages_in_batch`` for a batch), so permits
may go negative, as in Java.  Every entry sent is remembered in
``pending_acks`` (position -> message count) until acknowledged; that map is
what gets redelivered when the consumer closes or asks for redelivery, and it
bounds dispatch: a consumer whose unacked messages reach
``maxUnackedMessagesPerConsumer`` is *blocked* until it is back under half.

The wire side (MESSAGE frames) goes through the connection, so a consumer
never touches a socket.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from magnetar.broker.service.rates import Rate
from magnetar.managed_ledger.api import Entry, Position
from magnetar.protocol.enums import SubType

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection
    from magnetar.broker.service.subscription import Subscription


MAX_TRACKED_IN_FLIGHT_SINGLE = 100_000


@dataclass(slots=True)
class OutboundEntry:
    """An entry ready to dispatch: its message count, redelivery count and pending batch bits."""

    entry: Entry
    num_messages: int
    redelivery_count: int = 0
    ack_set: list[int] | None = None


class Consumer:
    def __init__(
        self,
        subscription: Subscription,
        cnx: Connection,
        consumer_id: int,
        consumer_name: str,
        priority_level: int,
        sub_type: int,
        partition_index: int,
        max_unacked_messages: int,
        metadata: dict[str, str],
        connected_since_ms: int,
    ) -> None:
        self.subscription = subscription
        self.cnx = cnx
        self.consumer_id = consumer_id
        self.consumer_name = consumer_name
        self.priority_level = priority_level
        self.sub_type = sub_type
        self.partition_index = partition_index
        self.max_unacked_messages = max_unacked_messages
        self.metadata = metadata
        self.connected_since_ms = connected_since_ms
        self.permits = 0
        # Key_Shared: the client's KeySharedMeta (mode, sticky ranges, out-of-order) from SUBSCRIBE,
        # and the sticky hash ranges the dispatcher accepted from it.
        self.key_shared_meta: Any = None
        self.key_shared_ranges: list[tuple[int, int]] | None = None
        # Shared consumers must remember every message in flight (that is how they are
        # redelivered); single-active ones only need a bounded window for redelivery counts.
        self.max_tracked = (
            MAX_TRACKED_IN_FLIGHT_SINGLE if sub_type in (SubType.Exclusive, SubType.Failover) else 1 << 62
        )
        self.pending_acks: dict[Position, int] = {}
        self.unacked_messages = 0
        self.blocked = False
        self.closed = False
        self.msg_out_counter = 0
        self.bytes_out_counter = 0
        self.redelivered_counter = 0
        self.rate_out = Rate()
        self.rate_redeliver = Rate()
        self.last_acked_ms = 0
        self.last_consumed_ms = 0
        self.last_flow_ms = 0

    # ------------------------------------------------------------ flow control
    def add_permits(self, n: int, now_ms: int) -> None:
        self.permits += n
        self.last_flow_ms = now_ms

    @property
    def available(self) -> bool:
        return not self.closed and self.permits > 0 and not self.blocked and self.cnx.writable

    # ------------------------------------------------------------ dispatch
    def send(self, batch: list[OutboundEntry], now_ms: int) -> None:
        """Write MESSAGE frames for ``batch`` and account for them (permits, pending acks)."""
        partition = self.subscription.topic.partition_index
        for out in batch:
            pos = out.entry.position
            self.cnx.send_message(
                self.consumer_id, pos, partition, out.entry.data, out.redelivery_count, out.ack_set
            )
            self.permits -= out.num_messages
            if pos not in self.pending_acks:
                self.unacked_messages += out.num_messages
            self.pending_acks[pos] = out.num_messages
            if len(self.pending_acks) > self.max_tracked:
                # Single-active subscriptions redeliver by rewinding the cursor, so forgetting
                # the oldest in-flight position only loses its redelivery count, not the message.
                old = next(iter(self.pending_acks))
                self.unacked_messages -= self.pending_acks.pop(old)
            self.msg_out_counter += out.num_messages
            self.bytes_out_counter += len(out.entry.data)
            if out.redelivery_count:
                self.redelivered_counter += out.num_messages
        if batch:
            self.last_consumed_ms = now_ms
        self._update_blocked()

    # ------------------------------------------------------------ acknowledgements
    def acked(self, positions: Iterable[Position], now_ms: int) -> None:
        for pos in positions:
            n = self.pending_acks.pop(pos, None)
            if n is not None:
                self.unacked_messages -= n
        self.last_acked_ms = now_ms
        self._update_blocked()

    def acked_up_to(self, position: Position, now_ms: int) -> list[Position]:
        """Cumulative ack: forget everything at or before ``position``; returns what was dropped."""
        done = [p for p in self.pending_acks if p <= position]
        self.acked(done, now_ms)
        return done

    def take_pending(self, positions: Iterable[Position] | None = None) -> list[Position]:
        """Remove (some or all) in-flight positions, for redelivery."""
        if positions is None:
            taken = list(self.pending_acks)
        else:
            taken = [p for p in positions if p in self.pending_acks]
        for p in taken:
            self.unacked_messages -= self.pending_acks.pop(p)
        self._update_blocked()
        return taken

    def _update_blocked(self) -> None:
        limit = self.max_unacked_messages
        if limit <= 0:
            self.blocked = False
        elif not self.blocked and self.unacked_messages >= limit:
            self.blocked = True
        elif self.blocked and self.unacked_messages < limit // 2:
            self.blocked = False

    # ------------------------------------------------------------ stats
    def to_stats(self) -> dict:
        from magnetar.broker.service.producer import _iso

        return {
            "msgRateOut": self.rate_out.msg_rate,
            "msgThroughputOut": self.rate_out.byte_rate,
            "bytesOutCounter": self.bytes_out_counter,
            "msgOutCounter": self.msg_out_counter,
            "msgRateRedeliver": self.rate_redeliver.msg_rate,
            "messageAckRate": 0.0,
            "chunkedMessageRate": 0.0,
            "consumerName": self.consumer_name,
            "availablePermits": self.permits,
            "unackedMessages": self.unacked_messages,
            "avgMessagesPerEntry": 1,
            "blockedConsumerOnUnackedMsgs": self.blocked,
            "address": self.cnx.peer_address,
            "connectedSince": _iso(self.connected_since_ms),
            "clientVersion": self.cnx.client_version,
            "lastAckedTimestamp": self.last_acked_ms,
            "lastConsumedTimestamp": self.last_consumed_ms,
            "lastConsumedFlowTimestamp": self.last_flow_ms,
            "metadata": dict(self.metadata),
        }
