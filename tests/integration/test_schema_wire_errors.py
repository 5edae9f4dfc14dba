"""Schema errors on the binary protocol, against an in-process standalone.

Speaks the wire through magnetar's sans-IO client connection so the error
*codes and messages* are visible (the official client only raises a class):

* GET_SCHEMA of a version that does not exist -> error_code TopicNotFound with
  Pulsar's "Topic not found or no-schema"; malformed version bytes -> an error
  that says so;
* PRODUCER with a broken Avro definition / unknown Avro type / oversized
  definition -> ERROR IncompatibleSchema with the reason; nothing is stored.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from magnetar.app.healthcheck import _Session
from magnetar.broker.schema import SchemaInfo, SchemaType
from magnetar.protocol import client_commands as cc
from magnetar.protocol.enums import CommandType, ServerError
from magnetar.protocol.enums import SchemaType as WireSchemaType
from magnetar.protocol.events import ResponseReceived
from magnetar.protocol.wire import WireSchema
from magnetar.testing.standalone import broker_unavailable_reason, running_standalone

TOPIC = "persistent://public/default/wire-schema"
TIMEOUT_S = 20
GOOD = {"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]}


@pytest.fixture
async def standalone(tmp_path):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    async with running_standalone(tmp_path / "data") as s:
        yield s


@pytest.fixture
async def session(standalone):
    reader, writer = await asyncio.open_connection("127.0.0.1", standalone.broker_port)
    s = _Session(reader, writer)
    await asyncio.wait_for(s.handshake(), TIMEOUT_S)
    yield s
    writer.close()


async def ask(session: _Session, kind: CommandType, build) -> ResponseReceived:  # type: ignore[no-untyped-def]
    rid = session.conn.new_request_id()
    session.writer.write(session.conn.send_request(kind, rid, build(rid)))
    async with asyncio.timeout(TIMEOUT_S):
        while True:
            event = await session.next_event()
            if isinstance(event, ResponseReceived) and event.request_id == rid and event.final:
                return event


async def test_get_schema_version_that_does_not_exist(standalone, session) -> None:
    registry = standalone.broker_service.schemas
    await registry.put_schema_if_compatible(
        TOPIC, SchemaInfo("r", SchemaType.AVRO, json.dumps(GOOD).encode(), {}), "FULL"
    )
    ok = await ask(session, CommandType.GET_SCHEMA, lambda rid: cc.get_schema(rid, TOPIC, bytes(8)))
    assert not ok.is_error and ok.frame.command.schema.type == WireSchemaType.AVRO
    missing = await ask(
        session, CommandType.GET_SCHEMA, lambda rid: cc.get_schema(rid, TOPIC, (7).to_bytes(8, "big"))
    )
    cmd = missing.frame.command
    assert missing.is_error and cmd.error_code == ServerError.TopicNotFound
    assert cmd.error_message == "Topic not found or no-schema"
    bad = await ask(session, CommandType.GET_SCHEMA, lambda rid: cc.get_schema(rid, TOPIC, b"\x01\x02\x03"))
    assert bad.is_error and "version" in bad.frame.command.error_message.lower()
    # nothing changed
    assert [r.version for r in await registry.get_all(TOPIC)] == [0]


@pytest.mark.parametrize(
    ("definition", "words"),
    [
        (b'{"type": "record", "name": "R", "fields": [', "json"),
        (
            json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "nosuch"}]}).encode(),
            "nosuch",
        ),
        (json.dumps({**GOOD, "doc": "x" * (300 * 1024)}).encode(), "limit"),
    ],
)
async def test_producer_with_malformed_schema(standalone, session, definition, words) -> None:
    topic = f"{TOPIC}-{words}"
    schema = WireSchema("bad", definition, WireSchemaType.AVRO, {})
    answer = await ask(session, CommandType.PRODUCER, lambda rid: cc.producer(topic, 1, rid, schema=schema))
    cmd = answer.frame.command
    assert answer.is_error and cmd.error == ServerError.IncompatibleSchema
    assert words in cmd.message.lower()
    assert await standalone.broker_service.schemas.get_all(topic) == []
