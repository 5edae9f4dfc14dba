"""The client-wide memory limit for messages waiting to be stored (Pulsar's MemoryLimitController).

Theory of operation: every producer of a client reserves a message's payload
size before queueing it and releases it when the broker acknowledged it or it
failed, so ``memory_limit_bytes`` bounds what all producers together hold
(batches being filled and frames waiting for receipts). When a reservation
does not fit, a producer with ``block_if_queue_full`` waits until enough is
released (waiters are served in order); otherwise the send fails at once with
``MemoryBufferIsFull``. A message larger than the whole limit is let through
when nothing else is reserved, so one big message can never block forever.
``0`` turns the limit off.
"""

from __future__ import annotations

import asyncio
from collections import deque

from magnetar.client.errors import MemoryBufferIsFull


class MemoryLimitController:
    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _fits(self, n: int) -> bool:
        return self.used_bytes + n <= self.limit_bytes or self.used_bytes == 0

    def try_reserve(self, n: int) -> bool:
        """Reserve without waiting if it fits now (the common case: no coroutine needed)."""
        if self.limit_bytes <= 0:
            return True
        if not self._waiters and self._fits(n):
            self.used_bytes += n
            return True
        return False

    async def reserve(self, n: int, block: bool) -> None:
        if self.limit_bytes <= 0:
            return
        if not self._waiters and self._fits(n):
            self.used_bytes += n
            return
        if not block:
            raise MemoryBufferIsFull(
                f"{self.used_bytes} of {self.limit_bytes} bytes in use; {n} more do not fit"
            )
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append((n, fut))
        try:
            await fut
        except BaseException:
            if fut.done() and not fut.cancelled():
                self.release(n)  # granted just as we were cancelled: give it back
            else:
                self._waiters = deque(w for w in self._waiters if w[1] is not fut)
            raise

    def release(self, n: int) -> None:
        if self.limit_bytes <= 0:
            return
        self.used_bytes = max(0, self.used_bytes - n)
        while self._waiters and self._fits(self._waiters[0][0]):
            size, fut = self._waiters.popleft()
            if not fut.done():
                self.used_bytes += size
                fut.set_result(None)
