"""Routing what a broker sends on one connection: answers to requests, commands to their handler.

Theory of operation: :class:`CommandRouter` is the input half of
``ClientCnx`` (a mixin: it works on the connection's state machine
``_conn``, its pending requests ``_pending`` and its handler tables).
``_drain_events`` takes every event the sans-IO state machine produced from
the last chunk and routes it at once, in order:

* a response (final; ``producer_ready=false`` is skipped, the final
  PRODUCER_SUCCESS follows) completes the future of ``(kind, request_id)``,
  with the typed ``ServerError`` exception when it is an error answer;
* a command for one producer, consumer or topic-list watcher (SEND_RECEIPT,
  SEND_ERROR, MESSAGE, CLOSE_PRODUCER, CLOSE_CONSUMER, ACTIVE_CONSUMER_CHANGE,
  REACHED_END_OF_TOPIC, TOPIC_MIGRATED, WATCH_TOPIC_UPDATE) goes to the
  handler registered under its id; CLOSE_* and TOPIC_MIGRATED also unregister
  it (the handler reconnects on its own);
* PING is answered (written with the turn's other frames), AUTH_CHALLENGE with fresh auth data (a task);
* ConnectionClosed stops the drain: ``_drain_events`` returns False and the
  connection shuts down.

Unknown commands and commands for ids nobody registered are dropped.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Protocol

from magnetar.client.errors import PulsarException, error_from_code
from magnetar.protocol.enums import CommandType
from magnetar.protocol.events import CommandReceived, ConnectionClosed, PingReceived, ResponseReceived
from magnetar.protocol.frames import Frame

if TYPE_CHECKING:
    from magnetar.protocol.client_connection import ClientConnection

T = CommandType
_PRODUCER_COMMANDS = {
    T.SEND_RECEIPT: "producer_id",
    T.SEND_ERROR: "producer_id",
    T.CLOSE_PRODUCER: "producer_id",
}
_CONSUMER_COMMANDS = {
    T.MESSAGE: "consumer_id",
    T.CLOSE_CONSUMER: "consumer_id",
    T.ACTIVE_CONSUMER_CHANGE: "consumer_id",
    T.REACHED_END_OF_TOPIC: "consumer_id",
}


class Handler(Protocol):
    def handle_frame(self, frame: Frame) -> None: ...
    def connection_closed(self, cnx: Any) -> None: ...


def response_error(frame: Frame) -> PulsarException:
    """The typed exception of an error answer (its ``error`` / ``error_code`` and message fields)."""
    cmd: Any = frame.command
    for code_field, msg_field in (("error", "message"), ("error_code", "error_message")):
        if code_field in cmd.DESCRIPTOR.fields_by_name and cmd.HasField(code_field):
            return error_from_code(getattr(cmd, code_field), getattr(cmd, msg_field, ""))
    return error_from_code(0, f"{frame.type.name} failed")


class CommandRouter:
    """The input half of a connection (mixed into ``ClientCnx``, which owns the state below)."""

    _conn: ClientConnection
    _transport: asyncio.Transport | None
    _pending: dict[tuple[CommandType, int], asyncio.Future[Frame]]
    _producers: dict[int, Handler]
    _consumers: dict[int, Handler]
    _watchers: dict[int, Handler]

    async def _answer_challenge_safely(self) -> None:  # provided by the connection
        raise NotImplementedError

    def _put(self, data: bytes) -> None:  # provided by the connection: write one frame
        raise NotImplementedError

    def _drain_events(self) -> bool:
        """Route every pending event; False once the state machine reports the connection closed."""
        conn = self._conn
        while (event := conn.next_event()) is not None:
            if isinstance(event, CommandReceived):
                self._on_command(event.frame)
            elif isinstance(event, ResponseReceived):
                if not event.final:
                    continue  # producer_ready=false: the final PRODUCER_SUCCESS follows
                fut = self._pending.pop((event.kind, event.request_id), None)
                if fut is not None and not fut.done():
                    if event.is_error:
                        fut.set_exception(response_error(event.frame))
                    else:
                        fut.set_result(event.frame)
            elif isinstance(event, PingReceived):
                self._put(event.reply)
            elif isinstance(event, ConnectionClosed):
                return False
        return True

    def _on_command(self, frame: Frame) -> None:
        ftype = frame.type
        field = _CONSUMER_COMMANDS.get(ftype)
        if field is not None:
            handler = self._consumers.get(getattr(frame.command, field))
            if ftype is T.CLOSE_CONSUMER:
                self._consumers.pop(frame.command.consumer_id, None)
        else:
            field = _PRODUCER_COMMANDS.get(ftype)
            if field is not None:
                handler = self._producers.get(getattr(frame.command, field))
                if ftype is T.CLOSE_PRODUCER:
                    self._producers.pop(frame.command.producer_id, None)
            elif ftype is T.TOPIC_MIGRATED:
                table = self._producers if frame.command.resource_type == 0 else self._consumers
                handler = table.pop(frame.command.resource_id, None)
            elif ftype is T.WATCH_TOPIC_UPDATE:
                handler = self._watchers.get(frame.command.watcher_id)
            elif ftype is T.AUTH_CHALLENGE:
                asyncio.get_running_loop().create_task(self._answer_challenge_safely())
                return
            else:
                return
        if handler is not None:
            handler.handle_frame(frame)
