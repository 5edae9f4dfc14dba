"""ManagedLedgerImpl: a topic's log as a list of BookKeeper ledgers.

Theory of operation
-------------------
Open (:meth:`ManagedLedgerImpl.initialize`): read ``/managed-ledgers/<name>``
(version V), open the last ledger with ``recovery=True`` -- that fences it
against a previous owner still writing and fixes its last entry -- record its
entry count and size (or drop it if its closed metadata says it is empty; a
list count above the recovered one is kept and logged, never dropped),
create a new ledger, and write the
list back with CAS on V.  A failed CAS means another broker owns the ledger:
:class:`ManagedLedgerFencedError`.  Then the cursors are recovered.

Adds, rollover and write failures are :mod:`.writer` (a mixin of this class);
reads and position arithmetic live in :mod:`.reads` and :mod:`.positions`;
cursor state in :mod:`.cursor`; cleanup in :mod:`.trimmer`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace

from magnetar.bookkeeper.api import BKError, NoSuchLedgerError, WriteHandle
from magnetar.common.latency import ENTRY_SIZE_BOUNDS, LatencyBuckets
from magnetar.managed_ledger import offload_process, trimmer
from magnetar.managed_ledger.api import (
    CursorNotFoundError,
    Entry,
    InitialPosition,
    InvalidCursorPositionError,
    LedgerInfo,
    ManagedCursor,
    ManagedLedgerClosedError,
    ManagedLedgerConfig,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerStorageError,
    ManagedLedgerTerminatedError,
    Position,
)
from magnetar.managed_ledger.context import MLContext, quiet, timed_lock
from magnetar.managed_ledger.counts import MessageCounts
from magnetar.managed_ledger.cursor import ManagedCursorImpl
from magnetar.managed_ledger.ledger_meta import LedgerMetaStore
from magnetar.managed_ledger.positions import LedgerList
from magnetar.managed_ledger.reads import LedgerReader
from magnetar.managed_ledger.state import MLState, check_transition
from magnetar.managed_ledger.stats import ledger_internal_stats
from magnetar.managed_ledger.writer import AddOp, LedgerWriter
from magnetar.runtime import SlimEvent

log = logging.getLogger(__name__)
_NONE: frozenset[int] = frozenset()  # shared: each frozenset() call makes a new 216-byte set


class ManagedLedgerImpl(LedgerWriter):
    # Slots, not an instance dict: a broker holds one of these per topic, idle or not.
    __slots__ = (
        "_name", "config", "ctx", "state", "ledger_list", "meta", "reader", "_cursors",
        "_cursor_creations", "_seq", "_queue", "_drained", "_op_lock", "_roll_idle", "_waiters",
        "add_latency", "ledger_add_latency", "entry_sizes", "message_counts",
        "_handle", "_unstarted", "_early", "_inflight", "_issued_entries", "_issued_bytes",
        "_rolling", "_ledger_created_mono", "entries_added", "bytes_added", "add_errors",
        "messages_added", "last_ledger_created_ms", "last_ledger_creation_failure_ms",
        "last_write_error", "terminated_position", "on_closed", "trim_task", "trim_again",
        "ledgers_deleted", "_offload", "verified_empty", "kept_unconfirmed",
    )  # fmt: skip

    def __init__(self, name: str, config: ManagedLedgerConfig, ctx: MLContext) -> None:
        self._name = name
        self.config = config
        self.ctx = ctx
        self.state = MLState.NONE
        self.ledger_list = LedgerList()
        self.meta = LedgerMetaStore(ctx.store, name, ctx.clock)
        self.reader = LedgerReader(ctx, self.ledger_list, self)
        self._cursors: dict[str, ManagedCursorImpl] = {}
        # one creation per cursor name at a time: two subscribes racing on a new
        # subscription must share one cursor, not both create its metadata node
        self._cursor_creations: dict[str, asyncio.Lock] = {}
        self._seq = itertools.count()
        # Adds waiting to be issued; a deque made on first use (writer.py), as an empty deque
        # holds a ~760-byte block and most ledgers never queue an add.
        self._queue: deque[AddOp] | tuple[()] = ()
        self._drained = SlimEvent()
        self._drained.set()
        self._op_lock = asyncio.Lock()
        self._roll_idle = SlimEvent()  # set while no roll runs (see writer._add_error)
        self._roll_idle.set()
        self._waiters: list[asyncio.Future[None]] = []
        # pulsar_storage_write_latency (the whole add) and _ledger_write_latency (BookKeeper part)
        self.add_latency = LatencyBuckets()
        self.ledger_add_latency = LatencyBuckets()
        self.entry_sizes = LatencyBuckets(ENTRY_SIZE_BOUNDS)  # pulsar_entry_size_le_*
        self.message_counts = MessageCounts()
        self._handle: WriteHandle | None = None
        self._unstarted = 0  # adds taken from the queue whose task has not started yet
        self._early: dict[int, AddOp] | None = None  # answered adds waiting for an earlier entry's answer
        self._inflight = 0
        self._issued_entries = 0
        self._issued_bytes = 0
        self._rolling = False
        self._ledger_created_mono = 0.0
        self.entries_added = 0
        self.bytes_added = 0
        self.add_errors = 0
        self.messages_added = 0
        self.last_ledger_created_ms = 0
        self.last_ledger_creation_failure_ms = 0
        self.last_write_error: ManagedLedgerError | None = None  # why the last ledger creation failed
        self.terminated_position: Position | None = None
        self.on_closed: Callable[[ManagedLedgerImpl], None] | None = None  # set by the factory
        self.trim_task: asyncio.Task[None] | None = None
        self.trim_again = False
        self.ledgers_deleted = 0
        self._offload: offload_process.OffloadState | None = None  # made by the first offload step
        # zero-entry ledgers whose BK metadata agrees / BK recovered entries in (trimmer;
        # replaced whole, never mutated, so the shared empty default is safe)
        self.verified_empty: frozenset[int] = _NONE
        self.kept_unconfirmed: frozenset[int] = _NONE

    # -- properties (api.ManagedLedger) -----------------------------------------------------

    @property
    def name(self) -> str:
        return self._name

    @property
    def write_handle(self) -> WriteHandle | None:
        """The handle of the ledger being written (None while rolling or closed)."""
        return self._handle

    @property
    def offload_state(self) -> offload_process.OffloadState:
        """Offload progress (read-only here: a shared idle state until the first offload)."""
        return self._offload or offload_process.IDLE

    def offload_progress(self) -> offload_process.OffloadState:
        """This ledger's own offload state, made on first use (offload_process changes it)."""
        if self._offload is None:
            self._offload = offload_process.OffloadState()
        return self._offload

    @property
    def last_confirmed_entry(self) -> Position:
        return self.ledger_list.last_confirmed

    @property
    def number_of_entries(self) -> int:
        return self.ledger_list.total_entries()

    @property
    def number_of_messages(self) -> int:
        """Messages in all ledgers (batch sizes as given to add_entry; 1 an entry where unknown)."""
        ll = self.ledger_list
        return ll.messages_between(Position(-1, -1), ll.last_confirmed, self.message_counts)

    @property
    def total_size(self) -> int:
        """Storage size: bytes of every ledger still in the list (consumed or not)."""
        return self.ledger_list.total_size()

    def estimated_backlog_size_bytes(self) -> int:
        """Backlog size: bytes after the slowest durable cursor's mark-delete.  Storage size
        minus this is what retention (or a slow trim) keeps beyond the backlog."""
        cursors = self.durable_cursors()
        if not cursors:
            return 0
        return self.ledger_list.size_after(min(c.mark_delete_position for c in cursors))

    @property
    def is_terminated(self) -> bool:
        return self.state is MLState.TERMINATED

    @property
    def cursors(self) -> Mapping[str, ManagedCursor]:
        return dict(self._cursors)

    def ledgers(self) -> list[LedgerInfo]:
        """The ledger list; the open ledger shows its live entry count and size."""
        out = self.ledger_list.infos()
        cur = self.ledger_list.current_id
        return [
            replace(li, entries=self.ledger_list.current_entries, size_bytes=self.ledger_list.current_size)
            if li.ledger_id == cur
            else li
            for li in out
        ]

    def _set_state(self, new: MLState) -> None:
        check_transition(self.state, new)
        self.state = new

    # -- open / recovery ----------------------------------------------------------------------

    async def initialize(self) -> None:
        info = await self.meta.load()
        new = self.meta.version == -1  # no node yet: no cursor nodes under it either
        for li in info.ledgers:
            self.ledger_list.set(li)
        self.terminated_position = info.terminated_position
        if info.ledgers:
            await self._recover_last_ledger(info.ledgers[-1])
        if self.terminated_position is not None:
            self.ledger_list.last_confirmed = self.terminated_position
            await self._write_list()
            self._set_state(MLState.TERMINATED)
        else:
            await self._create_and_record_ledger(initial=True)
            self._set_state(MLState.LEDGER_OPENED)
        for cname, raw, version in [] if new else await self.meta.load_cursors():
            cursor = await ManagedCursorImpl.recover(self, cname, raw, version)
            self._cursors[cname] = cursor
        self.schedule_trim()  # as Pulsar does after opening: consumed ledgers may be due

    async def _recover_last_ledger(self, last: LedgerInfo) -> None:
        try:
            rh = await self.ctx.bookkeeper.open_ledger(
                last.ledger_id, password=self.config.password, recovery=True
            )
        except NoSuchLedgerError:
            if last.entries == 0:
                self.ledger_list.remove(last.ledger_id)
                self._refresh_lac_from_list()
                return
            raise ManagedLedgerStorageError(f"ledger {last.ledger_id} of {self._name} is missing") from None
        except BKError as e:
            raise ManagedLedgerStorageError(f"recovery of ledger {last.ledger_id} failed: {e!r}") from e
        lac, length = rh.last_add_confirmed, rh.length
        try:
            await rh.close()
        except BKError:
            pass
        if lac < 0 and last.entries == 0:
            # Empty by its closed metadata (the recovery's answer), not only by our list.
            self.ledger_list.remove(last.ledger_id)
            self.ctx.supervisor.spawn(self._delete_bk_ledger(last.ledger_id), name="delete-empty-ledger")
        elif lac + 1 < last.entries:
            # The list recorded more confirmed entries than BookKeeper closed the ledger with:
            # never drop (or delete) it for that; readers of the missing tail get the error.
            log.error(
                "%s: ledger %d recovered with %d entries, the list says %d; keeping the list's count",
                self._name,
                last.ledger_id,
                lac + 1,
                last.entries,
            )
        else:
            self.ledger_list.set(replace(last, entries=lac + 1, size_bytes=length))
        self._refresh_lac_from_list()

    def _refresh_lac_from_list(self) -> None:
        ids = self.ledger_list.ids()
        for lid in reversed(ids):
            n = self.ledger_list.entries_of(lid)
            if n > 0:
                self.ledger_list.last_confirmed = Position(lid, n - 1)
                return
        self.ledger_list.last_confirmed = Position(ids[-1] if ids else -1, -1)

    async def _create_and_record_ledger(self, initial: bool = False) -> None:
        c = self.config
        try:
            handle = await self.ctx.bookkeeper.create_ledger(
                c.ensemble_size,
                c.write_quorum,
                c.ack_quorum,
                password=c.password,
                custom_metadata={
                    "application": b"pulsar",
                    "component": b"managed-ledger",
                    "pulsar/managed-ledger": self._name.encode(),
                    **({"EnsemblePlacementPolicyConfig": c.placement_config} if c.placement_config else {}),
                },
            )
        except BKError as e:
            self.last_ledger_creation_failure_ms = self.ctx.clock.time_ms()
            raise ManagedLedgerStorageError(f"cannot create a ledger for {self._name}: {e!r}") from e
        now = self.ctx.clock.time_ms()
        self.ledger_list.set(LedgerInfo(handle.ledger_id, 0, 0, now))
        try:
            await self._write_list()
        except ManagedLedgerError:
            self.ledger_list.remove(handle.ledger_id)
            await quiet(handle.close())
            self.ctx.supervisor.spawn(self._delete_bk_ledger(handle.ledger_id), name="delete-orphan-ledger")
            raise
        self._handle = handle
        self.ledger_list.current_id = handle.ledger_id
        self.ledger_list.current_entries = 0
        self._issued_entries = self._issued_bytes = 0
        self.ledger_list.current_size = 0
        self.ledger_list.last_confirmed = Position(handle.ledger_id, -1)
        self.last_ledger_created_ms = now
        self._ledger_created_mono = self.ctx.clock.monotonic()

    async def _write_list(self) -> None:
        """CAS the ledger list (a failed CAS fences us)."""
        try:
            await self.meta.store_list(self.ledger_list.infos(), self.terminated_position)
        except ManagedLedgerFencedError:
            self._fence()
            raise

    async def _delete_bk_ledger(self, ledger_id: int) -> None:
        try:
            await self.ctx.bookkeeper.delete_ledger(ledger_id)
        except BKError:
            pass

    # -- waiting for entries ---------------------------------------------------------------------

    async def wait_for_entries_after(self, position: Position) -> None:
        if self.ledger_list.last_confirmed > position or self.state in (
            MLState.TERMINATED,
            MLState.CLOSED,
            MLState.FENCED,
        ):
            return
        fut = asyncio.get_running_loop().create_future()
        if len(self._waiters) > 1024:
            self._waiters = [w for w in self._waiters if not w.done()]
        self._waiters.append(fut)
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()

    def _wake_waiters(self) -> None:
        waiters, self._waiters = self._waiters, []
        for w in waiters:
            if not w.done():
                w.set_result(None)

    # -- reads ------------------------------------------------------------------------------------

    async def read_entry(self, position: Position) -> Entry:
        if position.entry_id < 0 or position.entry_id >= self.ledger_list.entries_of(position.ledger_id):
            raise InvalidCursorPositionError(f"no entry at {position} in {self._name}")
        return await self.reader.read_entry(position)

    async def read_entries_from(self, start: Position, max_entries: int) -> list[Entry]:
        """Up to ``max_entries`` entries from the first existing position >= ``start``
        (admin peek/examine; no cursor involved)."""
        ll = self.ledger_list
        pos = ll.next_valid(start)
        out: list[Entry] = []
        while len(out) < max_entries and pos <= ll.last_confirmed:
            last = min(ll.entries_of(pos.ledger_id) - 1, pos.entry_id + max_entries - len(out) - 1)
            out += await self.reader.read_range(pos.ledger_id, pos.entry_id, last, read_ahead=False)
            pos = ll.next_valid(Position(pos.ledger_id, last + 1))
        return out

    def position_after(self, start: Position, n: int) -> Position:
        """The existing position ``n`` entries after the first existing one >= ``start``
        (past the end: the position after the last entry)."""
        return self.ledger_list.advance(start, n)

    def backlog_size_from(self, position: Position) -> int:
        """Estimated bytes from ``position`` (inclusive) to the end (admin ``backlogSize``)."""
        ll = self.ledger_list
        return ll.size_after(ll.previous(ll.next_valid(position)))

    # -- cursors ------------------------------------------------------------------------------

    async def open_cursor(
        self,
        name: str,
        initial_position: InitialPosition = InitialPosition.LATEST,
        properties: Mapping[str, int] | None = None,
    ) -> ManagedCursor:
        self._check_open()
        existing = self._cursors.get(name)
        if existing is not None:
            return existing
        lock = self._cursor_creations.setdefault(name, asyncio.Lock())
        try:
            async with lock:
                existing = self._cursors.get(name)
                if existing is not None:  # created by the call we waited for
                    return existing
                self._check_open()
                if initial_position is InitialPosition.EARLIEST:
                    md = self.ledger_list.previous(self.ledger_list.first_position())
                else:
                    md = self.ledger_list.last_confirmed
                cursor = await ManagedCursorImpl.create(self, name, md, dict(properties or {}))
                self._cursors[name] = cursor
                return cursor
        finally:
            if self._cursor_creations.get(name) is lock and not lock.locked():
                del self._cursor_creations[name]

    async def new_non_durable_cursor(self, start: Position, name: str | None = None) -> ManagedCursor:
        self._check_open()
        if start == Position.EARLIEST:  # type: ignore[attr-defined]
            md = self.ledger_list.previous(self.ledger_list.first_position())
        elif start == Position.LATEST:  # type: ignore[attr-defined]
            md = self.ledger_list.last_confirmed
        else:
            md = min(start, self.ledger_list.last_confirmed)
        return ManagedCursorImpl.non_durable(self, name or f"reader-{next(self._seq)}", md)

    async def delete_cursor(self, name: str) -> None:
        cursor = self._cursors.pop(name, None)
        if cursor is None:
            raise CursorNotFoundError(f"cursor {name} not found on {self._name}")
        await cursor.delete_durable_state()
        self.schedule_trim()

    def durable_cursors(self) -> list[ManagedCursorImpl]:
        return list(self._cursors.values())

    def _check_open(self) -> None:
        if self.state in (MLState.CLOSED, MLState.NONE):
            raise ManagedLedgerClosedError(f"{self._name} is closed")
        if self.state is MLState.FENCED:
            raise ManagedLedgerFencedError(f"{self._name} is fenced")

    # -- terminate / trim / config / stats ---------------------------------------------------

    async def terminate(self) -> Position:
        async with timed_lock(self._op_lock):
            if self.state is MLState.TERMINATED:
                return self.ledger_list.last_confirmed
            self._check_open()
            if self.state is MLState.LEDGER_OPENED:
                self._set_state(MLState.CLOSING_LEDGER)
            await self._close_current_ledger()
            self._refresh_lac_from_list()
            self.terminated_position = self.ledger_list.last_confirmed
            await self._write_list()
            self._set_state(MLState.TERMINATED)
            self._fail_queue(ManagedLedgerTerminatedError(f"{self._name} is terminated"))
            self._wake_waiters()
            return self.terminated_position

    async def offload_ledger(self, ledger_id: int, *, delete_from_bookkeeper: bool = False) -> None:
        """Offload a closed ledger now (see :mod:`.offload_process`)."""
        await offload_process.offload_one(self, ledger_id, delete_from_bookkeeper=delete_from_bookkeeper)

    def trigger_offload(self, before: Position) -> None:
        """Offload the closed ledgers before ``before`` in the background (admin PUT /offload)."""
        offload_process.trigger(self, before)

    def on_ledger_rolled(self) -> None:
        offload_process.schedule(self)

    def schedule_trim(self) -> None:
        trimmer.schedule(self)

    async def trim_consumed_ledgers(self) -> None:
        await trimmer.trim_consumed_ledgers(self)

    async def set_config(self, config: ManagedLedgerConfig) -> None:
        self.config = config
        self.schedule_trim()

    def internal_stats(self) -> dict:
        return ledger_internal_stats(self)

    async def internal_stats_with_metadata(self) -> dict:
        out = ledger_internal_stats(self)
        for info in out["ledgers"]:
            try:
                md = await self.ctx.bookkeeper.get_ledger_metadata(info["ledgerId"])
            except BKError:
                continue  # deleted meanwhile (or offloaded): no metadata, as in Pulsar
            ensembles = ", ".join(f"{first}=[{', '.join(e)}]" for first, e in md.ensembles)
            info["metadata"] = (
                f"LedgerMetadata{{formatVersion=3, ensembleSize={md.ensemble_size}, "
                f"writeQuorumSize={md.write_quorum}, ackQuorumSize={md.ack_quorum}, "
                f"state={md.state.name}, length={md.length}, lastEntryId={md.last_entry_id}, "
                f"digestType={md.digest_type.name}, password=OMITTED, ensembles={{{ensembles}}}, "
                f"customMetadata={{{', '.join(sorted(md.custom_metadata))}}}}}"
            )
        return out

    def counters(self) -> dict[str, int]:
        """Cumulative counters since this managed ledger was opened (for /metrics)."""
        r = self.reader
        return {
            "entriesAdded": self.entries_added,
            "bytesAdded": self.bytes_added,
            "messagesAdded": self.messages_added,
            "addEntryErrors": self.add_errors,
            "entriesReadFromBookies": r.entries_read_from_bookies,
            "readEntriesErrors": r.read_errors,
            "ledgersDeleted": self.ledgers_deleted,
            "storageSize": self.total_size,
            "numberOfEntries": self.number_of_entries,
        }

    def config_rate(self) -> float:
        return self.config.mark_delete_rate_per_s

    @property
    def op_lock(self) -> asyncio.Lock:
        return self._op_lock

    # -- close / delete ---------------------------------------------------------------------------

    async def close(self) -> None:
        if self.state is MLState.CLOSED:
            return
        async with timed_lock(self._op_lock):
            if self.state is MLState.CLOSED:
                return
            for cursor in list(self._cursors.values()):
                await cursor.close()
            if self._handle is not None:
                await self._close_current_ledger()
                if self.state is not MLState.FENCED:
                    await quiet(self._write_list())
            self._set_state(MLState.CLOSED)
            task = self.offload_state.task
            if task is not None:
                task.cancel()
            self._fail_queue(ManagedLedgerClosedError(f"{self._name} is closed"))
            self._wake_waiters()
            await self.reader.close()
        if self.on_closed is not None:
            self.on_closed(self)

    async def delete(self) -> None:
        if self.state is MLState.FENCED:
            raise ManagedLedgerFencedError(f"{self._name} is owned by another broker: not deleting it")
        if self.state is not MLState.CLOSED:
            async with timed_lock(self._op_lock):
                await self._write_list()  # a CAS: proves we still own it before deleting anything
        ids = self.ledger_list.ids()
        cursors = list(self._cursors.values())
        await self.close()
        for cursor in cursors:
            await cursor.delete_durable_state()
        infos = self.ledger_list.infos()
        for lid in ids:
            self.ctx.cache.invalidate_ledger(lid)
            await self._delete_bk_ledger(lid)
        for info in infos:
            await trimmer.delete_offloaded_copy(self, info)
        await self.meta.delete_all()
