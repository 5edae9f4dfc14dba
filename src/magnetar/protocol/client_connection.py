"""The client's end of a Pulsar connection, sans I/O, with request-id correlation.

Theory of operation: the same rules as ``_state.py`` (read its header),
seen from the client. ``connect()`` returns the CONNECT bytes and moves to
CONNECTING; CONNECTED yields ``Connected``, an ERROR yields
``ConnectRejected`` (and CLOSED). AUTH_CHALLENGE is accepted while CONNECTING
(Java brokers) and answered with ``send_auth_response``.

Requests: ``new_request_id()`` hands out ids; ``send_request(kind, request_id,
data)`` records the pending request ``(kind, request_id)`` and returns the
bytes. Responses are matched by *kind and id*, never by id alone, because
request ids repeat across request kinds on one connection (section 4 of
pulsar-protocol.md): LOOKUP_RESPONSE only resolves a LOOKUP, SUCCESS only
SUBSCRIBE/UNSUBSCRIBE/CLOSE_*/SEEK, ERROR any request kind that can fail with
it. A response that matches nothing is ``UnexpectedResponse``. Timeouts are
the owner's: it calls ``forget_request`` when it gives up. The pending table is
bounded by ``max_pending_requests``.
"""

from __future__ import annotations

from typing import Any

from magnetar.protocol import client_commands
from magnetar.protocol._state import SERVER_COMMANDS, Role, Trigger, _Connection, true_flags
from magnetar.protocol.enums import (
    DEFAULT_MAX_MESSAGE_SIZE,
    MESSAGE_SIZE_FRAME_PADDING,
    CommandType,
    LookupType,
    PartitionedMetadataResult,
)
from magnetar.protocol.errors import LocalProtocolError, RemoteProtocolError
from magnetar.protocol.events import (
    CommandReceived,
    Connected,
    ConnectionState,
    ConnectRejected,
    Event,
    ResponseReceived,
    UnexpectedResponse,
)
from magnetar.protocol.frames import Frame
from magnetar.protocol.message_id import to_unsigned64

S = ConnectionState
T = CommandType

# Request kinds whose failure comes back as a CommandError (in preference order).
_ERROR_KINDS: tuple[CommandType, ...] = (
    T.PRODUCER, T.SUBSCRIBE, T.UNSUBSCRIBE, T.CLOSE_PRODUCER, T.CLOSE_CONSUMER, T.SEEK,
    T.GET_LAST_MESSAGE_ID, T.GET_TOPICS_OF_NAMESPACE, T.CONSUMER_STATS, T.WATCH_TOPIC_LIST,
    T.GET_SCHEMA, T.GET_OR_CREATE_SCHEMA, T.PARTITIONED_METADATA, T.LOOKUP,
)  # fmt: skip
_SUCCESS_KINDS: tuple[CommandType, ...] = (
    T.SUBSCRIBE, T.UNSUBSCRIBE, T.CLOSE_PRODUCER, T.CLOSE_CONSUMER, T.SEEK, T.WATCH_TOPIC_LIST_CLOSE,
)  # fmt: skip
# response type -> request kinds it may resolve
_RESPONSE_KINDS: dict[CommandType, tuple[CommandType, ...]] = {
    T.SUCCESS: _SUCCESS_KINDS,
    T.ERROR: _ERROR_KINDS,
    T.PRODUCER_SUCCESS: (T.PRODUCER,),
    T.PARTITIONED_METADATA_RESPONSE: (T.PARTITIONED_METADATA,),
    T.LOOKUP_RESPONSE: (T.LOOKUP,),
    T.GET_LAST_MESSAGE_ID_RESPONSE: (T.GET_LAST_MESSAGE_ID,),
    T.GET_TOPICS_OF_NAMESPACE_RESPONSE: (T.GET_TOPICS_OF_NAMESPACE,),
    T.GET_SCHEMA_RESPONSE: (T.GET_SCHEMA,),
    T.GET_OR_CREATE_SCHEMA_RESPONSE: (T.GET_OR_CREATE_SCHEMA,),
    T.CONSUMER_STATS_RESPONSE: (T.CONSUMER_STATS,),
    T.ACK_RESPONSE: (T.ACK,),
    T.WATCH_TOPIC_LIST_SUCCESS: (T.WATCH_TOPIC_LIST,),
    T.TC_CLIENT_CONNECT_RESPONSE: (T.TC_CLIENT_CONNECT_REQUEST,),
    T.NEW_TXN_RESPONSE: (T.NEW_TXN,),
    T.ADD_PARTITION_TO_TXN_RESPONSE: (T.ADD_PARTITION_TO_TXN,),
    T.ADD_SUBSCRIPTION_TO_TXN_RESPONSE: (T.ADD_SUBSCRIPTION_TO_TXN,),
    T.END_TXN_RESPONSE: (T.END_TXN,),
    T.END_TXN_ON_PARTITION_RESPONSE: (T.END_TXN_ON_PARTITION,),
    T.END_TXN_ON_SUBSCRIPTION_RESPONSE: (T.END_TXN_ON_SUBSCRIPTION,),
    T.SCALABLE_TOPIC_SUBSCRIBE_RESPONSE: (T.SCALABLE_TOPIC_SUBSCRIBE,),
}
REQUEST_KINDS: frozenset[CommandType] = frozenset(k for kinds in _RESPONSE_KINDS.values() for k in kinds)


