"""Handshake, keep-alive, lookup and partitioned metadata over a real socket."""

from __future__ import annotations

import asyncio

from broker_harness import RawClient, running_broker

from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import LookupType, ServerError


async def test_handshake_answers_v20_with_max_message_size(raw) -> None:
    c = await raw()
    assert c.connected.protocol_version == 20
    assert c.connected.max_message_size == 5 * 1024 * 1024
    assert c.connected.server_version


async def test_older_client_gets_its_own_version(raw) -> None:
    c = await raw(handshake=False)
    c.send(commands.connect(protocol_version=15))
    f = await c.expect(T.CONNECTED)
    assert f.command.protocol_version == 15


async def test_ping_is_answered(raw) -> None:
    c = await raw()
    c.send(commands.ping())
    await c.expect(T.PONG)


async def test_lookup_connects_to_advertised_url(broker, raw) -> None:
    c = await raw()
    c.send(commands.lookup("persistent://public/default/x", 7))
    f = await c.expect(T.LOOKUP_RESPONSE)
    assert f.command.response == LookupType.Connect
    assert f.command.authoritative
    assert f.command.brokerServiceUrl == f"pulsar://127.0.0.1:{broker.port}"
    assert f.command.request_id == 7


async def test_lookup_unknown_namespace_fails_promptly(raw) -> None:
    c = await raw()
    c.send(commands.lookup("persistent://nope/nope/x", 8))
    f = await c.expect(T.LOOKUP_RESPONSE, timeout_s=2)
    assert f.command.response == LookupType.Failed
    assert f.command.error == ServerError.TopicNotFound
    assert "Namespace does not exist" in f.command.message


async def test_lookup_unknown_listener_uses_javas_words(raw) -> None:
    c = await raw()
    c.send(commands.lookup("persistent://public/default/x", 9, advertised_listener_name="internal"))
    f = await c.expect(T.LOOKUP_RESPONSE)
    assert f.command.response == LookupType.Failed
    assert f.command.error == ServerError.ServiceNotReady
    assert f.command.message == "the broker do not have internal listener"


async def test_partitioned_metadata_unknown_namespace_is_failed_response(raw) -> None:
    c = await raw()
    c.send(commands.partitioned_metadata("persistent://nope/ns/x", 3))
    f = await c.expect(T.PARTITIONED_METADATA_RESPONSE, timeout_s=2)
    assert f.command.HasField("response")
    assert f.command.response == 1  # Failed
    assert f.command.error == ServerError.TopicNotFound


async def test_partitioned_metadata_reports_partitions(broker, raw) -> None:
    await broker.service.create_partitioned_topic("persistent://public/default/pt", 3)
    c = await raw()
    c.send(commands.partitioned_metadata("persistent://public/default/pt", 4))
    f = await c.expect(T.PARTITIONED_METADATA_RESPONSE)
    assert f.command.response == 0 and f.command.partitions == 3
    c.send(commands.partitioned_metadata("persistent://public/default/plain", 5))
    f = await c.expect(T.PARTITIONED_METADATA_RESPONSE)
    assert f.command.HasField("response") and f.command.response == 0 and f.command.partitions == 0


async def test_partitioned_auto_creation() -> None:
    async with running_broker(allowAutoTopicCreationType="partitioned", defaultNumPartitions=2) as b:
        c = await RawClient.connect(b.port)
        try:
            c.send(commands.partitioned_metadata("auto-pt", 1))
            f = await c.expect(T.PARTITIONED_METADATA_RESPONSE)
            assert f.command.partitions == 2
            c.send(commands.partitioned_metadata("auto-pt2", 2, metadata_auto_creation_enabled=False))
            f = await c.expect(T.PARTITIONED_METADATA_RESPONSE)
            assert f.command.partitions == 0
        finally:
            await c.aclose()


async def test_topics_of_namespace_lists_partitions_not_system_topics(broker, raw) -> None:
    svc = broker.service
    await svc.create_partitioned_topic("persistent://public/default/pt", 2)
    c = await raw()
    await c.create_producer("persistent://public/default/plain")
    await c.create_producer("persistent://public/default/__change_events", producer_id=2)
    c.send(commands.get_topics_of_namespace(11, "public/default"))
    f = await c.expect(T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
    assert list(f.command.topics) == [
        "persistent://public/default/plain",
        "persistent://public/default/pt-partition-0",
        "persistent://public/default/pt-partition-1",
    ]


async def test_get_schema_answers_in_its_own_error_form(raw) -> None:
    c = await raw()
    c.send(commands.get_schema(12, "persistent://public/default/x"))
    f = await c.expect(T.GET_SCHEMA_RESPONSE)
    assert f.command.error_code == ServerError.TopicNotFound
    assert f.command.request_id == 12


async def test_broker_pings_and_drops_a_silent_client() -> None:
    async with running_broker(keepAliveIntervalSeconds=1) as b:
        c = await RawClient.connect(b.port)
        try:
            c.answer_pings = True
            await asyncio.sleep(2.3)
            assert not c.eof.is_set()  # answered pings keep it alive
            c.answer_pings = False
            await asyncio.wait_for(c.eof.wait(), 5)
        finally:
            await c.aclose()


async def test_command_before_connect_closes_the_connection(raw) -> None:
    c = await raw(handshake=False)
    c.send(commands.lookup("x", 1))
    await asyncio.wait_for(c.eof.wait(), 3)


async def test_client_vanishing_detaches_its_consumers(broker, raw) -> None:
    c = await raw()
    await c.subscribe("persistent://public/default/v", "s", 0, 1)
    topic = broker.service.topics.get_loaded("persistent://public/default/v")
    assert topic.subscriptions["s"].consumers
    c.writer.transport.abort()
    for _ in range(50):
        if not topic.subscriptions["s"].consumers:
            break
        await asyncio.sleep(0.05)
    assert not topic.subscriptions["s"].consumers
    assert broker.service.statistics()["connections"] == 0


async def test_get_schema_returns_the_producers_schema(raw) -> None:
    from magnetar.protocol.enums import SchemaType
    from magnetar.protocol.wire import WireSchema

    c = await raw()
    rid = c.rid()
    c.send(
        commands.producer(
            "persistent://public/default/sch",
            1,
            rid,
            schema=WireSchema("STRING", b"null", SchemaType.STRING, {}),
        )
    )
    f = await c.response(T.PRODUCER_SUCCESS, rid)
    assert f.command.schema_version == (0).to_bytes(8, "big")
    c.send(commands.get_schema(13, "persistent://public/default/sch"))
    f = await c.expect(T.GET_SCHEMA_RESPONSE)
    assert not f.command.HasField("error_code")
    assert f.command.schema.type == SchemaType.STRING and f.command.schema.schema_data == b"null"
    assert f.command.schema_version == (0).to_bytes(8, "big")
