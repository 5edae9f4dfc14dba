"""Managed-ledger conformance suite: the behaviour every storage stack must show.

Theory of operation: a *harness* provides storage (a metadata server and
ledger storage) and builds factories over it; ``new_factory()`` is "a new
broker process on the same storage", so a check can write, drop the factory
without closing it (a crash) or close it, and reopen.  Each ``check_*`` is an
async function taking a harness; :data:`CHECKS` lists them, and
``tests/conformance/test_managed_ledger_conformance.py`` runs every check over
every harness (in-memory BookKeeper, and the real ledger client over the
in-process bookie when present).

:class:`MemoryHarness` is here; other harnesses implement the same two
methods (``new_factory(config)`` and ``aclose()``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Protocol

from magnetar.managed_ledger.api import (
    InitialPosition,
    ManagedLedgerConfig,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
    Position,
)
from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import Clock, RealClock
from magnetar.testing.memory_bookkeeper import MemoryBookKeeper

SMALL = ManagedLedgerConfig(max_entries_per_ledger=10, min_ledger_rollover_time_ms=0)


def small_config(**overrides: object) -> ManagedLedgerConfig:
    """Test settings: 10 entries a ledger, no minimum rollover time, 5 s add timeout."""
    base: dict[str, object] = {
        "max_entries_per_ledger": 10,
        "min_ledger_rollover_time_ms": 0,
        "add_entry_timeout_ms": 5_000,
    }
    base.update(overrides)
    return ManagedLedgerConfig(**base)  # type: ignore[arg-type]


class MLHarness(Protocol):
    clock: Clock

    async def new_factory(self, config: ManagedLedgerConfig | None = None) -> ManagedLedgerFactoryImpl: ...

    async def aclose(self) -> None: ...


class MemoryHarness:
    """Memory metadata server + :class:`MemoryBookKeeper`, shared by every factory built."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock or RealClock()
        self.server = MemoryMetadataServer(clock=self.clock)
        self.bk = MemoryBookKeeper(self.clock)
        self._factories: list[ManagedLedgerFactoryImpl] = []

    async def new_factory(self, config: ManagedLedgerConfig | None = None) -> ManagedLedgerFactoryImpl:
        f = ManagedLedgerFactoryImpl(
            self.server.session(), self.bk, self.clock, config or SMALL, check_interval_s=0
        )
        self._factories.append(f)
        return f

    async def aclose(self) -> None:
        for f in self._factories:
            await f.aclose()


class LocalBookieHarness:
    """The real storage stack in-process: a :class:`LedgerStorage` bookie under ``data_dir``
    reached through the in-process bookie client, and a real :class:`BookKeeperClient` per
    factory (so a new factory is a new client, as after a broker restart), over a memory
    metadata server.  ``sync_journal=False`` skips fsync (the data still reaches the files)."""

    def __init__(
        self,
        data_dir: str,
        clock: Clock | None = None,
        *,
        sync_journal: bool = False,
        **bookie_overrides: object,
    ) -> None:
        self.clock = clock or RealClock()
        self.bookie_overrides = bookie_overrides
        self.data_dir = data_dir
        self.sync_journal = sync_journal
        self.server = MemoryMetadataServer(clock=self.clock)
        self._factories: list[ManagedLedgerFactoryImpl] = []
        self._clients: list[object] = []
        self._seed = 0
        self.storage = None
        self.pool = None

    async def start(self) -> LocalBookieHarness:
        from magnetar.bookie.api import AVAILABLE_PATH
        from magnetar.bookie.config import BookieConfig
        from magnetar.bookie.local_client import LocalBookieClient, LocalBookieClientPool
        from magnetar.bookie.storage import LedgerStorage

        cfg = BookieConfig.for_data_dir(
            self.data_dir,
            journal_sync_data=self.sync_journal,
            bookie_id="127.0.0.1:3181",
            **self.bookie_overrides,
        )
        self.storage = LedgerStorage(cfg, clock=self.clock)
        await self.storage.open()
        self.pool = LocalBookieClientPool(LocalBookieClient(self.storage))
        self._registrar = self.server.session()
        await self._registrar.put(f"{AVAILABLE_PATH}/{self.storage.bookie_id}", b"", ephemeral=True)
        return self

    def new_bookkeeper(self):  # noqa: ANN201 - a BookKeeperClient
        from magnetar.bookkeeper.client import BookKeeperClient
        from magnetar.runtime import Rng

        self._seed += 1
        bk = BookKeeperClient(self.server.session(), self.pool, self.clock, Rng(self._seed))
        self._clients.append(bk)
        return bk

    async def new_factory(self, config: ManagedLedgerConfig | None = None) -> ManagedLedgerFactoryImpl:
        f = ManagedLedgerFactoryImpl(
            self.server.session(), self.new_bookkeeper(), self.clock, config or SMALL, check_interval_s=0
        )
        self._factories.append(f)
        return f

    async def aclose(self) -> None:
        for f in self._factories:
            await f.aclose()
        for bk in self._clients:
            await bk.aclose()  # type: ignore[attr-defined]
        if self.pool is not None:
            await self.pool.aclose()
        if self.storage is not None:
            await self.storage.aclose()


