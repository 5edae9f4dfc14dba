"""Crash safety: kill -9 a bookie process mid-stream; every acknowledged add reads back bit-for-bit."""

from __future__ import annotations

import asyncio

from bookie_proc import free_port, start_bookie

from magnetar.bookie.api import BookieError
from magnetar.bookie.entry_format import decode_entry, encode_entry
from magnetar.bookie.wire_client import WireBookieClient
from magnetar.runtime import Rng

KEY = b"crash-key"


async def test_kill9_mid_stream_loses_no_acknowledged_add(tmp_path):
    data_dir = str(tmp_path / "bookie")
    meta = f"rocksdb:{tmp_path / 'meta'}"
    conf = tmp_path / "bk.conf"
    # checkpoints every 150 ms and small entry logs: some acked entries are in entry logs,
    # some only in the journal when the process dies
    conf.write_text("flushInterval=150\nlogSizeLimit=262144\njournalMaxGroupWaitMSec=1\n")
    port = free_port()
    bk = await start_bookie(data_dir, port, meta, config=str(conf))
    rng = Rng(1234)
    acked: dict[tuple[int, int], bytes] = {}
    client = WireBookieClient(bk.bookie_id, "127.0.0.1", port, timeout_ms=5000)
    ledgers = [11, 12, 13, 14]
    next_entry = dict.fromkeys(ledgers, 0)
    stop = asyncio.Event()
    enough = asyncio.Event()

    async def writer(lid: int) -> None:
        while not stop.is_set():
            eid = next_entry[lid]
            next_entry[lid] += 1
            payload = rng.randbytes(rng.randint(10, 3000))
            data = encode_entry(lid, eid, eid - 1, 0, payload)
            try:
                await client.add_entry(lid, eid, KEY, data)
            except BookieError:
                return  # the bookie died: this add was never acknowledged
            acked[(lid, eid)] = data
            if len(acked) >= 3000:
                enough.set()

    tasks = [asyncio.ensure_future(writer(lid)) for lid in ledgers for _ in range(8)]
    await asyncio.wait_for(enough.wait(), 60)
    await bk.kill9()  # mid-stream: 32 adds in flight
    stop.set()
    await asyncio.gather(*tasks)
    await client.aclose()
    assert len(acked) >= 3000

    bk2 = await start_bookie(data_dir, port, meta, config=str(conf))
    client2 = WireBookieClient(bk2.bookie_id, "127.0.0.1", port, timeout_ms=10000)
    try:
        assert bk2.bookie_id == bk.bookie_id
        for (lid, eid), data in sorted(acked.items()):
            got = await client2.read_entry(lid, eid)
            assert got == data, f"entry {lid}:{eid} differs after the crash"
            decode_entry(got, lid, eid)
        # the bookie keeps working on the same ledgers after recovery
        for lid in ledgers:
            last = max(e for (l2, e) in acked if l2 == lid)
            stored_last = await client2.read_entry(lid, -1)
            assert decode_entry(stored_last, lid)[0].entry_id >= last
    finally:
        await client2.aclose()
        assert await bk2.terminate() == 0
