"""A renamed Avro record class whose fields resolve is accepted under FORWARD and FULL
(Avro resolves records field by field, names aside), with the official client; a renamed
class whose fields do not resolve is still refused with IncompatibleSchema."""

from __future__ import annotations

import uuid

import httpx
import pytest
from schema_helpers import new_namespace

pulsar = pytest.importorskip("pulsar")
from pulsar.schema import AvroSchema, Integer, Record, String  # noqa: E402


@pytest.fixture
def http(standalone):
    with httpx.Client(base_url=standalone.web_url, timeout=10) as c:
        yield c


@pytest.mark.parametrize("strategy", ["FORWARD", "FULL", "BACKWARD"])
def test_renamed_record_is_compatible(client, http, strategy) -> None:
    ns = new_namespace(http, strategy)
    topic = f"persistent://{ns}/rename-{uuid.uuid4().hex[:6]}"
    user = type("User", (Record,), {"name": String(), "age": Integer()})
    person = type("Person", (Record,), {"name": String(), "age": Integer()})
    p0 = client.create_producer(topic, schema=AvroSchema(user))
    p0.send(user(name="a", age=1))
    p1 = client.create_producer(topic, schema=AvroSchema(person))  # refused before: "record name mismatch"
    p1.send(person(name="b", age=2))
    consumer = client.subscribe(
        topic, "s", schema=AvroSchema(person), initial_position=pulsar.InitialPosition.Earliest
    )
    got = [consumer.receive(timeout_millis=5000).value() for _ in range(2)]
    assert [(g.name, g.age) for g in got] == [("a", 1), ("b", 2)]
    # a renamed class whose fields do not resolve both ways is refused under FULL
    if strategy == "FULL":
        other = type("Other", (Record,), {"name": String(), "email": String(required=True)})
        with pytest.raises(pulsar.IncompatibleSchema):
            client.create_producer(topic, schema=AvroSchema(other))
    consumer.close()
    p0.close()
    p1.close()
