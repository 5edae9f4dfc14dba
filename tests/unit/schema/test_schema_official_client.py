"""The official client against a minimal broker whose schema decisions are the registry's.

A tiny server built on the protocol's ServerConnection answers CONNECT, PARTITIONED_METADATA,
LOOKUP, PRODUCER (through ``registry.add_producer_schema``), SEND (recording each message's
``schema_version``), GET_SCHEMA (through ``registry.get_schema``) and CLOSE_PRODUCER.  The
client (synchronous, threaded) runs in a worker thread.  This checks, with the bytes the real
client sends and expects: the schema field of PRODUCER as the wire carries it, the 8-byte
version in PRODUCER_SUCCESS copied into every message, identical-schema reuse across producers,
IncompatibleSchema surfacing as the client's own exception, and GET_SCHEMA by version and latest.
"""

from __future__ import annotations

import asyncio

import pytest

from magnetar.broker import errors as broker_errors
from magnetar.broker.schema import EffectiveSchemaPolicies, SchemaRegistry, SchemaType
from magnetar.broker.schema.policies import SchemaCompatibilityStrategy as S
from magnetar.broker.schema.wire import schema_info_from_command, to_wire_schema
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType
from magnetar.protocol.payload import parse_headers_and_payload
from magnetar.runtime import RealClock
from magnetar.testing.mini_broker import MiniBroker

pulsar = pytest.importorskip("pulsar")
ps = pytest.importorskip("pulsar.schema")

pytestmark = pytest.mark.compat

TOPIC = "persistent://public/default/schema-compat"
CLIENT_RUN_TIMEOUT_S = 60


class SchemaServer(MiniBroker):
    def __init__(self, registry: SchemaRegistry, policies: EffectiveSchemaPolicies) -> None:
        super().__init__()
        self.registry = registry
        self.policies = policies
        self.producer_schemas: list = []
        self.message_versions: list[bytes] = []
        self._entry_id = 0

    async def handle(self, conn, frame) -> bytes | None:  # type: ignore[no-untyped-def]
        cmd, t = frame.command, frame.type
        if t is CommandType.PRODUCER:
            info = schema_info_from_command(cmd)
            self.producer_schemas.append(info)
            try:
                version = await self.registry.add_producer_schema(cmd.topic, info, self.policies)
            except broker_errors.BrokerError as err:
                return conn.send(commands.error(cmd.request_id, int(err.server_error), err.message))
            name = f"p-{cmd.producer_id}"
            return conn.send(commands.producer_success(cmd.request_id, name, schema_version=version))
        if t is CommandType.SEND:
            meta = parse_headers_and_payload(frame.headers_and_payload).metadata
            self.message_versions.append(meta.schema_version if meta.HasField("schema_version") else b"")
            self._entry_id += 1
            return conn.send(commands.send_receipt(cmd.producer_id, cmd.sequence_id, 3, self._entry_id))
        if t is CommandType.GET_SCHEMA:
            try:
                rec = await self.registry.get_schema(
                    cmd.topic, cmd.schema_version if cmd.HasField("schema_version") else None
                )
            except broker_errors.BrokerError as err:
                return conn.send(
                    commands.get_schema_response(
                        cmd.request_id, error_code=int(err.server_error), error_message=err.message
                    )
                )
            return conn.send(
                commands.get_schema_response(cmd.request_id, to_wire_schema(rec.info), rec.version_bytes)
            )
        return None


def user_v1() -> type:
    return type("User", (ps.Record,), {"name": ps.String()})


def user_v2() -> type:  # adds a field with a default: FULL-compatible
    return type("User", (ps.Record,), {"name": ps.String(), "age": ps.Integer(required_default=True)})


def user_bad() -> type:  # name changes type: incompatible under FULL
    return type("User", (ps.Record,), {"name": ps.Integer(required=True)})


