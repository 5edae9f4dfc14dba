"""The offloader seam, the entry cache bound, read-ahead, and list/delete by name."""

from __future__ import annotations

import pytest

from magnetar.bookkeeper.api import LedgerEntry, NoSuchEntryError
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerError, Position
from magnetar.managed_ledger.cache import EntryCache
from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl
from magnetar.managed_ledger.offload import Offloader
from magnetar.testing.ml_conformance import small_config


class _Handle:
    def __init__(self, ledger_id: int, entries: list[bytes]) -> None:
        self.ledger_id = ledger_id
        self._entries = entries
        self.metadata = None
        self.last_add_confirmed = len(entries) - 1
        self.length = sum(map(len, entries))

    async def read(self, first: int, last: int) -> list[LedgerEntry]:
        if last >= len(self._entries):
            raise NoSuchEntryError("past the end")
        return [LedgerEntry(self.ledger_id, i, self._entries[i]) for i in range(first, last + 1)]

    async def read_last_add_confirmed(self) -> int:
        return self.last_add_confirmed

    async def close(self) -> None:
        pass


class DictOffloader:
    driver_name = "dict"

    def driver_metadata(self) -> dict[str, str]:
        return {}

    def __init__(self) -> None:
        self.blobs: dict[int, list[bytes]] = {}
        self.reads = 0
        self.deleted: list[int] = []

    async def offload(self, handle, uid, extra_metadata) -> None:
        lac = handle.last_add_confirmed
        got = await handle.read(0, lac) if lac >= 0 else []
        self.blobs[handle.ledger_id] = [e.data for e in got]

    async def read_offloaded(self, ledger_id: int, uid, driver_metadata):
        self.reads += 1
        return _Handle(ledger_id, self.blobs[ledger_id])

    async def delete_offloaded(self, ledger_id: int, uid, driver_metadata) -> None:
        self.blobs.pop(ledger_id, None)
        self.deleted.append(ledger_id)


async def test_offloaded_ledger_is_read_through_the_offloader(harness) -> None:
    off = DictOffloader()
    assert isinstance(off, Offloader)
    f = ManagedLedgerFactoryImpl(
        harness.server.session(), harness.bk, harness.clock, small_config(), offloader=off, check_interval_s=0
    )
    try:
        ml = await f.open("t/ns/d/offload")
        c = await ml.open_cursor("s", InitialPosition.EARLIEST)
        pos = [await ml.add_entry(b"o%02d" % i) for i in range(25)]
        first = pos[0].ledger_id
        with pytest.raises(ManagedLedgerError):
            await ml.offload_ledger(ml.ledger_list.current_id)
        await ml.offload_ledger(first, delete_from_bookkeeper=True)
        assert first not in harness.bk.ledger_ids()
        assert [li.offloaded for li in ml.ledgers()][:2] == [True, False]
        got = await c.read_entries(12)
        assert [e.data for e in got] == [b"o%02d" % i for i in range(12)]
        assert off.reads == 2  # one to verify the copy before the bookie delete, one to read
        # The flag is persisted: a new owner reads through the offloader too.
        await f.aclose()
        f2 = ManagedLedgerFactoryImpl(
            harness.server.session(),
            harness.bk,
            harness.clock,
            small_config(),
            offloader=off,
            check_interval_s=0,
        )
        ml2 = await f2.open("t/ns/d/offload")
        assert ml2.ledgers()[0].offloaded
        e = await ml2.read_entry(pos[3])
        assert e.data == b"o03"
        # Trimming an offloaded ledger deletes the offloaded copy.
        await ml2.cursors["s"].mark_delete(pos[15])
        await ml2.trim_consumed_ledgers()
        assert off.deleted == [first]
        await f2.aclose()
    finally:
        await f.aclose()


