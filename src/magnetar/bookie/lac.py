"""Long-poll waiters for a ledger's last-add-confirmed (BK's ``WAIT_LAC``).

Theory of operation: a reader that has seen LAC ``previous`` asks to be told
when the bookie sees a higher one.  :class:`LacWaiters` keeps, per ledger, the
futures of such readers; ``notify`` (called when an add moves the LAC, or
when the ledger is deleted) wakes every waiter of that ledger, and each
waiter also wakes after its own timeout via the injected clock.  The total
number of waiters is bounded; past it a waiter is refused with
TooManyRequestsError rather than queued.
"""

from __future__ import annotations

import asyncio

from magnetar.bookie.api import TooManyRequestsError
from magnetar.runtime import Clock


class LacWaiters:
    def __init__(self, clock: Clock, max_waiters: int) -> None:
        self._clock = clock
        self._max_waiters = max_waiters
        self._waiters: dict[int, list[asyncio.Future[None]]] = {}
        self._count = 0

    async def wait(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> None:
        """Return when ``notify`` is called for the ledger or after ``timeout_ms``."""
        if self._count >= self._max_waiters:
            raise TooManyRequestsError(f"too many LAC long-poll waiters ({self._count})")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(ledger_id, []).append(fut)
        self._count += 1
        handle = self._clock.call_later(max(0, timeout_ms) / 1000.0, lambda: _resolve(fut))
        try:
            await fut
        finally:
            handle.cancel()
            self._count -= 1
            waiters = self._waiters.get(ledger_id)
            if waiters is not None:
                try:
                    waiters.remove(fut)
                except ValueError:
                    pass
                if not waiters:
                    del self._waiters[ledger_id]

    def notify(self, ledger_id: int, lac: int) -> None:
        for fut in self._waiters.get(ledger_id, ()):
            _resolve(fut)

    def cancel_all(self) -> None:
        for waiters in self._waiters.values():
            for fut in waiters:
                _resolve(fut)

    def __len__(self) -> int:
        return self._count


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
