"""CompactedTopicReader: positioning by binary search, limits, acks, and a compaction under a reader."""

from __future__ import annotations

import asyncio

from compaction_helpers import decode_messages, read_view, single

from magnetar.broker.compaction import CompactedTopicReader, Compactor, read_horizon
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position

CONFIG = ManagedLedgerConfig(max_entries_per_ledger=50, min_ledger_rollover_time_ms=0)


async def compacted_topic(harness, n_keys: int = 200, rounds: int = 3):
    """Every key written ``rounds`` times, in rounds: the survivors are the last round's."""
    ml = await (await harness.new_factory(CONFIG)).open("public/default/persistent/view")
    seq = 0
    last: dict[str, Position] = {}
    for r in range(rounds):
        for i in range(n_keys):
            seq += 1
            last[f"k{i:04d}"] = await ml.add_entry(single(f"k{i:04d}", b"%d-%d" % (r, i), seq))
    await Compactor(harness.bk, harness.clock).compact(ml)
    return ml, last


async def new_reader(
    ml, harness, name: str, start: Position | None = Position.EARLIEST
) -> CompactedTopicReader:
    cursor = await ml.open_cursor(name, InitialPosition.EARLIEST)
    return CompactedTopicReader(ml, cursor, harness.bk, start=start)


async def test_seek_lands_on_the_first_compacted_entry_at_or_after_the_position(harness):
    ml, last = await compacted_topic(harness)
    positions = sorted(last.values())
    reader = await new_reader(ml, harness, "s")
    for target in (positions[0], positions[57], positions[-1]):
        await reader.seek(target)
        (first, *_rest) = await reader.read_entries(3)
        assert first.position == target
    # The position of an overwritten message (round one) maps to the next survivor.
    overwritten = (await ml.read_entries_from(Position.EARLIEST, 6))[5].position
    assert overwritten < positions[0]
    await reader.seek(overwritten)
    assert (await reader.read_entries(1))[0].position == positions[0]
    # Past the horizon the reader is on the live topic.
    await reader.seek(read_horizon(ml).position.next())
    assert await reader.read_entries(10) == []
    await ml.add_entry(single("live", b"x", 1))
    (live,) = await reader.read_entries(10)
    assert decode_messages(live.data) == [("live", b"x", False)]
    await reader.close()


async def test_limits_and_acks(harness):
    ml, last = await compacted_topic(harness, n_keys=50)
    reader = await new_reader(ml, harness, "acks")
    got = await reader.read_entries(10, max_bytes=1)
    assert len(got) == 1, "max_bytes stops after the first entry that reaches it"
    got += await reader.read_entries(9)
    assert [e.position for e in got] == sorted(last.values())[:10]
    # Acked compacted entries (their ledgers still exist) are skipped after a rewind.
    cursor = ml.cursors["acks"]
    await cursor.delete([e.position for e in got[:5]])
    reader.rewind()
    again = await reader.read_entries(5)
    assert [e.position for e in again] == [e.position for e in got[5:10]]
    await reader.close()


async def test_reader_survives_a_compaction_that_deletes_its_compacted_ledger(harness):
    ml, _last = await compacted_topic(harness, n_keys=100, rounds=2)
    reader = await new_reader(ml, harness, "r")
    first = await reader.read_entries(30)
    old = read_horizon(ml)
    for i in range(50):  # update half of the keys, then compact again
        await ml.add_entry(single(f"k{i:04d}", b"new-%d" % i, 1000 + i))
    await Compactor(harness.bk, harness.clock).compact(ml)
    assert old.ledger_id not in harness.bk.ledger_ids()
    rest = await read_view(reader)
    seen = {k: v for e in first for k, v, _ in decode_messages(e.data)}
    seen.update({k: v for _p, k, v, _n in rest})
    assert len(seen) == 100
    assert all(seen[f"k{i:04d}"] == b"new-%d" % i for i in range(50))
    assert all(seen[f"k{i:04d}"] == b"1-%d" % i for i in range(50, 100))
    await reader.close()


async def test_writes_during_compaction_stay_live(harness):
    ml = await (await harness.new_factory(CONFIG)).open("public/default/persistent/busy")
    for i in range(2_000):
        await ml.add_entry(single(f"k{i % 10}", b"v%d" % i, i))
    end_at_start = ml.last_confirmed_entry
    compaction = asyncio.ensure_future(Compactor(harness.bk, harness.clock).compact(ml))
    written = []
    while not compaction.done():
        written.append(await ml.add_entry(single("k0", b"during-%d" % len(written), 10_000 + len(written))))
        await asyncio.sleep(0)
    result = await compaction
    assert written, "the writer ran while the compaction did"
    assert result.horizon.position == end_at_start
    view = await read_view(await new_reader(ml, harness, "v"))
    compacted = [row for row in view if row[0] <= end_at_start]
    assert len(compacted) == 10
    assert [row[0] for row in view if row[0] > end_at_start] == written


