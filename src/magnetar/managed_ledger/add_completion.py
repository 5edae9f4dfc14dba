"""The completion half of a managed ledger's write path: answered adds applied in entry order.

Theory of operation
-------------------
:class:`AddCompletion` is a mixin of :class:`~magnetar.managed_ledger.ledger.ManagedLedgerImpl`
(the state lives on the managed ledger, see ``ledger.py``); ``writer.py`` queues
and issues adds, this module takes the ledger client's answers.

Completion order is enforced, not assumed: BookKeeper confirms in entry
order, but the answers may reach us by routes with a different number of
event-loop hops (that is how, once, a marker added by a coroutine at entry N
was applied after the message at N+1: the entry count went back to N+1 under
a last-confirmed of N+1, and a cursor stepped over N+1).  So
``_add_finished`` applies an answered add to the ledger list only when it is
the current ledger's next entry; one answered early waits in ``_early``.
Hence ``last_confirmed`` -- what readers may read up to -- and the entry
count advance one entry at a time, never past an add not yet completed;
reads check it (a short read is an error, never a silent gap).

The caller learns the outcome through its AddOp's ``future``: an asyncio
future (``add_entry``/``add_entry_nowait``), or an :class:`AddCallback`
(``add_entry_cb``, the broker's SEND path) whose function is called at once
with the position -- no future, no loop hop per layer -- and through
``call_soon`` with an error (failures keep the loop hop their handling
always had: the caller may close producers and topics, which must not run
inside the writer's bookkeeping).

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
from collections.abc import Callable
from typing import Any

from magnetar.bookkeeper.api import BKError, LedgerFencedError, WriteHandle
from magnetar.managed_ledger.api import (
    EntryMetadata,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerStorageError,
    Position,
)
from magnetar.managed_ledger.state import MLState

log = logging.getLogger(__name__)

# add_entry_cb's callback: (position, None) once stored, or (None, error).
AddCallbackFn = Callable[[Position | None, BaseException | None], None]


class AddCallback:
    """The outcome of one add, delivered to a function instead of a future: the part of the
    Future interface the writer uses (``done``, ``set_result``, ``set_exception``,
    ``get_loop``), so an AddOp carries either.  A position is delivered at once, an error
    through ``call_soon``; exactly one of them, once."""

    __slots__ = ("_fn", "_loop", "_done")

    def __init__(self, fn: AddCallbackFn, loop: asyncio.AbstractEventLoop) -> None:
        self._fn = fn
        self._loop = loop
        self._done = False

    def done(self) -> bool:
        return self._done

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._loop

    def set_result(self, pos: Position) -> None:
        if self._done:
            raise asyncio.InvalidStateError("add already completed")
        self._done = True
        try:
            self._fn(pos, None)
        except Exception:  # the writer's bookkeeping must go on (a future's callback would be logged too)
            log.exception("add callback failed")

    def set_exception(self, exc: BaseException) -> None:
        if self._done:
            raise asyncio.InvalidStateError("add already completed")
        self._done = True
        self._loop.call_soon(self._fn, None, exc)


class AddOp:
    __slots__ = ("seq", "data", "future", "issued", "num_messages", "metadata", "t0", "t_issued", "timer")

    def __init__(
        self,
        seq: int,
        data: bytes,
        future: asyncio.Future[Position] | AddCallback,
        num_messages: int,
        metadata: EntryMetadata | None = None,
        t0: float = 0.0,
    ) -> None:
        self.seq = seq
        self.data = data
        self.future = future
        self.issued = False
        self.num_messages = num_messages
        self.metadata = metadata
        self.t0 = t0  # when the add was asked for (add latency)
        self.t_issued = t0  # when it went to the ledger (ledger add latency)
        self.timer: asyncio.TimerHandle | None = None  # the queue deadline while waiting for a ledger


class AddCompletion:
    __slots__ = ()  # the state is the managed ledger's (its __slots__)

    def _handle_answered(self, op: AddOp, handle: WriteHandle, f: asyncio.Future[int]) -> None:
        if f.cancelled():
            self._add_finished(op, handle, BKError("add cancelled"))
        elif (exc := f.exception()) is not None:
            self._add_finished(op, handle, exc)
        else:
            self._add_finished(op, handle, None, f.result())

    def _add_finished(
        self, op: AddOp, handle: WriteHandle, error: BaseException | None, entry_id: int = -1
    ) -> None:
        """The ledger client's answer for an issued add.  Successes are applied to the ledger
        list in entry order, whatever order the answers arrive in: an entry answered before
        its predecessor waits in ``_early`` until the predecessor is applied, so
        ``last_confirmed`` and the current ledger's entry count only ever advance by one
        entry, and never past an entry whose add has not completed (the invariant cursors
        read by: see ``cursor._read_from``)."""
        lst = self.ledger_list
        lid = handle.ledger_id
        if error is not None:
            self._settle(op)
            early, self._early = self._early, None
            if early:  # BookKeeper confirms in entry order: nothing after a failed entry is
                for later in early.values():  # confirmed, so these cannot be applied either
                    self._settle(later)
                    self._fail_add(later.future, handle, error)
            self._fail_add(op.future, handle, error)
        elif lid == lst.current_id and entry_id > lst.current_entries:
            if self._early is None:
                self._early = {}
            self._early[entry_id] = op  # applied when the entries before it are
            return
        else:
            self._apply_add(op, lid, entry_id)
            early = self._early
            while early and lid == lst.current_id:
                nxt = early.pop(lst.current_entries, None)
                if nxt is None:
                    break
                self._apply_add(nxt, lid, lst.current_entries)
        if self._queue:
            self._pump()

    def _settle(self, op: AddOp) -> None:
        self._inflight -= 1
        if not self._inflight:
            self._drained.set()

    def _apply_add(self, op: AddOp, ledger_id: int, entry_id: int) -> None:
        self._settle(op)
        now = self.ctx.clock.monotonic()
        self.ledger_add_latency.record((now - op.t_issued) * 1000)
        self.add_latency.record((now - op.t0) * 1000)
        try:
            pos = self._add_done(ledger_id, entry_id, op.data, op.num_messages, op.metadata)
        except BaseException as err:  # noqa: BLE001 -- the caller gets it, as from add_entry
            if not op.future.done():
                op.future.set_exception(err)
            return
        if not op.future.done():
            op.future.set_result(pos)

    def _fail_add(self, out: Any, handle: WriteHandle, exc: BaseException) -> None:
        """An issued add failed: the roll starts and the caller gets the retriable
        managed-ledger error (:meth:`_add_error`: after the roll if the ledger was fenced)."""
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
        if ledger_id == lst.current_id:  # entry_id == current_entries: see _add_finished
            if entry_id >= lst.current_entries:  # (never backwards, whatever happens)
                lst.current_entries = entry_id + 1
                lst.last_confirmed = pos
            else:
                log.error("%s: entry %s answered twice", self._name, pos)
            lst.current_size += len(data)
        elif pos > lst.last_confirmed:  # a late answer for a ledger already closed
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
