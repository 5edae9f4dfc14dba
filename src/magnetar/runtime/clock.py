"""Clocks.

Theory of operation: every piece of code that needs "now", a timeout or a
delay asks an injected :class:`Clock`.  Two readings exist:

* ``monotonic()`` -- seconds, only for measuring intervals and deadlines;
* ``time_ms()``   -- wall-clock milliseconds since the epoch, for what is
  stored or sent on the wire (publish time, ledger ctime, TTL decisions).

Waiting goes through ``sleep()`` and ``call_later()`` so that a test clock
(``magnetar.testing.clock``: ManualClock, VirtualClock) can run a TTL of an
hour in no time; :func:`wait_for` is ``asyncio.wait_for`` with the timeout
measured by a given clock (it cancels the awaited task from a
``call_later`` timer and raises ``TimeoutError``).  ``RealClock`` simply delegates to the running asyncio loop
and ``time.time()``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")


@runtime_checkable
class TimerHandle(Protocol):
    def cancel(self) -> None: ...


@runtime_checkable
class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds from an arbitrary origin; never goes backwards."""

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the Unix epoch."""

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds`` of this clock's time."""

    def call_later(self, seconds: float, callback: Callable[[], object]) -> TimerHandle:
        """Run ``callback`` (a plain function) after ``seconds``; returns a cancellable handle."""


class RealClock:
    """The production clock: asyncio's loop time plus the system wall clock."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_later(self, seconds: float, callback: Callable[[], object]) -> TimerHandle:
        return asyncio.get_running_loop().call_later(max(0.0, seconds), callback)


async def wait_for(clock: Clock, aw: Awaitable[T], timeout_s: float) -> T:
    """Await ``aw``; after ``timeout_s`` of ``clock`` time cancel it and raise ``TimeoutError``.

    Cancelling the caller cancels ``aw`` too (wrap it in ``asyncio.shield`` to keep it running).
    A result that arrives although the timer fired (the awaited code swallowed the
    cancellation) is returned, as ``asyncio.wait_for`` does.
    """
    task = asyncio.ensure_future(aw)
    if task.done():
        return task.result()
    timed_out = False

    def expire() -> None:
        nonlocal timed_out
        if not task.done():
            timed_out = True
            task.cancel()

    handle = clock.call_later(timeout_s, expire)
    try:
        return await task
    except asyncio.CancelledError:
        me = asyncio.current_task()
        if timed_out and task.cancelled() and (me is None or not me.cancelling()):
            raise TimeoutError(f"timed out after {timeout_s} s") from None
        raise
    finally:
        handle.cancel()
