"""A persistent topic: producers and subscriptions over one managed ledger.

Theory of operation: the publish path is ``Producer.publish`` ->
:meth:`PersistentTopic.add_entry` -> ``ManagedLedger.add_entry`` with the
client's headers-and-payload bytes exactly as received (magic, CRC, metadata,
payload) and the entry's facts read at the SEND -> position -> receipt.  Adds
are started in arrival order, handed to the managed ledger synchronously, and
the managed ledger completes pipelined adds in call order.  A plain SEND (no
transaction, no deduplication, not a remote cluster's replicator) goes down as
callbacks (``ManagedLedger.add_entry_cb`` -> ``topic_publish.TopicAdd`` -> the producer's
pipeline: no future and no loop hop per layer); the other kinds keep their
futures.  Either way the topic owns the add (``_adds``): close() cancels any
still running and its producer hears of it.  Every completed add wakes every
subscription's dispatcher.

What every topic shares -- producers, the state machine, policies and the
admission state, closing the clients -- is :class:`BaseTopic`
(``topic_base``); this class adds the ledger: adds, cursors, deduplication,
transactions, replication, and the storage facts shared code asks of a topic
(``terminated``, ``stored_cursors``, ``number_of_entries``, ``storage_size``).

A retriable storage failure (the managed ledger rolls to a new ledger) is
retried once.  Known limit: adds issued after the failed one may already be
stored on the new ledger, so the retried entry lands after them (no
duplicate, but out of the producer's order) -- the managed ledger re-issuing
failed adds ahead of later ones, as Java's does, would close that gap.

Subscriptions are created on first subscribe (durable: a named cursor;
readers: a non-durable cursor starting one entry *before* the requested id so
the entry at the id is delivered, as Java does).

Closing stops the replicators, lets the clients go (``_close_clients``),
then closes cursors and the ledger; adds still running are cancelled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from magnetar.broker import errors
from magnetar.broker.config import BrokerConfig
from magnetar.broker.service.names import TopicRef
from magnetar.broker.service.producer import Producer
from magnetar.broker.service.subscription import Subscription
from magnetar.broker.service.topic_base import BaseTopic, TopicState
from magnetar.broker.service.topic_publish import TopicAdd, chain, fail_soon, outcome
from magnetar.managed_ledger.add_completion import AddCallbackFn
from magnetar.managed_ledger.api import (
    EntryMetadata,
    InitialPosition,
    ManagedLedger,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    Position,
)
from magnetar.managed_ledger.state import CursorState
from magnetar.protocol.enums import InitialPosition as WireInitialPosition
from magnetar.protocol.payload import is_batch as meta_is_batch
from magnetar.protocol.payload import num_messages, peek_metadata
from magnetar.runtime import Clock, TaskSupervisor

if TYPE_CHECKING:
    from magnetar.broker.replication.service import InboundReplication
    from magnetar.broker.replication.subscriptions import ReplicatedSubscriptions
    from magnetar.broker.service.consumer import Consumer
    from magnetar.broker.transaction.model import TxnID

log = logging.getLogger(__name__)

ADD_ATTEMPTS = 2
_NO_ADDS: frozenset[asyncio.Future[Position]] = frozenset()  # shared (frozenset() is a new set)
ADD_RETRY_DELAY_S = 0.05
INT64_MAX = (1 << 63) - 1


class PersistentTopic(BaseTopic):
    # Immutable starting values are class attributes, shared by every topic until one assigns
    # its own: an idle topic's instance dict stays under CPython's 30-key limit for compact
    # (key-shared) dicts instead of a ~1.6 KB table (benchmarks/topic_memory_bench.py).
    # Set by the registry: called when the ledger turns out fenced/closed under us.
    on_fenced: Callable[[PersistentTopic], None] | None = None
    _last_entry: tuple[Position, int, bool] | None = None
    applied_ml_config: ManagedLedgerConfig | None = None  # the last config the policies set
    # Geo-replication (broker.replication starts the replicators, in BaseTopic.replicators).
    replicated_subscriptions: ReplicatedSubscriptions | None = None
    # Set by the registry: sees what remote clusters' replicators store here (their markers).
    inbound_replication: InboundReplication | None = None

    def __init__(
        self,
        ref: TopicRef,
        ml: ManagedLedger,
        config: BrokerConfig,
        clock: Clock,
        supervisor: TaskSupervisor,
    ) -> None:
        super().__init__(ref, config, clock, supervisor)
        self.ml = ml
        self.subscriptions: dict[str, Subscription] = {}
        # adds in flight (one per SEND); a set made by the first add (an empty set is 216 B)
        self._adds: set[asyncio.Future[Position] | TopicAdd] | frozenset[asyncio.Future[Position]] = _NO_ADDS

    # ------------------------------------------------------------ storage facts
    @property
    def terminated(self) -> bool:
        return self.ml.is_terminated

    @property
    def stored_cursors(self) -> Mapping[str, Any]:
        return self.ml.cursors

    @property
    def number_of_entries(self) -> int:
        return self.ml.number_of_entries

    @property
    def storage_size(self) -> int:
        return self.ml.total_size

    def internal_stats(self) -> dict:
        return self.ml.internal_stats()

    # ------------------------------------------------------------ publish
    def add_entry(
        self,
        producer: Producer,
        data: bytes,
        n_messages: int,
        is_batch: bool,
        txnid: TxnID | None = None,
        metadata: EntryMetadata | None = None,
        on_done: AddCallbackFn | None = None,
    ) -> None:
        """Store one SEND's entry; ``on_done(position, None)`` once it is stored (in call
        order), or ``on_done(None, error)``.  ``metadata``: the entry's facts from the SEND,
        kept beside it for dispatch.

        The plain case -- no transaction, no deduplication, not a remote cluster's replicator
        -- goes down as a callback (``ManagedLedger.add_entry_cb``: no future and no loop hop
        per layer); the others keep their futures."""
        assert on_done is not None
        if self.state is not TopicState.ACTIVE:
            fail_soon(on_done, errors.TopicFencedError(f"Topic {self.name} is closing"))
            return
        inbound = self.inbound_replication
        replicated = inbound is not None and producer.producer_name.startswith(inbound.producer_prefix)
        if txnid is None and self.dedup is None and not replicated:
            if getattr(self.ml, "add_entry_cb", None) is not None:
                TopicAdd(self, data, n_messages, is_batch, metadata, on_done).start()
                return
            fut = self._start_add(data, n_messages, is_batch, metadata)
        elif txnid is not None:  # a transactional SEND: stored now, visible on commit (transaction.buffer)
            if self.txn_buffer is None:
                fail_soon(on_done, errors.NotAllowedError("Transactions are not enabled on this broker"))
                return
            fut = self.txn_buffer.append(txnid, lambda: self._start_add(data, n_messages, is_batch, metadata))
        elif self.dedup is not None:
            fut = self.dedup.add(
                producer.producer_name, data, lambda: self._start_add(data, n_messages, is_batch, metadata)
            )
        else:
            fut = self._start_add(data, n_messages, is_batch, metadata)
        if replicated:
            assert inbound is not None
            fut.add_done_callback(lambda f: inbound.entry_stored(self, data, f))  # markers (.replication)
        fut.add_done_callback(lambda f: on_done(*outcome(f)))

    def _track(self, add: asyncio.Future[Position] | TopicAdd) -> None:
        adds = self._adds
        if type(adds) is frozenset:
            adds = self._adds = set()
        adds.add(add)

    def _start_add(
        self, data: bytes, n_messages: int, is_batch: bool, metadata: EntryMetadata | None = None
    ) -> asyncio.Future[Position]:
        """One add, owned by the topic (``_adds``); its result or error goes to the producer
        awaiting it (SEND_RECEIPT / SEND_ERROR); close() cancels any still running.

        It is handed to the managed ledger at once (``add_entry_nowait``: no task per SEND),
        which issues or queues it in call order -- a SEND must never wait in a task of its own
        while a later one overtakes it; only a retry after a retriable failure is a task."""
        nowait = getattr(self.ml, "add_entry_nowait", None)
        added = nowait(data, num_messages=n_messages, metadata=metadata) if nowait is not None else None
        if added is None:
            fut: asyncio.Future[Position] = asyncio.get_running_loop().create_task(
                self._add(data, n_messages, is_batch, metadata=metadata)
            )
        else:
            fut = added.get_loop().create_future()
            added.add_done_callback(
                lambda f: self._nowait_added(f, fut, data, n_messages, is_batch, metadata)
            )
        self._track(fut)
        fut.add_done_callback(self._adds.discard)
        return fut

    def _nowait_added(
        self,
        added: asyncio.Future[Position],
        out: asyncio.Future[Position],
        data: bytes,
        n_messages: int,
        is_batch: bool,
        metadata: EntryMetadata | None,
    ) -> None:
        if out.done():  # cancelled by close()
            return
        if added.cancelled():
            out.cancel()
            return
        exc = added.exception()
        if exc is None:
            out.set_result(self._added(added.result(), data, n_messages, is_batch))
        elif isinstance(exc, ManagedLedgerError) and self._may_retry(exc, 0):
            retry = asyncio.get_running_loop().create_task(
                self._add(data, n_messages, is_batch, first_attempt=1, metadata=metadata)
            )
            retry.add_done_callback(lambda r: chain(r, out))
            out.add_done_callback(lambda o: o.cancelled() and retry.cancel())
        else:
            out.set_exception(exc)

    def _may_retry(self, exc: ManagedLedgerError, attempt: int) -> bool:
        # A retriable storage error means the ledger is being rolled: try the new one once
        # (receipts stay in order: the producer's FIFO waits for this add).
        if isinstance(exc, ManagedLedgerFencedError | ManagedLedgerClosedError) and self.on_fenced:
            self.on_fenced(self)  # another owner took the ledger: unload, reload on next use
        if not exc.retriable or attempt + 1 >= ADD_ATTEMPTS or self.state is not TopicState.ACTIVE:
            return False
        log.info("add on %s failed (%s); retrying on the next ledger", self.name, exc)
        return True

    async def _add(
        self,
        data: bytes,
        n_messages: int,
        is_batch: bool,
        first_attempt: int = 0,
        metadata: EntryMetadata | None = None,
    ) -> Position:
        if first_attempt:
            await self.clock.sleep(ADD_RETRY_DELAY_S)
        for attempt in range(first_attempt, ADD_ATTEMPTS):
            try:
                pos = await self.ml.add_entry(data, num_messages=n_messages, metadata=metadata)
                break
            except ManagedLedgerError as exc:
                if not self._may_retry(exc, attempt):
                    raise
                await self.clock.sleep(ADD_RETRY_DELAY_S)
        return self._added(pos, data, n_messages, is_batch)

    def _added(self, pos: Position, data: bytes, n_messages: int, is_batch: bool) -> Position:
        self.msg_in_counter += n_messages
        self.bytes_in_counter += len(data)
        self.last_publish_ms = self.clock.time_ms()
        self._last_entry = (pos, n_messages, is_batch)
        return pos

    # ------------------------------------------------------------ subscriptions
    async def get_or_create_subscription(
        self, name: str, initial_position: int, durable: bool, start: Position | None
    ) -> Subscription:
        self.check_active()
        sub = self.subscriptions.get(name)
        if sub is not None:
            return sub
        if durable:
            init = (
                InitialPosition.EARLIEST
                if initial_position == WireInitialPosition.Earliest
                else InitialPosition.LATEST
            )
            cursor = await self.ml.open_cursor(name, init)
        else:
            cursor = await self.ml.new_non_durable_cursor(self._reader_start(start, initial_position), name)
        pending_ack = None
        if durable and self.txn_buffer is not None:
            pending_ack = await self.txn_buffer.load_pending_ack(name, cursor)
        sub = self.subscriptions.get(name)
        if sub is not None:  # created concurrently while we awaited (its pending-ack log is the same
            return sub  # managed ledger, shared through the factory: the winner owns it)
        self.check_active()
        sub = Subscription(self, name, cursor, durable)
        sub.pending_ack = pending_ack
        self.subscriptions[name] = sub
        return sub

    def _reader_start(self, start: Position | None, initial_position: int) -> Position:
        """The non-durable cursor's start: the position *before* the first entry to deliver."""
        if start is None:
            return (
                Position.EARLIEST
                if initial_position == WireInitialPosition.Earliest
                else self.ml.last_confirmed_entry
            )
        if start.ledger_id < 0 or start.entry_id < 0:
            return Position.EARLIEST
        if start.ledger_id >= INT64_MAX:
            return self.ml.last_confirmed_entry
        # Step back one entry so the entry *at* the start id is delivered (the client filters).
        return Position(start.ledger_id, start.entry_id - 1)

    async def remove_consumer(self, consumer: Consumer) -> None:
        sub = consumer.subscription
        sub.remove_consumer(consumer)
        cursor = sub.cursor
        if sub.durable and getattr(cursor, "durable", False) and cursor.state is CursorState.OPEN:
            # Acks are persisted lazily (managedLedgerDefaultMarkDeleteRateLimit): a closing
            # consumer's acks are written now, so a client that closed is not redelivered to.
            try:
                await cursor.flush()
            except ManagedLedgerError:
                log.debug("flushing cursor %s on %s failed", sub.name, self.name, exc_info=True)
        if not sub.durable and not sub.consumers and self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
            await sub.close()
            try:
                await self.ml.delete_cursor(sub.name)
            except ManagedLedgerError:  # a reader's cursor: nothing durable is left behind
                log.debug("deleting reader cursor %s on %s failed", sub.name, self.name, exc_info=True)

    async def unsubscribe(self, sub: Subscription) -> None:
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
        await sub.close()
        if sub.durable:
            await self.ml.delete_cursor(sub.name)
        if sub.pending_ack is not None:
            await sub.pending_ack.delete()

    # ------------------------------------------------------------ last message id
    async def last_message_id(self) -> tuple[Position, int]:
        """(last position, batch index) -- batch index num_messages-1 for a batch entry, else -1."""
        pos = self.ml.last_confirmed_entry
        if self.txn_buffer is not None:  # not past an open transaction, not on a marker
            pos = await self.txn_buffer.last_dispatchable(pos)
        if pos.entry_id < 0:
            # Just rolled over to an empty ledger: the last stored entry is in an earlier one
            # (clients read "(L, -1)" as "nothing there": has_message_available would be False).
            pos = next(
                (
                    Position(i.ledger_id, i.entries - 1)
                    for i in reversed(self.ml.ledgers())
                    if i.ledger_id < pos.ledger_id and i.entries > 0
                ),
                pos,
            )
            if pos.entry_id < 0:
                return pos, -1
        cached = self._last_entry
        if cached is not None and cached[0] == pos:
            _, n, batch = cached
        else:
            entry = await self.ml.read_entry(pos)
            meta = peek_metadata(entry.data)
            n = num_messages(meta)
            batch = meta_is_batch(meta)
            self._last_entry = (pos, n, batch)
        return pos, (n - 1 if batch else -1)

    # ------------------------------------------------------------ close / delete
    async def close(self, *, delete: bool = False) -> None:
        if self.state is not TopicState.ACTIVE:
            return
        self._set_state(TopicState.CLOSING)
        for replicator in list(self.replicators.values()):  # they read the ledger: stop them first
            await replicator.close()
        self.replicators.clear()
        await self._close_clients()
        for sub in list(self.subscriptions.values()):
            await sub.close()
            if delete and sub.pending_ack is not None:
                try:
                    await sub.pending_ack.delete()
                except ManagedLedgerError:
                    log.warning(
                        "deleting the pending-ack log of %s/%s failed", self.name, sub.name, exc_info=True
                    )
        self.subscriptions.clear()
        if self.dedup is not None and not delete:
            await self.dedup.close()
        if self.txn_buffer is not None:
            try:
                await (self.txn_buffer.delete() if delete else self.txn_buffer.close())
            except Exception:
                log.warning("closing the transaction buffer of %s failed", self.name, exc_info=True)
        try:
            if delete:
                await self.ml.delete()
            else:
                await self.ml.close()
        finally:
            self._set_state(TopicState.DELETED if delete else TopicState.CLOSED)
            for task in list(self._adds):  # the ledger is gone: nothing of the topic keeps running
                task.cancel()

    @property
    def has_clients(self) -> bool:
        replicating = any(r.backlog() > 0 for r in self.replicators.values())
        return super().has_clients or replicating
