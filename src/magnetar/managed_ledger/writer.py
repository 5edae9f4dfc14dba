"""The write path of a managed ledger: pipelined adds, rollover, failure handling.

Theory of operation
-------------------
:class:`LedgerWriter` is the half of :class:`~magnetar.managed_ledger.ledger.ManagedLedgerImpl`
that appends (a mixin: the state lives on the managed ledger, see ``ledger.py``).

Adds are pipelined.  While a write handle is open, nothing is queued and the
ledger has room, an add goes straight to ``handle.add_entry`` in the caller's
task: issue order = call order, and BookKeeper completes in issue order.
``add_entry_nowait`` is the same fast path without a coroutine: it hands the
ledger client's future on (through a callback that does the bookkeeping), so
an add costs no task at all; it declines (None) whenever the slow path is due.  When
there is no writable handle (rolling over, creating a ledger) adds wait in a
queue kept in call-sequence order; when the next ledger is ready the queue is
issued in order by one task per add, and until those tasks have all started
new adds take the same path, so nothing overtakes.  At most MAX_INFLIGHT_ADDS
are in flight per managed ledger (below the ledger client's own pending-add
limit, so it never makes an add wait for room, where a later caller could
overtake it); more wait in the queue.  An add waiting for a
ledger gives up after ``add_entry_timeout_ms`` (it was never issued, so it
is not written).

Rollover: a ledger is full once it has been *given* ``max_entries_per_ledger``
entries or ``max_size_per_ledger_bytes`` bytes (counting adds in flight) and
is at least ``min_ledger_rollover_time_ms`` old, or is older than
``max_ledger_rollover_time_ms``.  Then the state becomes ClosingLedger:
in-flight adds drain, the handle is closed, the ledger's final entry count and
size go into the list, a new ledger is created and appended to the list (CAS),
and the queue is issued.

Failure: any BookKeeper error -- LedgerFencedError included -- fails that add
(and, as BookKeeper fails every later add on a broken handle, the ones after
it) with the retriable ManagedLedgerStorageError, and the ledger is rolled:
closed at its LAC (so the failed entries are not part of it) and replaced.  A
caller that retries gets a new position; no entry is in the log twice and
positions only grow.  If creating the next ledger fails the state is
WriteFailed and the next add tries again.  A fenced ledger is a BookKeeper
event, not proof of a new owner: auto-recovery's replication worker fences an
open ledger that lost a bookie to repair it (as in Pulsar).  Ownership is
decided by the ledger list's CAS alone: if another broker did take the
managed ledger, the roll's list write fails and *that* fences us
(ManagedLedgerFencedError).  The list records the writer's confirmed count
(its LAC + 1, as Pulsar's ``ledgerClosed``), checked against the closed
metadata: a recovery may have kept entries past it, but their adds failed to
their callers, who retry them on the next ledger, so counting them would store
them twice.  (An add that failed by timing out may still have reached a
quorum of bookies -- BookKeeper's ambiguous failure, as in Pulsar.  Reads are
bounded by the entry counts in our list, which count confirmed adds only, so
it stays invisible; only the last ledger's count comes from BookKeeper
recovery after a crash, where such an entry can surface, once, at its end.)
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import replace

from magnetar.bookkeeper.api import BKError, LedgerFencedError, WriteHandle
from magnetar.managed_ledger.api import (
    EntryMetadata,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerStorageError,
    ManagedLedgerTerminatedError,
    Position,
)
from magnetar.managed_ledger.context import (
    DRAIN_TIMEOUT_S,
    MAX_INFLIGHT_ADDS,
    MAX_QUEUED_ADDS,
    timed_lock,
)
from magnetar.managed_ledger.state import MLState, is_terminal

log = logging.getLogger(__name__)


class AddOp:
    __slots__ = ("seq", "data", "future", "issued", "num_messages", "metadata")

    def __init__(
        self,
        seq: int,
        data: bytes,
        future: asyncio.Future[Position],
        num_messages: int,
        metadata: EntryMetadata | None = None,
    ) -> None:
        self.seq = seq
        self.data = data
        self.future = future
        self.issued = False
        self.num_messages = num_messages
        self.metadata = metadata


class LedgerWriter:
    # -- adds -----------------------------------------------------------------------------------

    async def add_entry(
        self, data: bytes, *, num_messages: int = 1, metadata: EntryMetadata | None = None
    ) -> Position:
        """Append; pipelined calls complete in call order.  ``num_messages`` (the batch size
        from the entry's metadata, if the caller knows it) feeds the message counters;
        ``metadata`` goes into the entry cache beside the entry (see EntryMetadata)."""
        if metadata is not None:
            num_messages = metadata.num_messages
        handle = self._handle
        if (
            self.state is MLState.LEDGER_OPENED
            and not self._queue
            and not self._unstarted
            and handle is not None
            and self._inflight < MAX_INFLIGHT_ADDS
            and not self._full_before_issue()
        ):
            self._issued_entries += 1
            self._issued_bytes += len(data)
            self._inflight += 1
            self._drained.clear()
            t0 = self.ctx.clock.monotonic()
            failed: BKError | None = None
            try:
                entry_id = await handle.add_entry(data)
            except BKError as e:
                failed = e
            finally:
                self._inflight -= 1
                if not self._inflight:
                    self._drained.set()
                if self._queue:
                    self._pump()
            if failed is not None:  # outside the finally: the roll waits for the drain
                raise await self._add_error(handle, failed) from failed
            ms = (self.ctx.clock.monotonic() - t0) * 1000
            self.ledger_add_latency.record(ms)
            self.add_latency.record(ms)
            return self._add_done(handle.ledger_id, entry_id, data, num_messages, metadata)
        t0 = self.ctx.clock.monotonic()
        pos = await self._add_slow(data, num_messages, metadata)
        self.add_latency.record((self.ctx.clock.monotonic() - t0) * 1000)
        return pos

    def add_entry_nowait(
        self, data: bytes, *, num_messages: int = 1, metadata: EntryMetadata | None = None
    ) -> asyncio.Future[Position] | None:
        """:meth:`add_entry` without a coroutine or task when the add can be issued at once (the
        ledger is open, nothing is queued, the ledger client has room): the future of its
        position, completing in call order with the same results and errors.  None otherwise:
        then the caller awaits :meth:`add_entry` (which keeps the order: the fast path is only
        taken while nothing waits)."""
        handle = self._handle
        if (
            self.state is not MLState.LEDGER_OPENED
            or self._queue
            or self._unstarted
            or handle is None
            or self._inflight >= MAX_INFLIGHT_ADDS
            or self._full_before_issue()
        ):
            return None
        nowait = getattr(handle, "add_entry_nowait", None)
        if nowait is None:
            return None
        try:
            added = nowait(data)
        except BKError:
            return None  # not writable: the coroutine path fails it with the managed-ledger error
        if added is None:
            return None
        if metadata is not None:
            num_messages = metadata.num_messages
        self._issued_entries += 1
        self._issued_bytes += len(data)
        self._inflight += 1
        self._drained.clear()
        out: asyncio.Future[Position] = added.get_loop().create_future()
        t0 = self.ctx.clock.monotonic()

        def _added(f: asyncio.Future[int]) -> None:
            self._inflight -= 1
            if not self._inflight:
                self._drained.set()
            if self._queue:
                self._pump()
            exc = f.exception() if not f.cancelled() else BKError("add cancelled")
            if exc is not None:
                self._fail_nowait(out, handle, exc)
                return
            ms = (self.ctx.clock.monotonic() - t0) * 1000
            self.ledger_add_latency.record(ms)
            self.add_latency.record(ms)
            try:
                pos = self._add_done(handle.ledger_id, f.result(), data, num_messages, metadata)
            except BaseException as err:  # noqa: BLE001 -- the caller gets it, as from add_entry
                if not out.done():
                    out.set_exception(err)
                return
            if not out.done():
                out.set_result(pos)

        added.add_done_callback(_added)
        return out

    def _fail_nowait(self, out: asyncio.Future[Position], handle: WriteHandle, exc: BaseException) -> None:
        """A fast-path add failed: as :meth:`_add_error`, now unless the ledger was fenced."""
        if not isinstance(exc, BKError):
            if not out.done():
                out.set_exception(exc)
        elif isinstance(exc, LedgerFencedError):

            async def _after_roll() -> None:
                error = await self._add_error(handle, exc)
                if not out.done():
                    out.set_exception(error)

            try:
                self.ctx.supervisor.spawn(_after_roll(), name="add-fenced")
            except RuntimeError:  # shutting down: no roll to wait for
                if not out.done():
                    out.set_exception(self._add_failed(handle, exc))
        elif not out.done():
            out.set_exception(self._add_failed(handle, exc))
        else:
            self._add_failed(handle, exc)

    async def _add_slow(self, data: bytes, num_messages: int, metadata: EntryMetadata | None) -> Position:
        self._check_writable()
        if len(self._queue) + self._unstarted >= MAX_QUEUED_ADDS:
            raise ManagedLedgerStorageError(f"{self._name}: too many pending adds ({MAX_QUEUED_ADDS})")
        op = AddOp(next(self._seq), data, asyncio.get_running_loop().create_future(), num_messages, metadata)
        self._queue_for_append().append(op)
        if self.state is MLState.LEDGER_OPENED:
            if self._full_before_issue() and not self._rolling:
                self._start_roll()
            else:
                self._pump()
        elif self.state is MLState.WRITE_FAILED and not self._rolling:
            self._start_roll()
        timeout_s = self.config.add_entry_timeout_ms / 1000
        try:
            return await asyncio.wait_for(asyncio.shield(op.future), timeout_s)
        except TimeoutError:
            if not op.issued:
                op.future.cancel()
                raise ManagedLedgerStorageError(f"{self._name}: add timed out waiting for a ledger") from None
            return await op.future

    async def check_writable(self) -> None:
        """WriteFailed (the last ledger creation failed): roll now and raise its error if the
        new ledger cannot be created either.  Otherwise nothing to do."""
        if self.state is not MLState.WRITE_FAILED:
            return
        if not self._rolling:
            self._rolling = True
            self._roll_idle.clear()
            await self._roll()
        else:
            async with timed_lock(self._op_lock):
                pass  # the roll in progress holds the lock until it is done
        if self.state is MLState.WRITE_FAILED:
            raise self.last_write_error or ManagedLedgerStorageError(f"{self._name}: cannot create a ledger")

    def _check_writable(self) -> None:
        st = self.state
        if st is MLState.TERMINATED:
            raise ManagedLedgerTerminatedError(f"{self._name} is terminated")
        if st is MLState.FENCED:
            raise ManagedLedgerFencedError(f"{self._name} is fenced")
        if st is MLState.CLOSED or st is MLState.NONE:
            raise ManagedLedgerClosedError(f"{self._name} is closed")

    def _pump(self) -> None:
        """Issue queued adds, in order, while the ledger is writable and fewer than
        MAX_INFLIGHT_ADDS are in flight (so the ledger client never has to make an add wait
        for room, where a later caller could overtake it)."""
        handle = self._handle
        if self.state is not MLState.LEDGER_OPENED or handle is None:
            return
        q = self._queue
        while q and self._inflight + self._unstarted < MAX_INFLIGHT_ADDS:
            op = q.popleft()
            if not op.future.done():
                self._issue(op, handle)

    def _issue(self, op: AddOp, handle: WriteHandle) -> None:
        self._unstarted += 1
        self.ctx.supervisor.spawn(self._run_op(op, handle), name="add")

    async def _run_op(self, op: AddOp, handle: WriteHandle) -> None:
        self._unstarted -= 1
        if op.future.done():  # timed out while queued
            return
        if self.state is MLState.LEDGER_OPENED and self._full_before_issue() and not self._rolling:
            self._start_roll()
        if self._handle is not handle or self.state is not MLState.LEDGER_OPENED:
            self._requeue(op)
            return
        op.issued = True
        self._issued_entries += 1
        self._issued_bytes += len(op.data)
        self._inflight += 1
        self._drained.clear()
        t0 = self.ctx.clock.monotonic()
        failed: BKError | None = None
        try:
            entry_id = await handle.add_entry(op.data)
        except BKError as e:
            failed = e
        finally:
            self._inflight -= 1
            if not self._inflight:
                self._drained.set()
            if self._queue:
                self._pump()
        if failed is not None:
            error = await self._add_error(handle, failed)
            if not op.future.done():
                op.future.set_exception(error)
            return
        self.ledger_add_latency.record((self.ctx.clock.monotonic() - t0) * 1000)
        pos = self._add_done(handle.ledger_id, entry_id, op.data, op.num_messages, op.metadata)
        if not op.future.done():
            op.future.set_result(pos)

    def _queue_for_append(self) -> deque[AddOp]:
        """The add queue, made on first use (an idle ledger keeps the empty tuple)."""
        q = self._queue
        if q.__class__ is not deque:
            q = self._queue = deque()
        return q  # type: ignore[return-value]

    def _requeue(self, op: AddOp) -> None:
        q = self._queue_for_append()
        i = 0
        while i < len(q) and q[i].seq < op.seq:
            i += 1
        q.insert(i, op)
        if is_terminal(self.state) or self.state is MLState.TERMINATED:
            self._fail_queue(self._state_error())

    def _add_done(
        self,
        ledger_id: int,
        entry_id: int,
        data: bytes,
        num_messages: int,
        metadata: EntryMetadata | None = None,
    ) -> Position:
        lst = self.ledger_list
        pos = Position(ledger_id, entry_id)
        if ledger_id == lst.current_id:
            lst.current_entries = entry_id + 1
            lst.current_size += len(data)
        if pos > lst.last_confirmed:
            lst.last_confirmed = pos
        self.entries_added += 1
        self.bytes_added += len(data)
        self.entry_sizes.record(len(data))
        self.messages_added += num_messages
        self.message_counts.record(ledger_id, entry_id, num_messages, len(data))
        self.ctx.cache.put(ledger_id, entry_id, data, metadata)
        if self._waiters:
            self._wake_waiters()
        if self.state is MLState.LEDGER_OPENED and not self._rolling and self._ledger_full():
            self._start_roll()
        return pos

    async def _add_error(self, handle: WriteHandle, e: BKError) -> ManagedLedgerError:
        """The error for an add that failed with ``e`` (the roll is started).  A fenced ledger
        waits for the roll: if its list CAS failed another broker owns us, and the add fails
        with ManagedLedgerFencedError, as an owner change must; else retriably."""
        error = self._add_failed(handle, e)
        if isinstance(e, LedgerFencedError):
            try:
                await asyncio.wait_for(self._roll_idle.wait(), self.config.add_entry_timeout_ms / 1000)
            except TimeoutError:
                pass
            if self.state is MLState.FENCED:
                return ManagedLedgerFencedError(
                    f"{self._name}: ledger {handle.ledger_id} fenced; owned elsewhere"
                )
        return error

    def _add_failed(self, handle: WriteHandle, e: BKError) -> ManagedLedgerError:
        """Roll to a new ledger; the add fails retriably.  A fenced ledger too (see the module
        docstring): the roll's list CAS, not the fence, tells whether someone else owns us."""
        self.add_errors += 1
        if self._handle is handle and self.state is MLState.LEDGER_OPENED and not self._rolling:
            self._start_roll()
        what = "was fenced (recovered by another client)" if isinstance(e, LedgerFencedError) else "failed"
        return ManagedLedgerStorageError(f"{self._name}: add to ledger {handle.ledger_id} {what}: {e!r}")

    def _full_before_issue(self) -> bool:
        """The current ledger has been given its share of entries/bytes (counting adds still
        in flight), and the minimum rollover time has passed: the next add goes to a new ledger."""
        c = self.config
        if (
            self._issued_entries < c.max_entries_per_ledger
            and self._issued_bytes < c.max_size_per_ledger_bytes
        ):
            return False
        return (
            self.ctx.clock.monotonic() - self._ledger_created_mono
        ) * 1000 >= c.min_ledger_rollover_time_ms

    def _ledger_full(self) -> bool:
        c, lst = self.config, self.ledger_list
        age_ms = (self.ctx.clock.monotonic() - self._ledger_created_mono) * 1000
        if age_ms >= c.max_ledger_rollover_time_ms and lst.current_entries > 0:
            return True
        full = (
            lst.current_entries >= c.max_entries_per_ledger or lst.current_size >= c.max_size_per_ledger_bytes
        )
        return full and age_ms >= c.min_ledger_rollover_time_ms

    def check_rollover_by_time(self) -> None:
        """Roll a ledger older than the maximum rollover time (called periodically)."""
        if self.state is MLState.LEDGER_OPENED and not self._rolling and self._ledger_full():
            self._start_roll()

    # -- rollover ------------------------------------------------------------------------------

    def _start_roll(self) -> None:
        self._rolling = True
        self._roll_idle.clear()
        if self.state is MLState.LEDGER_OPENED:
            self._set_state(MLState.CLOSING_LEDGER)
        self.ctx.supervisor.spawn(self._roll(), name="rollover")

    async def _roll(self) -> None:
        try:
            async with timed_lock(self._op_lock):
                if self.state is MLState.CLOSING_LEDGER:
                    await self._close_current_ledger()
                    if self.state is not MLState.CLOSING_LEDGER:
                        return  # fenced (or terminated) while the ledger drained
                    self._set_state(MLState.CREATING_LEDGER)
                elif self.state is MLState.WRITE_FAILED:
                    self._set_state(MLState.CREATING_LEDGER)
                else:
                    return
                try:
                    await self._create_and_record_ledger()
                except ManagedLedgerError as e:
                    self.last_write_error = e
                    if self.state is MLState.CREATING_LEDGER:
                        self._set_state(MLState.WRITE_FAILED)
                    self._fail_queue(e)
                    return
                self.last_write_error = None
                if self.state is not MLState.CREATING_LEDGER:
                    return
                self._set_state(MLState.LEDGER_OPENED)
                self._pump()
                self.on_ledger_rolled()
        finally:
            self._rolling = False
            self._roll_idle.set()

    async def _close_current_ledger(self) -> None:
        """Drain in-flight adds, close the write handle, fix the ledger's entry in the list."""
        handle = self._handle
        if handle is None:
            return
        try:
            await asyncio.wait_for(self._drained.wait(), DRAIN_TIMEOUT_S)
        except TimeoutError:
            pass
        lst = self.ledger_list
        try:
            await handle.close()
        except (BKError, ManagedLedgerError) as e:
            # Fenced (a recovery closed it) or broken: the count stays the confirmed adds'.
            await self._check_closed_metadata(handle.ledger_id, lst.current_entries, e)
        entries, size = lst.current_entries, lst.current_size  # adds confirmed until the close
        info = lst.get(handle.ledger_id)
        if info is not None:
            lst.set(replace(info, entries=entries, size_bytes=size, timestamp_ms=self.ctx.clock.time_ms()))
        lst.current_id = -1
        lst.current_entries = lst.current_size = 0
        self._handle = None

    async def _check_closed_metadata(self, ledger_id: int, entries: int, why: Exception) -> None:
        """Our close failed: compare the confirmed count with what the closer recorded."""
        try:
            md = await self.ctx.bookkeeper.get_ledger_metadata(ledger_id)
        except BKError:
            return
        if not md.is_closed:
            log.info(
                "%s: ledger %d left open (%r); %d entries confirmed", self._name, ledger_id, why, entries
            )
        elif md.last_entry_id + 1 < entries:
            log.error(
                "%s: ledger %d closed by another client at entry %d, below the %d entries confirmed to us",
                self._name,
                ledger_id,
                md.last_entry_id,
                entries,
            )
        else:
            log.info(
                "%s: ledger %d closed by another client at entry %d (%d confirmed to us): rolling over",
                self._name,
                ledger_id,
                md.last_entry_id,
                entries,
            )

    def _fail_queue(self, error: Exception) -> None:
        queue, self._queue = self._queue, ()
        for op in queue:
            if not op.future.done():
                op.future.set_exception(error)

    def _state_error(self) -> ManagedLedgerError:
        try:
            self._check_writable()
        except ManagedLedgerError as e:
            return e
        return ManagedLedgerStorageError(f"{self._name}: not writable ({self.state.value})")

    def _fence(self) -> None:
        if self.state in (MLState.FENCED, MLState.CLOSED):
            return
        self._set_state(MLState.FENCED)
        self._fail_queue(ManagedLedgerFencedError(f"{self._name} is fenced"))
        self._wake_waiters()
