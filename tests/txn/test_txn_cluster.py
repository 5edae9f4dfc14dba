"""Transactions in a real cluster: coordinators owned like topics, participants on other brokers.

ZooKeeper + two ``magnetar bookie`` + three ``magnetar broker`` (``ClusterProcesses``), with
``transactionCoordinatorEnabled=true`` and two coordinators.  Each coordinator is served by
the owner of its ``transaction_coordinator_assign`` partition's bundle; a transaction spans
two topics owned by two different brokers, so at least one of them is ended by the
coordinator through END_TXN_ON_PARTITION to its owner.  The last test kills (``kill -9``) the
broker serving a coordinator: the client looks the coordinator up again, the new owner
recovers it from its log, an open transaction times out there and aborts, and one being
committed completes -- committed data intact.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid

import pytest

from magnetar.client.errors import Timeout
from magnetar.testing.cluster import ClusterProcesses
from magnetar.testing.standalone import broker_unavailable_reason
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401

pytestmark = [
    pytest.mark.zookeeper,
    pytest.mark.skipif(broker_unavailable_reason() is not None, reason="the broker is not built yet"),
]

BROKERS = 3
TC_ASSIGN = "persistent://pulsar/system/transaction_coordinator_assign"
NO_MESSAGE_MS = 1000
PROPS = {
    "transactionCoordinatorEnabled": "true",
    "magnetarTransactionCoordinatorCount": "2",
    "magnetarTransactionTimeoutCheckIntervalMs": "100",
    "metadataStoreSessionTimeoutMillis": "2000",
    "managedLedgerDefaultEnsembleSize": "2",
    "managedLedgerDefaultWriteQuorum": "2",
    "managedLedgerDefaultAckQuorum": "2",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper_server):
    c = ClusterProcesses(
        tmp_path_factory.mktemp("txn-cluster"),
        brokers=BROKERS,
        bookies=2,
        zookeeper_url=zookeeper_server.url,
        broker_properties=PROPS,
    )
    with c:
        yield c


def lookup(cluster: ClusterProcesses, topic: str, via: int = 0) -> str:
    """The broker URL serving ``topic`` (the lookup places an unowned bundle)."""
    for i in [via] + [j for j in range(BROKERS) if j != via]:
        if not cluster.running(f"broker-{i}"):
            continue
        url = f"{cluster.web_url(i)}/lookup/v2/topic/{topic.replace('://', '/')}"
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())["brokerUrl"]
    raise AssertionError("no live broker")


def unload(cluster: ClusterProcesses, namespace: str) -> int:
    req = urllib.request.Request(f"{cluster.web_url(0)}/admin/v2/namespaces/{namespace}/unload", method="PUT")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status


def loaded_coordinators(cluster: ClusterProcesses) -> list[str]:
    """The coordinator ids loaded on every live broker (admin coordinatorStats), repeats kept."""
    out = []
    for i in range(BROKERS):
        if cluster.running(f"broker-{i}"):
            url = f"{cluster.web_url(i)}/admin/v3/transactions/coordinatorStats"
            with urllib.request.urlopen(url, timeout=30) as r:
                out.extend(json.loads(r.read()))
    return out


def buffer_stats(cluster: ClusterProcesses, topic: str) -> object:
    """The transaction buffer's stats where the topic is served (for failure messages)."""
    i = int(broker_name(cluster, lookup(cluster, topic))[-1])
    url = f"{cluster.web_url(i)}/admin/v3/transactions/transactionBufferStats/{topic.split('://', 1)[1]}"
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return json.loads(r.read())
    except Exception as e:  # noqa: BLE001 -- only for the message
        return repr(e)


def broker_name(cluster: ClusterProcesses, url: str) -> str:
    return next(n for n in cluster.names("broker") if cluster.broker_url(int(n[-1])) == url)


def two_topics_on_two_brokers(cluster: ClusterProcesses) -> tuple[str, str]:
    first = f"persistent://public/default/txc-{uuid.uuid4().hex[:8]}"
    owner = lookup(cluster, first)
    for _ in range(64):
        other = f"persistent://public/default/txc-{uuid.uuid4().hex[:8]}"
        if lookup(cluster, other) != owner:
            return first, other
    raise AssertionError("every topic landed on one broker")


async def drain(consumer, wait_ms: int = NO_MESSAGE_MS) -> list[bytes]:
    out = []
    while True:
        try:
            msg = await consumer.receive(wait_ms)
        except Timeout:
            return out
        out.append(msg.data())
        await consumer.acknowledge(msg)


@pytest.fixture
async def client(cluster):
    from magnetar.client import Client

    c = Client(cluster.service_url, operation_timeout_seconds=30)
    yield c
    await c.close()


async def test_coordinators_served_by_their_partition_owner(cluster, client):
    """Both coordinators answer through the lookup of their partition; a broker that does not
    own a coordinator's bundle refuses it (the client looks up again)."""
    from magnetar.protocol import client_commands
    from magnetar.protocol.enums import CommandType as T

    for tc_id in range(2):
        owner = lookup(cluster, f"{TC_ASSIGN}-partition-{tc_id}")
        other = next(cluster.broker_url(i) for i in range(BROKERS) if cluster.broker_url(i) != owner)
        cnx = await client.pool.get(other, other)
        with pytest.raises(Exception, match="ServiceNotReady|not owned"):
            await cnx.request(
                T.TC_CLIENT_CONNECT_REQUEST,
                lambda rid, i=tc_id: client_commands.tc_client_connect_request(rid, i),
            )
    async with client.transaction(timeout=30):
        pass  # both coordinators reachable (round robin starts at the first)


