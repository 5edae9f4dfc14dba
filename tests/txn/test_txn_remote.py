"""The coordinator's path to participants on other brokers: END_TXN_ON_PARTITION and
END_TXN_ON_SUBSCRIPTION over the wire (broker/transaction/remote.py) against a real
standalone, and the choice between here and there (``_remote_owner``)."""

from __future__ import annotations

import types

import pytest

from magnetar.broker.transaction.model import TxnID
from magnetar.broker.transaction.remote import RemoteParticipants
from magnetar.broker.transaction.service import TransactionService
from magnetar.client.errors import Timeout
from magnetar.runtime import RealClock


async def test_end_on_partition_and_subscription_over_the_wire(client, topic, txn_broker):
    remote = RemoteParticipants(RealClock())
    producer = await client.create_producer(topic, batching_enabled=False)
    consumer = await client.subscribe(topic, "wire", consumer_type="Shared", initial_position="earliest")
    txn = await client.transaction(timeout=30)
    await producer.send(b"r1", txn=txn)
    with pytest.raises(Timeout):
        await consumer.receive(500)
    # what a coordinator on another broker sends to the topic's owner
    await remote.end_partition(txn_broker.broker_url, topic, TxnID(*txn.txn_id), commit=True)
    msg = await consumer.receive(2000)
    assert msg.data() == b"r1"
    t2 = await client.transaction(timeout=30)
    await consumer.acknowledge(msg, txn=t2)
    await remote.end_subscription(txn_broker.broker_url, topic, "wire", TxnID(*t2.txn_id), commit=False)
    assert (await consumer.receive(3000)).data() == b"r1"  # the abort made it available again
    # a subscription that does not exist has nothing to end: success
    await remote.end_subscription(txn_broker.broker_url, topic, "nobody", TxnID(*t2.txn_id), commit=True)
    with pytest.raises(OSError):
        await remote.end_partition("pulsar://127.0.0.1:1", topic, TxnID(0, 1), commit=True)


async def test_remote_owner_is_asked_only_for_topics_owned_elsewhere():
    """The bundle's owner decides: another broker -> there; us or nobody -> here (loading the
    topic takes an unowned bundle); a loaded topic never asks."""
    asked = []
    owners = {"remote": "pulsar://other:6650", "mine": "pulsar://me:6650", "free": None}

    async def bundle_of(ref):
        asked.append(ref.local_name)
        return ref.local_name

    async def owner_of(bundle):
        url = owners[bundle]
        return None if url is None else types.SimpleNamespace(native_url=url)

    svc = types.SimpleNamespace(
        topics=types.SimpleNamespace(get_loaded=lambda name: object() if "loaded" in name else None),
        namespace_service=types.SimpleNamespace(bundle_of=bundle_of, owner_of=owner_of),
        broker_service_url=lambda: "pulsar://me:6650",
        clock=RealClock(),
    )
    txns = TransactionService(svc, config=None)  # type: ignore[arg-type]
    assert await txns._remote_owner("persistent://t/n/loaded") is None
    assert asked == []  # loaded here: no ownership read
    assert await txns._remote_owner("persistent://t/n/mine") is None
    assert await txns._remote_owner("persistent://t/n/free") is None
    assert await txns._remote_owner("persistent://t/n/remote") == "pulsar://other:6650"
