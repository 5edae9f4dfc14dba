"""``magnetar bookie`` as real processes: kill -9 crash safety, cookies, clean shutdown.

The helpers (bookie_proc.py, also used by the replication and fencing process
tests) start the CLI (``python -m magnetar.cli.main bookie``) and wait for
its ready line; every test drives it over TCP with the wire client.
"""

from __future__ import annotations

import asyncio
import sys

import pytest
from bookie_proc import free_port, start_bookie  # shared with the ledger-client process tests

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


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_repeated_kill9_cycles(tmp_path, seed):
    """Several kill -9 / restart cycles on the same directories, some right after a restart
    (while the replayed journal is being checkpointed); every acknowledged add survives all of them."""
    data_dir = str(tmp_path / "bookie")
    meta = f"rocksdb:{tmp_path / 'meta'}"
    conf = tmp_path / "bk.conf"
    conf.write_text("flushInterval=100\nlogSizeLimit=131072\n")
    port = free_port()
    rng = Rng(seed)
    acked: dict[tuple[int, int], bytes] = {}
    next_entry: dict[int, int] = {}
    for cycle in range(6):
        bk = await start_bookie(data_dir, port, meta, config=str(conf))
        client = WireBookieClient(bk.bookie_id, "127.0.0.1", port, timeout_ms=5000)
        stop = asyncio.Event()
        ledgers = [100 + cycle, 100 + (cycle + 1) % 6]  # ledgers span restarts

        async def writer(lid: int, client: WireBookieClient = client, stop: asyncio.Event = stop) -> None:
            while not stop.is_set():
                eid = next_entry.get(lid, 0)
                next_entry[lid] = eid + 1
                data = encode_entry(lid, eid, eid - 1, 0, rng.randbytes(rng.randint(1, 4000)))
                try:
                    await client.add_entry(lid, eid, KEY, data)
                except BookieError:
                    return
                acked[(lid, eid)] = data

        tasks = [asyncio.ensure_future(writer(lid)) for lid in ledgers for _ in range(4)]
        await asyncio.sleep(rng.uniform(0.05, 1.0))
        await bk.kill9()
        stop.set()
        await asyncio.gather(*tasks)
        await client.aclose()
    bk = await start_bookie(data_dir, port, meta, config=str(conf))
    client = WireBookieClient(bk.bookie_id, "127.0.0.1", port, timeout_ms=10000)
    try:
        for (lid, eid), data in sorted(acked.items()):
            assert await client.read_entry(lid, eid) == data, f"entry {lid}:{eid} lost or changed"
    finally:
        await client.aclose()
        assert await bk.terminate() == 0


async def test_bookie_on_someone_elses_directories_refuses_to_start(tmp_path):
    data_dir = str(tmp_path / "bookie")
    meta = f"rocksdb:{tmp_path / 'meta'}"
    port = free_port()
    bk = await start_bookie(data_dir, port, meta)
    assert await bk.terminate() == 0
    other_port = free_port()  # another identity (bookie id = address:port) on the same directories
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "magnetar.cli.main", "bookie", "--data-dir", data_dir,
        "--port", str(other_port), "--metadata-url", meta,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 3
    assert b"ready" not in out
    assert f"belongs to bookie 127.0.0.1:{port}".encode() in err
    # the rightful owner still starts
    bk = await start_bookie(data_dir, port, meta)
    assert await bk.terminate() == 0
