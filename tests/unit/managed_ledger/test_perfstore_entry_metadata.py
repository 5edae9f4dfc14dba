"""Per-entry metadata given at add_entry comes back with the entry while it is cached."""

from __future__ import annotations

from magnetar.managed_ledger.api import EntryMetadata, InitialPosition
from magnetar.managed_ledger.cache import EntryCache
from magnetar.testing.ml_conformance import small_config


async def test_metadata_comes_back_with_tailing_reads_and_counts_messages(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/entry-meta")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    metas = [EntryMetadata(num_messages=i + 1, key_hash=1000 + i, deliver_at_ms=None) for i in range(5)]
    pos = [await ml.add_entry(b"m%d" % i, metadata=m) for i, m in enumerate(metas)]
    plain = await ml.add_entry(b"plain", num_messages=3)
    delayed = EntryMetadata(num_messages=2, deliver_at_ms=1_700_000_000_000)
    last = await ml.add_entry(b"late", metadata=delayed)
    got = await c.read_entries(100)
    assert [e.position for e in got] == [*pos, plain, last]
    assert [e.metadata for e in got] == [*metas, None, delayed]
    assert c.number_of_messages_in_backlog() == sum(range(1, 6)) + 3 + 2  # metadata's count
    replayed = await c.replay_entries([pos[1], pos[2]])
    assert [e.metadata for e in replayed] == metas[1:3]


async def test_metadata_is_gone_once_the_entry_leaves_the_cache(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/entry-meta-evicted")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    p = await ml.add_entry(b"x" * 10, metadata=EntryMetadata(num_messages=4, key_hash=7))
    ml.ctx.cache.clear()
    (e,) = await c.read_entries(10)
    assert e.position == p and e.data == b"x" * 10 and e.metadata is None  # the caller parses


def test_cache_side_table_follows_eviction_and_invalidation() -> None:
    cache = EntryCache(max_bytes=100)
    m = EntryMetadata(num_messages=2)
    for i in range(10):
        cache.put(1, i, b"y" * 20, m if i % 2 else None)
    held = cache.get_run(1, 0, 9)
    first = 10 - len(cache._ledgers[1])
    assert len(held) == 0 and first > 0  # the oldest were evicted
    run = cache.get_run(1, first, 9)
    assert cache.get_run_meta(1, first, len(run)) == [m if i % 2 else None for i in range(first, 10)]
    assert sum(len(v) for v in cache._meta.values()) == sum(1 for i in range(first, 10) if i % 2)
    cache.invalidate_ledger(1)
    assert cache.get_run_meta(1, first, 1) is None
