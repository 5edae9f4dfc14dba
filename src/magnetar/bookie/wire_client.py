"""A BookieClient over TCP, and a pool of them keyed by bookie id.

Theory of operation: :class:`WireBookieClient` keeps at most one connection
to its bookie, opened lazily on the first request and reopened on the next
request after it breaks (no background reconnect loop: a dead bookie costs
nothing until someone asks for it).  Requests are pipelined: each gets a
request id and a future in ``_pending``; one reader task per connection
decodes responses and completes the matching futures.

Errors, as the ledger client expects them:

* cannot connect (refused, unreachable, connect timeout) and connection lost
  with requests in flight -> :class:`BookieUnavailableError`;
* no answer within the request's timeout -> :class:`BookieTimeoutError` (the
  request id is forgotten; a late answer is dropped).  Deadlines are checked by
  one watchdog timer per client every timeout/10 (at most 250 ms), not a timer
  per request;
* an error status from the bookie -> the BookieError subclass of its code.

The number of requests in flight is bounded; past it a request waits for a
slot, within its timeout.  ``add_entry_nowait`` is the add's hot path (as the
in-process client's): no task, timer or coroutine per add, a future completed
from the reader's callback; the ledger handle's one watchdog keeps its
deadline.  It declines (None: take ``add_entry``) until connected, when no
slot is free or when the socket's buffer is over its bound.

:class:`WireBookieClientPool` maps ``host:port``
bookie ids (BookKeeper's default) to clients; a ``resolve`` function can map
other ids to addresses.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from typing import TypeVar

from magnetar.bookie import wire
from magnetar.bookie.api import (
    BookieError,
    BookieInfo,
    BookieTimeoutError,
    BookieUnavailableError,
    error_for_code,
)

log = logging.getLogger(__name__)
_T = TypeVar("_T")

DEFAULT_TIMEOUT_MS = 30_000
DEFAULT_CONNECT_TIMEOUT_MS = 5_000
MAX_WRITE_BUFFER_BYTES = 4 * 1024 * 1024  # past it a request waits for the socket to drain (_request)


class _Conn:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, max_frame_bytes: int
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.decoder = wire.FrameDecoder(max_frame_bytes)
        self.pending: dict[int, asyncio.Future[wire.Response]] = {}
        self.broken: BaseException | None = None
        self.reader_task: asyncio.Task[None] | None = None
        self.drain_lock = asyncio.Lock()
        self.out = wire.WriteCoalescer(self._write, asyncio.get_running_loop().call_soon)

    def _write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    def fail_all(self, exc: BaseException) -> None:
        if self.broken is None:
            self.broken = exc
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(exc)
        self.pending.clear()


class WireBookieClient:
    def __init__(
        self,
        bookie_id: str,
        host: str,
        port: int,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        max_frame_bytes: int = wire.DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = 10_000,
    ) -> None:
        self._bookie_id = bookie_id
        self._host = host
        self._port = port
        self._timeout_s = timeout_ms / 1000.0
        self._connect_timeout_s = connect_timeout_ms / 1000.0
        self._max_frame_bytes = max_frame_bytes
        self._slots = asyncio.Semaphore(max_in_flight)
        self._ids = itertools.count(1)
        self._conn: _Conn | None = None
        self._connect_lock = asyncio.Lock()
        self._closed = False
        # Deadlines of requests in flight, kept coarsely: one watchdog timer per client
        # (re-armed every timeout/10, at most 250 ms, while requests are out) fails the
        # overdue ones; a timer per request (asyncio.timeout) cost a heap push and a cancel each.
        self._deadlines: dict[asyncio.Future[wire.Response], tuple[float, float]] = {}
        self._watchdog: asyncio.TimerHandle | None = None
        self._tick_s = max(0.001, min(0.25, self._timeout_s / 10))

    @property
    def bookie_id(self) -> str:
        return self._bookie_id

    # --- connection ---------------------------------------------------------------------------

    async def _connection(self) -> _Conn:
        conn = self._conn
        if conn is not None and conn.broken is None:
            return conn
        async with self._connect_lock:
            if self._closed:
                raise BookieUnavailableError("client closed", self._bookie_id)
            conn = self._conn
            if conn is not None and conn.broken is None:
                return conn
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self._host, self._port), self._connect_timeout_s
                )
            except (OSError, TimeoutError) as exc:
                raise BookieUnavailableError(
                    f"cannot connect to bookie {self._bookie_id} at {self._host}:{self._port}: {exc!r}",
                    self._bookie_id,
                ) from None
            conn = _Conn(reader, writer, self._max_frame_bytes)
            conn.reader_task = asyncio.get_running_loop().create_task(
                self._read_loop(conn), name=f"bookie-client:{self._bookie_id}"
            )
            self._conn = conn
            return conn

    async def _read_loop(self, conn: _Conn) -> None:
        exc: BaseException = BookieUnavailableError(
            f"connection to bookie {self._bookie_id} closed", self._bookie_id
        )
        try:
            while True:
                data = await conn.reader.read(256 * 1024)
                if not data:
                    break
                conn.decoder.receive_data(data)
                while (event := conn.decoder.next_event()) is not None:
                    fut = conn.pending.pop(event.request_id, None)
                    if fut is not None and not fut.done():
                        fut.set_result(event)  # type: ignore[arg-type]
        except (OSError, wire.WireProtocolError) as err:
            exc = BookieUnavailableError(
                f"connection to bookie {self._bookie_id} lost: {err!r}", self._bookie_id
            )
        except asyncio.CancelledError:
            exc = BookieUnavailableError("client closed", self._bookie_id)
            raise
        finally:
            conn.fail_all(exc)
            conn.writer.close()

    # --- requests -----------------------------------------------------------------------------

    async def _request(
        self, make: Callable[[int], wire.Request], extra_timeout_s: float = 0.0
    ) -> wire.Response:
        if self._closed:
            raise BookieUnavailableError("client closed", self._bookie_id)
        timeout_s = self._timeout_s + extra_timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._slots.locked():
            try:
                await asyncio.wait_for(self._slots.acquire(), timeout_s)
            except TimeoutError:
                raise BookieTimeoutError(
                    f"too many requests in flight to {self._bookie_id}", self._bookie_id
                ) from None
        else:
            await self._slots.acquire()  # returns at once: no timer needed
        try:
            conn = await self._connection()
            rid = next(self._ids)
            fut: asyncio.Future[wire.Response] = loop.create_future()
            conn.pending[rid] = fut
            self._deadlines[fut] = (deadline, timeout_s)
            if self._watchdog is None:
                self._watchdog = loop.call_later(self._tick_s, self._expire_overdue, loop)
            try:
                if conn.broken is not None:  # lost between the check and now
                    raise BookieUnavailableError(f"connection to {self._bookie_id} lost", self._bookie_id)
                conn.out.write(wire.encode(make(rid)))
                if conn.writer.transport.get_write_buffer_size() > 4 * 1024 * 1024:
                    async with conn.drain_lock:
                        await asyncio.wait_for(conn.writer.drain(), max(0.001, deadline - loop.time()))
                resp = await fut  # BookieTimeoutError from the watchdog when overdue
            except TimeoutError:
                raise BookieTimeoutError(
                    f"bookie {self._bookie_id} did not answer within {timeout_s * 1000:.0f} ms",
                    self._bookie_id,
                ) from None
            except (OSError, RuntimeError) as exc:
                conn.fail_all(
                    BookieUnavailableError(f"write to {self._bookie_id} failed: {exc!r}", self._bookie_id)
                )
                raise BookieUnavailableError(
                    f"write to {self._bookie_id} failed: {exc!r}", self._bookie_id
                ) from None
            finally:
                conn.pending.pop(rid, None)
                self._deadlines.pop(fut, None)
        finally:
            self._slots.release()
        if isinstance(resp, wire.ErrorResponse):
            raise error_for_code(resp.code, resp.message, self._bookie_id)
        return resp

    def _expire_overdue(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        overdue = [(fut, t) for fut, (deadline, t) in self._deadlines.items() if deadline <= now]
        for fut, timeout_s in overdue:
            del self._deadlines[fut]
            if not fut.done():
                fut.set_exception(
                    BookieTimeoutError(
                        f"bookie {self._bookie_id} did not answer within {timeout_s * 1000:.0f} ms",
                        self._bookie_id,
                    )
                )
        self._watchdog = (
            loop.call_later(self._tick_s, self._expire_overdue, loop) if self._deadlines else None
        )

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        resp = await self._request(
            lambda rid: wire.AddRequest(rid, ledger_id, entry_id, master_key, entry, recovery)
        )
        _expect(resp, wire.AddResponse, self._bookie_id)

    def add_entry_nowait(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> asyncio.Future[None] | None:
        """:meth:`add_entry` without a task, a timer or a coroutine: a future that completes
        when the bookie acknowledges, or None when the add must take the coroutine path (not
        connected yet, no free slot, the socket's buffer over its bound).  No deadline is kept
        here: the caller (the ledger handle's add watchdog) times the future out, and a late
        answer then completes a future nobody waits for.  Errors come as the future's
        exception, typed as :meth:`add_entry` raises them."""
        conn = self._conn
        slots = self._slots
        if (
            self._closed
            or conn is None
            or conn.broken is not None
            or slots._value <= 0  # slots.locked(), without a coroutine to acquire
            or slots._waiters
            or conn.writer.transport.get_write_buffer_size() > MAX_WRITE_BUFFER_BYTES
        ):
            return None
        rid = next(self._ids)
        frame = wire.encode(wire.AddRequest(rid, ledger_id, entry_id, master_key, entry, recovery))
        slots._value -= 1
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[wire.Response] = loop.create_future()
        done: asyncio.Future[None] = loop.create_future()
        conn.pending[rid] = answer
        answer.add_done_callback(lambda f: self._add_answered(conn, rid, f, done))
        try:
            conn.out.write(frame)
        except (OSError, RuntimeError) as exc:
            conn.fail_all(
                BookieUnavailableError(f"write to {self._bookie_id} failed: {exc!r}", self._bookie_id)
            )
        return done

    def _add_answered(
        self, conn: _Conn, rid: int, answer: asyncio.Future[wire.Response], done: asyncio.Future[None]
    ) -> None:
        self._slots.release()
        conn.pending.pop(rid, None)
        if done.done():
            return
        if answer.cancelled():
            done.set_exception(BookieUnavailableError("client closed", self._bookie_id))
        elif (exc := answer.exception()) is not None:
            done.set_exception(exc)
        elif isinstance(resp := answer.result(), wire.ErrorResponse):
            done.set_exception(error_for_code(resp.code, resp.message, self._bookie_id))
        else:
            try:
                _expect(resp, wire.AddResponse, self._bookie_id)
            except BookieError as err:
                done.set_exception(err)
            else:
                done.set_result(None)

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        resp = await self._request(lambda rid: wire.ReadRequest(rid, ledger_id, entry_id, fence, master_key))
        return _expect(resp, wire.ReadResponse, self._bookie_id).entry

    async def read_lac(self, ledger_id: int) -> int:
        resp = await self._request(lambda rid: wire.ReadLacRequest(rid, ledger_id))
        return _expect(resp, wire.LacResponse, self._bookie_id).lac

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        resp = await self._request(
            lambda rid: wire.WaitLacRequest(rid, ledger_id, previous_lac, timeout_ms), timeout_ms / 1000.0
        )
        return _expect(resp, wire.LacResponse, self._bookie_id).lac

    async def get_info(self) -> BookieInfo:
        resp = _expect(await self._request(wire.GetInfoRequest), wire.InfoResponse, self._bookie_id)
        return BookieInfo(resp.bookie_id, resp.total_disk_bytes, resp.free_disk_bytes, resp.read_only)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None
        conn = self._conn
        self._conn = None
        if conn is not None:
            conn.fail_all(BookieUnavailableError("client closed", self._bookie_id))
            conn.writer.close()
            if conn.reader_task is not None:
                conn.reader_task.cancel()
                await asyncio.gather(conn.reader_task, return_exceptions=True)


def _expect(resp: wire.Response, kind: type[_T], bookie_id: str) -> _T:
    if not isinstance(resp, kind):
        raise BookieError(f"bookie {bookie_id} answered with {type(resp).__name__}", bookie_id)
    return resp


def parse_bookie_address(bookie_id: str) -> tuple[str, int]:
    host, sep, port = bookie_id.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"bookie id {bookie_id!r} is not host:port")
    return host.strip("[]"), int(port)


class WireBookieClientPool:
    def __init__(
        self,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        resolve: Callable[[str], tuple[str, int]] = parse_bookie_address,
        max_clients: int = 10_000,
    ) -> None:
        self._timeout_ms = timeout_ms
        self._connect_timeout_ms = connect_timeout_ms
        self._resolve = resolve
        self._max_clients = max_clients
        self._clients: dict[str, WireBookieClient] = {}
        self._closed = False

    def get(self, bookie_id: str) -> WireBookieClient:
        if self._closed:
            raise BookieUnavailableError("client pool closed", bookie_id)
        client = self._clients.get(bookie_id)
        if client is None:
            if len(self._clients) >= self._max_clients:
                raise BookieUnavailableError(f"more than {self._max_clients} bookies", bookie_id)
            host, port = self._resolve(bookie_id)
            client = WireBookieClient(
                bookie_id,
                host,
                port,
                timeout_ms=self._timeout_ms,
                connect_timeout_ms=self._connect_timeout_ms,
            )
            self._clients[bookie_id] = client
        return client

    async def aclose(self) -> None:
        self._closed = True
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.aclose()
