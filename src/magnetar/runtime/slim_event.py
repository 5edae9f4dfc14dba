"""``SlimEvent``: an ``asyncio.Event`` that costs almost nothing while nobody waits.

Theory of operation: ``asyncio.Event`` allocates a ``collections.deque`` for
its waiters at construction; an empty deque holds a 64-slot block, ~760
bytes.  Managed ledgers and ledger handles keep a "drained" event each, so
10,000 idle topics carried ~15 MB of empty deques.  :class:`SlimEvent` has the
same interface (``set``, ``clear``, ``is_set``, ``async wait``) and creates
its list of waiter futures on the first ``wait`` that has to block.

It follows asyncio.Event's rules: ``set`` wakes every waiter (each ``wait``
returns True), ``clear`` affects only later waits, and a cancelled ``wait``
removes its own future.  Not thread-safe, like every asyncio primitive.
"""

from __future__ import annotations

import asyncio


class SlimEvent:
    __slots__ = ("_value", "_waiters")

    def __init__(self) -> None:
        self._value = False
        self._waiters: list[asyncio.Future[bool]] | None = None

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if self._value:
            return
        self._value = True
        if self._waiters:
            for fut in self._waiters:
                if not fut.done():
                    fut.set_result(True)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> bool:
        if self._value:
            return True
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        if self._waiters is None:
            self._waiters = []
        self._waiters.append(fut)
        try:
            await fut
            return True
        finally:
            self._waiters.remove(fut)

    def __repr__(self) -> str:
        waiters = len(self._waiters) if self._waiters else 0
        return f"<SlimEvent {'set' if self._value else 'unset'}, waiters:{waiters}>"
