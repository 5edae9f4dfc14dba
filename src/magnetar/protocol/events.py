"""Events the connection state machines hand to their owner (h11's "events out").

Theory of operation: ``ServerConnection.next_event()`` and
``ClientConnection.next_event()`` turn received frames into these small value
objects; ``None`` means "need more data". Frames that need no special handling
by the state machine arrive as ``CommandReceived`` carrying the decoded
``Frame`` (``.type``, ``.command``, ``.headers_and_payload``). Errors are not
events: a protocol violation raises ``RemoteProtocolError`` from
``next_event`` and the connection enters ERROR.

Keep-alive is data too: ``keepalive_tick(now_s)`` returns a
``KeepaliveAction`` and the caller, who owns the timer, acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from magnetar.protocol.enums import CommandType
from magnetar.protocol.frames import Frame


class ConnectionState(Enum):
    IDLE = "IDLE"  # client: CONNECT not sent yet
    AWAITING_CONNECT = "AWAITING_CONNECT"  # server: waiting for the client's CONNECT
    CONNECTING = "CONNECTING"  # handshake under way (CONNECT seen/sent, no CONNECTED yet)
    CONNECTED = "CONNECTED"
    CLOSED = "CLOSED"  # EOF received, handshake rejected, or closed by us
    ERROR = "ERROR"  # a protocol error happened; the connection is unusable


class KeepaliveAction(Enum):
    NOTHING = "NOTHING"
    SEND_PING = "SEND_PING"  # write commands.ping() now
    CLOSE = "CLOSE"  # the previous PING got no answer (and nothing else arrived): close


class Event:
    """Base class of connection events."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ConnectRequested(Event):
    """Server side: the client's CONNECT. Answer with accept_connect() or reject_connect()."""

    client_version: str
    protocol_version: int
    auth_method_name: str | None
    auth_data: bytes | None
    feature_flags: frozenset[str]
    proxy_to_broker_url: str | None
    original_principal: str | None
    original_auth_data: str | None
    original_auth_method: str | None
    frame: Frame


@dataclass(frozen=True, slots=True)
class Connected(Event):
    """Client side: the broker's CONNECTED."""

    server_version: str
    protocol_version: int
    max_message_size: int | None
    feature_flags: frozenset[str]
    frame: Frame


@dataclass(frozen=True, slots=True)
class ConnectRejected(Event):
    """Client side: the broker answered CONNECT with ERROR."""

    error: int
    message: str
    frame: Frame


@dataclass(frozen=True, slots=True)
class CommandReceived(Event):
    """Any command not covered by a more specific event."""

    frame: Frame

    @property
    def type(self) -> CommandType:
        return self.frame.type


@dataclass(frozen=True, slots=True)
class ResponseReceived(Event):
    """Client side: the answer to a request registered with ``send_request``.

    ``kind`` is the request's command type (e.g. LOOKUP), ``is_error`` tells an
    ERROR / Failed / error_code answer from a success. ``final`` is False only
    for PRODUCER_SUCCESS with producer_ready=false (a second one will follow).
    """

    kind: CommandType
    request_id: int
    frame: Frame
    is_error: bool
    final: bool = True


@dataclass(frozen=True, slots=True)
class UnexpectedResponse(Event):
    """Client side: a response whose (kind, request_id) matches no pending request."""

    frame: Frame


@dataclass(frozen=True, slots=True)
class PingReceived(Event):
    """The peer sent PING: write ``reply`` (a PONG frame) promptly."""

    reply: bytes


@dataclass(frozen=True, slots=True)
class PongReceived(Event):
    pass


@dataclass(frozen=True, slots=True)
class ConnectionClosed(Event):
    """The peer closed its side. ``clean`` is False if it stopped in the middle of a frame."""

    clean: bool = True
