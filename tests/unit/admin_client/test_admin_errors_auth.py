"""Error mapping, auth headers, owner redirects, decoding and Pulsar's size/time shorthands."""

from __future__ import annotations

import base64
import json

import httpx
import pytest

from magnetar.admin_client import (
    AdminConnectionError,
    AdminError,
    BadRequest,
    BasicAuth,
    Conflict,
    MessageId,
    NotAllowed,
    NotAuthorized,
    NotFound,
    PersistencePolicies,
    PreconditionFailed,
    PulsarAdmin,
    ServerError,
    TokenAuth,
    TooManyRequests,
    auth_from_plugin,
)
from magnetar.admin_client.auth import AuthConfigError, TlsAuth
from magnetar.admin_client.errors import TooManyRedirects
from magnetar.admin_client.units import parse_size, parse_time_minutes, parse_time_s
from magnetar.common.errors import InvalidArgument
from magnetar.protocol.batch import SingleMessage, encode_batch


def _admin(handler, **kw) -> PulsarAdmin:
    return PulsarAdmin("http://broker:8080", transport=httpx.MockTransport(handler), **kw)


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequest),
        (401, NotAuthorized),
        (403, NotAuthorized),
        (404, NotFound),
        (405, NotAllowed),
        (406, BadRequest),
        (409, Conflict),
        (412, PreconditionFailed),
        (422, BadRequest),
        (429, TooManyRequests),
        (500, ServerError),
        (501, ServerError),
        (503, ServerError),
    ],
)
def test_status_maps_to_typed_error_with_reason(status, cls):
    admin = _admin(lambda r: httpx.Response(status, json={"reason": f"reason {status}"}))
    with pytest.raises(cls) as info:
        admin.tenants.get("t")
    err = info.value
    assert isinstance(err, AdminError)
    assert err.status == status and err.reason == f"reason {status}"
    assert err.method == "GET" and err.url.endswith("/admin/v2/tenants/t")
    assert err.retriable == (status >= 429)


def test_non_json_error_body_is_kept_as_reason():
    admin = _admin(lambda r: httpx.Response(502, text="<html>bad gateway</html>"))
    with pytest.raises(ServerError, match="bad gateway"):
        admin.clusters.list()
    admin = _admin(lambda r: httpx.Response(404))
    with pytest.raises(NotFound) as info:
        admin.clusters.get("x")
    assert info.value.reason == "Not Found"


def test_connection_failure_is_typed():
    def refuse(request):
        raise httpx.ConnectError("connection refused", request=request)

    with pytest.raises(AdminConnectionError) as info:
        _admin(refuse).clusters.list()
    assert "connection refused" in str(info.value) and info.value.retriable


def test_decoding_json_empty_text_and_message_id():
    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/health"):
            return httpx.Response(200, text="ok")
        if path.endswith("/terminate"):
            return httpx.Response(200, json={"ledgerId": 12, "entryId": 34, "partitionIndex": -1})
        if path.endswith("/clusters/c1") and request.method == "PUT":
            return httpx.Response(200)  # Pulsar: 200 with an empty body
        if path.endswith("/messageTTL"):
            return httpx.Response(204)  # unset
        return httpx.Response(200, json=["standalone"])

    admin = _admin(handler)
    assert admin.clusters.list() == ["standalone"]
    assert admin.clusters.create("c1", {"serviceUrl": "http://x"}) is None
    assert admin.namespaces.get_message_ttl("t/ns") is None
    assert admin.brokers.health_check() == "ok"
    mid = admin.topics.terminate("persistent://t/ns/x")
    assert mid == MessageId(12, 34, -1) and str(mid) == "12:34:-1"


