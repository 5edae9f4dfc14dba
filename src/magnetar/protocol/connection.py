"""Connection state machines for both ends of a Pulsar connection, sans I/O.

Theory of operation (h11's shape): bytes in, events out; events in, bytes out.
The rules and the transition table are in ``_state.py`` (read its header);
this module holds the broker's end, ``ServerConnection``, and re-exports the
client's end, ``ClientConnection`` (``client_connection.py``), plus the
events and states, so callers import everything from here.

Typical broker loop::

    conn = ServerConnection(max_message_size=5 * 1024 * 1024)
    conn.receive_data(data)             # b"" on EOF
    while (event := conn.next_event()) is not None:
        if isinstance(event, ConnectRequested):
            write(conn.accept_connect())
        elif isinstance(event, PingReceived):
            write(event.reply)
        elif isinstance(event, CommandReceived):
            handle(event.frame)         # write(conn.send(commands.success(...)))
        elif isinstance(event, ConnectionClosed):
            break

``RemoteProtocolError`` from ``receive_data``/``next_event`` means: close the
socket (optionally after writing an ERROR built from ``exc.hint``).
"""

from __future__ import annotations

from magnetar.protocol import server_commands
from magnetar.protocol._state import (
    CLIENT_COMMANDS,
    SERVER_COMMANDS,
    Role,
    Trigger,
    _Connection,
    true_flags,
)
from magnetar.protocol.client_connection import ClientConnection
from magnetar.protocol.enums import DEFAULT_MAX_MESSAGE_SIZE, MAX_PROTOCOL_VERSION, CommandType, ServerError
from magnetar.protocol.errors import LocalProtocolError, RemoteProtocolError
from magnetar.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionClosed,
    ConnectionState,
    ConnectRejected,
    ConnectRequested,
    Event,
    KeepaliveAction,
    PingReceived,
    PongReceived,
    ResponseReceived,
    UnexpectedResponse,
)
from magnetar.protocol.frames import Frame, frame_limit_for

S = ConnectionState
DEFAULT_SERVER_VERSION = "Pulsar Server 4.0.0-magnetar"

__all__ = [
    "CLIENT_COMMANDS",
    "SERVER_COMMANDS",
    "ClientConnection",
    "CommandReceived",
    "Connected",
    "ConnectionClosed",
    "ConnectionState",
    "ConnectRejected",
    "ConnectRequested",
    "Event",
    "KeepaliveAction",
    "PingReceived",
    "PongReceived",
    "ResponseReceived",
    "ServerConnection",
    "UnexpectedResponse",
]


class ServerConnection(_Connection):
    """The broker's end of one client connection."""

    role = Role.SERVER

    def __init__(
        self,
        max_frame_size: int | None = None,
        server_version: str = DEFAULT_SERVER_VERSION,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        keepalive_interval_s: float = 30.0,
    ) -> None:
        super().__init__(
            max_frame_size if max_frame_size is not None else frame_limit_for(max_message_size),
            keepalive_interval_s,
            S.AWAITING_CONNECT,
        )
        self.server_version = server_version
        self.max_message_size = max_message_size
        self.client_version: str | None = None
        self.client_protocol_version: int | None = None
        self.protocol_version: int | None = None  # negotiated
        self.client_features: frozenset[str] = frozenset()
        self._auth_challenge_sent = False

    def _handle(self, frame: Frame) -> Event | None:
        state = self._state
        if state is S.CONNECTED:
            if frame.type not in CLIENT_COMMANDS:
                raise RemoteProtocolError(f"a client may not send {frame.type.name}")
            return self._common(frame)
        if state is S.AWAITING_CONNECT:
            if frame.type is not CommandType.CONNECT:
                raise RemoteProtocolError(f"expected CONNECT, got {frame.type.name}")
            return self._on_connect(frame)
        if state is S.CONNECTING:
            if frame.type is CommandType.AUTH_RESPONSE and self._auth_challenge_sent:
                self._auth_challenge_sent = False
                return CommandReceived(frame)
            raise RemoteProtocolError(f"{frame.type.name} before the handshake finished")
        # CLOSED: we rejected or closed; drain what the peer still sends.
        return None

    def _on_connect(self, frame: Frame) -> ConnectRequested:
        cmd = frame.command
        self._move(Trigger.RECV_CONNECT)
        self.client_version = cmd.client_version
        self.client_protocol_version = max(0, cmd.protocol_version)
        self.client_features = true_flags(cmd.feature_flags) if cmd.HasField("feature_flags") else frozenset()

        def opt(name: str):
            return getattr(cmd, name) if cmd.HasField(name) else None

        return ConnectRequested(
            client_version=cmd.client_version,
            protocol_version=self.client_protocol_version,
            auth_method_name=opt("auth_method_name"),
            auth_data=opt("auth_data"),
            feature_flags=self.client_features,
            proxy_to_broker_url=opt("proxy_to_broker_url"),
            original_principal=opt("original_principal"),
            original_auth_data=opt("original_auth_data"),
            original_auth_method=opt("original_auth_method"),
            frame=frame,
        )

    def accept_connect(
        self,
        *,
        supports_topic_watchers: bool | None = None,
        supports_get_partitioned_metadata_without_auto_creation: bool | None = True,
    ) -> bytes:
        """CONNECTED with the negotiated version; the connection becomes CONNECTED."""
        self._move(Trigger.SEND_CONNECTED)
        assert self.client_protocol_version is not None
        self.protocol_version = min(MAX_PROTOCOL_VERSION, self.client_protocol_version)
        return server_commands.connected(
            self.server_version,
            self.protocol_version,
            self.max_message_size,
            supports_topic_watchers=supports_topic_watchers,
            supports_get_partitioned_metadata_without_auto_creation=(
                supports_get_partitioned_metadata_without_auto_creation
            ),
        )

    def reject_connect(self, error: ServerError | int, message: str) -> bytes:
        """ERROR (request_id -1) for a refused CONNECT; the connection becomes CLOSED."""
        self._move(Trigger.CONNECT_REJECTED)
        return server_commands.error(-1, error, message)

    def send_auth_challenge(self, challenge_frame: bytes) -> bytes:
        """AUTH_CHALLENGE, during the handshake (Java peers) or later (credential refresh)."""
        if self._state not in (S.CONNECTING, S.CONNECTED):
            raise LocalProtocolError(f"cannot challenge in state {self._state.name}")
        self._auth_challenge_sent = True
        return challenge_frame

    @property
    def supports_broker_entry_metadata(self) -> bool:
        return "supports_broker_entry_metadata" in self.client_features
