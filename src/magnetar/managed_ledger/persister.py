"""Group-committed, optionally rate-limited persistence of a durable cursor's snapshots.

Theory of operation: every change to a cursor's state calls :meth:`CursorPersister.changed`,
which bumps a sequence number and makes sure one persister task is running.  The task takes a
snapshot of the *current* state, writes it (through the cursor store), and marks every change up
to the sequence number it saw as durable -- so however many acks arrive while a write is in
flight, the next write covers all of them (group commit), and snapshots never queue up.

``mark_delete_rate_per_s > 0`` (Pulsar's managedLedgerDefaultMarkDeleteRateLimit) spaces the
writes at least ``1/rate`` seconds apart on the injected clock; callers then do not wait.  With
rate 0 a caller waits (:meth:`wait`, bounded) until a snapshot containing its change is durable.
:meth:`flush` (cursor close, topic unload, broker shutdown) cuts a rate-limit pause short, so
the latest state is written at once rather than after up to ``1/rate`` seconds.

A failed write fails the waiters of the changes it covered and stops the task without marking
anything durable: the next change, or :meth:`flush` (close calls it), tries again with the full
state.  A fenced write (another owner) stops it for good as far as this owner is concerned:
every later attempt fails the same way.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from magnetar.managed_ledger.api import ManagedLedgerError, ManagedLedgerStorageError
from magnetar.managed_ledger.snapshot import CursorSnapshot

PERSIST_WAIT_TIMEOUT_S = 60.0


class PersistedCursor(Protocol):
    """What the persister needs of its cursor (one object, not three closures per cursor)."""

    def snapshot(self) -> CursorSnapshot: ...  # the current state

    def snapshot_durable(self, snap: CursorSnapshot) -> None: ...  # ``snap`` is written

    @property
    def is_open(self) -> bool: ...  # False while closing: no rate-limit pause


class CursorPersister:
    # slots: one per durable cursor (a broker holds thousands of idle subscriptions)
    __slots__ = (
        "_name", "_ml", "_store", "_cursor", "dirty_seq", "persisted_seq", "_task", "_waiters",
        "_last_write_mono", "_pause", "_flush_seq", "last_error",
    )  # fmt: skip

    def __init__(
        self,
        name: str,
        ml,  # noqa: ANN001 - the ManagedLedgerImpl (config, ctx, schedule_trim)
        store,  # noqa: ANN001 - the CursorStore
        cursor: PersistedCursor,
    ) -> None:
        self._name = name
        self._ml = ml
        self._store = store
        self._cursor = cursor
        self.dirty_seq = 0
        self.persisted_seq = 0
        self._task: asyncio.Task[None] | None = None
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._last_write_mono = -1e18
        self._pause: asyncio.Future[None] | None = None  # the rate-limit sleep, cut short by flush
        self._flush_seq = 0  # changes up to here were flushed: written without a rate-limit pause
        self.last_error: str | None = None

    @property
    def rate_per_s(self) -> float:
        return self._ml.config.mark_delete_rate_per_s

    def changed(self) -> int:
        self.dirty_seq += 1
        self._ensure_task()
        return self.dirty_seq

    def _ensure_task(self) -> None:
        if self._task is None and self.persisted_seq < self.dirty_seq:
            self._task = self._ml.ctx.supervisor.spawn(self._run(), name=f"persist-{self._name}")

    async def wait(self, seq: int) -> None:
        if self.persisted_seq >= seq:
            return
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((seq, fut))
        try:
            await asyncio.wait_for(asyncio.shield(fut), PERSIST_WAIT_TIMEOUT_S)
        except TimeoutError:
            raise ManagedLedgerStorageError(f"cursor {self._name}: persisting timed out") from None

    async def flush(self) -> None:
        self._flush_seq = self.dirty_seq
        self._ensure_task()
        if self._pause is not None:
            self._pause.cancel()
        await self.wait(self.dirty_seq)

    async def _run(self) -> None:
        clock = self._ml.ctx.clock
        try:
            while self.persisted_seq < self.dirty_seq:
                rate = self.rate_per_s
                if rate > 0 and self._cursor.is_open and self.persisted_seq >= self._flush_seq:
                    wait_s = self._last_write_mono + 1.0 / rate - clock.monotonic()
                    if wait_s > 0:
                        pause = self._pause = asyncio.ensure_future(clock.sleep(wait_s))
                        try:
                            await asyncio.wait((pause,))
                        finally:
                            self._pause = None
                            pause.cancel()
                seq = self.dirty_seq
                self._last_write_mono = clock.monotonic()
                snap = self._cursor.snapshot()
                try:
                    await self._store.persist(snap, self._ml.config)
                except ManagedLedgerError as e:
                    self.last_error = repr(e)
                    self.resolve(seq, e)
                    return  # nothing marked durable: the next change or flush retries
                self.persisted_seq = seq
                self.last_error = None
                self._cursor.snapshot_durable(snap)
                self.resolve(seq, None)
        finally:
            self._task = None

    def resolve(self, seq: int, error: Exception | None) -> None:
        keep = []
        for s, fut in self._waiters:
            if s > seq:
                keep.append((s, fut))
            elif not fut.done():
                if error is None:
                    fut.set_result(None)
                else:
                    fut.set_exception(error)
        self._waiters = keep

    def cancel(self, error: Exception) -> None:
        if self._task is not None:
            self._task.cancel()
        self.resolve(self.dirty_seq, error)
