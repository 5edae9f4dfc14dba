"""magnetar.client readers: start ids (earliest, latest, by id, inclusive/exclusive), has_message_available."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.client import EARLIEST, LATEST, Timeout


async def _produce(client, topic, n, **kw):
    p = await client.create_producer(topic, **kw)
    ids = await asyncio.gather(*[await p.send_async(f"m{i}".encode()) for i in range(n)])
    await p.close()
    return ids


async def _read_all(reader, timeout_ms=700):
    out = []
    while True:
        try:
            out.append((await reader.read_next(timeout_ms)).data())
        except Timeout:
            return out


@pytest.mark.parametrize("batching", [False, True])
async def test_reader_start_positions(client, topic, batching):
    ids = await _produce(client, topic, 6, batching_enabled=batching, batching_max_publish_delay_ms=1)
    all_ = [f"m{i}".encode() for i in range(6)]
    r = await client.create_reader(topic, EARLIEST)
    assert await _read_all(r) == all_
    r = await client.create_reader(topic, ids[2])
    assert await _read_all(r) == all_[3:]
    r = await client.create_reader(topic, ids[2], start_message_id_inclusive=True)
    assert await _read_all(r) == all_[2:]
    r = await client.create_reader(topic, LATEST)
    assert await _read_all(r, 300) == []
    r = await client.create_reader(topic, "latest", start_message_id_inclusive=True)
    assert await _read_all(r) == all_[-1:]


async def test_has_message_available(client, topic):
    empty = await client.create_reader(topic, EARLIEST)
    assert not await empty.has_message_available()
    await _produce(client, topic, 3, batching_enabled=False)
    r = await client.create_reader(topic, EARLIEST)
    seen = []
    while await r.has_message_available():
        seen.append((await r.read_next(2000)).data())
    assert seen == [b"m0", b"m1", b"m2"]
    latest = await client.create_reader(topic, LATEST)
    assert not await latest.has_message_available()


async def test_reader_seek_and_async_iteration(client, topic):
    ids = await _produce(client, topic, 5, batching_enabled=False)
    r = await client.create_reader(topic, EARLIEST)
    got = []
    async for msg in r:
        got.append(msg.data())
        if len(got) == 5:
            break
    await r.seek(ids[1])
    assert (await r.read_next(5000)).data() == b"m1"


async def test_reader_on_partitioned_topic(standalone, client, topic):
    from nc_helpers import create_partitioned

    create_partitioned(standalone, topic, 3)
    ids = await _produce(client, topic, 9, batching_enabled=False)
    assert {m.partition for m in ids} == {0, 1, 2}
    r = await client.create_reader(topic, EARLIEST)
    seen = []
    while await r.has_message_available():
        seen.append((await r.read_next(2000)).data())
    assert sorted(seen) == sorted(f"m{i}".encode() for i in range(9))
    latest = await client.create_reader(topic, LATEST)
    assert not await latest.has_message_available()


async def _read_available(reader) -> list:
    out = []
    while await reader.has_message_available():
        out.append(await reader.read_next(2000))
    return out


@pytest.mark.parametrize("inclusive", [False, True])
async def test_partitioned_reader_from_a_message_id(standalone, client, topic, inclusive):
    """As the official clients: every partition starts at the id's (ledger, entry) position.

    Ledger ids are broker-wide, so the partition the id came from starts right at (or after) it and
    the others at their first entry past that position; nothing before it is delivered.
    """
    from nc_helpers import create_partitioned

    create_partitioned(standalone, topic, 3)
    ids = await _produce(client, topic, 30, batching_enabled=False)
    start = ids[14]
    r = await client.create_reader(topic, start, start_message_id_inclusive=inclusive)
    got = await _read_available(r)

    def key(m):
        return (m.ledger_id, m.entry_id)

    want = {str(m) for m in ids if key(m) > key(start) or (inclusive and key(m) == key(start))}
    assert {str(m.message_id()) for m in got} == want
    same = [m for m in got if m.message_id().partition == start.partition]
    assert same and (key(same[0].message_id()) == key(start)) == inclusive
    # in the start's own partition: exactly the messages after (or from) it, in order
    own = [key(m) for m in ids if m.partition == start.partition]
    assert [key(m.message_id()) for m in same] == [
        k for k in own if k > key(start) or (inclusive and k == key(start))
    ]
    await r.close()


async def test_partitioned_reader_latest_inclusive_gets_each_partitions_last(standalone, client, topic):
    from nc_helpers import create_partitioned

    create_partitioned(standalone, topic, 3)
    ids = await _produce(client, topic, 9, batching_enabled=False)
    r = await client.create_reader(topic, LATEST, start_message_id_inclusive=True)
    got = await _read_available(r)
    last = {}
    for m in ids:
        last[m.partition] = str(m)
    assert sorted(str(m.message_id()) for m in got) == sorted(last.values())
