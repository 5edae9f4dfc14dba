"""magnetar.client with a multi-host service URL: a host that refuses connections passes the request on.

One host of each URL is a dead port (bound, then closed: connection refused),
the other the test standalone. Lookups, producers and consumers must work
whichever host comes first in the rotation, as with the official client; when
every host is dead the error names them all.
"""

from __future__ import annotations

import socket

import pytest

from magnetar.client import Client
from magnetar.client.errors import ConnectError
from magnetar.client.lookup import ServiceHosts


def _dead_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: connecting is refused
    return port


def _hostport(url: str) -> str:
    return url.split("://", 1)[1].rstrip("/")


@pytest.mark.parametrize("dead_first", [True, False])
async def test_binary_lookup_skips_refusing_host(standalone, topic, dead_first):
    dead, live = f"127.0.0.1:{_dead_port()}", _hostport(standalone.broker_url)
    hosts = [dead, live] if dead_first else [live, dead]
    client = Client("pulsar://" + ",".join(hosts), operation_timeout_seconds=10)
    try:
        # several lookups: the rotation starts on each host in turn, the dead one is always skipped
        consumer = await client.subscribe(topic, "sub", initial_position="earliest")
        producer = await client.create_producer(topic, batching_enabled=False)
        for i in range(3):
            await producer.send(f"m{i}".encode())
            assert await client.get_topic_partitions(topic) == [topic]
        got = [(await consumer.receive(10_000)).data() for _ in range(3)]
        assert got == [b"m0", b"m1", b"m2"]
        # every connection of the pool goes to the live broker
        assert {c.physical for c in client.pool.connections} <= {
            "pulsar://" + live,
            standalone.broker_url.rstrip("/"),
        }
    finally:
        await client.close()


async def test_http_lookup_skips_refusing_host(standalone, topic):
    dead, live = f"127.0.0.1:{_dead_port()}", _hostport(standalone.web_url)
    client = Client(f"http://{dead},{live}", operation_timeout_seconds=10)
    try:
        producer = await client.create_producer(topic, batching_enabled=False)
        consumer = await client.subscribe(topic, "sub", initial_position="earliest")
        await producer.send(b"over http lookup")
        assert (await consumer.receive(10_000)).data() == b"over http lookup"
    finally:
        await client.close()


async def test_all_hosts_refusing_names_each(standalone, topic):
    ports = [_dead_port(), _dead_port()]
    client = Client(
        ",".join(f"pulsar://127.0.0.1:{p}" if i == 0 else f"127.0.0.1:{p}" for i, p in enumerate(ports)),
        operation_timeout_seconds=5,
    )
    try:
        with pytest.raises(ConnectError) as err:
            await client.create_producer(topic)
        for p in ports:
            assert f"127.0.0.1:{p}" in str(err.value)
    finally:
        await client.close()


def test_service_hosts_order_puts_failed_hosts_last():
    hosts = ServiceHosts("pulsar://a:1,b:2,c:3")
    assert hosts.order() == ["pulsar://a:1", "pulsar://b:2", "pulsar://c:3"]
    assert hosts.order() == ["pulsar://b:2", "pulsar://c:3", "pulsar://a:1"]
    hosts._down.add("pulsar://c:3")
    assert hosts.order() == ["pulsar://a:1", "pulsar://b:2", "pulsar://c:3"]
    assert hosts.order() == ["pulsar://a:1", "pulsar://b:2", "pulsar://c:3"]
