"""Bad schema input, through REST and through a producer: a clear error, nothing stored.

* broken Avro JSON, an Avro type that does not exist, an unknown schema type,
  a definition over the 256 KiB limit -> REST 422 / wire IncompatibleSchema
  (the client's ``IncompatibleSchema``), with the reason in the body / log;
* a version that does not exist -> 404, a version that is not a number -> 412;
* a body that is not JSON -> 400;
* afterwards the topic's versions are exactly what they were, and a good
  producer still works.
"""

from __future__ import annotations

import json

import _pulsar
import httpx
import pytest
from pulsar.schema import Schema
from schema_helpers import rest_path

pulsar = pytest.importorskip("pulsar")
from pulsar.schema import AvroSchema, Integer, Record, String  # noqa: E402

pytestmark = pytest.mark.compat

GOOD = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}
BROKEN_JSON = '{"type": "record", "name": "R", "fields": ['
UNKNOWN_AVRO_TYPE = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "nosuch"}]})
OVERSIZED = json.dumps({**GOOD, "doc": "x" * (300 * 1024)})


class Item(Record):
    name = String()
    n = Integer()


class RawAvro(Schema):
    """An AVRO schema with any definition text (the Python client validates nothing)."""

    def __init__(self, text: str) -> None:
        self._record_cls = bytes
        self._schema_info = _pulsar.SchemaInfo(_pulsar.SchemaType.AVRO, "raw", text)

    def encode(self, obj):  # type: ignore[no-untyped-def]
        return obj

    def decode(self, data):  # type: ignore[no-untyped-def]
        return data


@pytest.fixture
def http(standalone):
    with httpx.Client(base_url=standalone.web_url, timeout=10) as c:
        yield c


def reason(r: httpx.Response) -> str:
    body = r.json()
    assert set(body) == {"reason"}, body
    return body["reason"]


def all_versions(http: httpx.Client, topic: str) -> list:
    r = http.get(rest_path(topic) + "/schemas")
    return r.json()["getSchemaResponses"] if r.status_code == 200 else []


@pytest.mark.parametrize(
    ("payload", "status", "words"),
    [
        ({"type": "AVRO", "schema": BROKEN_JSON}, 422, "not valid json"),
        ({"type": "AVRO", "schema": UNKNOWN_AVRO_TYPE}, 422, "nosuch"),
        ({"type": "NO_SUCH_TYPE", "schema": ""}, 422, "unknown schema type"),
        ({"type": "AVRO", "schema": OVERSIZED}, 422, "limit"),
        ({"type": "AVRO", "schema": 5}, 422, "must be a string"),
    ],
)
def test_rest_refuses_malformed(client, http, topic, payload, status, words) -> None:
    producer = client.create_producer(topic, schema=AvroSchema(Item))
    before = all_versions(http, topic)
    r = http.post(rest_path(topic) + "/schema", json=payload)
    assert r.status_code == status, r.text
    assert words in reason(r).lower()
    r = http.post(rest_path(topic) + "/compatibility", json=payload)
    if payload["schema"] is OVERSIZED:
        # Only storing is size-bound: the check itself answers (a different schema under FULL).
        assert r.status_code == 200 and r.json()["compatibility"] is False, r.text
    else:
        assert r.status_code == status, r.text
    assert all_versions(http, topic) == before
    producer.send(Item(name="still", n=1))
    producer.close()


@pytest.mark.parametrize("text", [BROKEN_JSON, UNKNOWN_AVRO_TYPE, OVERSIZED])
def test_producer_refused_malformed(client, http, topic, text) -> None:
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=RawAvro(text))
    assert all_versions(http, topic) == []
    # The topic is not poisoned: a good schema registers as version 0.
    client.create_producer(topic, schema=AvroSchema(Item)).close()
    assert [v["version"] for v in all_versions(http, topic)] == [0]


def test_versions_that_do_not_exist(client, http, topic) -> None:
    path = rest_path(topic)
    r = http.get(path + "/schema")
    assert r.status_code == 404 and "not found" in reason(r).lower()
    assert http.get(path + "/schemas").status_code == 404
    client.create_producer(topic, schema=AvroSchema(Item)).close()
    assert http.get(path + "/schema/0").json()["version"] == 0
    r = http.get(path + "/schema/7")
    assert r.status_code == 404 and "7" in reason(r)
    r = http.get(path + "/schema/abc")
    assert r.status_code == 412 and "invalid schema version" in reason(r).lower()
    r = http.get(path + "/schema/-3")
    assert r.status_code == 412
    r = http.post(path + "/version", json={"type": "AVRO", "schema": json.dumps(GOOD)})
    assert r.status_code == 404
    assert http.get("/admin/v2/schemas/public/no-such-ns/t/schema").status_code == 404


def test_bad_request_bodies(http, topic) -> None:
    r = http.post(
        rest_path(topic) + "/schema", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert r.status_code == 400 and reason(r)
    r = http.post(rest_path(topic) + "/schema", json=["a", "list"])
    assert r.status_code == 422 and "json object" in reason(r).lower()
    assert all_versions(http, topic) == []


def test_delete_schema(client, http, topic) -> None:
    path = rest_path(topic)
    client.create_producer(topic, schema=AvroSchema(Item)).close()
    r = http.delete(path + "/schema")
    assert r.status_code == 200 and r.json() == {"version": 1}
    assert http.get(path + "/schema").status_code == 404
    assert http.delete(path + "/schema").status_code == 404
    # After a deletion any schema starts a fresh history.
    other = type("Item", (Record,), {"x": Integer(required=True)})
    client.create_producer(topic, schema=AvroSchema(other)).close()
    assert http.get(path + "/schema").json()["version"] == 2
    r = http.delete(path + "/schema", params={"force": "true"})
    assert r.status_code == 200
    assert http.get(path + "/schemas").status_code == 404


def test_schema_deleted_with_topic(client, http, topic) -> None:
    client.create_producer(topic, schema=AvroSchema(Item)).close()
    local = topic.split("://", 1)[1]
    r = http.delete(f"/admin/v2/persistent/{local}")
    assert r.status_code == 204, r.text
    assert http.get(rest_path(topic) + "/schema").status_code == 404