def _payload(i: int) -> bytes:
    return b"entry-%06d" % i


async def check_add_and_read(h: MLHarness) -> None:
    f = await h.new_factory()
    ml = await f.open("t/ns/persistent/add-read")
    c = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    positions = await asyncio.gather(*(ml.add_entry(_payload(i)) for i in range(35)))
    assert positions == sorted(positions) and len(set(positions)) == 35, positions
    assert ml.last_confirmed_entry == positions[-1]
    assert ml.number_of_entries == 35
    assert len({p.ledger_id for p in positions}) >= 3, "rolled over every 10 entries"
    got = []
    while True:
        batch = await c.read_entries(8)
        if not batch:
            break
        got.extend(batch)
    assert [e.data for e in got] == [_payload(i) for i in range(35)]
    assert [e.position for e in got] == positions
    assert c.number_of_entries_in_backlog() == 35
    assert not c.has_more_entries()
    e = await ml.read_entry(positions[17])
    assert e.data == _payload(17)


async def check_cursor_acks_and_restart(h: MLHarness) -> None:
    f = await h.new_factory()
    ml = await f.open("t/ns/persistent/acks")
    c = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(_payload(i)) for i in range(30)]
    await c.delete([pos[0], pos[1], pos[3], pos[5], pos[6], pos[12], pos[25]])
    assert c.mark_delete_position == pos[1]
    await c.ack_batch_indexes(pos[7], [0b1010])
    await c.ack_batch_indexes(pos[7], [0b0010 | 0b1000_0000])
    assert c.get_ack_set(pos[7]) == [0b0010]
    await c.ack_batch_indexes(pos[8], [0xFF])
    backlog = c.number_of_entries_in_backlog()
    assert backlog == 30 - 7
    ranges = c.individually_deleted_ranges()
    await c.mark_delete(pos[2], {"k": 7})
    assert c.mark_delete_position == pos[3]
    ranges = c.individually_deleted_ranges()
    await f.aclose()

    f2 = await h.new_factory()
    ml2 = await f2.open("t/ns/persistent/acks")
    c2 = ml2.cursors["sub"]
    assert c2.mark_delete_position == pos[3]
    assert c2.individually_deleted_ranges() == ranges
    assert c2.get_ack_set(pos[7]) == [0b0010]
    assert c2.get_ack_set(pos[8]) == [0xFF]
    assert c2.properties == {"k": 7}
    assert c2.number_of_entries_in_backlog() == 30 - 8
    got = await c2.read_entries(100)
    expect = [p for i, p in enumerate(pos) if i not in (0, 1, 2, 3, 5, 6, 12, 25)]
    assert [e.position for e in got] == expect
    # New adds land after the recovered ones.
    p = await ml2.add_entry(b"after-restart")
    assert p > pos[-1]


