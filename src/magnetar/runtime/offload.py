"""Thread offload for blocking work.

Theory of operation: the event loop never blocks.  fsync, RocksDB calls and
file I/O run on a :class:`BlockingExecutor`, a named, bounded thread pool
owned by the component that created it (the journal gets its own so a slow
fsync never queues behind a RocksDB compaction).  ``run`` awaits the result
in the calling task; ``aclose`` waits for queued work and stops the threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class BlockingExecutor:
    def __init__(self, name: str, max_threads: int = 1) -> None:
        self.name = name
        self._pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix=f"magnetar-{name}")
        self._closed = False

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self._closed:
            raise RuntimeError(f"executor {self.name} is closed")
        loop = asyncio.get_running_loop()
        ctx = contextvars.copy_context()
        call = functools.partial(ctx.run, fn, *args, **kwargs)
        return await loop.run_in_executor(self._pool, call)

    def submit_nowait(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(self._pool, functools.partial(fn, *args))

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.get_running_loop().run_in_executor(None, functools.partial(self._pool.shutdown, wait=True))

    def close_nowait(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=False)
