"""The official pulsar-client against the security core, over real sockets.

A minimal broker front door (``AuthEdge``): the sans-IO ``ServerConnection``
for framing, an optional TLS listener built by ``broker.auth.tls``, and
``AuthSession`` for CONNECT and AUTH_CHALLENGE.  It answers every
PARTITIONED_METADATA with TopicNotFound (no topics here), so each client call
fails fast after the handshake; what the test checks is what the edge
recorded: the role each connection authenticated as, refusals, refreshes.
This proves the wire formats (token / basic / tls auth data, AUTH_RESPONSE)
and the test PKI against the C++ client's OpenSSL, before the broker wires it,
and shows the fail-fast refusal (CONNECTED, then AuthenticationError on every
request) that makes the client report AuthenticationError instead of a timeout.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import jwt
import pytest

from magnetar.broker.auth.basic import BasicProvider, apr1_md5
from magnetar.broker.auth.config import AuthConfig
from magnetar.broker.auth.providers import TlsProvider
from magnetar.broker.auth.service import AuthenticationService
from magnetar.broker.auth.session import AuthSession, RefreshAction
from magnetar.broker.auth.tls import peer_certificate, server_ssl_context
from magnetar.broker.auth.token import TokenProvider
from magnetar.broker.errors import BrokerError
from magnetar.protocol import server_commands
from magnetar.protocol.connection import (
    CommandReceived,
    ConnectionClosed,
    ConnectRequested,
    PingReceived,
    ServerConnection,
)
from magnetar.protocol.enums import CommandType, ServerError
from magnetar.runtime.clock import RealClock
from magnetar.testing.certs import TestPki, make_test_pki

pulsar = pytest.importorskip("pulsar")
pytestmark = pytest.mark.compat

OPERATION_TIMEOUT_S = 10
READ_TIMEOUT_S = 30


class AuthEdge:
    def __init__(self, authn: AuthenticationService, ssl_ctx=None) -> None:  # type: ignore[no-untyped-def]
        self.authn = authn
        self.ssl_ctx = ssl_ctx
        self.events: list[tuple[str, object]] = []
        self.changed = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> AuthEdge:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ssl_ctx)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        async def _stop() -> None:
            assert self._server is not None
            self._server.close()
            await self.authn.aclose()

        asyncio.run_coroutine_threadsafe(_stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)

    def record(self, kind: str, detail: object) -> None:
        self.events.append((kind, detail))
        self.changed.set()

    def wait_for(self, kind: str, timeout_s: float = 15) -> list[object]:
        deadline = threading.Event()
        for _ in range(int(timeout_s * 20)):
            found = [d for k, d in self.events if k == kind]
            if found:
                return found
            deadline.wait(0.05)
        raise AssertionError(f"no {kind!r} event; events: {self.events}")

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConnection()
        peer = peer_certificate(writer.get_extra_info("ssl_object"))
        session: AuthSession | None = None
        try:
            while True:
                data = await asyncio.wait_for(reader.read(65536), READ_TIMEOUT_S)
                conn.receive_data(data)
                while (ev := conn.next_event()) is not None:
                    if isinstance(ev, ConnectionClosed):
                        return
                    if isinstance(ev, PingReceived):
                        writer.write(ev.reply)
                    elif isinstance(ev, ConnectRequested):
                        session = AuthSession(
                            self.authn,
                            RealClock(),
                            supports_auth_refresh="supports_auth_refresh" in ev.feature_flags,
                            tls_peer_cert=peer,
                        )
                        await self._connect(conn, writer, session, ev)
                    elif isinstance(ev, CommandReceived) and session is not None:
                        if not session.is_authenticated:
                            self._refuse(writer, session, ev)
                            await writer.drain()
                            return
                        await self._command(writer, session, ev)
                await writer.drain()
        except (TimeoutError, ConnectionError):
            return
        finally:
            writer.close()

    async def _connect(self, conn, writer, session: AuthSession, ev: ConnectRequested) -> None:  # type: ignore[no-untyped-def]
        try:
            result = await session.connect(ev.auth_method_name, ev.auth_data or b"")
        except BrokerError as exc:
            self.record("refused", (ev.auth_method_name, exc.message))
            # fail-fast refusal (see session.py): CONNECTED, then every request gets the error
            writer.write(conn.accept_connect())
            return
        writer.write(conn.accept_connect())
        self.record("connected", (result.method, result.role))
        if session.check_refresh() is RefreshAction.SEND_CHALLENGE:
            ch = session.challenge()
            frame = server_commands.auth_challenge(
                conn.server_version, ch.auth_method_name, ch.auth_data, conn.protocol_version
            )
            writer.write(conn.send_auth_challenge(frame))
            self.record("challenged", result.role)

    def _refuse(self, writer, session: AuthSession, ev: CommandReceived) -> None:  # type: ignore[no-untyped-def]
        exc = session.rejection
        assert exc is not None
        frame = ev.frame
        request_id = getattr(frame.command, "request_id", -1)
        if frame.type is CommandType.PARTITIONED_METADATA:
            writer.write(
                server_commands.partitioned_metadata_response(
                    request_id, error=exc.server_error, message=exc.message
                )
            )
        elif frame.type is CommandType.LOOKUP:
            writer.write(server_commands.lookup_failed(request_id, exc.server_error, exc.message))
        else:
            writer.write(server_commands.error(request_id, exc.server_error, exc.message))

    async def _command(self, writer, session, ev) -> None:  # type: ignore[no-untyped-def]
        frame = ev.frame
        if frame.type is CommandType.AUTH_RESPONSE:
            resp = frame.command.response
            try:
                fresh = await session.on_auth_response(resp.auth_method_name, resp.auth_data)
                self.record("refreshed", (fresh.role, fresh.expires_at_ms))
            except BrokerError as exc:
                self.record("refresh-failed", exc.message)
        elif frame.type is CommandType.PARTITIONED_METADATA:
            writer.write(
                server_commands.partitioned_metadata_response(
                    frame.command.request_id, error=ServerError.TopicNotFound, message="no topics at the edge"
                )
            )


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> TestPki:  # type: ignore[no-untyped-def]
    return make_test_pki(tmp_path_factory.mktemp("pki"), client_roles=("tls-app",))


@pytest.fixture(scope="module")
def secret() -> bytes:
    return b"k" * 32


def _service(secret: bytes, methods: tuple[str, ...], anonymous: str | None = None) -> AuthenticationService:
    clock = RealClock()
    providers = {
        "token": TokenProvider(clock, secret_key=secret),
        "basic": BasicProvider.from_text(f"alice:{apr1_md5(b'right', b'pepper')}\n"),
        "tls": TlsProvider(),
    }
    cfg = AuthConfig(
        authentication_enabled=True, authentication_providers=methods, anonymous_user_role=anonymous
    )
    return AuthenticationService(cfg, {m: providers[m] for m in methods})


@pytest.fixture
def edge_factory() -> Iterator:  # type: ignore[type-arg]
    edges: list[AuthEdge] = []

    def make(authn: AuthenticationService, ssl_ctx=None) -> AuthEdge:  # type: ignore[no-untyped-def]
        edges.append(AuthEdge(authn, ssl_ctx).start())
        return edges[-1]

    yield make
    for e in edges:
        e.stop()


def _client(url: str, **kw):  # type: ignore[no-untyped-def]
    return pulsar.Client(
        url,
        operation_timeout_seconds=OPERATION_TIMEOUT_S,
        logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error),
        **kw,
    )


def _try_producer(client) -> Exception:  # type: ignore[no-untyped-def]
    with pytest.raises(pulsar.exceptions.PulsarException) as info:
        client.create_producer("persistent://public/default/edge")
    client.close()
    return info.value


def test_token_over_tls_with_hostname_check(edge_factory, pki: TestPki, secret: bytes) -> None:  # type: ignore[no-untyped-def]
    ctx = server_ssl_context(pki.server.cert_file, pki.server.key_file)
    edge = edge_factory(_service(secret, ("token",)), ctx)
    token = jwt.encode({"sub": "tok-user"}, secret, "HS256")
    client = _client(
        f"pulsar+ssl://localhost:{edge.port}",
        authentication=pulsar.AuthenticationToken(token),
        tls_trust_certs_file_path=pki.ca_cert_file,
        tls_validate_hostname=True,
    )
    _try_producer(client)
    assert ("token", "tok-user") in edge.wait_for("connected")


def test_tls_client_certificate_role(edge_factory, pki: TestPki, secret: bytes) -> None:  # type: ignore[no-untyped-def]
    ctx = server_ssl_context(
        pki.server.cert_file, pki.server.key_file, pki.ca_cert_file, require_client_cert=True
    )
    edge = edge_factory(_service(secret, ("tls",)), ctx)
    cert = pki.clients["tls-app"]
    client = _client(
        f"pulsar+ssl://localhost:{edge.port}",
        authentication=pulsar.AuthenticationTLS(cert.cert_file, cert.key_file),
        tls_trust_certs_file_path=pki.ca_cert_file,
        tls_validate_hostname=True,
    )
    _try_producer(client)
    assert ("tls", "tls-app") in edge.wait_for("connected")


def test_basic_good_and_bad_password(edge_factory, secret: bytes) -> None:  # type: ignore[no-untyped-def]
    edge = edge_factory(_service(secret, ("basic",)))
    _try_producer(
        _client(
            f"pulsar://127.0.0.1:{edge.port}", authentication=pulsar.AuthenticationBasic("alice", "right")
        )
    )
    assert ("basic", "alice") in edge.wait_for("connected")
    err = _try_producer(
        _client(
            f"pulsar://127.0.0.1:{edge.port}", authentication=pulsar.AuthenticationBasic("alice", "wrong")
        )
    )
    refused = edge.wait_for("refused")
    assert refused[0][0] == "basic" and "wrong password" in str(refused[0][1])
    # refused, not timed out: the client reports the broker's AuthenticationError
    assert isinstance(err, pulsar.exceptions.AuthenticationError), repr(err)
    # garbage auth data is refused the same way, and the edge keeps serving good clients
    garbage = pulsar.AuthenticationBasic("\x01\x02", "\xff")
    assert isinstance(
        _try_producer(_client(f"pulsar://127.0.0.1:{edge.port}", authentication=garbage)),
        pulsar.exceptions.AuthenticationError,
    )
    _try_producer(
        _client(
            f"pulsar://127.0.0.1:{edge.port}", authentication=pulsar.AuthenticationBasic("alice", "right")
        )
    )
    assert edge.wait_for("connected").count(("basic", "alice")) == 2


def test_unknown_method_falls_back_to_anonymous(edge_factory, secret: bytes) -> None:  # type: ignore[no-untyped-def]
    edge = edge_factory(_service(secret, ("basic",), anonymous="anon"))
    token = jwt.encode({"sub": "tok-user"}, secret, "HS256")
    _try_producer(
        _client(f"pulsar://127.0.0.1:{edge.port}", authentication=pulsar.AuthenticationToken(token))
    )
    _try_producer(_client(f"pulsar://127.0.0.1:{edge.port}"))
    connected = edge.wait_for("connected")
    assert connected.count(("anonymous", "anon")) >= 2, connected


def test_token_refresh_through_auth_challenge(edge_factory, secret: bytes) -> None:  # type: ignore[no-untyped-def]
    edge = edge_factory(_service(secret, ("token",)))
    calls: list[int] = []

    def supplier() -> str:
        calls.append(1)
        # first token expires within the refresh check period, so the edge challenges at once
        ttl = 30 if len(calls) == 1 else 3600
        return jwt.encode(
            {"sub": "refresher", "exp": int(RealClock().time_ms() / 1000) + ttl}, secret, "HS256"
        )

    client = _client(f"pulsar://127.0.0.1:{edge.port}", authentication=pulsar.AuthenticationToken(supplier))
    with pytest.raises(pulsar.exceptions.PulsarException):
        client.create_producer("persistent://public/default/edge")
    assert edge.wait_for("challenged") == ["refresher"]
    refreshed = edge.wait_for("refreshed")
    client.close()
    assert refreshed[0][0] == "refresher"  # type: ignore[index]
    assert len(calls) >= 2
