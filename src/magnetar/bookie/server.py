"""The bookie's asyncio TCP server over the sans-IO wire codec.

Theory of operation: one :class:`_Connection` per accepted socket reads bytes,
feeds them to a :class:`~magnetar.bookie.wire.FrameDecoder` and runs every
decoded request as its own task, so requests on one connection are pipelined
and answered as they complete (the request id correlates).  An add to an
in-process service with ``add_entry_nowait`` (the bookie's own storage) takes
no task: the answer is encoded in the add future's callback, and the answers
of one loop iteration -- a journal group completes many at once -- go out in
one socket write (``wire.WriteCoalescer``).  In-flight
requests per connection are bounded (``maxPendingRequestsPerConnection``):
when the bound is reached the connection stops reading until one finishes,
which pushes back on the client through TCP.

:func:`handle_request` is the one place where storage results and typed
BookieErrors become wire responses (status codes).  A malformed request body
gets a BAD_REQUEST answer for that request id; a framing error (oversized or
garbled frame) closes the connection, since the stream can no longer be
trusted.  Nothing a client sends can crash the server.

Every connection task is owned by the server's TaskSupervisor; ``aclose``
stops listening, cancels in-flight handlers and closes every socket.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

from magnetar.bookie import wire
from magnetar.bookie.api import BookieError, BookieErrorCode, BookieInfo, BookieUnavailableError
from magnetar.runtime import TaskSupervisor

log = logging.getLogger(__name__)

_READ_CHUNK_BYTES = 256 * 1024
_WRITE_BUFFER_HIGH_BYTES = 4 * 1024 * 1024


class BookieService(Protocol):
    """What the server needs from the bookie: the storage operations plus info."""

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None: ...

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes: ...

    async def read_lac(self, ledger_id: int) -> int: ...

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int: ...

    async def get_info(self) -> BookieInfo: ...


async def handle_request(service: BookieService, req: wire.Request) -> wire.Response:
    """Run one request; every failure becomes an ErrorResponse with its code."""
    op = _op_of(req)
    try:
        match req:
            case wire.AddRequest():
                await service.add_entry(
                    req.ledger_id, req.entry_id, req.master_key, req.entry, recovery=req.recovery
                )
                return wire.AddResponse(req.request_id, req.ledger_id, req.entry_id)
            case wire.ReadRequest():
                data = await service.read_entry(
                    req.ledger_id, req.entry_id, fence=req.fence, master_key=req.master_key
                )
                entry_id = req.entry_id
                if entry_id < 0 and len(data) >= 16:
                    entry_id = int.from_bytes(data[8:16], "big", signed=False)
                return wire.ReadResponse(req.request_id, req.ledger_id, entry_id, data)
            case wire.ReadLacRequest():
                lac = await service.read_lac(req.ledger_id)
                return wire.LacResponse(req.request_id, wire.Op.READ_LAC, req.ledger_id, lac)
            case wire.WaitLacRequest():
                lac = await service.wait_lac(req.ledger_id, req.previous_lac, req.timeout_ms)
                return wire.LacResponse(req.request_id, wire.Op.WAIT_LAC, req.ledger_id, lac)
            case wire.GetInfoRequest():
                info = await service.get_info()
                return wire.InfoResponse(
                    req.request_id,
                    info.bookie_id,
                    info.total_disk_bytes,
                    info.free_disk_bytes,
                    info.read_only,
                )
    except BookieError as exc:
        return wire.ErrorResponse(req.request_id, op, int(exc.code), str(exc))
    except Exception as exc:  # never let one request take the connection down
        log.exception("bookie request %r failed", req)
        return wire.ErrorResponse(
            req.request_id, op, int(BookieErrorCode.INTERNAL), f"internal error: {exc!r}"
        )
    raise AssertionError(f"unhandled request {req!r}")


def _outcome(fut: asyncio.Future[object]) -> BaseException | None:
    if fut.cancelled():
        return BookieUnavailableError("add cancelled")
    return fut.exception()


def _op_of(req: wire.Request) -> wire.Op:
    return {
        wire.AddRequest: wire.Op.ADD,
        wire.ReadRequest: wire.Op.READ,
        wire.ReadLacRequest: wire.Op.READ_LAC,
        wire.WaitLacRequest: wire.Op.WAIT_LAC,
        wire.GetInfoRequest: wire.Op.GET_INFO,
    }[type(req)]


class BookieServer:
    def __init__(
        self,
        service: BookieService,
        host: str,
        port: int,
        *,
        max_frame_bytes: int = wire.DEFAULT_MAX_FRAME_BYTES,
        max_in_flight: int = 1000,
    ) -> None:
        self._service = service
        self._host = host
        self._port = port
        self._max_frame_bytes = max_frame_bytes
        self._max_in_flight = max_in_flight
        self._supervisor = TaskSupervisor("bookie-server")
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._accept, self._host, self._port)
        self._port = self._server.sockets[0].getsockname()[1]
        return self._port

    @property
    def port(self) -> int:
        return self._port

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._supervisor.closed:
            writer.close()
            return
        self._writers.add(writer)
        conn = _Connection(
            self._service, reader, writer, self._max_frame_bytes, self._max_in_flight, self._supervisor
        )
        task = self._supervisor.spawn(conn.run(), name="connection")
        task.add_done_callback(lambda _t: self._writers.discard(writer))

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.close()
        await self._supervisor.aclose()
        if self._server is not None:
            try:
                await asyncio.wait_for(self._server.wait_closed(), 5)
            except TimeoutError:
                pass


class _Connection:
    def __init__(
        self,
        service: BookieService,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_frame_bytes: int,
        max_in_flight: int,
        supervisor: TaskSupervisor,
    ) -> None:
        self._service = service
        self._reader = reader
        self._writer = writer
        self._decoder = wire.FrameDecoder(max_frame_bytes)
        self._slots = asyncio.Semaphore(max_in_flight)
        self._supervisor = supervisor
        self._drain_lock = asyncio.Lock()
        self._out = wire.WriteCoalescer(self._write_now, asyncio.get_running_loop().call_soon)
        self._handlers: set[asyncio.Task[None]] = set()
        # The add's fast path: an in-process service's add_entry_nowait (no task per add).
        self._add_nowait = getattr(service, "add_entry_nowait", None)

    async def run(self) -> None:
        peer = self._writer.get_extra_info("peername")
        try:
            while True:
                data = await self._reader.read(_READ_CHUNK_BYTES)
                if not data:
                    return
                self._decoder.receive_data(data)
                while True:
                    try:
                        event = self._decoder.next_event()
                    except wire.MalformedFrame as exc:
                        if (
                            exc.request_id is not None
                            and exc.op is not None
                            and not exc.op & wire.RESPONSE_BIT
                        ):
                            op = wire.Op(exc.op) if exc.op in wire.Op._value2member_map_ else wire.Op.GET_INFO
                            err = wire.ErrorResponse(
                                exc.request_id, op, int(BookieErrorCode.BAD_REQUEST), str(exc)
                            )
                            await self._send(err)
                        continue
                    if event is None:
                        break
                    if not isinstance(
                        event,
                        wire.AddRequest
                        | wire.ReadRequest
                        | wire.ReadLacRequest
                        | wire.WaitLacRequest
                        | wire.GetInfoRequest,
                    ):
                        raise wire.WireProtocolError(f"a client sent a response frame: {event!r}")
                    await self._slots.acquire()
                    if self._add_nowait is not None and event.__class__ is wire.AddRequest:
                        if self._add_fast(event):  # type: ignore[arg-type]
                            continue
                    task = asyncio.get_running_loop().create_task(self._handle(event))
                    self._handlers.add(task)
                    task.add_done_callback(self._handlers.discard)
        except wire.WireProtocolError as exc:
            log.warning("closing bookie connection from %s: %s", peer, exc)
        except (ConnectionError, OSError):
            pass
        finally:
            for t in list(self._handlers):
                t.cancel()
            if self._handlers:
                await asyncio.gather(*self._handlers, return_exceptions=True)
            self._writer.close()

    async def _handle(self, req: wire.Request) -> None:
        try:
            resp = await handle_request(self._service, req)
            await self._send(resp)
        except (ConnectionError, OSError):
            pass
        finally:
            self._slots.release()

    def _add_fast(self, req: wire.AddRequest) -> bool:
        """Start an add without a task; its answer is written from the future's callback.
        False when the add must go the task path (the storage must wait for room, or the
        ledger is new here)."""
        try:
            fut = self._add_nowait(  # type: ignore[misc]
                req.ledger_id, req.entry_id, req.master_key, req.entry, recovery=req.recovery
            )
        except Exception as exc:
            self._add_answer(req, exc)
            return True
        if fut is None:
            return False
        fut.add_done_callback(lambda f: self._add_answer(req, _outcome(f)))
        return True

    def _add_answer(self, req: wire.AddRequest, exc: BaseException | None) -> None:
        self._slots.release()
        resp: wire.Response
        if exc is None:
            resp = wire.AddResponse(req.request_id, req.ledger_id, req.entry_id)
        elif isinstance(exc, BookieError):
            resp = wire.ErrorResponse(req.request_id, wire.Op.ADD, int(exc.code), str(exc))
        else:
            log.error("bookie add %d:%d failed: %r", req.ledger_id, req.entry_id, exc)
            resp = wire.ErrorResponse(
                req.request_id, wire.Op.ADD, int(BookieErrorCode.INTERNAL), f"internal error: {exc!r}"
            )
        if not self._writer.is_closing():
            self._out.write(wire.encode(resp))  # many answers of one loop iteration: one write

    def _write_now(self, data: bytes) -> None:
        if not self._writer.is_closing():
            self._writer.write(data)

    async def _send(self, resp: wire.Response) -> None:
        if self._writer.is_closing():
            return
        self._out.write(wire.encode(resp))
        transport = self._writer.transport
        if transport.get_write_buffer_size() > _WRITE_BUFFER_HIGH_BYTES:
            async with self._drain_lock:
                await asyncio.wait_for(self._writer.drain(), 30)
