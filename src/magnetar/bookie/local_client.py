"""An in-process BookieClient: the ledger client calls the bookie's storage directly.

Theory of operation: standalone runs one bookie inside the broker process
(E = Qw = Qa = 1).  :class:`LocalBookieClient` implements the same
:class:`~magnetar.bookie.api.BookieClient` protocol as the TCP wire client,
with the same typed errors, but without a socket: each call goes straight to
the :class:`~magnetar.bookie.storage.LedgerStorage` on the same event loop.
Every call still has a deadline (``timeout_ms``), so a stuck disk surfaces
as BookieTimeoutError exactly as over the network.  The deadlines are kept
coarsely: a call registers (deadline, task) in a dict and one watchdog timer
per client, re-armed every ``timeout/10`` (at most 250 ms) while calls are in
flight, cancels the overdue ones, which then raise BookieTimeoutError.
``add_entry_nowait`` is the add's hot path: no task, no coroutine, a future
straight from the journal; its caller keeps the deadline.  A
timer per call (``asyncio.timeout``) cost as much as the add itself: heap
pushes and Python-level comparisons of TimerHandles for every entry.

:class:`LocalBookieClientPool` hands out the local client for its bookie id
(and refuses others with BookieUnavailableError on use), so code written
against a pool works unchanged in standalone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from magnetar.bookie.api import BookieClient, BookieInfo, BookieTimeoutError, BookieUnavailableError
from magnetar.bookie.storage import LedgerStorage

T = TypeVar("T")
DEFAULT_TIMEOUT_MS = 30_000


class LocalBookieClient:
    def __init__(self, storage: LedgerStorage, *, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> None:
        self._storage = storage
        self._timeout_s = timeout_ms / 1000.0
        self._closed = False
        self._calls: dict[int, tuple[float, asyncio.Task[object]]] = {}  # seq -> (deadline, task)
        self._expired: set[int] = set()
        self._seq = 0
        self._watchdog: asyncio.TimerHandle | None = None
        self._tick_s = max(0.001, min(0.25, self._timeout_s / 10))

    @property
    def bookie_id(self) -> str:
        return self._storage.bookie_id

    async def _call(self, aw: Awaitable[T], extra_s: float = 0.0) -> T:
        if self._closed:
            if asyncio.iscoroutine(aw):
                aw.close()
            raise BookieUnavailableError("client closed", self.bookie_id)
        task = asyncio.current_task()
        assert task is not None, "bookie calls are awaited inside a task"
        loop = task.get_loop()
        self._seq = seq = self._seq + 1
        self._calls[seq] = (loop.time() + self._timeout_s + extra_s, task)  # type: ignore[assignment]
        if self._watchdog is None:
            self._watchdog = loop.call_later(self._tick_s, self._expire_overdue, loop)
        try:
            return await aw
        except asyncio.CancelledError:
            if seq in self._expired:
                self._expired.discard(seq)
                if task.uncancel() == 0:
                    raise BookieTimeoutError(
                        f"bookie {self.bookie_id} did not answer in time", self.bookie_id
                    ) from None
            raise
        finally:
            self._calls.pop(seq, None)

    def _expire_overdue(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        overdue = [seq for seq, (deadline, _) in self._calls.items() if deadline <= now]
        for seq in overdue:
            _, task = self._calls.pop(seq)
            if not task.done():
                self._expired.add(seq)
                task.cancel()
        self._watchdog = loop.call_later(self._tick_s, self._expire_overdue, loop) if self._calls else None

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        await self._call(self._storage.add_entry(ledger_id, entry_id, master_key, entry, recovery=recovery))

    def add_entry_nowait(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> asyncio.Future[None] | None:
        """The add without a task: a future that completes when the entry is durable, or None
        when it must wait for room (then use :meth:`add_entry`).  No deadline is kept here: the
        caller (the ledger handle's add watchdog) times the future out.  Errors known at once
        are raised at once."""
        if self._closed:
            raise BookieUnavailableError("client closed", self.bookie_id)
        return self._storage.add_entry_nowait(ledger_id, entry_id, master_key, entry, recovery=recovery)

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        return await self._call(
            self._storage.read_entry(ledger_id, entry_id, fence=fence, master_key=master_key)
        )

    async def read_entries(self, ledger_id: int, first: int, last: int, max_bytes: int = 0) -> list[bytes]:
        """A batch read: framed entries ``first..last`` in order, possibly fewer (a prefix)."""
        return await self._call(self._storage.read_entries(ledger_id, first, last, max_bytes))

    async def read_lac(self, ledger_id: int) -> int:
        return await self._call(self._storage.read_lac(ledger_id))

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        return await self._call(
            self._storage.wait_lac(ledger_id, previous_lac, timeout_ms), timeout_ms / 1000.0
        )

    async def get_info(self) -> BookieInfo:
        usage = await self._call(self._storage.disk_usage())
        return BookieInfo(
            bookie_id=self.bookie_id,
            total_disk_bytes=usage.total_bytes,
            free_disk_bytes=usage.free_bytes,
            read_only=self._storage.read_only,
        )

    async def aclose(self) -> None:
        self._closed = True
        if self._watchdog is not None and not self._calls:
            self._watchdog.cancel()
            self._watchdog = None


class LocalBookieClientPool:
    def __init__(self, *clients: LocalBookieClient) -> None:
        self._clients = {c.bookie_id: c for c in clients}

    def add(self, client: LocalBookieClient) -> None:
        self._clients[client.bookie_id] = client

    def get(self, bookie_id: str) -> BookieClient:
        client = self._clients.get(bookie_id)
        if client is None:
            return _MissingBookie(bookie_id)
        return client

    async def aclose(self) -> None:
        for c in self._clients.values():
            await c.aclose()


class _MissingBookie:
    """A client for a bookie this process does not have: every call is unavailable."""

    def __init__(self, bookie_id: str) -> None:
        self._bookie_id = bookie_id

    @property
    def bookie_id(self) -> str:
        return self._bookie_id

    def _fail(self) -> BookieUnavailableError:
        return BookieUnavailableError(f"bookie {self._bookie_id} is not in this process", self._bookie_id)

    async def add_entry(self, *args: object, **kwargs: object) -> None:
        raise self._fail()

    async def read_entry(self, *args: object, **kwargs: object) -> bytes:
        raise self._fail()

    async def read_lac(self, ledger_id: int) -> int:
        raise self._fail()

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        raise self._fail()

    async def get_info(self) -> BookieInfo:
        raise self._fail()

    async def aclose(self) -> None:
        pass
