"""Server and client connection state machines: handshake, rules, keep-alive, correlation, splits."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from magnetar.protocol import commands as c
from magnetar.protocol.connection import (
    ClientConnection,
    CommandReceived,
    Connected,
    ConnectionClosed,
    ConnectionState,
    ConnectRejected,
    ConnectRequested,
    KeepaliveAction,
    PingReceived,
    PongReceived,
    ResponseReceived,
    ServerConnection,
    UnexpectedResponse,
)
from magnetar.protocol.enums import CommandType, LookupType, ServerError, SubType
from magnetar.protocol.errors import FrameTooLarge, LocalProtocolError, RemoteProtocolError
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

S = ConnectionState
T = CommandType


def _events(conn) -> list:
    out = []
    while (ev := conn.next_event()) is not None:
        out.append(ev)
        if isinstance(ev, ConnectionClosed):
            break
    return out


def _connected_pair(client_protocol_version=20):
    server, client = ServerConnection(), ClientConnection()
    server.receive_data(
        client.connect(client_version="Pulsar-CPP-v4.2.0", protocol_version=client_protocol_version)
    )
    [req] = _events(server)
    assert isinstance(req, ConnectRequested)
    client.receive_data(server.accept_connect())
    [ev] = _events(client)
    assert isinstance(ev, Connected)
    return server, client


def test_handshake_and_version_negotiation():
    server, client = ServerConnection(), ClientConnection()
    assert server.state is S.AWAITING_CONNECT and client.state is S.IDLE
    server.receive_data(client.connect(client_version="Pulsar-CPP-v4.2.0", auth_data=b"tok"))
    assert client.state is S.CONNECTING
    [req] = _events(server)
    assert req.client_version == "Pulsar-CPP-v4.2.0" and req.protocol_version == 20
    assert req.auth_method_name == "none" and req.auth_data == b"tok"
    assert "supports_broker_entry_metadata" in req.feature_flags
    assert server.supports_broker_entry_metadata
    assert server.state is S.CONNECTING
    with pytest.raises(LocalProtocolError):
        server.send(c.ping())  # CONNECTED must be the first frame we send
    client.receive_data(server.accept_connect())
    [ev] = _events(client)
    assert (ev.protocol_version, ev.max_message_size) == (20, 5 * 1024 * 1024)
    assert ev.server_version.startswith("Pulsar Server")
    assert server.state is S.CONNECTED and client.state is S.CONNECTED


@pytest.mark.parametrize("client_version,negotiated", [(20, 20), (25, 20), (12, 12), (0, 0)])
def test_negotiated_version_is_min(client_version, negotiated):
    server, client = _connected_pair(client_version)
    assert server.protocol_version == negotiated == client.protocol_version


def test_reject_connect():
    server, client = ServerConnection(), ClientConnection()
    server.receive_data(client.connect())
    _events(server)
    client.receive_data(server.reject_connect(ServerError.AuthenticationError, "bad token"))
    assert server.state is S.CLOSED
    [ev] = _events(client)
    assert isinstance(ev, ConnectRejected) and ev.error == ServerError.AuthenticationError
    assert ev.message == "bad token" and client.state is S.CLOSED


def test_auth_challenge_during_handshake():
    server, client = ServerConnection(), ClientConnection()
    server.receive_data(client.connect(auth_method_name="token"))
    _events(server)
    client.receive_data(server.send_auth_challenge(c.auth_challenge("srv", "token", b"prove it")))
    [ev] = _events(client)
    assert isinstance(ev, CommandReceived) and ev.type is T.AUTH_CHALLENGE
    server.receive_data(client.send_auth_response(c.auth_response("cli", "token", b"proof")))
    [ev] = _events(server)
    assert ev.type is T.AUTH_RESPONSE and ev.frame.command.response.auth_data == b"proof"
    client.receive_data(server.accept_connect())
    assert isinstance(_events(client)[0], Connected)


@pytest.mark.parametrize(
    "first",
    [c.ping(), c.producer("t", 1, 2), c.partitioned_metadata("t", 1), c.connected("x", 20)],
    ids=["PING", "PRODUCER", "PARTITIONED_METADATA", "CONNECTED"],
)
def test_command_before_connect_is_remote_error(first):
    server = ServerConnection()
    server.receive_data(first)
    with pytest.raises(RemoteProtocolError):
        server.next_event()
    assert server.state is S.ERROR
    with pytest.raises(RemoteProtocolError):
        server.next_event()  # stays failed
    with pytest.raises(RemoteProtocolError):
        server.receive_data(c.ping())


@pytest.mark.parametrize(
    "frame",
    [c.connect(), c.send_receipt(1, 2, 3, 4), c.message(1, 2, 3, -1, b"")],
    ids=["CONNECT", "RECEIPT", "MSG"],
)
def test_server_rejects_second_connect_and_broker_only_commands(frame):
    server, _client = _connected_pair()
    server.receive_data(frame)
    with pytest.raises(RemoteProtocolError):
        server.next_event()
    assert server.state is S.ERROR


def test_client_rejects_client_only_commands_and_early_frames():
    _server, client = _connected_pair()
    client.receive_data(c.flow(1, 10))
    with pytest.raises(RemoteProtocolError):
        client.next_event()
    early = ClientConnection()
    early.connect()
    early.receive_data(c.ping())  # cpp closes on anything but CONNECTED first
    with pytest.raises(RemoteProtocolError):
        early.next_event()


def test_oversized_frame_fails_connection():
    server = ServerConnection(max_message_size=1000)
    assert server.max_frame_size == 1000 + 10240
    with pytest.raises(FrameTooLarge):
        server.receive_data(b"\x00\x10\x00\x00")
    assert server.state is S.ERROR


def test_ping_pong_and_commands_after_handshake():
    server, client = _connected_pair()
    hp = build_headers_and_payload(
        new_message_metadata(producer_name="p", sequence_id=0, publish_time=1), b"x"
    )
    server.receive_data(client.send(c.ping()) + client.send(c.send(0, 0, hp)) + c.pong())
    ping, send, pong = _events(server)
    assert isinstance(ping, PingReceived) and ping.reply == c.pong()
    assert isinstance(send, CommandReceived) and send.frame.headers_and_payload == hp
    assert isinstance(pong, PongReceived)


def test_eof_and_close():
    server, _client = _connected_pair()
    server.receive_data(c.flow(1, 5)[:5])
    server.receive_data(b"")
    [ev] = _events(server)
    assert isinstance(ev, ConnectionClosed) and not ev.clean
    assert server.state is S.CLOSED
    assert isinstance(server.next_event(), ConnectionClosed)
    with pytest.raises(LocalProtocolError):
        server.receive_data(b"more")
    with pytest.raises(LocalProtocolError):
        server.send(c.ping())
    other, _ = _connected_pair()
    other.close()
    assert other.state is S.CLOSED


def test_keepalive_tick():
    server, _client = _connected_pair()
    assert server.keepalive_tick(100.0) is KeepaliveAction.NOTHING  # starts the clock
    assert server.keepalive_tick(110.0) is KeepaliveAction.NOTHING
    assert server.keepalive_tick(130.0) is KeepaliveAction.SEND_PING
    assert server.ping_outstanding
    assert server.keepalive_tick(160.0) is KeepaliveAction.CLOSE  # no answer in time
    # Any inbound frame counts as the answer.
    server2, _ = _connected_pair()
    server2.keepalive_tick(0.0)
    assert server2.keepalive_tick(30.0) is KeepaliveAction.SEND_PING
    server2.receive_data(c.flow(1, 1))
    _events(server2)
    assert not server2.ping_outstanding
    assert server2.keepalive_tick(60.0) is KeepaliveAction.SEND_PING
    assert ServerConnection().keepalive_tick(1e9) is KeepaliveAction.NOTHING  # not connected yet


def test_request_correlation_by_kind_and_id():
    server, client = _connected_pair()
    # The same id used by two kinds at once (observed: LOOKUP rid 2 and SUBSCRIBE rid 2).
    out = client.send_request(T.LOOKUP, 2, c.lookup("t", 2))
    out += client.send_request(T.SUBSCRIBE, 2, c.subscribe("t", "s", SubType.Shared, 0, 2))
    server.receive_data(out)
    assert [e.type for e in _events(server)] == [T.LOOKUP, T.SUBSCRIBE]
    assert client.pending_requests == 2
    client.receive_data(c.success(2) + c.lookup_response(2, LookupType.Connect, "pulsar://h:1"))
    sub, look = _events(client)
    assert isinstance(sub, ResponseReceived) and sub.kind is T.SUBSCRIBE and not sub.is_error
    assert look.kind is T.LOOKUP and not look.is_error
    assert client.pending_requests == 0
    client.receive_data(c.success(2))
    [ev] = _events(client)
    assert isinstance(ev, UnexpectedResponse)


def test_error_responses_and_failed_lookups():
    _server, client = _connected_pair()
    rid = client.new_request_id()
    client.send_request(T.PRODUCER, rid, c.producer("t", 0, rid))
    client.send_request(T.PARTITIONED_METADATA, rid, c.partitioned_metadata("t", rid))
    client.receive_data(
        c.error(rid, ServerError.ProducerBusy, "busy")
        + c.partitioned_metadata_response(rid, error=ServerError.TopicNotFound, message="nope")
    )
    prod, pm = _events(client)
    assert prod.kind is T.PRODUCER and prod.is_error and prod.frame.command.error == ServerError.ProducerBusy
    assert pm.kind is T.PARTITIONED_METADATA and pm.is_error


def test_producer_ready_false_keeps_request_pending():
    _server, client = _connected_pair()
    client.send_request(T.PRODUCER, 5, c.producer("t", 0, 5))
    client.receive_data(c.producer_success(5, "p", producer_ready=False))
    [ev] = _events(client)
    assert not ev.final and client.pending_requests == 1
    client.receive_data(c.producer_success(5, "p"))
    [ev] = _events(client)
    assert ev.final and client.pending_requests == 0


def test_request_bookkeeping_limits():
    _server, client = _connected_pair()
    client.max_pending_requests = 1
    client.send_request(T.LOOKUP, 1, c.lookup("t", 1))
    with pytest.raises(LocalProtocolError):
        client.send_request(T.LOOKUP, 1, c.lookup("t", 1))  # already pending
    with pytest.raises(LocalProtocolError):
        client.send_request(T.LOOKUP, 2, c.lookup("t", 2))  # bound reached
    assert client.forget_request(T.LOOKUP, 1) and not client.forget_request(T.LOOKUP, 1)
    with pytest.raises(LocalProtocolError):
        client.send_request(T.FLOW, 3, c.flow(1, 1))  # not a request
    assert [client.new_request_id() for _ in range(3)] == [0, 1, 2]


def test_client_frame_limit_grows_with_advertised_max_message_size():
    server = ServerConnection(max_message_size=20 * 1024 * 1024)
    client = ClientConnection()
    server.receive_data(client.connect())
    _events(server)
    client.receive_data(server.accept_connect())
    _events(client)
    assert client.max_frame_size >= 20 * 1024 * 1024 + 10240


# --------------------------------------------------------------------------- split invariance


def _client_stream() -> bytes:
    hp = build_headers_and_payload(
        new_message_metadata(producer_name="p", sequence_id=1, publish_time=2), b"z" * 300
    )
    return b"".join(
        [
            c.connect(client_version="Pulsar-CPP-v4.2.0"),
            c.partitioned_metadata("t", 1),
            c.lookup("t", 2),
            c.producer("t", 0, 0),
            c.send(0, 0, hp),
            c.ping(),
            c.subscribe("t", "s", SubType.Failover, 1, 3),
            c.flow(1, 1000),
            c.close_producer(0, 4),
        ]
    )


def _server_events(chunks: list[bytes]) -> list:
    server = ServerConnection()
    out = []
    for chunk in chunks:
        if not chunk:
            continue  # b"" means EOF to receive_data
        server.receive_data(chunk)
        while (ev := server.next_event()) is not None:
            out.append(ev)
            if isinstance(ev, ConnectRequested):
                server.accept_connect()
    server.receive_data(b"")
    out.append(server.next_event())
    return out


def test_server_split_invariance_byte_at_a_time():
    data = _client_stream()
    whole = _server_events([data])
    assert len(whole) == 10
    assert _server_events([data[i : i + 1] for i in range(len(data))]) == whole


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_server_split_invariance_random(data):
    blob = _client_stream()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(blob)), max_size=30)))
    chunks = [blob[a:b] for a, b in zip([0, *cuts], [*cuts, len(blob)], strict=True)]
    assert _server_events(chunks) == _server_events([blob])


def _client_events(chunks: list[bytes]) -> list:
    client = ClientConnection()
    client.connect()
    client_out = []
    for chunk in chunks:
        if not chunk:
            continue
        client.receive_data(chunk)
        while (ev := client.next_event()) is not None:
            client_out.append(ev)
            if isinstance(ev, Connected):
                client.send_request(T.LOOKUP, 1, c.lookup("t", 1))
    return client_out


def test_client_split_invariance():
    hp = build_headers_and_payload(
        new_message_metadata(producer_name="p", sequence_id=1, publish_time=2), b"m"
    )
    blob = (
        c.connected("s", 20, 1 << 20)
        + c.lookup_response(1, LookupType.Connect, "pulsar://h:1")
        + c.message(1, 7, 0, -1, hp)
        + c.ping()
    )
    whole = _client_events([blob])
    assert [type(e).__name__ for e in whole] == [
        "Connected",
        "ResponseReceived",
        "CommandReceived",
        "PingReceived",
    ]
    assert _client_events([blob[i : i + 1] for i in range(len(blob))]) == whole
