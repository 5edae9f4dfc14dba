"""magnetar.client TableView over a compacted topic, with live updates and tombstones."""

from __future__ import annotations

import asyncio
import time

import httpx

from magnetar.client import StringSchema


async def _compact(standalone, topic: str) -> None:
    path = "/admin/v2/persistent/" + topic.split("://", 1)[1] + "/compaction"
    async with httpx.AsyncClient(base_url=standalone.web_url, timeout=15) as http:
        assert (await http.put(path)).status_code == 204
        deadline = time.monotonic() + 30
        while (await http.get(path)).json()["status"] != "SUCCESS":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)


async def test_table_view_compacted_and_live(standalone, client, topic):
    producer = await client.create_producer(topic, schema=StringSchema(), block_if_queue_full=True)
    expected: dict[str, str] = {}
    futs = []
    for i in range(300):
        key = f"key-{i % 20}"
        expected[key] = f"value-{i}"
        futs.append(await producer.send_async(expected[key], partition_key=key))
    for key in ("key-0", "key-1"):
        futs.append(await producer.send_async("", partition_key=key))
        del expected[key]
    await asyncio.gather(*futs)
    await _compact(standalone, topic)
    tv = await client.create_table_view(topic, schema=StringSchema())
    seen: dict[str, str] = {}
    tv.for_each(seen.__setitem__)
    assert seen == expected and len(tv) == 18
    assert tv.get("key-5") == expected["key-5"] and tv.get("key-0") is None
    updates = []
    tv.for_each_and_listen(lambda k, v: updates.append((k, v)))
    assert len(updates) == 18
    await producer.send("fresh", partition_key="key-5")
    await producer.send("", partition_key="key-6")
    deadline = time.monotonic() + 10
    while tv.get("key-5") != "fresh" or "key-6" in tv:
        assert time.monotonic() < deadline, (tv.get("key-5"), "key-6" in tv)
        await asyncio.sleep(0.05)
    assert updates[-2:] == [("key-5", "fresh"), ("key-6", None)]
    await tv.close()
