"""Two subscribes racing on a new subscription share one cursor (no AlreadyExists, no fencing)."""

from __future__ import annotations

import asyncio

from magnetar.managed_ledger.api import InitialPosition


async def test_concurrent_open_cursor_of_one_name_creates_it_once(harness) -> None:
    f = await harness.new_factory()
    ml = await f.open("t/ns/persistent/cursor-race")
    await ml.add_entry(b"m0")
    store = ml.ctx.store
    put = store.put

    async def slow_put(*args, **kwargs):  # a real store answers later: let the racers interleave
        await asyncio.sleep(0.01)
        return await put(*args, **kwargs)

    store.put = slow_put
    cursors = await asyncio.gather(*(ml.open_cursor("sub", InitialPosition.EARLIEST) for _ in range(4)))
    assert all(c is cursors[0] for c in cursors)
    # the ledger is still usable (not fenced) and the cursor reads from the start
    await ml.add_entry(b"m1")
    got = await cursors[0].read_entries(10)
    assert [e.data for e in got] == [b"m0", b"m1"]
    store.put = put
    await f.aclose()

    f2 = await harness.new_factory()
    ml2 = await f2.open("t/ns/persistent/cursor-race")
    assert list(ml2.cursors) == ["sub"]
