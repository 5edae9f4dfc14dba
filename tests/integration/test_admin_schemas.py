# ruff: noqa: F811  -- module-scoped fixtures are imported by name
"""Schema registry and compaction REST against a real standalone, with the official client."""

from __future__ import annotations

import json
import time

import httpx
import pulsar
import pytest
from pulsar.schema import AvroSchema, Record, String

from tests.integration.test_admin_support import http, standalone  # noqa: F401

V2 = "/admin/v2"
NS = "public/default"


class User(Record):
    name = String()


def avro(fields: list[dict]) -> dict:
    return {
        "type": "AVRO",
        "schema": json.dumps({"type": "record", "name": "User", "fields": fields}),
        "properties": {},
    }


def test_schema_rest_and_namespace_strategy(http: httpx.Client, standalone) -> None:  # type: ignore[no-untyped-def]
    base = f"{V2}/schemas/{NS}/sch-t"
    assert http.get(f"{base}/schema").status_code == 404
    v1 = avro([{"name": "name", "type": "string"}])
    r = http.post(f"{base}/schema", json=v1)
    assert r.status_code == 200 and r.json() == {"version": {"version": 0}}
    got = http.get(f"{base}/schema").json()
    assert got["version"] == 0 and got["type"] == "AVRO" and "User" in got["data"]
    # adding a required field without default is not BACKWARD-compatible ... under FULL it is refused
    v2 = avro([{"name": "name", "type": "string"}, {"name": "age", "type": "int"}])
    assert http.put(f"{V2}/namespaces/{NS}/schemaCompatibilityStrategy", json="FULL").status_code == 204
    c = http.post(f"{base}/compatibility", json=v2).json()
    assert c == {"compatibility": False, "schemaCompatibilityStrategy": "FULL"}
    assert http.post(f"{base}/schema", json=v2).status_code == 409
    assert (
        http.put(f"{V2}/namespaces/{NS}/schemaCompatibilityStrategy", json="ALWAYS_COMPATIBLE").status_code
        == 204
    )
    assert http.post(f"{base}/schema", json=v2).json() == {"version": {"version": 1}}
    assert len(http.get(f"{base}/schemas").json()["getSchemaResponses"]) == 2
    assert http.post(f"{base}/version", json=v1).json() == {"version": 0}
    assert http.get(f"{base}/schema/0").json()["version"] == 0
    assert http.post(f"{base}/schema", json={"type": "AVRO", "schema": "{not avro"}).status_code == 422
    # the namespace strategy is enforced for the official client's producers too
    assert (
        http.put(f"{V2}/namespaces/{NS}/schemaCompatibilityStrategy", json="ALWAYS_INCOMPATIBLE").status_code
        == 204
    )
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=5)
    try:
        try:
            client.create_producer(f"persistent://{NS}/sch-t", schema=AvroSchema(User)).close()
            refused = False
        except pulsar.IncompatibleSchema:
            refused = True
        assert refused
    finally:
        client.close()
    assert http.put(f"{V2}/namespaces/{NS}/schemaCompatibilityStrategy", json="UNDEFINED").status_code == 204
    assert http.delete(f"{base}/schema").json()["version"] == 2
    assert http.get(f"{base}/schema").status_code == 404


def test_compaction_rest(http: httpx.Client, standalone) -> None:  # type: ignore[no-untyped-def]
    t = f"persistent://{NS}/compact-t"
    base = f"{V2}/persistent/{NS}/compact-t"
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=5)
    try:
        p = client.create_producer(t, batching_enabled=False)
        for i in range(20):
            p.send(b"v%d" % i, partition_key=f"k{i % 3}")
        p.close()
    finally:
        client.close()
    assert http.get(f"{base}/compaction").json()["status"] == "NOT_RUN"
    assert http.put(f"{base}/compaction").status_code == 204
    deadline = time.monotonic() + 20
    status = "RUNNING"
    while time.monotonic() < deadline and status in ("RUNNING", "NOT_RUN"):
        status = http.get(f"{base}/compaction").json()["status"]
        time.sleep(0.1)
    assert status == "SUCCESS"
    assert "__compaction" in http.get(f"{base}/internalStats").json()["cursors"]
    assert http.get(f"{V2}/persistent/{NS}/nope-c/compaction").status_code == 404


def test_topic_level_schema_strategy_overrides_namespace(http: httpx.Client, standalone) -> None:  # type: ignore[no-untyped-def]
    t = f"persistent://{NS}/sch-topic"
    base = f"{V2}/persistent/{NS}/sch-topic"
    assert http.put(base).status_code == 204
    assert (
        http.post(
            f"{V2}/schemas/{NS}/sch-topic/schema", json=avro([{"name": "x", "type": "int"}])
        ).status_code
        == 200
    )
    assert (
        http.put(f"{V2}/namespaces/{NS}/schemaCompatibilityStrategy", json="ALWAYS_COMPATIBLE").status_code
        == 204
    )
    assert http.put(f"{base}/schemaCompatibilityStrategy", json="ALWAYS_INCOMPATIBLE").status_code == 204
    assert http.get(f"{base}/schemaCompatibilityStrategy").json() == "ALWAYS_INCOMPATIBLE"
    client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=5)
    try:
        with pytest.raises(pulsar.IncompatibleSchema):  # the topic override wins over the namespace
            client.create_producer(t, schema=AvroSchema(User)).close()
        assert http.delete(f"{base}/schemaCompatibilityStrategy").status_code == 204
        client.create_producer(t, schema=AvroSchema(User)).close()  # the namespace's ALWAYS_COMPATIBLE
    finally:
        client.close()
        http.put(f"{V2}/namespaces/{NS}/schemaCompatibilityStrategy", json="UNDEFINED")
