"""Shared core of the connection state machines: the rules, the transition table, the base class.

Theory of operation (h11's shape): the owner feeds received bytes with
``receive_data(data)`` (``b""`` = EOF), pulls events with ``next_event()``
until it returns None, and gets the bytes to write from ``send(...)`` or the
handshake helpers. Nothing here touches a socket, a clock or a task.

The rules
---------
1. The client's first frame is CONNECT; nothing else is legal before it. The
   server's first frame is CONNECTED (``accept_connect``) or ERROR
   (``reject_connect``, after which the connection is CLOSED). cpp closes the
   connection on anything else before CONNECTED, even AUTH_CHALLENGE; Java
   peers may exchange AUTH_CHALLENGE/AUTH_RESPONSE during the handshake, so
   that one exchange is allowed while CONNECTING.
2. Protocol version: CONNECTED carries min(MAX_PROTOCOL_VERSION, client's).
3. Once CONNECTED, each side accepts only the commands its peer may send
   (``CLIENT_COMMANDS`` / ``SERVER_COMMANDS``); a second CONNECT, a broker-only
   command from a client, garbage or an oversized frame raise
   ``RemoteProtocolError`` and the state becomes ERROR for good.
4. PING is answered by the owner: ``PingReceived.reply`` holds the PONG bytes.
5. Keep-alive as data: ``keepalive_tick(now_s)``, called by the owner's timer,
   says SEND_PING every ``keepalive_interval_s``; if the previous PING is still
   unanswered when the next tick is due it says CLOSE. Any received frame
   counts as an answer (Java's rule).
6. EOF moves to CLOSED and yields ``ConnectionClosed`` (repeatedly).

State transitions live in ``_TRANSITIONS`` below; ``_move`` is the only code
that changes ``state``.
"""

from __future__ import annotations

from enum import Enum

from magnetar.protocol import server_commands
from magnetar.protocol.enums import (
    CommandType,
)
from magnetar.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError
from magnetar.protocol.events import (
    CommandReceived,
    ConnectionClosed,
    ConnectionState,
    Event,
    KeepaliveAction,
    PingReceived,
    PongReceived,
)
from magnetar.protocol.frames import Frame, FrameDecoder

S = ConnectionState


class Role(Enum):
    CLIENT = "CLIENT"
    SERVER = "SERVER"


class Trigger(Enum):
    SEND_CONNECT = "SEND_CONNECT"
    RECV_CONNECT = "RECV_CONNECT"
    SEND_CONNECTED = "SEND_CONNECTED"
    RECV_CONNECTED = "RECV_CONNECTED"
    CONNECT_REJECTED = "CONNECT_REJECTED"  # server sent / client received ERROR during handshake
    EOF = "EOF"
    LOCAL_CLOSE = "LOCAL_CLOSE"
    PROTOCOL_ERROR = "PROTOCOL_ERROR"


# (role, state, trigger) -> next state. Anything missing is illegal.
_TRANSITIONS: dict[tuple[Role, ConnectionState, Trigger], ConnectionState] = {
    (Role.CLIENT, S.IDLE, Trigger.SEND_CONNECT): S.CONNECTING,
    (Role.CLIENT, S.CONNECTING, Trigger.RECV_CONNECTED): S.CONNECTED,
    (Role.CLIENT, S.CONNECTING, Trigger.CONNECT_REJECTED): S.CLOSED,
    (Role.SERVER, S.AWAITING_CONNECT, Trigger.RECV_CONNECT): S.CONNECTING,
    (Role.SERVER, S.CONNECTING, Trigger.SEND_CONNECTED): S.CONNECTED,
    (Role.SERVER, S.CONNECTING, Trigger.CONNECT_REJECTED): S.CLOSED,
}
for _role in Role:
    for _state in ConnectionState:
        if _state is not S.ERROR:
            _TRANSITIONS[(_role, _state, Trigger.EOF)] = S.CLOSED
            _TRANSITIONS[(_role, _state, Trigger.LOCAL_CLOSE)] = S.CLOSED
            _TRANSITIONS[(_role, _state, Trigger.PROTOCOL_ERROR)] = S.ERROR