def test_token_auth_header_on_every_request_and_redirect_hop():
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        if request.url.host == "broker":
            return httpx.Response(
                307,
                headers={"Location": "http://owner:8080/admin/v2/persistent/t/ns/x/stats?authoritative=true"},
            )
        return httpx.Response(200, json={"msgRateIn": 0.0})

    admin = _admin(handler, auth=TokenAuth("jwt-123"))
    assert admin.topics.get_stats("persistent://t/ns/x") == {"msgRateIn": 0.0}
    assert [h for _, h in seen] == ["Bearer jwt-123", "Bearer jwt-123"]
    assert seen[1][0] == "http://owner:8080/admin/v2/persistent/t/ns/x/stats?authoritative=true"


def test_redirects_are_bounded():
    admin = _admin(lambda r: httpx.Response(307, headers={"Location": "http://broker:8080/loop"}))
    with pytest.raises(TooManyRedirects):
        admin.clusters.list()


def test_redirect_keeps_method_and_body():
    seen: list[tuple[str, bytes]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.content))
        if request.url.host == "broker":
            return httpx.Response(
                307, headers={"Location": "http://owner:8080" + request.url.raw_path.decode()}
            )
        return httpx.Response(204)

    _admin(handler).topics.create_partitioned("persistent://t/ns/x", 3)
    assert seen == [("PUT", b"3"), ("PUT", b"3")]


def test_basic_auth_header():
    admin_headers = BasicAuth("alice", "s3cret").http_headers()
    assert admin_headers["Authorization"] == "Basic " + base64.b64encode(b"alice:s3cret").decode()


def test_auth_from_plugin_forms(tmp_path):
    token_file = tmp_path / "token.txt"
    token_file.write_text("file-token\n")
    plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"
    assert auth_from_plugin(plugin, "token:abc") == TokenAuth("abc")
    assert auth_from_plugin(plugin, f"file://{token_file}") == TokenAuth("file-token")
    assert auth_from_plugin(plugin, f"file:{token_file}") == TokenAuth("file-token")
    assert auth_from_plugin(plugin, json.dumps({"token": "xyz"})) == TokenAuth("xyz")
    assert auth_from_plugin(plugin, "raw") == TokenAuth("raw")
    basic = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
    assert auth_from_plugin(basic, '{"userId":"u","password":"p"}') == BasicAuth("u", "p")
    assert auth_from_plugin("basic", "userId:u,password:p") == BasicAuth("u", "p")
    tls = auth_from_plugin(
        "org.apache.pulsar.client.impl.auth.AuthenticationTls", "tlsCertFile:/c.pem,tlsKeyFile:/k.pem"
    )
    assert tls == TlsAuth("/c.pem", "/k.pem") and tls.client_certificate() == ("/c.pem", "/k.pem")
    assert auth_from_plugin(None, None) is None
    with pytest.raises(AuthConfigError):
        auth_from_plugin("org.example.Unknown", "x")
    with pytest.raises(AuthConfigError):
        auth_from_plugin(plugin, f"file:{tmp_path / 'missing'}")
    with pytest.raises(AuthConfigError):
        auth_from_plugin(plugin, "")


def test_peek_splits_batches_and_reads_property_headers():
    batch = encode_batch([SingleMessage(b"hello", {"a": "1"}, partition_key="k1"), SingleMessage(b"world")])

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/position/1"):
            return httpx.Response(
                200,
                content=batch,
                headers={
                    "X-Pulsar-Message-ID": "5:7",
                    "X-Pulsar-num-batch-message": "2",
                    "X-Pulsar-publish-time": "2024-03-01T12:00:00.8Z",
                    "Content-Type": "application/octet-stream",
                },
            )
        return httpx.Response(
            200,
            content=b"single",
            headers={
                "X-Pulsar-Message-ID": "5:8",
                "X-Pulsar-PROPERTY": '{"x":"y"}',
                "X-Pulsar-PROPERTY-old": "2",
            },
        )

    admin = _admin(handler)
    msgs = admin.topics.peek_message("persistent://t/ns/x", "s", 1)
    assert [(m.message_id, m.batch_index, m.payload) for m in msgs] == [
        ("5:7", 0, b"hello"),
        ("5:7", 1, b"world"),
    ]
    assert msgs[0].properties == {"a": "1"} and msgs[0].key == "k1"
    (single,) = admin.topics.peek_message("persistent://t/ns/x", "s", 2)
    assert (
        single.payload == b"single"
        and single.properties == {"x": "y", "old": "2"}
        and single.batch_index is None
    )


