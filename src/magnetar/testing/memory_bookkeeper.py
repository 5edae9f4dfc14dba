"""An in-memory BookKeeper with scripted failures.

Theory of operation: :class:`MemoryBookKeeper` implements
:mod:`magnetar.bookkeeper.api` with ledgers held in a dict, so the managed
ledger (and everything above it) can be tested without bookies.  It keeps the
semantics that matter to a writer and a recovering reader:

* ledger ids grow from 1; entry ids from 0; adds complete in call order and the
  LAC only moves over confirmed entries;
* once an add fails, the handle is *broken*: every later add on it fails with
  the same error (as a real handle that errors out), and ``close`` seals the
  ledger at the LAC, so entries after a failure never become part of it;
* a reader opening an OPEN ledger without recovery sees the LAC piggybacked on
  its last entry, i.e. the entry before the last (as with real bookies);
* ``open_ledger(recovery=True)`` fences the ledger: the old writer's next add
  fails with :class:`LedgerFencedError`; the ledger is closed at its LAC;
* ``delete_ledger`` removes it; reads of a deleted ledger fail NoSuchLedger.

Failures are scripted on :attr:`MemoryBookKeeper.faults` (a :class:`FaultScript`):
``fail_add(nth)`` fails the nth add from now (1 = the next one),
``fail_create(count)``, ``fail_open(count)``, ``fail_close(count)`` (the ledger
stays OPEN), ``fence_now(ledger_id)``,
``delay_reads(seconds)`` / ``delay_adds(seconds)`` (through the injected clock), and
``hold_adds()`` / ``release_adds()`` to park adds until released (pipelining tests).
Everything it does is also counted in :attr:`MemoryBookKeeper.counters`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from magnetar.bookkeeper.api import (
    BKClosedError,
    BKError,
    DigestType,
    LedgerClosedError,
    LedgerFencedError,
    LedgerMetadata,
    LedgerState,
    NoSuchEntryError,
    NoSuchLedgerError,
    NotEnoughBookiesError,
)
from magnetar.runtime import Clock, RealClock

_HOLD_TIMEOUT_S = 60.0


@dataclass
class FaultScript:
    """Scripted failures; every field is consumed as the operations happen."""

    add_failures: dict[int, BKError] = field(default_factory=dict)  # absolute add number -> error
    create_failures: list[BKError] = field(default_factory=list)
    open_failures: list[BKError] = field(default_factory=list)
    close_failures: list[BKError] = field(default_factory=list)
    read_delay_s: float = 0.0
    add_delay_s: float = 0.0
    adds_seen: int = 0
    hold: asyncio.Event | None = None

    def fail_add(self, nth: int = 1, error: BKError | None = None) -> None:
        self.add_failures[self.adds_seen + nth] = error or NotEnoughBookiesError("scripted add failure")

    def fail_create(self, count: int = 1, error: BKError | None = None) -> None:
        self.create_failures.extend([error or NotEnoughBookiesError("scripted create failure")] * count)

    def fail_open(self, count: int = 1, error: BKError | None = None) -> None:
        self.open_failures.extend([error or NotEnoughBookiesError("scripted open failure")] * count)

    def fail_close(self, count: int = 1, error: BKError | None = None) -> None:
        """The next ``count`` write-handle closes fail and leave the ledger OPEN."""
        self.close_failures.extend([error or NotEnoughBookiesError("scripted close failure")] * count)

    def delay_reads(self, seconds: float) -> None:
        self.read_delay_s = seconds

    def delay_adds(self, seconds: float) -> None:
        self.add_delay_s = seconds

    def hold_adds(self) -> None:
        self.hold = asyncio.Event()

    def release_adds(self) -> None:
        if self.hold is not None:
            self.hold.set()
            self.hold = None


class _Ledger:
    __slots__ = ("metadata", "entries", "fenced", "length")

    def __init__(self, metadata: LedgerMetadata) -> None:
        self.metadata = metadata
        self.entries: list[bytes] = []
        self.fenced = False
        self.length = 0


class _ReadHandle:
    def __init__(self, bk: MemoryBookKeeper, ledger: _Ledger) -> None:
        self._bk = bk
        self._ledger = ledger
        self._lid = ledger.metadata.ledger_id
        self._lac = bk._lac_of(ledger)

    @property
    def ledger_id(self) -> int:
        return self._lid

    @property
    def metadata(self) -> LedgerMetadata:
        return self._ledger.metadata

    @property
    def last_add_confirmed(self) -> int:
        return self._lac

    @property
    def length(self) -> int:
        return self._ledger.length

    async def read(self, first_entry_id: int, last_entry_id: int) -> list:
        from magnetar.bookkeeper.api import LedgerEntry

        self._bk._check_open()
        if self._bk.faults.read_delay_s > 0:
            await self._bk.clock.sleep(self._bk.faults.read_delay_s)
        if self._lid not in self._bk._ledgers:
            raise NoSuchLedgerError(f"ledger {self._lid} deleted")
        if first_entry_id < 0 or last_entry_id < first_entry_id:
            raise NoSuchEntryError(f"bad range {first_entry_id}..{last_entry_id}")
        if last_entry_id > self._lac:
            if self._ledger.metadata.is_closed:
                raise LedgerClosedError(f"ledger {self._lid} ends at {self._lac}")
            raise NoSuchEntryError(f"entry {last_entry_id} > LAC {self._lac} of ledger {self._lid}")
        self._bk.counters["reads"] += 1
        self._bk.counters["entries_read"] += last_entry_id - first_entry_id + 1
        lid, entries = self._lid, self._ledger.entries
        return [LedgerEntry(lid, i, entries[i]) for i in range(first_entry_id, last_entry_id + 1)]

    async def read_last_add_confirmed(self) -> int:
        self._lac = max(self._lac, self._bk._lac_of(self._ledger))
        return self._lac

    async def close(self) -> None:
        return None


class _WriteHandle(_ReadHandle):
    def __init__(self, bk: MemoryBookKeeper, ledger: _Ledger) -> None:
        super().__init__(bk, ledger)
        self._lac = -1  # the writer knows its own LAC exactly
        self._pushed = -1
        self._error: BKError | None = None
        self._closed = False
        self._pending = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._prev_done: asyncio.Future[None] | None = None

    @property
    def last_add_pushed(self) -> int:
        return self._pushed

    async def add_entry(self, data: bytes) -> int:
        bk = self._bk
        bk._check_open()
        if self._closed:
            raise LedgerClosedError(f"ledger {self._lid} is closed")
        faults = bk.faults
        faults.adds_seen += 1
        scripted = faults.add_failures.pop(faults.adds_seen, None)
        self._pushed += 1
        entry_id = self._pushed
        if not self._pending and faults.hold is None and faults.add_delay_s <= 0:
            # Nothing in flight and nothing scripted to wait: complete now (the common case).
            return self._complete(entry_id, data, scripted)
        self._pending += 1
        self._drained.clear()
        prev, done = self._prev_done, asyncio.get_running_loop().create_future()
        self._prev_done = done
        try:
            hold = faults.hold
            if hold is not None:
                await asyncio.wait_for(hold.wait(), _HOLD_TIMEOUT_S)
            if faults.add_delay_s > 0:
                await bk.clock.sleep(faults.add_delay_s)
            if prev is not None and not prev.done():
                await asyncio.wait_for(asyncio.shield(prev), _HOLD_TIMEOUT_S)  # complete in order
            return self._complete(entry_id, data, scripted)
        finally:
            done.set_result(None)
            self._pending -= 1
            if self._pending == 0:
                self._drained.set()

    def _complete(self, entry_id: int, data: bytes, scripted: BKError | None) -> int:
        bk, ledger = self._bk, self._ledger
        if self._error is None:
            if ledger.fenced:
                self._error = LedgerFencedError(f"ledger {self._lid} fenced")
            elif scripted is not None:
                self._error = scripted
            elif self._lid not in bk._ledgers:
                self._error = NoSuchLedgerError(f"ledger {self._lid} deleted")
        if self._error is not None:
            bk.counters["adds_failed"] += 1
            raise self._error
        # In-order completion: entry_id is exactly the next slot.
        assert entry_id == len(ledger.entries), (entry_id, len(ledger.entries))
        ledger.entries.append(bytes(data))
        ledger.length += len(data)
        self._lac = entry_id
        bk.counters["adds"] += 1
        return entry_id

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.wait_for(self._drained.wait(), _HOLD_TIMEOUT_S)
        if self._bk.faults.close_failures:
            raise self._bk.faults.close_failures.pop(0)
        ledger = self._ledger
        if self._lid in self._bk._ledgers and not ledger.metadata.is_closed:
            self._bk._seal(ledger)


class MemoryBookKeeper:
    """In-memory :class:`magnetar.bookkeeper.api.BookKeeper` with a :class:`FaultScript`."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or RealClock()
        self.faults = FaultScript()
        self.counters: dict[str, int] = {
            "adds": 0,
            "adds_failed": 0,
            "reads": 0,
            "entries_read": 0,
            "created": 0,
            "deleted": 0,
        }
        self._ledgers: dict[int, _Ledger] = {}
        self._next_id = 1
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise BKClosedError("bookkeeper client closed")

    @staticmethod
    def _lac_of(ledger: _Ledger) -> int:
        """What a reader learns: the closed ledger's last entry, or for an OPEN ledger the LAC
        piggybacked on the last entry -- which confirms only the entry before it."""
        return ledger.metadata.last_entry_id if ledger.metadata.is_closed else len(ledger.entries) - 2

    def _seal(self, ledger: _Ledger) -> None:
        ledger.metadata = replace(
            ledger.metadata,
            state=LedgerState.CLOSED,
            last_entry_id=len(ledger.entries) - 1,
            length=ledger.length,
        )

    # -- scripted faults that act on a ledger --------------------------------------------------

    def fence_now(self, ledger_id: int) -> None:
        """Fence the ledger as a recovering reader would: its writer's next add fails."""
        ledger = self._ledgers[ledger_id]
        ledger.fenced = True
        if not ledger.metadata.is_closed:
            self._seal(ledger)

    def entries_of(self, ledger_id: int) -> list[bytes]:
        return list(self._ledgers[ledger_id].entries)

    def ledger_ids(self) -> list[int]:
        return sorted(self._ledgers)

    # -- BookKeeper ------------------------------------------------------------------------------

    async def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        *,
        digest_type: DigestType = DigestType.CRC32C,
        password: bytes = b"",
        custom_metadata: Mapping[str, bytes] | None = None,
    ) -> _WriteHandle:
        self._check_open()
        if not ensemble_size >= write_quorum >= ack_quorum >= 1:
            raise ValueError(f"bad quorums E={ensemble_size} Qw={write_quorum} Qa={ack_quorum}")
        if self.faults.create_failures:
            raise self.faults.create_failures.pop(0)
        lid = self._next_id
        self._next_id += 1
        ensemble = tuple(f"memory-bookie-{i}:3181" for i in range(ensemble_size))
        md = LedgerMetadata(
            ledger_id=lid,
            ensemble_size=ensemble_size,
            write_quorum=write_quorum,
            ack_quorum=ack_quorum,
            state=LedgerState.OPEN,
            ensembles=((0, ensemble),),
            digest_type=digest_type,
            password=password,
            ctime_ms=self.clock.time_ms(),
            custom_metadata=dict(custom_metadata or {}),
        )
        ledger = _Ledger(md)
        self._ledgers[lid] = ledger
        self.counters["created"] += 1
        return _WriteHandle(self, ledger)

    async def open_ledger(
        self, ledger_id: int, *, password: bytes = b"", recovery: bool = True
    ) -> _ReadHandle:
        self._check_open()
        if self.faults.open_failures:
            raise self.faults.open_failures.pop(0)
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} does not exist")
        if recovery:
            self.fence_now(ledger_id)
        return _ReadHandle(self, ledger)

    async def delete_ledger(self, ledger_id: int) -> None:
        self._check_open()
        if self._ledgers.pop(ledger_id, None) is not None:
            self.counters["deleted"] += 1

    async def get_ledger_metadata(self, ledger_id: int) -> LedgerMetadata:
        self._check_open()
        ledger = self._ledgers.get(ledger_id)
        if ledger is None:
            raise NoSuchLedgerError(f"ledger {ledger_id} does not exist")
        return ledger.metadata

    async def list_ledgers(self) -> Sequence[int]:
        self._check_open()
        return sorted(self._ledgers)

    async def aclose(self) -> None:
        self._closed = True