T = CommandType
# What a client may send to a broker once connected (TC brokers act as clients too).
CLIENT_COMMANDS: frozenset[CommandType] = frozenset(
    {
        T.SUBSCRIBE, T.PRODUCER, T.SEND, T.ACK, T.FLOW, T.UNSUBSCRIBE, T.CLOSE_PRODUCER,
        T.CLOSE_CONSUMER, T.PING, T.PONG, T.REDELIVER_UNACKNOWLEDGED_MESSAGES,
        T.PARTITIONED_METADATA, T.LOOKUP, T.CONSUMER_STATS, T.SEEK, T.GET_LAST_MESSAGE_ID,
        T.GET_TOPICS_OF_NAMESPACE, T.GET_SCHEMA, T.AUTH_RESPONSE, T.GET_OR_CREATE_SCHEMA,
        T.NEW_TXN, T.ADD_PARTITION_TO_TXN, T.ADD_SUBSCRIPTION_TO_TXN, T.END_TXN,
        T.END_TXN_ON_PARTITION, T.END_TXN_ON_SUBSCRIPTION, T.TC_CLIENT_CONNECT_REQUEST,
        T.WATCH_TOPIC_LIST, T.WATCH_TOPIC_LIST_CLOSE, T.SCALABLE_TOPIC_LOOKUP,
        T.SCALABLE_TOPIC_CLOSE, T.SCALABLE_TOPIC_SUBSCRIBE, T.WATCH_SCALABLE_TOPICS,
        T.WATCH_SCALABLE_TOPICS_CLOSE, T.WATCH_TC_ASSIGNMENTS, T.WATCH_TC_ASSIGNMENTS_CLOSE,
    }
)  # fmt: skip
# What a broker may send to a client once connected.
SERVER_COMMANDS: frozenset[CommandType] = frozenset(
    {
        T.SEND_RECEIPT, T.SEND_ERROR, T.MESSAGE, T.SUCCESS, T.ERROR, T.CLOSE_PRODUCER,
        T.CLOSE_CONSUMER, T.PRODUCER_SUCCESS, T.PING, T.PONG, T.PARTITIONED_METADATA_RESPONSE,
        T.LOOKUP_RESPONSE, T.CONSUMER_STATS_RESPONSE, T.REACHED_END_OF_TOPIC,
        T.GET_LAST_MESSAGE_ID_RESPONSE, T.ACTIVE_CONSUMER_CHANGE,
        T.GET_TOPICS_OF_NAMESPACE_RESPONSE, T.GET_SCHEMA_RESPONSE, T.AUTH_CHALLENGE,
        T.ACK_RESPONSE, T.GET_OR_CREATE_SCHEMA_RESPONSE, T.NEW_TXN_RESPONSE,
        T.ADD_PARTITION_TO_TXN_RESPONSE, T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE, T.END_TXN_RESPONSE,
        T.END_TXN_ON_PARTITION_RESPONSE, T.END_TXN_ON_SUBSCRIPTION_RESPONSE,
        T.TC_CLIENT_CONNECT_RESPONSE, T.WATCH_TOPIC_LIST_SUCCESS, T.WATCH_TOPIC_UPDATE,
        T.TOPIC_MIGRATED, T.SCALABLE_TOPIC_UPDATE, T.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE,
        T.SCALABLE_TOPIC_ASSIGNMENT_UPDATE, T.WATCH_SCALABLE_TOPICS_UPDATE,
        T.WATCH_TC_ASSIGNMENTS_UPDATE,
    }
)  # fmt: skip


def true_flags(flags) -> frozenset[str]:
    """Names of the FeatureFlags set to true."""
    return frozenset(f.name for f, value in flags.ListFields() if value is True)