def test_bad_names_fail_before_sending():
    admin = _admin(lambda r: pytest.fail("must not send"))
    with pytest.raises(InvalidArgument):
        admin.namespaces.get_policies("t/bad name")
    with pytest.raises(InvalidArgument):
        admin.topics.create("a/b")
    with pytest.raises(InvalidArgument):
        PersistencePolicies(1, 2, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", 4096),
        ("100K", 102400),
        ("100k", 102400),
        ("10M", 10 * 1024**2),
        ("16G", 16 * 1024**3),
        ("2T", 2 * 1024**4),
        ("-1", -1),
        (0, 0),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30", 30),
        ("100s", 100),
        ("100m", 6000),
        ("13h", 46800),
        ("2d", 172800),
        ("5w", 3024000),
        ("1y", 31536000),
        ("-1", -1),
    ],
)
def test_parse_time(text, expected):
    assert parse_time_s(text) == expected


def test_parse_time_minutes_and_bad_input():
    assert parse_time_minutes("3h") == 180 and parse_time_minutes("-1") == -1
    for bad in ("", "abc", "10x", "-2", "1.5.2M", "M"):
        with pytest.raises(InvalidArgument):
            parse_size(bad) if not bad.endswith("x") else parse_time_s(bad)
    with pytest.raises(InvalidArgument):
        parse_time_s("-1", allow_unlimited=False)
    with pytest.raises(InvalidArgument):
        parse_size("-5")


async def test_async_client_maps_errors_and_follows_redirects():
    from magnetar.admin_client import AsyncPulsarAdmin

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/missing/stats"):
            return httpx.Response(404, json={"reason": "Topic not found"})
        if request.url.host == "broker":
            return httpx.Response(
                307, headers={"Location": "http://owner:8080" + request.url.raw_path.decode()}
            )
        assert request.headers["authorization"] == "Bearer t0k"
        return httpx.Response(200, json={"partitions": 3})

    async with AsyncPulsarAdmin(
        "http://broker:8080", auth=TokenAuth("t0k"), transport=httpx.MockTransport(handler)
    ) as a:
        assert await a.topics.get_partitioned_metadata("persistent://t/ns/x") == {"partitions": 3}
        with pytest.raises(NotFound, match="Topic not found"):
            await a.topics.get_stats("persistent://t/ns/missing")


def test_response_body_is_bounded():
    from magnetar.admin_client import AdminConfig

    config = AdminConfig("http://broker:8080", response_bytes_max=64)
    big = httpx.MockTransport(lambda r: httpx.Response(200, json=["x" * 100]))
    with pytest.raises(AdminConnectionError, match="64-byte bound"):
        PulsarAdmin(config, transport=big).clusters.list()
    small = httpx.MockTransport(lambda r: httpx.Response(200, json=["x" * 10]))
    assert PulsarAdmin(config, transport=small).clusters.list() == ["x" * 10]


def test_unexpected_answer_shape_and_bad_tls_files_are_typed(tmp_path):
    from magnetar.admin_client import TlsOptions
    from magnetar.admin_client.errors import UnexpectedResponse

    admin = _admin(lambda r: httpx.Response(200, json=["not", "a", "message", "id"]))
    with pytest.raises(UnexpectedResponse):
        admin.topics.terminate("persistent://t/ns/x")
    with pytest.raises(InvalidArgument, match="TLS"):
        PulsarAdmin("https://b:8443", tls=TlsOptions(trust_certs_file_path=str(tmp_path / "missing.pem")))