def test_entry_cache_is_bounded_and_fifo() -> None:
    cache = EntryCache(max_bytes=1000)
    for i in range(50):
        cache.put(1, i, b"x" * 100)
    assert cache.size_bytes <= 1000
    assert cache.get(1, 0) is None and cache.get(1, 49) == b"x" * 100
    assert cache.get_run(1, 45, 60) == [b"x" * 100] * 5
    cache.invalidate_ledger(1)
    assert cache.size_bytes == 0 and len(cache) == 0
    cache.put(2, 0, b"y" * 5000)  # bigger than the cache: not kept
    assert cache.get(2, 0) is None


async def test_read_ahead_fills_the_cache(harness) -> None:
    f = await harness.new_factory(small_config(max_entries_per_ledger=1000))
    ml = await f.open("t/ns/d/readahead")
    for i in range(300):
        await ml.add_entry(b"r%03d" % i)
    f.cache.clear()
    c = await ml.new_non_durable_cursor(Position.EARLIEST)  # type: ignore[attr-defined]
    reads0 = harness.bk.counters["reads"]
    n = 0
    while got := await c.read_entries(10):
        n += len(got)
    assert n == 300
    # 10-entry reads with 100 entries of read-ahead: one bookie read per ~110 entries.
    assert harness.bk.counters["reads"] - reads0 <= 4


async def test_list_names_exists_and_delete(harness) -> None:
    f = await harness.new_factory()
    for name in ("a/ns/persistent/t1", "a/ns/persistent/t2", "b/ns/persistent/t1"):
        ml = await f.open(name)
        await ml.open_cursor("sub")
    assert await f.list_names() == ["a/ns/persistent/t1", "a/ns/persistent/t2", "b/ns/persistent/t1"]
    assert await f.list_names("a/") == ["a/ns/persistent/t1", "a/ns/persistent/t2"]
    ml = await f.open("a/ns/persistent/t1")
    p = await ml.add_entry(b"x")
    await f.delete("a/ns/persistent/t1")
    assert not await f.exists("a/ns/persistent/t1")
    assert p.ledger_id not in harness.bk.ledger_ids()
    assert await f.list_names("a/") == ["a/ns/persistent/t2"]


async def test_replay_skips_acked_and_trimmed_positions(harness) -> None:
    f = await harness.new_factory(small_config(retention_time_ms=0, retention_size_bytes=0))
    ml = await f.open("t/ns/d/replay")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"p%02d" % i) for i in range(25)]
    await c.delete([pos[12]])
    old = [pos[2], pos[5]]
    await c.mark_delete(pos[10])
    await ml.trim_consumed_ledgers()
    assert pos[2].ledger_id not in [li.ledger_id for li in ml.ledgers()]
    got = await c.replay_entries(old + [pos[12], pos[13], pos[20]])
    assert [e.data for e in got] == [b"p13", b"p20"]


async def test_admin_reads_peek_examine_backlog_size(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/admin")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"%02d" % i + b"." * 98) for i in range(25)]
    got = await ml.read_entries_from(Position.EARLIEST, 12)  # type: ignore[attr-defined]
    assert [e.position for e in got] == pos[:12]
    assert [e.position for e in await ml.read_entries_from(pos[18], 100)] == pos[18:]
    assert ml.position_after(Position.EARLIEST, 13) == pos[13]  # type: ignore[attr-defined]
    assert ml.position_after(pos[20], 10) > pos[-1]
    assert ml.backlog_size_from(pos[15]) == 10 * 100
    await c.delete([pos[0], pos[2]])
    peeked = await c.peek_entries(3)
    assert [e.position for e in peeked] == [pos[1], pos[3], pos[4]]
    assert c.read_position == pos[1], "peek does not move the read position"


async def test_counters(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/counters")
    for _ in range(5):
        await ml.add_entry(b"12345", num_messages=2)
    harness.bk.faults.fail_add(1)
    with pytest.raises(ManagedLedgerError):
        await ml.add_entry(b"x")
    f.cache.clear()
    await ml.read_entries_from(Position.EARLIEST, 10)  # type: ignore[attr-defined]
    c = ml.counters()
    assert c["entriesAdded"] == 5 and c["bytesAdded"] == 25 and c["messagesAdded"] == 10
    assert c["addEntryErrors"] == 1 and c["entriesReadFromBookies"] == 5
