"""Schema evolution under each compatibility strategy, with the official client.

Each test gets its own namespace whose ``schemaCompatibilityStrategy`` is set
through REST (204), registers version 0 with a producer, then tries version 1
with another producer: accepted (a new version, messages of both decode) or
refused with the client's ``IncompatibleSchema`` and nothing stored.

The changes, as pulsar.schema Records write them in Avro:

* ``add_default``   -- a new field ``["null","string"]`` with default null
                       (``String(required_default=True)``): readable both ways;
* ``add_nodefault`` -- a new field without a default (``String()``): new readers
                       cannot read old data (not BACKWARD), old readers skip it;
* ``remove``        -- drop a field that had no default: new readers ignore it,
                       old readers cannot read new data (not FORWARD).
"""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from schema_helpers import V2, new_namespace, rest_path

pulsar = pytest.importorskip("pulsar")
from pulsar.schema import AvroSchema, Integer, JsonSchema, Record, String  # noqa: E402

pytestmark = pytest.mark.compat


def user_v0() -> type:
    return type("User", (Record,), {"name": String(), "age": Integer()})


def user_v1(change: str) -> type:
    fields: dict = {"name": String(), "age": Integer()}
    if change == "add_default":
        fields["email"] = String(required_default=True)
    elif change == "add_nodefault":
        fields["email"] = String()
    elif change == "remove":
        del fields["age"]
    return type("User", (Record,), fields)


# strategy -> (add_default, add_nodefault, remove) accepted?
EXPECTED = {
    "ALWAYS_COMPATIBLE": (True, True, True),
    "ALWAYS_INCOMPATIBLE": (False, False, False),
    "BACKWARD": (True, False, True),
    "FORWARD": (True, True, False),
    "FULL": (True, False, False),
    "BACKWARD_TRANSITIVE": (True, False, True),
    "FORWARD_TRANSITIVE": (True, True, False),
    "FULL_TRANSITIVE": (True, False, False),
}
CHANGES = ("add_default", "add_nodefault", "remove")


@pytest.fixture
def http(standalone):
    with httpx.Client(base_url=standalone.web_url, timeout=10) as c:
        yield c


def versions(http: httpx.Client, topic: str) -> list[int]:
    r = http.get(rest_path(topic) + "/schemas")
    assert r.status_code == 200, r.text
    return [v["version"] for v in r.json()["getSchemaResponses"]]


@pytest.mark.parametrize("strategy", list(EXPECTED))
def test_evolution_under_strategy(client, http, strategy) -> None:
    ns = new_namespace(http, strategy)
    assert http.get(f"{V2}/namespaces/{ns}/schemaCompatibilityStrategy").json() == strategy
    for change, accepted in zip(CHANGES, EXPECTED[strategy], strict=True):
        topic = f"persistent://{ns}/evo-{change}-{uuid.uuid4().hex[:6]}"
        v0 = user_v0()
        p0 = client.create_producer(topic, schema=AvroSchema(v0))
        p0.send(v0(name="a", age=1))
        new_cls = user_v1(change)
        if accepted:
            p1 = client.create_producer(topic, schema=AvroSchema(new_cls))
            p1.send(new_cls(name="b"))
            p1.close()
            assert versions(http, topic) == [0, 1], (strategy, change)
        else:
            with pytest.raises(pulsar.IncompatibleSchema):
                client.create_producer(topic, schema=AvroSchema(new_cls))
            assert versions(http, topic) == [0], (strategy, change)
        p0.close()


def test_forward_set_by_post_then_consumers(client, http) -> None:
    """FORWARD set on the namespace with POST (204); a reader with the old schema keeps reading."""
    ns = new_namespace(http)
    r = http.post(f"{V2}/namespaces/{ns}/schemaCompatibilityStrategy", json="FORWARD")
    assert r.status_code == 204 and r.content == b""
    topic = f"persistent://{ns}/forward-{uuid.uuid4().hex[:6]}"
    old, new = user_v0(), user_v1("add_nodefault")
    consumer = client.subscribe(topic, "s", schema=JsonSchema(old))
    p_new = client.create_producer(topic, schema=JsonSchema(new))  # FORWARD: old readers read it
    p_new.send(new(name="n", age=7, email="e@x"))
    msg = consumer.receive(10_000)
    assert (msg.value().name, msg.value().age) == ("n", 7)
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=JsonSchema(user_v1("remove")))
    r = http.post(
        rest_path(topic) + "/compatibility", json={"type": "JSON", "schema": json.dumps(old.schema())}
    )
    assert r.status_code == 200 and r.json()["schemaCompatibilityStrategy"] == "FORWARD"
    consumer.close()
    p_new.close()


