"""The write path of a managed ledger: adds queued and issued in call order, rollover.

Theory of operation
-------------------
:class:`LedgerWriter` is the half of :class:`~magnetar.managed_ledger.ledger.ManagedLedgerImpl`
that appends (a mixin: the state lives on the managed ledger, see ``ledger.py``).

Adds are pipelined.  Every add -- ``add_entry_cb`` (the broker's SEND path: no
task, no future), ``add_entry_nowait`` (a future) or the coroutine
``add_entry`` -- is issued or queued
synchronously in call order: while a write handle is open, nothing is queued
and the ledger client has room, it goes straight to the handle's
``add_entry_nowait`` with a callback on the handle's future; otherwise it
waits in a queue kept in call-sequence order, issued in order when the next
ledger is ready (a write handle without ``add_entry_nowait``, the memory
BookKeeper's, gets a task per queued add, and until those tasks have started
new adds queue too).  At most MAX_INFLIGHT_ADDS are in flight per managed
ledger; more wait in the queue.  An add waiting for a ledger gives up after
``add_entry_timeout_ms`` (it was never issued, so it is not written).

Answers are applied in entry order, whatever order they arrive in, and a
failed add rolls the ledger: that is the other half, ``add_completion.py``.

Rollover: a ledger is full once it has been *given* ``max_entries_per_ledger``
entries or ``max_size_per_ledger_bytes`` bytes (counting adds in flight) and
is at least ``min_ledger_rollover_time_ms`` old, or is older than
``max_ledger_rollover_time_ms``.  Then the state becomes ClosingLedger:
in-flight adds drain, the handle is closed, the ledger's final entry count and
size go into the list, a new ledger is created and appended to the list (CAS),
and the queue is issued.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import replace

from magnetar.bookkeeper.api import BKError, WriteHandle
from magnetar.managed_ledger.add_completion import AddCallback, AddCallbackFn, AddCompletion, AddOp
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


class LedgerWriter(AddCompletion):
    __slots__ = ()  # the state is the managed ledger's (its __slots__)

    # -- adds -----------------------------------------------------------------------------------

    async def add_entry(
        self, data: bytes, *, num_messages: int = 1, metadata: EntryMetadata | None = None
    ) -> Position:
        """Append; pipelined calls complete in call order.  ``num_messages`` (the batch size
        from the entry's metadata, if the caller knows it) feeds the message counters;
        ``metadata`` goes into the entry cache beside the entry (see EntryMetadata).
        Cancelling the caller drops the answer, not the add once it is issued."""
        handle = self._handle
        if handle is None or hasattr(handle, "add_entry_nowait") or not self._may_issue_now(handle):
            return await self.add_entry_nowait(data, num_messages=num_messages, metadata=metadata)
        # A write handle without add_entry_nowait (the memory BookKeeper): issued in the
        # caller's task, as it always was; its answer goes through the same ordering.
        if metadata is not None:
            num_messages = metadata.num_messages
        loop = asyncio.get_running_loop()
        op = AddOp(
            next(self._seq), data, loop.create_future(), num_messages, metadata, self.ctx.clock.monotonic()
        )
        self._mark_issued(op)
        try:
            entry_id = await handle.add_entry(data)
        except BKError as e:
            self._add_finished(op, handle, e)
        except BaseException:
            self._settle(op)  # cancelled: the answer is lost (entries after it wait for the close)
            raise
        else:
            self._add_finished(op, handle, None, entry_id)
        return await op.future

    def _may_issue_now(self, handle: WriteHandle) -> bool:
        """An add may go to the ledger client at once: nothing waits before it."""
        return (
            self.state is MLState.LEDGER_OPENED
            and not self._queue
            and not self._unstarted
            and self._inflight < MAX_INFLIGHT_ADDS
            and not self._full_before_issue()
        )

    def add_entry_nowait(
        self, data: bytes, *, num_messages: int = 1, metadata: EntryMetadata | None = None
    ) -> asyncio.Future[Position]:
        """:meth:`add_entry` without a coroutine: the add is issued (or queued) now, in call
        order, and the returned future gets its position -- futures complete in call order --
        or its error (a state error too: nothing is raised here)."""
        if metadata is not None:
            num_messages = metadata.num_messages
        clock = self.ctx.clock
        op = AddOp(
            next(self._seq),
            data,
            asyncio.get_running_loop().create_future(),
            num_messages,
            metadata,
            clock.monotonic(),
        )
        handle = self._handle
        if handle is not None and self._may_issue_now(handle) and self._issue(op, handle):
            return op.future
        self._enqueue(op)
        return op.future

    def add_entry_cb(
        self,
        data: bytes,
        callback: AddCallbackFn,
        *,
        num_messages: int = 1,
        metadata: EntryMetadata | None = None,
    ) -> AddCallback:
        """:meth:`add_entry_nowait` without a future: ``callback(position, None)`` is called
        once the add is stored -- at once, in entry order, with no loop hop -- or
        ``callback(None, error)`` (soon, never from inside this call).  The returned handle
        says whether it has been called (``done()``)."""
        if metadata is not None:
            num_messages = metadata.num_messages
        loop = asyncio.get_running_loop()
        out = AddCallback(callback, loop)
        op = AddOp(next(self._seq), data, out, num_messages, metadata, self.ctx.clock.monotonic())
        handle = self._handle
        if handle is not None and self._may_issue_now(handle) and self._issue(op, handle):
            return out
        self._enqueue(op)
        return out

    def _enqueue(self, op: AddOp) -> None:
        """The slow path: wait in call order for a writable ledger (or for room), at most
        ``add_entry_timeout_ms`` (an add never issued is not written)."""
        try:
            self._check_writable()
            if len(self._queue) + self._unstarted >= MAX_QUEUED_ADDS:
                raise ManagedLedgerStorageError(f"{self._name}: too many pending adds ({MAX_QUEUED_ADDS})")
        except ManagedLedgerError as e:
            op.future.set_exception(e)
            return
        self._queue_for_append().append(op)
        op.timer = op.future.get_loop().call_later(
            self.config.add_entry_timeout_ms / 1000, self._queued_add_expired, op
        )
        if self.state is MLState.LEDGER_OPENED:
            if self._full_before_issue() and not self._rolling:
                self._start_roll()
            else:
                self._pump()
        elif self.state is MLState.WRITE_FAILED and not self._rolling:
            self._start_roll()

    def _queued_add_expired(self, op: AddOp) -> None:
        op.timer = None
        if not op.issued and not op.future.done():
            op.future.set_exception(
                ManagedLedgerStorageError(f"{self._name}: add timed out waiting for a ledger")
            )

    def _issue(self, op: AddOp, handle: WriteHandle) -> bool:
        """Hand ``op`` to the ledger client now; False when it has no room (``op`` must wait).
        The in-process ledger handle's ``add_entry_nowait`` takes it without a task; another
        write handle gets one task per add (``_unstarted`` keeps later adds behind it)."""
        nowait = getattr(handle, "add_entry_nowait", None)
        if nowait is None:
            self._unstarted += 1
            self.ctx.supervisor.spawn(self._run_op(op, handle), name="add")
            return True
        try:
            added = nowait(op.data)
        except BKError as e:  # the handle is not writable: the add fails as a failed add does
            self._mark_issued(op)
            self._add_finished(op, handle, e)
            return True
        if added is None:
            return False
        self._mark_issued(op)
        added.add_done_callback(lambda f: self._handle_answered(op, handle, f))
        return True

    def _mark_issued(self, op: AddOp) -> None:
        if op.timer is not None:
            op.timer.cancel()
            op.timer = None
        op.issued = True
        op.t_issued = self.ctx.clock.monotonic()
        self._issued_entries += 1
        self._issued_bytes += len(op.data)
        self._inflight += 1
        self._drained.clear()

    async def _run_op(self, op: AddOp, handle: WriteHandle) -> None:
        """An add to a write handle without ``add_entry_nowait``, as a task."""
        self._unstarted -= 1
        if op.future.done():  # timed out while queued
            return
        if self._handle is not handle or self.state is not MLState.LEDGER_OPENED:
            self._requeue(op)
            return
        self._mark_issued(op)
        try:
            entry_id = await handle.add_entry(op.data)
        except BKError as e:
            self._add_finished(op, handle, e)
            return
        self._add_finished(op, handle, None, entry_id)

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
            if q[0].future.done():  # timed out while queued
                q.popleft()
                continue
            if self._full_before_issue():
                if not self._rolling:
                    self._start_roll()
                return
            op = q.popleft()
            if not self._issue(op, handle):
                q.appendleft(op)  # no room in the ledger client: the next answer pumps again
                return

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
        if op.timer is None:  # it was taken from the fast path, not the queue: the deadline now
            op.timer = op.future.get_loop().call_later(
                self.config.add_entry_timeout_ms / 1000, self._queued_add_expired, op
            )
        if is_terminal(self.state) or self.state is MLState.TERMINATED:
            self._fail_queue(self._state_error())

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
        early, self._early = self._early, None
        for op in (early or {}).values():  # an entry before these never answered: not ours
            self._settle(op)
            if not op.future.done():
                op.future.set_exception(
                    ManagedLedgerStorageError(
                        f"{self._name}: add to ledger {handle.ledger_id} did not complete"
                    )
                )
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