def _is_error(frame: Frame) -> bool:
    cmd: Any = frame.command
    ftype = frame.type
    if ftype is T.ERROR:
        return True
    if ftype is T.LOOKUP_RESPONSE:
        return not cmd.HasField("response") or cmd.response == LookupType.Failed
    if ftype is T.PARTITIONED_METADATA_RESPONSE:
        return not cmd.HasField("response") or cmd.response == PartitionedMetadataResult.Failed
    for name in ("error_code", "error"):
        if name in cmd.DESCRIPTOR.fields_by_name and cmd.HasField(name):
            return True
    return False


class ClientConnection(_Connection):
    """The client's end of one connection to a broker."""

    role = Role.CLIENT

    def __init__(
        self,
        max_frame_size: int | None = None,
        keepalive_interval_s: float = 30.0,
        max_pending_requests: int = 50_000,
    ) -> None:
        # Brokers send frames up to their max message size plus headers; grown after CONNECTED.
        super().__init__(
            max_frame_size or DEFAULT_MAX_MESSAGE_SIZE + 2 * MESSAGE_SIZE_FRAME_PADDING,
            keepalive_interval_s,
            S.IDLE,
        )
        self.max_pending_requests = max_pending_requests
        self._pending: dict[tuple[CommandType, int], None] = {}
        self._next_request_id = 0
        self.server_version: str | None = None
        self.protocol_version: int | None = None
        self.max_message_size: int | None = None
        self.server_features: frozenset[str] = frozenset()
        self._auth_challenged = False

    # ------------------------------------------------------------------ handshake
    def connect(self, **connect_fields: Any) -> bytes:
        """The CONNECT frame (fields as ``client_commands.connect``); moves to CONNECTING."""
        data = client_commands.connect(**connect_fields)
        self._move(Trigger.SEND_CONNECT)
        return data

    def send_auth_response(self, data: bytes) -> bytes:
        if self._state not in (S.CONNECTING, S.CONNECTED) or not self._auth_challenged:
            raise LocalProtocolError("AUTH_RESPONSE without an AUTH_CHALLENGE")
        self._auth_challenged = False
        return data

    # ------------------------------------------------------------------ requests
    def new_request_id(self) -> int:
        rid = self._next_request_id
        self._next_request_id += 1
        return rid

    def send_request(self, kind: CommandType, request_id: int, data: bytes) -> bytes:
        """Record a pending (kind, request_id) and return ``data`` to write."""
        if kind not in REQUEST_KINDS:
            raise LocalProtocolError(f"{kind.name} is not a request with a correlated response")
        key = (kind, to_unsigned64(request_id))
        if key in self._pending:
            raise LocalProtocolError(f"{kind.name} request {request_id} is already pending")
        if len(self._pending) >= self.max_pending_requests:
            raise LocalProtocolError(f"too many pending requests ({self.max_pending_requests})")
        out = self.send(data)
        self._pending[key] = None
        return out

    def forget_request(self, kind: CommandType, request_id: int) -> bool:
        """Drop a pending request (e.g. on timeout); True if it was pending."""
        return self._pending.pop((kind, to_unsigned64(request_id)), 0) is None

    @property
    def pending_requests(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ input
    def _handle(self, frame: Frame) -> Event | None:
        state = self._state
        if state is S.CONNECTED:
            if frame.type not in SERVER_COMMANDS:
                raise RemoteProtocolError(f"a broker may not send {frame.type.name}")
            if frame.type is T.AUTH_CHALLENGE:
                self._auth_challenged = True
            kinds = _RESPONSE_KINDS.get(frame.type)
            if kinds is not None and frame.command.HasField("request_id"):
                return self._correlate(frame, kinds)
            return self._common(frame)
        if state is S.CONNECTING:
            return self._on_handshake_frame(frame)
        if state is S.IDLE:
            raise RemoteProtocolError(f"{frame.type.name} before we sent CONNECT")
        return None  # CLOSED: drain

    def _on_handshake_frame(self, frame: Frame) -> Event:
        cmd: Any = frame.command
        if frame.type is T.CONNECTED:
            self._move(Trigger.RECV_CONNECTED)
            self.server_version = cmd.server_version
            self.protocol_version = cmd.protocol_version
            self.max_message_size = cmd.max_message_size if cmd.HasField("max_message_size") else None
            self.server_features = (
                true_flags(cmd.feature_flags) if cmd.HasField("feature_flags") else frozenset()
            )
            if self.max_message_size is not None:
                wanted = self.max_message_size + 2 * MESSAGE_SIZE_FRAME_PADDING
                self._decoder.max_frame_size = max(self._decoder.max_frame_size, wanted)
            return Connected(
                self.server_version, self.protocol_version, self.max_message_size, self.server_features, frame
            )
        if frame.type is T.ERROR:
            self._move(Trigger.CONNECT_REJECTED)
            return ConnectRejected(cmd.error, cmd.message, frame)
        if frame.type is T.AUTH_CHALLENGE:
            self._auth_challenged = True
            return CommandReceived(frame)
        raise RemoteProtocolError(f"expected CONNECTED, got {frame.type.name}")

    def _correlate(self, frame: Frame, kinds: tuple[CommandType, ...]) -> Event:
        rid = frame.command.request_id
        for kind in kinds:
            key = (kind, rid)
            if key in self._pending:
                final = not (
                    frame.type is T.PRODUCER_SUCCESS
                    and frame.command.HasField("producer_ready")
                    and not frame.command.producer_ready
                )
                if final:
                    del self._pending[key]
                return ResponseReceived(kind, rid, frame, _is_error(frame), final)
        return UnexpectedResponse(frame)