class _Connection:
    """What both ends share: the decoder, the state, EOF and keep-alive bookkeeping."""

    role: Role

    def __init__(self, max_frame_size: int, keepalive_interval_s: float, initial: ConnectionState) -> None:
        self._decoder = FrameDecoder(max_frame_size)
        self._state = initial
        self._eof = False
        self._error: ProtocolError | None = None
        self.keepalive_interval_s = keepalive_interval_s
        self._last_tick_s: float | None = None
        self._ping_outstanding = False
        self._received_since_ping = False

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> ConnectionState:
        return self._state

    def _move(self, trigger: Trigger) -> None:
        nxt = _TRANSITIONS.get((self.role, self._state, trigger))
        if nxt is None:
            raise LocalProtocolError(
                f"{self.role.name}: {trigger.name} is illegal in state {self._state.name}"
            )
        self._state = nxt

    def _remote_error(self, exc: RemoteProtocolError) -> RemoteProtocolError:
        self._error = exc
        if self._state is not S.ERROR:
            self._move(Trigger.PROTOCOL_ERROR)
        return exc

    @property
    def buffered_bytes(self) -> int:
        return self._decoder.buffered_bytes

    @property
    def max_frame_size(self) -> int:
        return self._decoder.max_frame_size

    # ------------------------------------------------------------------ input
    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Feed bytes from the socket; ``b""`` means the peer closed its side."""
        if self._state is S.ERROR:
            raise self._error or RemoteProtocolError("connection failed earlier")
        if self._eof:
            raise LocalProtocolError("receive_data after EOF")
        if not data:
            self._eof = True
            return
        try:
            self._decoder.feed(data)
        except RemoteProtocolError as exc:
            raise self._remote_error(exc) from None

    def next_event(self) -> Event | None:
        """The next event, or None when more bytes are needed."""
        if self._state is S.ERROR:
            raise self._error or RemoteProtocolError("connection failed earlier")
        try:
            frame = self._decoder.next_frame()
            if frame is None:
                if self._eof:
                    if self._state is not S.CLOSED:
                        self._move(Trigger.EOF)
                    return ConnectionClosed(clean=self._decoder.buffered_bytes == 0)
                return None
            self._received_since_ping = True
            self._ping_outstanding = False
            return self._handle(frame)
        except RemoteProtocolError as exc:
            raise self._remote_error(exc) from None

    def _handle(self, frame: Frame) -> Event | None:
        raise NotImplementedError

    def _common(self, frame: Frame) -> Event:
        """PING/PONG and plain commands, once connected."""
        if frame.type is CommandType.PING:
            return PingReceived(server_commands.pong())
        if frame.type is CommandType.PONG:
            return PongReceived()
        return CommandReceived(frame)

    # ------------------------------------------------------------------ output
    def send(self, data: bytes) -> bytes:
        """Check that we may send now and return ``data`` (an encoded frame) to write."""
        if self._state is not S.CONNECTED:
            raise LocalProtocolError(f"cannot send in state {self._state.name}")
        return data

    def close(self) -> None:
        """We are closing the connection; later sends fail."""
        if self._state not in (S.CLOSED, S.ERROR):
            self._move(Trigger.LOCAL_CLOSE)

    # ------------------------------------------------------------------ keep-alive
    def keepalive_tick(self, now_s: float) -> KeepaliveAction:
        """Call from the owner's timer; returns what to do. Ticks closer than the interval do nothing."""
        if self._state is not S.CONNECTED:
            return KeepaliveAction.NOTHING
        if self._last_tick_s is None:
            self._last_tick_s = now_s
            return KeepaliveAction.NOTHING
        if now_s - self._last_tick_s < self.keepalive_interval_s:
            return KeepaliveAction.NOTHING
        self._last_tick_s = now_s
        if self._ping_outstanding:
            return KeepaliveAction.CLOSE
        self._ping_outstanding = True
        self._received_since_ping = False
        return KeepaliveAction.SEND_PING

    @property
    def ping_outstanding(self) -> bool:
        return self._ping_outstanding
