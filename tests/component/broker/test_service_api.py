"""The service API the HTTP layer calls (see magnetar.broker's docstring)."""

from __future__ import annotations

import asyncio

import pytest
from broker_harness import RawClient, running_broker

from magnetar.broker import errors
from magnetar.broker.admin.topic_ops import TopicOps
from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType as T

NS = "public/default"


async def test_lookup_dict_has_every_key(broker) -> None:
    d = await broker.service.lookup("persistent://public/default/x")
    assert d == {
        "brokerUrl": f"pulsar://127.0.0.1:{broker.port}",
        "brokerUrlTls": None,
        "httpUrl": "http://127.0.0.1:8080",
        "httpUrlTls": None,
        "nativeUrl": f"pulsar://127.0.0.1:{broker.port}",
    }
    with pytest.raises(errors.NamespaceNotFoundError) as e:
        await broker.service.lookup("persistent://t/none/x")
    assert e.value.http_status == 404
    with pytest.raises(errors.InvalidTopicNameError):
        await broker.service.lookup("a/b")


async def test_partitioned_topic_lifecycle(broker) -> None:
    svc = broker.service
    t = "persistent://public/default/pt"
    await svc.create_partitioned_topic(t, 2)
    assert await svc.get_partitioned_metadata(t) == 2
    with pytest.raises(errors.AlreadyExistsError) as e:
        await svc.create_partitioned_topic(t, 2)
    assert e.value.http_status == 409
    with pytest.raises(errors.InvalidPartitionCountError):
        await svc.create_partitioned_topic("persistent://public/default/zero", 0)
    with pytest.raises(errors.PreconditionFailedError):
        await svc.create_partitioned_topic("persistent://public/default/a-partition-1", 2)
    await svc.update_partitioned_topic(t, 3)
    with pytest.raises(errors.UnprocessableError):
        await svc.update_partitioned_topic(t, 2)
    assert await svc.list_partitioned_topics(NS) == [t]
    assert await svc.list_topics(NS) == [f"{t}-partition-{i}" for i in range(3)]
    with pytest.raises(errors.AlreadyExistsError, match="is a partitioned topic"):
        await svc.delete_topic(t)
    c = await RawClient.connect(broker.port)
    try:
        await c.create_producer(f"{t}-partition-1")
        c.send_message(1, 0, b"x")
        await c.expect(T.SEND_RECEIPT)
        stats = await TopicOps(svc).partitioned_topic_stats(t)
        assert stats["msgInCounter"] == 1 and stats["metadata"] == {"partitions": 3}
        assert list(stats["partitions"]) == [f"{t}-partition-1"]
        with pytest.raises(errors.PreconditionFailedError):
            await svc.delete_partitioned_topic(t)
        await svc.delete_partitioned_topic(t, force=True)
        await c.expect(T.CLOSE_PRODUCER)
    finally:
        await c.aclose()
    assert await svc.get_partitioned_metadata(t) == 0
    assert await svc.list_topics(NS) == []


async def test_non_partitioned_topic_admin(broker) -> None:
    svc = broker.service
    t = "persistent://public/default/np"
    await svc.create_non_partitioned_topic(t)
    with pytest.raises(errors.AlreadyExistsError):
        await svc.create_non_partitioned_topic(t)
    with pytest.raises(errors.AlreadyExistsError):
        await svc.create_partitioned_topic(t, 2)
    assert t in await svc.list_topics(NS)
    assert await svc.list_topics(NS, "NON_PERSISTENT") == []
    c = await RawClient.connect(broker.port)
    try:
        await c.subscribe(t, "sub-a", 0, 1)
        name = await c.create_producer(t, 2)
        for seq in range(3):
            c.send_message(2, seq, b"12345")
        for _ in range(3):
            await c.expect(T.SEND_RECEIPT)
        stats = await TopicOps(svc).topic_stats(t)
        assert stats["msgInCounter"] == 3 and stats["bytesInCounter"] > 15
        assert stats["publishers"][0]["producerName"] == name
        sub = stats["subscriptions"]["sub-a"]
        assert sub["msgBacklog"] == 3 and sub["type"] == "Exclusive" and sub["isDurable"] is True
        assert sub["consumers"][0]["availablePermits"] == 0
        assert await TopicOps(svc).list_subscriptions(t) == ["sub-a"]
        internal = await TopicOps(svc).internal_stats(t)
        assert internal["numberOfEntries"] == 3
        with pytest.raises(errors.PreconditionFailedError):
            await svc.delete_topic(t)
    finally:
        await c.aclose()
    await TopicOps(svc).unload_topic(t)
    assert (await TopicOps(svc).topic_stats(t))["subscriptions"]["sub-a"]["msgBacklog"] == 3  # reloaded
    await svc.delete_topic(t)
    with pytest.raises(errors.TopicNotFoundError) as e:
        await TopicOps(svc).topic_stats(t)
    assert e.value.http_status == 404
    with pytest.raises(errors.TopicNotFoundError):
        await svc.delete_topic(t)


async def test_statistics_snapshot(broker) -> None:
    c = await RawClient.connect(broker.port)
    try:
        await c.subscribe("persistent://public/default/s", "x", 1, 1)
        s = broker.service.statistics()
        assert s == {"connections": 1, "topics": 1, "producers": 0, "subscriptions": 1, "consumers": 1}
    finally:
        await c.aclose()


async def test_rates_are_sampled() -> None:

    async with running_broker(statsUpdateFrequencyInSecs=1) as b:
        c = await RawClient.connect(b.port)
        try:
            t = "persistent://public/default/rates"
            await c.subscribe(t, "s", 0, 1)
            c.send(commands.flow(1, 1000))
            await c.create_producer(t, 2)
            for seq in range(50):
                c.send_message(2, seq, b"x" * 100)
            await asyncio.sleep(1.3)
            stats = await TopicOps(b.service).topic_stats(t)
            assert stats["msgRateIn"] > 0 and stats["msgThroughputIn"] > stats["msgRateIn"]
            assert stats["publishers"][0]["msgRateIn"] > 0
            assert stats["subscriptions"]["s"]["msgRateOut"] > 0
        finally:
            await c.aclose()


async def test_idle_topics_are_unloaded_but_keep_their_data() -> None:
    # An idle topic that still has a subscription is not deleted (the default mode is
    # delete_when_no_subscriptions, as Pulsar's); it is unloaded and keeps its data.
    async with running_broker(brokerDeleteInactiveTopicsFrequencySeconds=1) as b:
        t = "persistent://public/default/idle"
        c = await RawClient.connect(b.port)
        try:
            await c.subscribe(t, "late", 0, 3, initial_position=1)
            rid = c.rid()
            c.send(commands.close_consumer(3, rid))
            await c.response(T.SUCCESS, rid)
            await c.create_producer(t, 1)
            c.send_message(1, 0, b"kept")
            await c.expect(T.SEND_RECEIPT)
            rid = c.rid()
            c.send(commands.close_producer(1, rid))
            await c.response(T.SUCCESS, rid)
            busy = "persistent://public/default/busy"
            await c.subscribe(busy, "s", 0, 2)
            for _ in range(60):
                if b.service.topics.get_loaded(t) is None:
                    break
                await asyncio.sleep(0.1)
            assert b.service.topics.get_loaded(t) is None
            assert b.service.topics.get_loaded(busy) is not None  # a consumer keeps it loaded
            await c.subscribe(t, "late", 0, 4, initial_position=1)
            c.send(commands.flow(4, 10))
            f = await c.expect(T.MESSAGE)
            assert f.headers_and_payload.endswith(b"kept")
        finally:
            await c.aclose()
