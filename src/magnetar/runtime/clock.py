"""Clocks.

Theory of operation: every piece of code that needs "now", a timeout or a
delay asks an injected :class:`Clock`.  Two readings exist:

* ``monotonic()`` -- seconds, only for measuring intervals and deadlines;
* ``time_ms()``   -- wall-clock milliseconds since the epoch, for what is
  stored or sent on the wire (publish time, ledger ctime, TTL decisions).

Waiting goes through ``sleep()`` and ``call_later()`` so that a test clock
(``magnetar.testing.clock``: ManualClock, VirtualClock) can run a TTL of an
hour in no time.  ``RealClock`` simply delegates to the running asyncio loop
and ``time.time()``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol, runtime_checkable


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