async def test_commit_and_abort_span_two_brokers(cluster, client):
    t1, t2 = two_topics_on_two_brokers(cluster)
    p1 = await client.create_producer(t1, batching_enabled=False)
    p2 = await client.create_producer(t2, batching_enabled=False)
    c1 = await client.subscribe(t1, "s", initial_position="earliest")
    c2 = await client.subscribe(t2, "s", initial_position="earliest")
    for round_ in range(4):  # round robin: both coordinators, each remote from >= 1 topic
        async with client.transaction(timeout=30) as txn:
            await p1.send(f"c{round_}".encode(), txn=txn)
            await p2.send(f"c{round_}".encode(), txn=txn)
        aborted = await client.transaction(timeout=30)
        await p1.send(b"x", txn=aborted)
        await p2.send(b"x", txn=aborted)
        await aborted.abort()
    want = [f"c{i}".encode() for i in range(4)]
    assert await drain(c1, 3000) == want
    assert await drain(c2, 3000) == want
    # an acknowledgement in a transaction on the other broker's subscription: abort redelivers
    await p2.send(b"plain")
    msg = await c2.receive(10_000)
    txn = await client.transaction(timeout=30)
    await c2.acknowledge(msg, txn=txn)
    await p1.send(b"moved", txn=txn)
    await txn.abort()
    assert (await c2.receive(10_000)).data() == b"plain"


async def test_coordinators_move_with_an_unload(cluster, client):
    """Unloading ``pulsar/system`` closes the coordinators; the next requests load them again
    (recovered from their logs) wherever the bundles go, and a transaction opened before
    commits after."""
    t1, t2 = two_topics_on_two_brokers(cluster)
    p1 = await client.create_producer(t1, batching_enabled=False)
    p2 = await client.create_producer(t2, batching_enabled=False)
    c1 = await client.subscribe(t1, "s", initial_position="earliest")
    opened = [await client.transaction(timeout=60) for _ in range(2)]  # one per coordinator
    for txn in opened:
        await p1.send(b"u", txn=txn)
    assert unload(cluster, "pulsar/system") == 204
    assert loaded_coordinators(cluster) == []  # closed with their bundles
    for txn in opened:
        await p2.send(b"u", txn=txn)
        await txn.commit()
    assert await drain(c1, 3000) == [b"u", b"u"]
    assert sorted(loaded_coordinators(cluster)) == ["0", "1"]  # each loaded once, on its owner


async def test_kill_coordinator_owner(cluster, client):
    """kill -9 of the broker serving a coordinator: it moves; the committed data stays, a
    transaction committed after the kill completes, one left open times out and aborts."""
    t1, t2 = two_topics_on_two_brokers(cluster)
    p1 = await client.create_producer(t1, batching_enabled=False, send_timeout_millis=30_000)
    p2 = await client.create_producer(t2, batching_enabled=False, send_timeout_millis=30_000)
    for t in (t1, t2):  # a durable subscription keeps the data (no retention otherwise)
        await (await client.subscribe(t, "keep", initial_position="earliest")).close()
    async with client.transaction(timeout=60) as txn:
        await p1.send(b"before", txn=txn)
        await p2.send(b"before", txn=txn)
    left_open = await client.transaction(timeout=6)
    to_commit = await client.transaction(timeout=60)
    assert {left_open.txn_id[0], to_commit.txn_id[0]} == {0, 1}
    for t in (left_open, to_commit):
        await p1.send(b"open" if t is left_open else b"commit", txn=t)
        await p2.send(b"open" if t is left_open else b"commit", txn=t)
    victim = broker_name(cluster, lookup(cluster, f"{TC_ASSIGN}-partition-{left_open.txn_id[0]}"))
    started = time.monotonic()
    cluster.kill(victim)
    await to_commit.commit()  # whichever broker serves its coordinator now
    # the other coordinator loads on its new owner with the next request to it, then times out
    # the open transaction there
    async with client.transaction(timeout=30):
        pass
    async with client.transaction(timeout=30):
        pass
    from magnetar.client import Client

    survivors = ",".join(
        cluster.broker_url(i).split("://", 1)[1] for i in range(BROKERS) if cluster.running(f"broker-{i}")
    )
    reader = Client(f"pulsar://{survivors}", operation_timeout_seconds=30)
    got = {}
    try:
        for t in (t1, t2):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # "commit" is visible once "open" (before it) aborted
                c = await reader.subscribe(t, f"r-{uuid.uuid4().hex[:6]}", initial_position="earliest")
                got[t] = await drain(c, 2000)
                await c.close()
                if b"commit" in got[t]:
                    break
    finally:
        await reader.close()
    for t in (t1, t2):
        assert got[t] == [b"before", b"commit"], (t, got[t], victim, buffer_stats(cluster, t))
    assert time.monotonic() - started < 60
