"""The console's own routes (web/console/): page and assets, the policy table, payload decoding.

The page and assets are public and carry no data; decoding needs an
authenticated role when authentication is on (checked in the secured app of
test_auth_routes.py's style) and answers 400 with a reason on input that does
not fit, never 500.
"""

from __future__ import annotations

import base64
import io
import json
from types import SimpleNamespace

import fastavro
import httpx
import jwt
import pytest

from magnetar.broker.auth import AuthConfig, AuthenticationService, AuthorizationService
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.protocol.batch import SingleMessage, encode_batch
from magnetar.runtime import RealClock
from magnetar.web.app import create_app
from magnetar.web.console import ASSETS

SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": "int"},
        {"name": "tag", "type": ["null", "bytes"], "default": None},
    ],
}
SECRET = b"0123456789abcdef0123456789abcdef"


def avro(value: dict) -> bytes:
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMA), value)
    return buf.getvalue()


async def call(app, method: str, path: str, body=None, headers=None) -> httpx.Response:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        return await c.request(method, path, json=body, headers=headers or {})


def decode_body(payload: bytes, schema_type: str = "AVRO", **extra) -> dict:
    return {
        "schemaType": schema_type,
        "schema": json.dumps(SCHEMA),
        "payload": base64.b64encode(payload).decode(),
        **extra,
    }


@pytest.fixture(scope="module")
def app():
    return create_app(SimpleNamespace())  # building the app is the slow part: once per module


async def test_page_and_every_asset_are_served(app) -> None:
    r = await call(app, "GET", "/console")
    assert r.status_code == 307 and r.headers["location"] == "/console/"
    page = await call(app, "GET", "/console/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for name in ASSETS:  # every asset the table names exists in the package, and the page loads it
        assert f"static/{name}" in page.text
        r = await call(app, "GET", f"/console/static/{name}")
        assert r.status_code == 200 and r.content, name
        assert r.headers["content-type"] == ASSETS[name]
    r = await call(app, "GET", "/console/static/..%2F__init__.py")
    assert r.status_code == 404 and r.json()["reason"]


async def test_policy_table_names_rest_suffixes(app) -> None:
    table = (await call(app, "GET", "/console/api/policies")).json()
    by_name = {row["name"]: row for row in table}
    assert by_name["messageTTL"] == {
        "name": "messageTTL",
        "field": "message_ttl_in_seconds",
        "suffix": "messageTTL",
        "method": "POST",
        "perCluster": False,
    }
    assert by_name["schemaCompatibilityStrategy"]["method"] == "PUT"


async def test_avro_payload_is_decoded(app) -> None:
    r = await call(
        app,
        "POST",
        "/console/api/decode",
        decode_body(avro({"customer": "c-1", "amount": 7, "tag": b"\x01"})),
    )
    assert r.status_code == 200, r.text
    (msg,) = r.json()["messages"]
    assert msg["format"] == "avro"
    assert msg["value"] == {"customer": "c-1", "amount": 7, "tag": "01"}


async def test_a_batch_is_split_and_each_record_decoded(app) -> None:
    batch = encode_batch(
        [
            SingleMessage(avro({"customer": "a", "amount": 1, "tag": None}), partition_key="k1"),
            SingleMessage(avro({"customer": "b", "amount": 2, "tag": None}), properties={"p": "v"}),
        ]
    )
    r = await call(app, "POST", "/console/api/decode", decode_body(batch, batchCount=2))
    assert r.status_code == 200, r.text
    a, b = r.json()["messages"]
    assert (a["value"]["customer"], a["key"]) == ("a", "k1")
    assert (b["value"]["amount"], b["properties"]) == (2, {"p": "v"})
    r = await call(app, "POST", "/console/api/decode", decode_body(batch, batchCount=3))
    assert r.status_code == 400 and "3 records" in r.json()["reason"]


@pytest.mark.parametrize(
    ("schema_type", "payload", "expected"),
    [
        ("JSON", b'{"a": [1, 2]}', ("json", {"a": [1, 2]})),
        ("STRING", "héllo".encode(), ("text", "héllo")),
        ("NONE", b"\xff\x00", ("hex", "ff00")),
        ("INT32", (-2).to_bytes(4, "big", signed=True), ("int32", -2)),
        ("BOOLEAN", b"\x01", ("boolean", True)),
    ],
)
async def test_other_schema_types(app, schema_type, payload, expected) -> None:
    r = await call(app, "POST", "/console/api/decode", decode_body(payload, schema_type))
    assert r.status_code == 200, r.text
    msg = r.json()["messages"][0]
    assert (msg["format"], msg["value"]) == expected


@pytest.mark.parametrize(
    "body",
    [
        decode_body(b"\x02"),  # truncated Avro datum
        decode_body(avro({"customer": "x", "amount": 1, "tag": None}) + b"junk"),  # bytes past the datum
        {**decode_body(b"x"), "schema": "{not json"},
        {**decode_body(b"x"), "schema": json.dumps({"type": "record", "name": "R", "fields": "nope"})},
        {**decode_body(b"x"), "payload": "***"},
        decode_body(b"{", "JSON"),
        decode_body(b"\x00\x01", "INT32"),
        {"payload": 5},
        [1, 2],
        {**decode_body(b"x"), "batchCount": -1},
    ],
    ids=["truncated", "trailing", "schema-not-json", "schema-bad", "not-base64", "json-bad", "int32-size",
         "payload-type", "not-object", "batch-count"],
)  # fmt: skip
async def test_bad_input_is_400_with_a_reason(app, body) -> None:
    r = await call(app, "POST", "/console/api/decode", body)
    assert r.status_code == 400, r.text
    assert r.json()["reason"]


async def test_an_oversized_request_is_413(app) -> None:
    from magnetar.web.console.decode import BODY_BYTES_MAX

    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as c:
        r = await c.post("/console/api/decode", content=b"x" * (BODY_BYTES_MAX + 1))
    assert r.status_code == 413 and r.json()["reason"]


async def test_with_authentication_on_the_page_is_public_and_decoding_needs_a_role(tmp_path) -> None:
    key = tmp_path / "secret.key"
    key.write_bytes(SECRET)
    cfg = AuthConfig.from_properties(
        {
            "authenticationEnabled": "true",
            "authenticationProviders": "token",
            "tokenSecretKey": f"file://{key}",
            "authorizationEnabled": "true",
            "superUserRoles": "root",
        }
    )
    authn = AuthenticationService.from_config(cfg, RealClock())
    app = create_app(
        SimpleNamespace(
            authentication=authn, authorization=AuthorizationService(cfg, MemoryMetadataServer().session())
        )
    )
    try:
        assert (await call(app, "GET", "/console/")).status_code == 200
        assert (await call(app, "GET", "/console/static/app.js")).status_code == 200
        assert (await call(app, "GET", "/console/api/policies")).status_code == 200
        body = decode_body(avro({"customer": "c", "amount": 1, "tag": None}))
        r = await call(app, "POST", "/console/api/decode", body)
        assert r.status_code == 401 and r.json()["reason"]
        any_role = {"Authorization": "Bearer " + jwt.encode({"sub": "someone"}, SECRET, "HS256")}
        r = await call(app, "POST", "/console/api/decode", body, any_role)
        assert r.status_code == 200, r.text
        # The admin API behind the page is not opened by the console: still 401 without credentials.
        assert (await call(app, "GET", "/admin/v2/tenants")).status_code == 401
    finally:
        await authn.aclose()