def run_client(url: str) -> dict:
    out: dict = {}
    client = pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        u1, u2 = user_v1(), user_v2()
        p1 = client.create_producer(TOPIC, schema=ps.AvroSchema(u1), batching_enabled=False)
        p1.send(u1(name="a"))
        p2 = client.create_producer(TOPIC, schema=ps.AvroSchema(u2), batching_enabled=False)
        p2.send(u2(name="b", age=3))
        p3 = client.create_producer(TOPIC, schema=ps.AvroSchema(u1), batching_enabled=False)
        p3.send(u1(name="c"))
        for label, schema in (("avro_bad", ps.AvroSchema(user_bad())), ("json", ps.JsonSchema(user_v1()))):
            try:
                client.create_producer(TOPIC, schema=schema, batching_enabled=False)
                out[label] = "created"
            except Exception as exc:  # the client's IncompatibleSchema
                out[label] = type(exc).__name__
        p4 = client.create_producer(TOPIC, batching_enabled=False)  # BytesSchema: schemaless
        p4.send(b"raw")
        out["v0"] = client._client.get_schema_info(TOPIC, 0)
        out["latest"] = client._client.get_schema_info(TOPIC, -1)
        try:
            client._client.get_schema_info(TOPIC, 9)
            out["v9"] = "found"
        except Exception as exc:
            out["v9"] = type(exc).__name__
        for p in (p1, p2, p3, p4):
            p.close()
    finally:
        client.close()
    return out


async def test_official_client_schema_round_trip() -> None:
    registry = SchemaRegistry(MemoryMetadataServer().session(), RealClock())
    server = SchemaServer(registry, EffectiveSchemaPolicies(S.FULL, True, False))
    await server.start()
    try:
        out = await asyncio.wait_for(asyncio.to_thread(run_client, server.url), CLIENT_RUN_TIMEOUT_S)
    finally:
        await server.stop()
    assert server.errors == []
    # What the client sent: AVRO with the record definition; nothing for BYTES.
    sent = server.producer_schemas
    assert (
        sent[0].type is SchemaType.AVRO
        and sent[0].name == "AVRO"
        and b'"name": "User"' in sent[0].schema_data
    )
    assert sent[4].type is SchemaType.JSON
    assert sent[-1] is None
    # Versions: v1 -> 0, v2 -> 1, v1 again reuses 0; the schemaless producer's messages carry none.
    assert server.message_versions == [bytes(8), bytes(7) + b"\x01", bytes(8), b""]
    assert out["avro_bad"] == "IncompatibleSchema" and out["json"] == "IncompatibleSchema"
    assert [r.version for r in await registry.get_all(TOPIC)] == [0, 1]
    # GET_SCHEMA through the client's own API.
    assert out["v0"].schema_type().name == "AVRO"
    assert out["v0"].schema() == ps.AvroSchema(user_v1()).schema_info().schema()
    assert out["latest"].schema() == ps.AvroSchema(user_v2()).schema_info().schema()
    assert out["v9"] != "found"


def run_string_then_json(url: str) -> dict:
    out: dict = {}
    client = pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    try:
        p1 = client.create_producer(TOPIC, schema=ps.StringSchema(), batching_enabled=False)
        p1.send("hello")
        try:
            client.create_producer(TOPIC, schema=ps.JsonSchema(user_v1()), batching_enabled=False)
            out["json"] = "created"
        except Exception as exc:
            out["json"] = type(exc).__name__
        p2 = client.create_producer(TOPIC, schema=ps.StringSchema(), batching_enabled=False)
        p2.send("again")
        p1.close()
        p2.close()
    finally:
        client.close()
    return out


async def test_json_producer_on_a_string_topic_is_incompatible() -> None:
    registry = SchemaRegistry(MemoryMetadataServer().session(), RealClock())
    server = SchemaServer(registry, EffectiveSchemaPolicies(S.FULL, True, False))
    await server.start()
    try:
        out = await asyncio.wait_for(
            asyncio.to_thread(run_string_then_json, server.url), CLIENT_RUN_TIMEOUT_S
        )
    finally:
        await server.stop()
    assert server.errors == []
    first = server.producer_schemas[0]
    assert (first.type, first.schema_data, first.name) == (SchemaType.STRING, b"null", "STRING")
    assert out["json"] == "IncompatibleSchema"
    assert server.message_versions == [bytes(8), bytes(8)]
