"""An in-memory bookie with BookKeeper's semantics, for ledger-client tests.

Theory of operation: a :class:`FakeBookie` keeps, per ledger, the master key,
the fenced flag, the highest LAC seen in an entry header, and the entries.
It behaves like a bookie where it matters to the client:

* an add is visible to reads as soon as it is accepted (BK writes the ledger
  storage before the journal), and acknowledged after a simulated journal
  sync (``journal_delay_s``, a number or a callable drawn per add);
  ``crash()`` loses exactly the entries whose sync had not finished (their
  adds fail) and nothing that was acknowledged;
* ``read_entry(fence=True)`` fences the ledger -- creating its state if the
  bookie has never seen it, so a late add from the old writer is refused --
  and later adds without ``recovery=True`` fail with LedgerFencedError;
* a wrong master key is UnauthorizedAccessError; ``LAST_ENTRY`` reads the
  highest entry; ``read_lac`` / ``wait_lac`` report the piggy-backed LAC.

Faults for unit tests: ``down`` (every call fails BookieUnavailable),
``hang`` (calls wait until the caller's timeout), ``fail_adds`` (the next N
adds fail), ``accept_adds_max`` (accept N more adds, then fail them all), ``add_delay_s`` / ``read_delay_s`` (through the injected clock),
``read_only``, and :meth:`corrupt` (flip a payload byte).  It also records
invariant evidence: every accepted add is in ``accepted_adds`` as
(ledger, entry, recovery, fenced_at_the_time).

:class:`FakeBookiePool` implements ``BookieClientPool`` over a dict of fakes
and registers them in a metadata store (``AVAILABLE_PATH`` ephemerals, racks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from magnetar.bookie import api as bookie_api
from magnetar.bookie.api import AVAILABLE_PATH, LAST_ENTRY, RACKS_PATH, READONLY_PATH, BookieInfo
from magnetar.bookie.entry_format import OVERHEAD, MalformedEntry, parse_header
from magnetar.metadata.api import MetadataStore
from magnetar.runtime import Clock, RealClock

DelaySpec = float | Callable[[], float]


@dataclass
class _LedgerState:
    master_key: bytes
    fenced: bool = False
    lac: int = -1
    entries: dict[int, bytes] = field(default_factory=dict)
    unsynced: set[int] = field(default_factory=set)
    lac_changed: asyncio.Event = field(default_factory=asyncio.Event)


class FakeBookie:
    def __init__(
        self, bookie_id: str, clock: Clock | None = None, *, journal_delay_s: DelaySpec = 0.0
    ) -> None:
        self.bookie_id = bookie_id
        self.clock = clock or RealClock()
        self.journal_delay_s = journal_delay_s
        self.ledgers: dict[int, _LedgerState] = {}
        self.down = False
        self.hang = False
        self.read_only = False
        self.fail_adds = 0
        self.accept_adds_max: int | None = None  # adds beyond this many fail (a bookie that gives out)
        self.add_delay_s = 0.0
        self.read_delay_s = 0.0
        self.epoch = 0  # bumps on every crash
        self.accepted_adds: list[tuple[int, int, bool, bool]] = []
        self.counters = {"adds": 0, "reads": 0, "fences": 0, "crashes": 0}

    # --- faults -------------------------------------------------------------------------
    def crash(self) -> None:
        """Lose everything not yet synced; calls fail until :meth:`restart`."""
        self.down = True
        self.epoch += 1
        self.counters["crashes"] += 1
        for state in self.ledgers.values():
            for e in state.unsynced:
                state.entries.pop(e, None)
            state.unsynced.clear()
            state.lac = max((parse_header(v).lac for v in state.entries.values()), default=-1)

    def restart(self) -> None:
        self.down = False
        self.hang = False

    def corrupt(self, ledger_id: int, entry_id: int) -> None:
        raw = bytearray(self.ledgers[ledger_id].entries[entry_id])
        raw[-1 if len(raw) > OVERHEAD else 0] ^= 0xFF
        self.ledgers[ledger_id].entries[entry_id] = bytes(raw)

    def has_entry(self, ledger_id: int, entry_id: int) -> bool:
        state = self.ledgers.get(ledger_id)
        return state is not None and entry_id in state.entries

    async def _gate(self, delay_s: float) -> int:
        if self.down:
            raise bookie_api.BookieUnavailableError("bookie is down", self.bookie_id)
        if self.hang:
            await asyncio.Event().wait()  # the caller's timeout ends this
        if delay_s > 0:
            await self.clock.sleep(delay_s)
            if self.down:
                raise bookie_api.BookieUnavailableError("bookie is down", self.bookie_id)
        return self.epoch

    # --- the BookieClient operations -------------------------------------------------------
    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        epoch = await self._gate(self.add_delay_s)
        if self.fail_adds > 0:
            self.fail_adds -= 1
            raise bookie_api.BookieUnavailableError("injected add failure", self.bookie_id)
        if self.accept_adds_max is not None:
            if self.accept_adds_max <= 0:
                raise bookie_api.BookieUnavailableError("injected add failure (gave out)", self.bookie_id)
            self.accept_adds_max -= 1
        if self.read_only:
            raise bookie_api.BookieReadOnlyError("bookie is read-only", self.bookie_id)
        try:
            header = parse_header(entry)
        except MalformedEntry as exc:
            raise bookie_api.BadRequestError(str(exc), self.bookie_id) from None
        if (header.ledger_id, header.entry_id) != (ledger_id, entry_id):
            raise bookie_api.BadRequestError("entry header does not match the request", self.bookie_id)
        state = self.ledgers.setdefault(ledger_id, _LedgerState(master_key))
        if state.master_key != master_key:
            raise bookie_api.UnauthorizedAccessError("wrong master key", self.bookie_id)
        if state.fenced and not recovery:
            raise bookie_api.LedgerFencedError(f"ledger {ledger_id} is fenced", self.bookie_id)
        self.accepted_adds.append((ledger_id, entry_id, recovery, state.fenced))
        self.counters["adds"] += 1
        was_synced = entry_id in state.entries and entry_id not in state.unsynced
        state.entries[entry_id] = entry
        if not was_synced:
            state.unsynced.add(entry_id)
        delay = self.journal_delay_s() if callable(self.journal_delay_s) else self.journal_delay_s
        if delay > 0:
            await self.clock.sleep(delay)
        if self.epoch != epoch:
            raise bookie_api.BookieUnavailableError("bookie crashed before the journal sync", self.bookie_id)
        state.unsynced.discard(entry_id)
        if header.lac > state.lac:
            state.lac = header.lac
            state.lac_changed.set()
            state.lac_changed = asyncio.Event()

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        await self._gate(self.read_delay_s)
        self.counters["reads"] += 1
        state = self.ledgers.get(ledger_id)
        if fence:
            self.counters["fences"] += 1
            if state is None:
                state = self.ledgers[ledger_id] = _LedgerState(master_key)
            elif state.master_key != master_key:
                raise bookie_api.UnauthorizedAccessError("wrong master key", self.bookie_id)
            state.fenced = True
        if state is None:
            raise bookie_api.NoSuchLedgerError(f"no ledger {ledger_id}", self.bookie_id)
        if entry_id == LAST_ENTRY:
            if not state.entries:
                raise bookie_api.NoSuchEntryError(f"ledger {ledger_id} has no entries", self.bookie_id)
            entry_id = max(state.entries)
        data = state.entries.get(entry_id)
        if data is None:
            raise bookie_api.NoSuchEntryError(f"no entry {ledger_id}:{entry_id}", self.bookie_id)
        return data

    async def read_lac(self, ledger_id: int) -> int:
        await self._gate(self.read_delay_s)
        state = self.ledgers.get(ledger_id)
        if state is None:
            raise bookie_api.NoSuchLedgerError(f"no ledger {ledger_id}", self.bookie_id)
        return state.lac

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        await self._gate(0.0)
        state = self.ledgers.get(ledger_id)
        if state is None:
            raise bookie_api.NoSuchLedgerError(f"no ledger {ledger_id}", self.bookie_id)
        if state.lac > previous_lac:
            return state.lac
        changed = state.lac_changed
        handle = self.clock.call_later(timeout_ms / 1000.0, changed.set)
        try:
            await changed.wait()
        finally:
            handle.cancel()
        return state.lac

    async def get_info(self) -> BookieInfo:
        await self._gate(0.0)
        return BookieInfo(self.bookie_id, 1 << 30, 1 << 29, self.read_only)

    def delete_ledger(self, ledger_id: int) -> None:
        self.ledgers.pop(ledger_id, None)


class FakeBookieClient:
    """A BookieClient bound to one :class:`FakeBookie` (or to nothing: always unavailable)."""

    def __init__(self, bookie_id: str, bookie: FakeBookie | None) -> None:
        self._id = bookie_id
        self._bookie = bookie

    @property
    def bookie_id(self) -> str:
        return self._id

    def _target(self) -> FakeBookie:
        if self._bookie is None:
            raise bookie_api.BookieUnavailableError(f"unknown bookie {self._id}", self._id)
        return self._bookie

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        await self._target().add_entry(ledger_id, entry_id, master_key, entry, recovery=recovery)

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        return await self._target().read_entry(ledger_id, entry_id, fence=fence, master_key=master_key)

    async def read_lac(self, ledger_id: int) -> int:
        return await self._target().read_lac(ledger_id)

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        return await self._target().wait_lac(ledger_id, previous_lac, timeout_ms)

    async def get_info(self) -> BookieInfo:
        return await self._target().get_info()

    async def aclose(self) -> None:
        return None


class FakeBookiePool:
    """``BookieClientPool`` over in-memory bookies."""

    def __init__(self, bookies: Iterable[FakeBookie] = ()) -> None:
        self.bookies: dict[str, FakeBookie] = {b.bookie_id: b for b in bookies}

    @classmethod
    def of(
        cls, count: int, clock: Clock | None = None, prefix: str = "bookie-", **kwargs: object
    ) -> FakeBookiePool:
        return cls(FakeBookie(f"{prefix}{i}:3181", clock, **kwargs) for i in range(count))  # type: ignore[arg-type]

    def add(self, bookie: FakeBookie) -> FakeBookie:
        self.bookies[bookie.bookie_id] = bookie
        return bookie

    def __getitem__(self, bookie_id: str) -> FakeBookie:
        return self.bookies[bookie_id]

    def get(self, bookie_id: str) -> FakeBookieClient:
        return FakeBookieClient(bookie_id, self.bookies.get(bookie_id))

    async def aclose(self) -> None:
        return None

    async def register(
        self,
        store: MetadataStore,
        only: Iterable[str] | None = None,
        racks: Mapping[str, str] | None = None,
        read_only: Iterable[str] = (),
    ) -> None:
        """Announce bookies as available (ephemeral nodes of ``store``'s session)."""
        for bookie_id in sorted(only if only is not None else self.bookies):
            await store.put(f"{AVAILABLE_PATH}/{bookie_id}", b"", ephemeral=True)
        for bookie_id in sorted(read_only):
            await store.put(f"{READONLY_PATH}/{bookie_id}", b"", ephemeral=True)
        for bookie_id, rack in sorted((racks or {}).items()):
            await store.put(f"{RACKS_PATH}/{bookie_id}", rack.encode())

    @staticmethod
    async def unregister(store: MetadataStore, bookie_id: str) -> None:
        await store.delete(f"{AVAILABLE_PATH}/{bookie_id}")
