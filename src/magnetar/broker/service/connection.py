"""One client connection: bytes in -> protocol events -> command handlers -> bytes out.

Theory of operation: the socket shell around ``protocol.ServerConnection``.
A read loop feeds received bytes to the codec and handles its events in
order: CONNECT is answered with CONNECTED (protocol version min(20, the
client's), ``max_message_size``), PING with PONG, and every other command is
dispatched to the handler of its family (``handlers/``).  Handlers run one
after the other, so a FLOW never overtakes the SUBSCRIBE before it; the
publish path does not wait for storage (SEND only *starts* an add; receipts
go out in order from the producer's pipeline), so one slow add does not stall
the connection.

Back-pressure: while publishes in flight on this connection exceed
``maxPendingPublishRequestsPerConnection`` the loop stops reading the socket
(TCP then pushes back on the client) and resumes below half of it.

Keep-alive both ways: a timer asks the codec every interval whether to PING
or, when the previous PING went unanswered and nothing else arrived, to drop
the client.  The client PINGs us too; we PONG at once.

Outbound back-pressure: frames are written once per loop turn; while the
socket's send buffer is above ``WRITE_HIGH_WATER_BYTES`` (a consumer that
does not read) dispatchers skip this connection's consumers, and a drain
waiter wakes them when it is writable again.

Teardown (EOF, reset, protocol error, keep-alive timeout, broker shutdown)
removes every producer and consumer of the connection from its topic, which
re-queues the consumers' unacknowledged messages for redelivery.

State: the codec's ConnectionState is the state; ``closed`` only marks that
teardown started (idempotent).
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import TYPE_CHECKING

from magnetar.broker import errors
from magnetar.broker.service import handlers
from magnetar.broker.service.security import ConnectionSecurity
from magnetar.broker.service.transport_cnx import TransportCnx
from magnetar.managed_ledger.api import Position
from magnetar.protocol import server_commands as cmds
from magnetar.protocol.connection import (
    CommandReceived,
    ConnectionClosed,
    ConnectRequested,
    KeepaliveAction,
    PingReceived,
    ServerConnection,
)
from magnetar.protocol.enums import ServerError
from magnetar.protocol.errors import ProtocolError, RemoteProtocolError
from magnetar.protocol.frames import Frame
from magnetar.runtime import wait_for

if TYPE_CHECKING:
    from magnetar.broker.service.broker_service import BrokerService
    from magnetar.broker.service.consumer import Consumer
    from magnetar.broker.service.producer import Producer

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 256 * 1024
HANDLER_TIMEOUT_S = 25.0
BACKPRESSURE_CHECK_S = 1.0
WRITE_HIGH_WATER_BYTES = 8 * 1024 * 1024
DRAIN_CHECK_S = 1.0
_U32_PAIR = struct.Struct(">II")


class Connection(TransportCnx):
    service: BrokerService

    def __init__(
        self, service: BrokerService, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        cfg = service.config
        self.reader = reader
        self.writer = writer
        self.proto = ServerConnection(
            max_frame_size=cfg.max_frame_size,
            max_message_size=cfg.max_message_size,
            keepalive_interval_s=float(cfg.keep_alive_interval_seconds),
        )
        peer = writer.get_extra_info("peername")
        super().__init__(
            service, f"/{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        )
        self._max_pending = max(1, cfg.max_pending_publish_requests_per_connection)
        self._pending_publishes = 0
        self._resume_reading = asyncio.Event()
        self._resume_reading.set()
        self._paused_until = 0.0  # publish rate limiting: no socket reads before (monotonic s)
        self._keepalive: asyncio.Task[None] | None = None
        self._out: list[bytes] = []
        self._flush_scheduled = False
        self._drain_task: asyncio.Task[None] | None = None
        self._liveness_waiters: list[asyncio.Future[None]] = []
        self._in_handler = False
        self.security = ConnectionSecurity(self)
        self._refresh: asyncio.Task[None] | None = None
        transport = writer.transport
        if transport is not None:
            transport.set_write_buffer_limits(high=WRITE_HIGH_WATER_BYTES)

    # ------------------------------------------------------------ output
    # Frames are collected and written once per event-loop turn: one send() for many receipts
    # and messages instead of one each.  Order is kept (one list, flushed in order).
    def write(self, data: bytes) -> None:
        if self.closed:
            return
        self._out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        out, self._out = self._out, []
        if out and not self.writer.is_closing():
            self.writer.write(b"".join(out))
            if not self.writable and self._drain_task is None and not self.closed:
                self._drain_task = self.service.supervisor.spawn(
                    self._wait_drained(), name="drain", on_error=self._task_failed
                )

    @property
    def writable(self) -> bool:
        """False while the socket's send buffer is above the high-water mark (a slow reader):
        dispatchers stop sending to this connection's consumers until it drains."""
        transport = self.writer.transport
        return transport is None or transport.get_write_buffer_size() < WRITE_HIGH_WATER_BYTES

    async def _wait_drained(self) -> None:
        try:
            while not self.closed and not self.writable:
                try:
                    await wait_for(self.service.clock, self.writer.drain(), DRAIN_CHECK_S)
                except TimeoutError:
                    continue
                except ConnectionError:
                    return
        finally:
            self._drain_task = None
        for consumer in list(self.consumers.values()):
            if consumer.subscription.dispatcher is not None:
                consumer.subscription.dispatcher.notify()

    def send_message(
        self,
        consumer_id: int,
        pos: Position,
        partition: int,
        data: bytes,
        redelivery_count: int,
        ack_set: list[int] | None,
    ) -> None:
        self.intercept_dispatch(consumer_id, pos, data)
        head = cmds.message_command_bytes(
            consumer_id, pos.ledger_id, pos.entry_id, partition, redelivery_count, ack_set or None
        )
        if self.closed:
            return
        out = self._out
        out.append(_U32_PAIR.pack(len(head) + 4 + len(data), len(head)) + head)
        out.append(data)
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def send_receipt(self, producer: Producer, sequence_id: int, highest: int | None, pos: Position) -> None:
        self._publish_done()
        self.write(cmds.send_receipt(producer.producer_id, sequence_id, pos.ledger_id, pos.entry_id, highest))

    def publish_failed(self, producer: Producer, sequence_id: int, exc: BaseException) -> None:
        """A stored add failed: close the producer so the client re-sends (SEND_ERROR would kill the cnx)."""
        self._publish_done()
        err = errors.translate(exc)
        if isinstance(err, errors.ChecksumError):
            self.write(
                cmds.send_error(producer.producer_id, sequence_id, ServerError.ChecksumError, err.message)
            )
            return
        log.warning(
            "publish on %s failed: %s; closing producer %s",
            producer.topic.name,
            err.message,
            producer.producer_name,
        )
        if self.producers.get(producer.producer_id) is producer:
            self.broker_closed_producer(producer)
            producer.topic.remove_producer(producer)

    def publish_abandoned(self) -> None:
        """A publish completed after its producer failed: no receipt, only the accounting."""
        self._publish_done()

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        # After the SUBSCRIBE's SUCCESS (written synchronously by the handler).
        asyncio.get_running_loop().call_soon(self.write, cmds.active_consumer_change(consumer_id, is_active))

    def broker_closed_producer(self, producer: Producer) -> None:
        """The broker drops a producer (unload, delete, failure): tell the client to reconnect."""
        if self.forget_producer(producer):
            self.write(cmds.close_producer(producer.producer_id))

    def producer_ready(self, producer: Producer, request_id: int) -> None:
        """A producer queued for exclusive access got it: the second PRODUCER_SUCCESS."""
        self.write(
            cmds.producer_success(
                request_id, producer.producer_name, -1, topic_epoch=producer.topic_epoch, producer_ready=True
            )
        )

    def broker_closed_consumer(self, consumer: Consumer) -> None:
        if self.forget_consumer(consumer):
            self.write(cmds.close_consumer(consumer.consumer_id))

    # ------------------------------------------------------------ back-pressure
    def publish_started(self) -> None:
        self._pending_publishes += 1
        if self._pending_publishes >= self._max_pending:
            self._resume_reading.clear()

    def _publish_done(self) -> None:
        self._pending_publishes -= 1
        if not self._resume_reading.is_set() and self._pending_publishes <= self._max_pending // 2:
            self._resume_reading.set()

    def pause_reading(self, delay_s: float) -> None:
        """Read nothing more from this client for ``delay_s`` (publish rate limiting)."""
        self._paused_until = max(self._paused_until, self.service.clock.monotonic() + delay_s)

    @property
    def pending_publishes(self) -> int:
        return self._pending_publishes

    # ------------------------------------------------------------ the loop
    async def run(self) -> None:
        self._keepalive = self.service.supervisor.spawn(
            self._keepalive_loop(), name=f"keepalive:{self.peer_address}", on_error=self._task_failed
        )
        try:
            await self._read_loop()
        except RemoteProtocolError as exc:
            log.info("protocol error from %s: %s", self.peer_address, exc)
            if exc.hint is not None:
                self._try_write(cmds.error(-1, exc.hint, exc.message))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            await self.close()

    def _must_wait(self) -> bool:
        """Reading must pause (rate limit or back-pressure): checked per frame without a
        coroutine; :meth:`_wait_for_room` does the waiting."""
        return bool(self._paused_until) or not self._resume_reading.is_set()

    async def _wait_for_room(self) -> None:
        """Back-pressure: hold off while too many publishes are in flight."""
        clock = self.service.clock
        while (delay_s := self._paused_until - clock.monotonic()) > 0:
            await clock.sleep(delay_s)
        self._paused_until = 0.0
        while not self._resume_reading.is_set() and not self.closed:
            try:
                await wait_for(self.service.clock, self._resume_reading.wait(), BACKPRESSURE_CHECK_S)
            except TimeoutError:
                pass

    async def _read_loop(self) -> None:
        while not self.closed:
            if self._must_wait():
                await self._wait_for_room()
            data = await self.reader.read(READ_CHUNK_BYTES)
            self.proto.receive_data(data)
            if data and self._liveness_waiters:
                self._alive()
            while True:
                # Frames already received stay in the codec's buffer until there is room.
                if self._must_wait():
                    await self._wait_for_room()
                event = self.proto.next_event()
                if event is None:
                    break
                if isinstance(event, CommandReceived):
                    if not self._dispatch_now(event.frame):
                        await self._dispatch(event)
                elif isinstance(event, PingReceived):
                    self.write(event.reply)
                elif isinstance(event, ConnectRequested):
                    self.client_version = event.client_version
                    await self.security.on_connect(event)
                    self.write(
                        self.proto.accept_connect(
                            supports_topic_watchers=self.service.topic_list_watchers.enabled
                        )
                    )
                    if self.service.authentication.enabled:
                        self._refresh = self.service.supervisor.spawn(
                            self._refresh_loop(), name="auth-refresh", on_error=self._task_failed
                        )
                elif isinstance(event, ConnectionClosed):
                    return
            if not data:
                return

    # ------------------------------------------------------------ liveness
    async def check_liveness(self, timeout_s: float) -> bool:
        """PING the client and wait for anything from it (Java's checkConnectionLiveness):
        an Exclusive subscription held by a connection that died silently is freed at once
        instead of after the keep-alive timeout."""
        if self.closed:
            return False
        if self._in_handler or not self._resume_reading.is_set():
            return True  # it sent us a command just now; we are not reading its answer yet
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._liveness_waiters.append(fut)
        self.write(cmds.ping())
        try:
            await wait_for(self.service.clock, asyncio.shield(fut), timeout_s)
        except TimeoutError:
            return False
        finally:
            if fut in self._liveness_waiters:
                self._liveness_waiters.remove(fut)
        return not self.closed

    def _alive(self) -> None:
        waiters, self._liveness_waiters = self._liveness_waiters, []
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)

    def _dispatch_now(self, frame: Frame) -> bool:
        """The hot path of :meth:`_dispatch` (SEND, FLOW: the synchronous handlers) without a
        coroutine, for an authenticated connection without an interceptor.
        False: take :meth:`_dispatch` (which makes the same checks, in the same order)."""
        t = frame.type
        if (
            not handlers.is_sync(t)
            or self.service.interceptor is not None
            or self.security.rejected is not None
        ):
            return False
        handler = handlers.HANDLERS.get(t)
        if handler is None:
            return False
        handler(self, frame)
        return True

    async def _dispatch(self, event: CommandReceived) -> None:
        frame = event.frame
        handler = handlers.HANDLERS.get(frame.type)
        if handler is None:
            log.debug("ignoring %s from %s", frame.type.name, self.peer_address)
            return
        rejected = self.security.rejected
        if rejected is not None:
            # CONNECT was refused: fail each request in the form it expects, then hang up.
            answer = handlers.error_answer(frame, rejected)
            if answer is not None:
                self.write(answer)
            self._flush()
            self.writer.close()
            return
        ic = self.service.interceptor
        if ic is not None:  # broker.interceptors: may refuse the command with a BrokerError
            try:
                ic.on_pulsar_command(frame.type.name, frame.command, self)
            except errors.BrokerError as exc:
                answer = handlers.error_answer(frame, exc)
                if answer is not None:
                    self.write(answer)
                return
        if handlers.is_sync(frame.type):
            handler(self, frame)
            return
        self._in_handler = True
        try:
            await self.security.authorize(frame)
            await wait_for(self.service.clock, handler(self, frame), HANDLER_TIMEOUT_S)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            err = (
                errors.ServiceNotReadyError("Request timed out")
                if isinstance(exc, TimeoutError)
                else errors.translate(exc)
            )
            if not isinstance(exc, errors.BrokerError | TimeoutError):
                log.exception("handler for %s failed", frame.type.name)
            answer = handlers.error_answer(frame, err)
            if answer is not None:
                self.write(answer)
        finally:
            self._in_handler = False

    async def _refresh_loop(self) -> None:
        interval_s = max(1.0, float(self.service.auth_config.authentication_refresh_check_seconds))
        while not self.closed:
            await self.service.clock.sleep(interval_s)
            if not self.security.refresh_tick():
                log.info("closing %s: its credentials expired", self.peer_address)
                self.writer.close()
                return

    async def _keepalive_loop(self) -> None:
        clock = self.service.clock
        interval = max(0.05, float(self.service.config.keep_alive_interval_seconds))
        self.proto.keepalive_tick(clock.monotonic())
        while not self.closed:
            await clock.sleep(interval)
            action = self.proto.keepalive_tick(clock.monotonic())
            if action is KeepaliveAction.SEND_PING:
                self.write(cmds.ping())
            elif action is KeepaliveAction.CLOSE:
                log.info("closing %s after keep-alive timeout", self.peer_address)
                self.writer.close()
                return

    def _try_write(self, data: bytes) -> None:
        try:
            self._flush()
            if not self.writer.is_closing():
                self.writer.write(data)
        except Exception:
            pass

    # ------------------------------------------------------------ teardown
    def _task_failed(self, name: str, exc: BaseException) -> None:
        """A task this connection owns (keepalive, drain, auth refresh) failed: without it the
        connection cannot be trusted, so it is dropped (the client reconnects)."""
        log.warning("connection %s: task %s failed (%r); closing", self.peer_address, name, exc, exc_info=exc)
        if not self.closed:
            self.writer.close()  # the read loop ends and run() closes the connection

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self._resume_reading.set()
        try:
            self.proto.close()
        except ProtocolError:
            pass
        for task in (self._keepalive, self._refresh):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        await self.release_clients()
        self.service.topic_list_watchers.forget_connection(self)
        try:
            self._flush()
            self.writer.close()
            await wait_for(self.service.clock, self.writer.wait_closed(), 2.0)
        except Exception:
            pass
        self.service.connection_closed(self)
