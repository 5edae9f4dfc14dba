"""Cleanup over the real stack: trimmed ledgers leave the metadata store and, after the bookie's
garbage collection, the bookie itself."""

from __future__ import annotations

from magnetar.bookie.api import ledger_path as bk_ledger_path
from magnetar.bookie.gc import GarbageCollector
from magnetar.managed_ledger.api import InitialPosition
from magnetar.testing.ml_conformance import LocalBookieHarness, small_config


async def test_trimmed_ledgers_are_deleted_and_garbage_collected(tmp_path) -> None:
    # Small entry logs so the consumed ledgers' bytes sit in finished logs that compaction can drop.
    h = await LocalBookieHarness(str(tmp_path / "bookie"), entry_log_size_limit_bytes=64 * 1024).start()
    try:
        f = await h.new_factory(small_config(retention_time_ms=0, retention_size_bytes=0))
        ml = await f.open("t/ns/persistent/gc")
        c = await ml.open_cursor("s", InitialPosition.EARLIEST)
        pos = [await ml.add_entry(b"g" * 4096) for _ in range(30)]
        ledgers = sorted({p.ledger_id for p in pos})
        assert len(ledgers) == 3
        await h.storage.checkpoint()
        assert set(ledgers) <= set(h.storage.ledger_ids())
        await c.mark_delete(pos[21])
        await ml.trim_consumed_ledgers()
        kept = [li.ledger_id for li in ml.ledgers()]
        assert ledgers[0] not in kept and ledgers[1] not in kept and ledgers[2] in kept
        store = h.server.session()
        for lid in ledgers[:2]:
            assert await store.exists(bk_ledger_path(lid)) is None, "ledger metadata deleted"
        ml_node = await store.get("/managed-ledgers/t/ns/persistent/gc")
        for lid in ledgers[:2]:
            assert b'"ledgerId":%d,' % lid not in ml_node.value
        gc = GarbageCollector(h.storage, store, h.storage.config, h.clock)
        result = await gc.run_once(force_major=True)
        assert set(ledgers[:2]) <= set(result.ledgers_deleted)
        assert result.logs_compacted and result.bytes_reclaimed >= 10 * 4096, result  # bytes gone from disk
        remaining = set(h.storage.ledger_ids())
        assert not (set(ledgers[:2]) & remaining) and ledgers[2] in remaining
        # The cursor still reads what it has not consumed.
        got = await c.read_entries(100)
        assert [e.position for e in got] == pos[22:]
    finally:
        await h.aclose()
