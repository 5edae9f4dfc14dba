"""What a connection is opened with: its configuration, the TLS context, the broker's host and port.

Theory of operation: every connection of a client shares one frozen
:class:`ConnectionConfig` (authentication, TLS context, timeouts, keep-alive
interval, the client version sent in CONNECT), built once by ``Client`` and
held by the pool. :func:`make_ssl_context` turns the client's TLS options
(trusted CAs, insecure / hostname-check switches, a client certificate) into
an ``ssl.SSLContext``; :func:`split_host_port` reads the socket address out of
a broker URL (``pulsar://h:p``, ``pulsar+ssl://h:p`` or ``h:p``, IPv6 in
brackets), refusing one without a port with ``ConnectError``.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from magnetar.client.auth import Authentication
from magnetar.client.errors import ConnectError
from magnetar.protocol import client_commands


@dataclass(frozen=True)
class ConnectionConfig:
    authentication: Authentication
    ssl_context: ssl.SSLContext | None = None
    tls_validate_hostname: bool = False
    operation_timeout_s: float = 30.0
    connection_timeout_s: float = 10.0
    keepalive_s: float = 30.0
    client_version: str = client_commands.CLIENT_VERSION


def make_ssl_context(
    trust_file: str | None, insecure: bool, validate_hostname: bool, cert: str | None, key: str | None
) -> ssl.SSLContext:
    """The TLS context: trusted CAs, the insecure / hostname switches, an optional client certificate."""
    ctx = ssl.create_default_context(cafile=trust_file) if trust_file else ssl.create_default_context()
    ctx.check_hostname = bool(validate_hostname) and not insecure
    if insecure:
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        ctx.load_cert_chain(cert, key)
    return ctx


def split_host_port(address: str) -> tuple[str, int]:
    """``pulsar://h:p`` / ``pulsar+ssl://h:p`` / ``h:p`` -> (host, port)."""
    rest = address.split("://", 1)[-1].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit():
        raise ConnectError(f"broker address {address!r} has no port")
    return host.strip("[]"), int(port)