async def check_crash_recovery(h: MLHarness) -> None:
    """Drop a factory without closing it; a new owner fences the old one and recovers."""
    f = await h.new_factory()
    ml = await f.open("t/ns/persistent/crash")
    c = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(_payload(i)) for i in range(15)]
    await c.delete(pos[:4] + [pos[9]])
    f2 = await h.new_factory()
    ml2 = await f2.open("t/ns/persistent/crash")
    assert ml2.last_confirmed_entry > pos[-1]  # (new ledger, -1), as Pulsar
    assert ml2.number_of_entries == 15
    c2 = ml2.cursors["sub"]
    assert c2.mark_delete_position == pos[3]
    assert c2.is_acknowledged(pos[9]) and not c2.is_acknowledged(pos[8])
    # The old owner is fenced: its next add (or metadata write) fails clearly.
    try:
        for i in range(20):
            await ml.add_entry(b"stale-%d" % i)
    except ManagedLedgerFencedError:
        pass
    else:
        raise AssertionError("old owner was not fenced")
    got = await c2.read_entries(100)
    assert [e.data for e in got] == [_payload(i) for i in range(4, 15) if i != 9]
    await f2.aclose()


async def check_tailing_wait(h: MLHarness) -> None:
    f = await h.new_factory()
    ml = await f.open("t/ns/persistent/tail")
    c = await ml.new_non_durable_cursor(Position.LATEST)  # type: ignore[attr-defined]
    reader = asyncio.ensure_future(c.read_entries_or_wait(10))
    await asyncio.sleep(0)
    assert not reader.done()
    p = await ml.add_entry(b"x")
    got = await asyncio.wait_for(reader, 5)
    assert [e.position for e in got] == [p]
    assert "nd" not in ml.cursors


async def check_seek_reset_skip_clear(h: MLHarness) -> None:
    f = await h.new_factory()
    ml = await f.open("t/ns/persistent/moves")
    c = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(_payload(i)) for i in range(25)]
    await c.skip_entries(3)
    assert c.mark_delete_position == pos[2]
    await c.delete([pos[4], pos[5]])
    await c.skip_entries(2)  # skips 3 and 6 (4, 5 already acked)
    assert c.mark_delete_position == pos[6]
    await c.seek(pos[20])
    assert [e.position for e in await c.read_entries(2)] == pos[20:22]
    c.rewind()
    assert c.read_position == pos[7]
    await c.reset_cursor(pos[12])
    assert c.mark_delete_position == pos[11] and c.read_position == pos[12]
    assert c.number_of_entries_in_backlog() == 13
    found = await c.find_position_by_publish_time(1000 + 15, lambda d: 1000 + int(d[-6:]))
    assert found == pos[15]
    await c.clear_backlog()
    assert c.number_of_entries_in_backlog() == 0 and not c.has_more_entries()


async def check_terminate(h: MLHarness) -> None:
    f = await h.new_factory()
    ml = await f.open("t/ns/persistent/term")
    for i in range(5):
        await ml.add_entry(_payload(i))
    last = await ml.terminate()
    assert last == ml.last_confirmed_entry and ml.is_terminated
    try:
        await ml.add_entry(b"no")
    except ManagedLedgerTerminatedError:
        pass
    else:
        raise AssertionError("add after terminate succeeded")
    await f.aclose()
    f2 = await h.new_factory()
    ml2 = await f2.open("t/ns/persistent/term")
    assert ml2.is_terminated and ml2.last_confirmed_entry == last


async def check_trim_and_delete(h: MLHarness) -> None:
    f = await h.new_factory()
    ml = await f.open("t/ns/persistent/trim")
    c = await ml.open_cursor("sub", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(_payload(i)) for i in range(35)]
    first_ledgers = sorted({p.ledger_id for p in pos})
    await c.mark_delete(pos[24])
    await ml.trim_consumed_ledgers()
    remaining = [li.ledger_id for li in ml.ledgers()]
    assert first_ledgers[0] not in remaining and first_ledgers[1] not in remaining, remaining
    assert pos[25].ledger_id in remaining
    assert c.number_of_entries_in_backlog() == 10
    got = await c.read_entries(100)
    assert [e.position for e in got] == pos[25:]
    names = await f.list_names("t/ns")
    assert "t/ns/persistent/trim" in names
    await f.delete("t/ns/persistent/trim")
    assert not await f.exists("t/ns/persistent/trim")


CHECKS: list[Callable[[MLHarness], Awaitable[None]]] = [
    check_add_and_read,
    check_cursor_acks_and_restart,
    check_crash_recovery,
    check_tailing_wait,
    check_seek_reset_skip_clear,
    check_terminate,
    check_trim_and_delete,
]
