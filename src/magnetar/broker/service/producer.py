"""A producer attached to a topic, and its in-order publish pipeline.

Theory of operation: every SEND becomes one managed-ledger add (a batch is one
entry).  Adds are pipelined -- many in flight at once -- but the client
insists on receipts in send order (it matches each receipt against the
front of its pending queue and drops the connection on a receipt from the
future).  So each producer keeps a FIFO of in-flight publishes; when an add
completes we send receipts from the front of the FIFO for as long as the
front is done.  A failed add fails that publish with SEND_ERROR only if it is
ChecksumError (the one soft error cpp tolerates); anything else closes the
producer (CLOSE_PRODUCER) so the client reconnects and re-sends everything
not yet acknowledged -- which is exactly what Java does on a persistence
error.

State machine (one place, ``_set_state``)::

    ACTIVE --close()/topic closing--> CLOSING --pipeline drained--> CLOSED
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from magnetar.broker.service.rates import Rate
from magnetar.managed_ledger.api import EntryMetadata, Position
from magnetar.runtime import wait_for

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection
    from magnetar.broker.service.topic import PersistentTopic


class ProducerState(enum.Enum):
    ACTIVE = "active"
    CLOSING = "closing"
    CLOSED = "closed"


_TRANSITIONS = {
    ProducerState.ACTIVE: {ProducerState.CLOSING, ProducerState.CLOSED},
    ProducerState.CLOSING: {ProducerState.CLOSED},
    ProducerState.CLOSED: set(),
}


class PendingPublish:
    """One SEND in the producer's FIFO; ``stored`` (the topic's callback) fills in its
    outcome, then receipts leave from the front of the FIFO for as long as it is done."""

    __slots__ = ("producer", "sequence_id", "highest_sequence_id", "num_messages", "size_bytes")
    __slots__ += ("done", "position", "error")

    def __init__(
        self,
        producer: Producer,
        sequence_id: int,
        highest_sequence_id: int | None,
        num_messages: int,
        size_bytes: int,
    ) -> None:
        self.producer = producer
        self.sequence_id = sequence_id
        self.highest_sequence_id = highest_sequence_id
        self.num_messages = num_messages
        self.size_bytes = size_bytes
        self.done = False
        self.position: Position | None = None
        self.error: BaseException | None = None

    def stored(self, pos: Position | None, exc: BaseException | None) -> None:
        self.done = True
        self.position = pos
        self.error = exc
        self.producer._flush_receipts()


@dataclass
class ProducerStats:
    msg_in_counter: int = 0
    bytes_in_counter: int = 0
    connected_since_ms: int = 0
    extra: dict = field(default_factory=dict)


class Producer:
    def __init__(
        self,
        topic: PersistentTopic,
        cnx: Connection,
        producer_id: int,
        producer_name: str,
        user_provided_name: bool,
        access_mode: int,
        metadata: dict[str, str],
        epoch: int,
        connected_since_ms: int,
    ) -> None:
        self.topic = topic
        self.cnx = cnx
        self.producer_id = producer_id
        self.producer_name = producer_name
        self.user_provided_name = user_provided_name
        self.access_mode = access_mode
        self.metadata = metadata
        self.epoch = epoch
        self.state = ProducerState.ACTIVE
        self.stats = ProducerStats(connected_since_ms=connected_since_ms)
        self._pending: deque[PendingPublish] = deque()
        self._drained = asyncio.Event()
        self._drained.set()
        self._broken = False
        self.rate = Rate()
        self.encrypted = False  # the client said it encrypts (CommandProducer.encrypted)
        # Exclusive modes: the topic epoch the client holds (None: a new producer); set to the
        # topic's epoch once admitted, and sent back in PRODUCER_SUCCESS.
        self.topic_epoch: int | None = None

    # ------------------------------------------------------------ state
    def _set_state(self, new: ProducerState) -> None:
        if new is self.state:
            return
        if new not in _TRANSITIONS[self.state]:
            raise AssertionError(f"producer {self.producer_name}: {self.state} -> {new} not allowed")
        self.state = new

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------ publish
    def publish(
        self,
        sequence_id: int,
        highest_sequence_id: int | None,
        num_messages: int,
        is_batch: bool,
        data: bytes,
        txnid: Any = None,
        metadata: EntryMetadata | None = None,
    ) -> None:
        """Start storing one entry; the receipt goes out in order when it (and all before it) completes.

        ``txnid``: the (most, least) transaction id of a transactional SEND (transaction.buffer);
        ``metadata``: the entry's facts from the SEND, kept beside it for dispatch."""
        pending = PendingPublish(self, sequence_id, highest_sequence_id, num_messages, len(data))
        self._pending.append(pending)
        self._drained.clear()
        self.topic.add_entry(self, data, num_messages, is_batch, txnid, metadata, pending.stored)

    def reject(self, sequence_id: int, highest_sequence_id: int | None, error: BaseException) -> None:
        """Fail one send, in order with the sends before it (a policy refused it)."""
        pending = PendingPublish(self, sequence_id, highest_sequence_id, 0, 0)
        pending.done, pending.error = True, error
        self._pending.append(pending)
        self._drained.clear()
        self._flush_receipts()

    def _flush_receipts(self) -> None:
        stored = False
        pending = self._pending
        while pending and pending[0].done:
            p = pending.popleft()
            err = p.error
            if self._broken:
                # After a failed publish the client re-sends everything from it on; a receipt
                # for a later one would be out of its order (cpp drops the connection).
                self.cnx.publish_abandoned()
                continue
            if err is None:
                stats = self.stats
                stats.msg_in_counter += p.num_messages
                stats.bytes_in_counter += p.size_bytes
                self.cnx.send_receipt(self, p.sequence_id, p.highest_sequence_id, p.position)
                stored = True
            else:
                self._broken = not _is_checksum_error(err)
                self.cnx.publish_failed(self, p.sequence_id, err)
        if not pending:
            self._drained.set()
        if stored:
            self.topic.notify_dispatchers()

    async def wait_drained(self, timeout_s: float) -> None:
        try:
            await wait_for(self.topic.clock, self._drained.wait(), timeout_s)
        except TimeoutError:
            pass

    # ------------------------------------------------------------ close
    def mark_closing(self) -> None:
        if self.state is ProducerState.ACTIVE:
            self._set_state(ProducerState.CLOSING)

    def mark_closed(self) -> None:
        if self.state is not ProducerState.CLOSED:
            self._set_state(ProducerState.CLOSED)

    def to_stats(self) -> dict:
        return {
            "accessMode": _ACCESS_MODES.get(self.access_mode, "Shared"),
            "msgRateIn": self.rate.msg_rate,
            "msgThroughputIn": self.rate.byte_rate,
            "averageMsgSize": (
                self.stats.bytes_in_counter / self.stats.msg_in_counter if self.stats.msg_in_counter else 0.0
            ),
            "chunkedMessageRate": 0.0,
            "producerId": self.producer_id,
            "supportsPartialProducer": False,
            "producerName": self.producer_name,
            "address": self.cnx.peer_address,
            "connectedSince": _iso(self.stats.connected_since_ms),
            "clientVersion": self.cnx.client_version,
            "metadata": dict(self.metadata),
            "msgInCounter": self.stats.msg_in_counter,
            "bytesInCounter": self.stats.bytes_in_counter,
        }


def _is_checksum_error(err: BaseException) -> bool:
    from magnetar.broker.errors import ChecksumError

    return isinstance(err, ChecksumError)


_ACCESS_MODES = {0: "Shared", 1: "Exclusive", 2: "WaitForExclusive", 3: "ExclusiveWithFencing"}


def _iso(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).isoformat().replace("+00:00", "Z")
