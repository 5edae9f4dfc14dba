"""SlimEvent behaves as asyncio.Event: set wakes every waiter, clear affects later waits,
a cancelled wait leaves no waiter behind, and an idle event holds no waiter list."""

from __future__ import annotations

import asyncio

import pytest

from magnetar.runtime import SlimEvent


async def test_set_wakes_every_waiter_and_clear_affects_only_later_waits():
    ev = SlimEvent()
    assert not ev.is_set()
    waiters = [asyncio.ensure_future(ev.wait()) for _ in range(3)]
    await asyncio.sleep(0)
    assert not any(w.done() for w in waiters)
    ev.set()
    ev.clear()  # the waiters were already woken: they still return True
    assert await asyncio.gather(*waiters) == [True, True, True]
    later = asyncio.ensure_future(ev.wait())
    await asyncio.sleep(0.01)
    assert not later.done()
    ev.set()
    assert await asyncio.wait_for(later, 5) is True
    assert await ev.wait() is True  # set: returns at once


async def test_cancelled_and_timed_out_waits_leave_no_waiter():
    ev = SlimEvent()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(ev.wait(), 0.01)
    task = asyncio.ensure_future(ev.wait())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ev._waiters == []
    ev.set()
    assert ev.is_set()


def test_an_idle_event_holds_no_waiter_list():
    ev = SlimEvent()
    ev.set()
    ev.clear()
    assert ev._waiters is None
