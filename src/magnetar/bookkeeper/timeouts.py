"""Bounded waits on an injected clock.

Theory of operation: every wait in the ledger client has a timeout, and time
comes from the injected :class:`~magnetar.runtime.Clock` (so a virtual clock
drives timeouts in tests and simulation).  :func:`with_timeout` arms a timer
with ``clock.call_later`` that cancels the waiting task, and turns that
cancellation into the caller's timeout error -- the same trick as
``asyncio.timeout`` but on our clock rather than the loop's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from magnetar.runtime import Clock, SlimEvent

T = TypeVar("T")


async def with_timeout(
    clock: Clock, aw: Awaitable[T], timeout_ms: int, make_error: Callable[[], BaseException]
) -> T:
    """Await ``aw``; if it takes longer than ``timeout_ms`` cancel it and raise ``make_error()``."""
    task = asyncio.current_task()
    assert task is not None, "with_timeout must be awaited inside a task"
    fired = False

    def _expire() -> None:
        nonlocal fired
        if not task.done():
            fired = True
            task.cancel()

    handle = clock.call_later(timeout_ms / 1000.0, _expire)
    try:
        return await aw
    except asyncio.CancelledError:
        if fired and task.uncancel() == 0:
            raise make_error() from None
        raise
    finally:
        handle.cancel()


async def wait_event(clock: Clock, event: asyncio.Event | SlimEvent, timeout_ms: int) -> bool:
    """Wait for ``event``; False if the timeout passed first."""
    if event.is_set():
        return True
    try:
        await with_timeout(clock, event.wait(), timeout_ms, TimeoutError)
    except TimeoutError:
        return False
    return True