AVRO = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}


def _avro(*extra: dict) -> dict:
    return {"type": "AVRO", "schema": json.dumps({**AVRO, "fields": AVRO["fields"] + list(extra)})}


@pytest.mark.parametrize(
    ("strategy", "third_accepted"),
    [("BACKWARD", True), ("BACKWARD_TRANSITIVE", False), ("FULL", True), ("FULL_TRANSITIVE", False)],
)
def test_transitive_strategies_check_every_version(client, http, strategy, third_accepted) -> None:
    """v0 {a}; v1 {a, b=0}; v2 {a, b} (no default): v2 reads v1 data, not v0 data."""
    ns = new_namespace(http, strategy)
    topic = f"persistent://{ns}/trans-{uuid.uuid4().hex[:6]}"
    path = rest_path(topic) + "/schema"
    assert http.post(path, json=_avro()).json() == {"version": {"version": 0}}
    assert http.post(path, json=_avro({"name": "b", "type": "int", "default": 0})).json() == {
        "version": {"version": 1}
    }
    r = http.post(path, json=_avro({"name": "b", "type": "int"}))
    if third_accepted:
        assert r.status_code == 200 and r.json() == {"version": {"version": 2}}, r.text
    else:
        assert r.status_code == 409 and "reason" in r.json(), r.text
        assert versions(http, topic) == [0, 1]


def test_identical_schema_reuses_version_and_consumer_checks(client, http, topic) -> None:
    cls = user_v0()
    p1 = client.create_producer(topic, schema=AvroSchema(cls))
    p2 = client.create_producer(topic, schema=AvroSchema(cls))
    assert versions(http, topic) == [0]
    # A consumer whose schema cannot read the topic's is refused too.
    other = type("User", (Record,), {"name": Integer()})
    with pytest.raises(pulsar.IncompatibleSchema):
        client.subscribe(topic, "s", schema=AvroSchema(other))
    p1.close()
    p2.close()


def test_auto_update_disabled(client, http) -> None:
    ns = new_namespace(http, "BACKWARD")
    r = http.post(f"{V2}/namespaces/{ns}/isAllowAutoUpdateSchema", json=False)
    assert r.status_code == 204, r.text
    topic = f"persistent://{ns}/noauto-{uuid.uuid4().hex[:6]}"
    v0, v1 = user_v0(), user_v1("add_default")
    # Pulsar refuses even a first schema from a producer then ("Schema not found and schema
    # auto updating is disabled"); an operator uploads it through REST.
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(v0))
    # The exact text the client sends (a schema is identified by its bytes, as in Pulsar).
    upload = {"type": "AVRO", "schema": AvroSchema(v0).schema_info().schema()}
    assert http.post(rest_path(topic) + "/schema", json=upload).json() == {"version": {"version": 0}}
    p0 = client.create_producer(topic, schema=AvroSchema(v0))
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic, schema=AvroSchema(v1))
    assert versions(http, topic) == [0]
    r = http.post(
        rest_path(topic) + "/schema", json={"type": "AVRO", "schema": AvroSchema(v1).schema_info().schema()}
    )
    assert r.status_code == 200 and r.json() == {"version": {"version": 1}}, r.text
    client.create_producer(topic, schema=AvroSchema(v1)).close()
    p0.close()


def test_schema_validation_enforced(client, http) -> None:
    ns = new_namespace(http)
    r = http.post(f"{V2}/namespaces/{ns}/schemaValidationEnforced", json=True)
    assert r.status_code == 204, r.text
    topic = f"persistent://{ns}/enforced-{uuid.uuid4().hex[:6]}"
    client.create_producer(topic, schema=AvroSchema(user_v0())).close()
    with pytest.raises(pulsar.IncompatibleSchema):
        client.create_producer(topic)  # no schema on a topic that has one