class _LazyDeleteBookKeeper:
    """Deleted ledgers stay readable (as on a bookie before its GC runs)."""

    def __init__(self, inner) -> None:  # noqa: ANN001
        self._inner = inner
        self.deleted: list[int] = []

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self._inner, name)

    async def delete_ledger(self, ledger_id: int) -> None:
        self.deleted.append(ledger_id)


async def test_reader_between_reads_moves_to_a_newer_compacted_ledger_when_retention_trimmed_the_gap(harness):
    config = ManagedLedgerConfig(
        max_entries_per_ledger=20, min_ledger_rollover_time_ms=0, retention_time_ms=0, retention_size_bytes=0
    )
    ml = await (await harness.new_factory(config)).open("public/default/persistent/gap")
    lazy = _LazyDeleteBookKeeper(harness.bk)
    for r in range(2):
        for i in range(100):
            await ml.add_entry(single(f"k{i:03d}", b"%d-%d" % (r, i), r * 100 + i))
    await Compactor(lazy, harness.clock).compact(ml)
    cursor = await ml.new_non_durable_cursor(Position.EARLIEST)  # a reader: holds no data back
    reader = CompactedTopicReader(ml, cursor, harness.bk, start=Position.EARLIEST)
    first = await reader.read_entries(30)
    for i in range(50):  # newer values, then a compaction that lets retention drop them
        await ml.add_entry(single(f"k{i:03d}", b"new-%d" % i, 1000 + i))
    await ml.add_entry(single("tail", b"t", 2000))
    await Compactor(lazy, harness.clock).compact(ml)
    await ml.trim_consumed_ledgers()
    assert lazy.deleted, "the old compacted ledger is still readable through the reader's handle"
    rest = await read_view(reader)
    seen = {k: v for e in first for k, v, _ in decode_messages(e.data)}
    seen.update({k: v for _p, k, v, _n in rest})
    assert all(seen[f"k{i:03d}"] == b"new-%d" % i for i in range(50)), "updates in the trimmed gap not lost"
    assert all(seen[f"k{i:03d}"] == b"1-%d" % i for i in range(50, 100))
    assert seen["tail"] == b"t"
    await reader.close()


class _HookedBookKeeper:
    """Runs ``hook`` once, inside the first compacted-ledger read after ``arm()``."""

    def __init__(self, inner, hook) -> None:  # noqa: ANN001
        self._inner, self._hook, self.armed = inner, hook, False

    def __getattr__(self, name):  # noqa: ANN001, ANN204
        return getattr(self._inner, name)

    async def open_ledger(self, ledger_id: int, **kwargs):  # noqa: ANN003, ANN201
        handle = await self._inner.open_ledger(ledger_id, **kwargs)
        outer = self

        class _Handle:
            def __getattr__(self, name):  # noqa: ANN001, ANN204
                return getattr(handle, name)

            async def read(self, first: int, last: int):  # noqa: ANN202
                entries = await handle.read(first, last)
                if outer.armed:
                    outer.armed = False
                    await outer._hook()
                return entries

        return _Handle()


async def test_compaction_finishing_inside_a_read_does_not_skip_the_trimmed_gap(harness):
    """The reader is at the old horizon, past the old compacted ledger's last entry (the last
    message before it was a delete); a compaction + trim lands during its binary search.  It must
    search the new compacted ledger, not read live from old horizon + 1 (trimmed by now)."""
    config = ManagedLedgerConfig(
        max_entries_per_ledger=20, min_ledger_rollover_time_ms=0, retention_time_ms=0, retention_size_bytes=0
    )
    ml = await (await harness.new_factory(config)).open("public/default/persistent/race")
    lazy = _LazyDeleteBookKeeper(harness.bk)
    for i in range(100):
        await ml.add_entry(single(f"k{i:03d}", b"old-%d" % i, i))
    await ml.add_entry(single("gone", b"", 100))  # the horizon's message is a delete
    await Compactor(lazy, harness.clock).compact(ml)
    h1 = read_horizon(ml).position
    for i in range(50):
        await ml.add_entry(single(f"k{i:03d}", b"new-%d" % i, 1000 + i))
    await ml.add_entry(single("tail", b"t", 2000))

    async def compact_and_trim() -> None:
        await Compactor(lazy, harness.clock).compact(ml)
        await ml.add_entry(single("after", b"a", 3000))
        await ml.trim_consumed_ledgers()

    cursor = await ml.new_non_durable_cursor(Position.EARLIEST)
    hooked = _HookedBookKeeper(harness.bk, compact_and_trim)
    reader = CompactedTopicReader(ml, cursor, hooked, start=Position.EARLIEST)
    await reader.seek(h1)
    hooked.armed = True
    seen = {k: v for _p, k, v, _n in await read_view(reader)}
    assert read_horizon(ml).position > h1, "the hook compacted"
    assert seen == {**{f"k{i:03d}": b"new-%d" % i for i in range(50)}, "tail": b"t", "after": b"a"}
    await reader.close()
