"""The admin client and CLI over real sockets: plain HTTP, a cross-origin owner redirect, and HTTPS.

Small threaded ``http.server`` fakes stand in for brokers (the real web
service is tested by its own suites); these tests check what MockTransport
cannot: connection handling, the auth header surviving a redirect to another
port, TLS trust options, and the ``magnetar admin`` process end to end.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from magnetar.admin_client import AdminConnectionError, NotFound, PulsarAdmin, TlsOptions, TokenAuth


class _Handler(BaseHTTPRequestHandler):
    redirect_to: str | None = None
    seen: list[tuple[str, str, str | None]]

    def log_message(self, *args: object) -> None:  # keep test output clean
        pass

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, self.headers.get("Authorization")))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.redirect_to:
            self.send_response(307)
            self.send_header("Location", self.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if self.path == "/admin/v2/tenants":
            payload, status = json.dumps(["public", "pulsar"]).encode(), 200
        elif self.path.startswith("/admin/v2/namespaces/t/ns/retention") and self.command == "POST":
            payload, status = b"", 204
            assert json.loads(body) == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 10}
        else:
            payload, status = json.dumps({"reason": "Tenant does not exist"}).encode(), 404
        self.send_response(status)
        if payload:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = _answer


@contextmanager
def serve(redirect_to: str | None = None, tls: ssl.SSLContext | None = None) -> Iterator[tuple[str, list]]:
    seen: list = []
    handler = type("H", (_Handler,), {"redirect_to": redirect_to, "seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    scheme = "https" if tls else "http"
    try:
        yield f"{scheme}://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_plain_http_and_typed_error():
    with serve() as (url, seen):
        with PulsarAdmin(url, timeout_s=5) as admin:
            assert admin.tenants.list() == ["public", "pulsar"]
            with pytest.raises(NotFound, match="Tenant does not exist"):
                admin.tenants.get("nope")
    assert [s[:2] for s in seen] == [("GET", "/admin/v2/tenants"), ("GET", "/admin/v2/tenants/nope")]


def test_redirect_to_owner_on_another_port_keeps_auth_and_body():
    from magnetar.admin_client import RetentionPolicies

    with serve() as (owner_url, owner_seen), serve(redirect_to=owner_url) as (url, seen):
        with PulsarAdmin(url, auth=TokenAuth("tok"), timeout_s=5) as admin:
            admin.namespaces.set_retention("t/ns", RetentionPolicies(60, 10))
    assert seen == [("POST", "/admin/v2/namespaces/t/ns/retention", "Bearer tok")]
    assert owner_seen == [("POST", "/admin/v2/namespaces/t/ns/retention", "Bearer tok")]


def test_connection_refused_is_typed():
    with serve() as (url, _):
        pass  # closed again: nothing listens on that port now
    with PulsarAdmin(url, timeout_s=2) as admin, pytest.raises(AdminConnectionError):
        admin.tenants.list()


@pytest.fixture(scope="module")
def self_signed(tmp_path_factory) -> tuple[str, str]:
    d = tmp_path_factory.mktemp("tls")
    cert, key = str(d / "cert.pem"), str(d / "key.pem")
    try:
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-keyout",
                key,
                "-out",
                cert,
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"openssl cannot make a test certificate: {e}")
    return cert, key


def test_https_trust_options(self_signed):
    cert, key = self_signed
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    with serve(tls=server_ctx) as (url, _):
        trusted = TlsOptions(trust_certs_file_path=cert, enable_hostname_verification=True)
        with PulsarAdmin(url, tls=trusted, timeout_s=5) as admin:
            assert admin.tenants.list() == ["public", "pulsar"]
        with PulsarAdmin(url, timeout_s=5) as admin, pytest.raises(AdminConnectionError):
            admin.tenants.list()  # self-signed, not trusted
        with PulsarAdmin(url, tls=TlsOptions(allow_insecure_connection=True), timeout_s=5) as admin:
            assert admin.tenants.list() == ["public", "pulsar"]


def test_magnetar_admin_process_end_to_end():
    with serve() as (url, seen):
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("MAGNETAR_ADMIN", "PULSAR_CLIENT_CONF"))
        }
        ok = subprocess.run(
            [sys.executable, "-m", "magnetar.cli.main", "admin", "--admin-url", url, "tenants", "list"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        bad = subprocess.run(
            [
                sys.executable,
                "-m",
                "magnetar.cli.main",
                "admin",
                "--admin-url",
                url,
                "tenants",
                "get",
                "nope",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert ok.returncode == 0 and ok.stdout.split() == ["public", "pulsar"]
    assert bad.returncode == 1 and "Reason: Tenant does not exist" in bad.stderr


async def test_async_client_over_a_real_socket():
    from magnetar.admin_client import AsyncPulsarAdmin

    with serve() as (url, seen):
        async with AsyncPulsarAdmin(url, timeout_s=5) as admin:
            assert await admin.tenants.list() == ["public", "pulsar"]
            with pytest.raises(NotFound):
                await admin.tenants.get("nope")
    with pytest.raises(AdminConnectionError) as info:
        async with AsyncPulsarAdmin(url, timeout_s=2) as admin:
            await admin.tenants.list()
    assert info.value.url == url + "/admin/v2/tenants"
