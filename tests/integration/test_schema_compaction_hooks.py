"""The broker's compaction hooks, in process over the real standalone storage stack.

* deleting a topic deletes its compacted ledger (nothing leaks on the bookie);
* a delete refused because the topic is in use keeps the compacted ledger;
* the compactionThreshold check triggers only above the threshold;
* schema history goes with a deleted topic, and stays when a partition goes.

The official client blocks, so it runs in a worker thread while the broker
serves on the test's event loop.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from magnetar.bookkeeper.api import BKError
from magnetar.broker import errors
from magnetar.broker.compaction import read_horizon
from magnetar.broker.schema import SchemaInfo, SchemaType
from magnetar.broker.service.names import parse_topic
from magnetar.testing.standalone import broker_unavailable_reason, running_standalone

pulsar = pytest.importorskip("pulsar")

TIMEOUT_S = 60


def produce(url: str, topic: str, n: int, keys: int) -> None:
    client = pulsar.Client(url, operation_timeout_seconds=10)
    try:
        producer = client.create_producer(topic, batching_enabled=False)
        for i in range(n):
            producer.send(f"v{i}".encode(), partition_key=f"k{i % keys}")
        producer.close()
    finally:
        client.close()


@pytest.fixture
async def standalone(tmp_path):
    reason = broker_unavailable_reason()
    if reason:
        pytest.skip(reason)
    async with running_standalone(tmp_path / "data", {"brokerDeleteInactiveTopicsEnabled": "false"}) as s:
        yield s


async def compacted_ledger(svc, topic: str) -> int:  # type: ignore[no-untyped-def]
    await asyncio.wait_for(svc.compaction.service.compact(topic), TIMEOUT_S)
    t = svc.topics.get_loaded(topic)
    horizon = read_horizon(t.ml)
    assert horizon is not None
    return horizon.ledger_id


async def ledger_exists(svc, ledger_id: int) -> bool:  # type: ignore[no-untyped-def]
    try:
        handle = await svc.compaction.bookkeeper.open_ledger(ledger_id, password=b"", recovery=False)
    except BKError:
        return False
    await handle.close()
    return True


async def test_topic_delete_deletes_compacted_ledger(standalone) -> None:
    svc = standalone.broker_service
    topic = "persistent://public/default/hooks-delete"
    await asyncio.to_thread(produce, standalone.broker_url, topic, 40, 4)
    ledger_id = await compacted_ledger(svc, topic)
    assert await ledger_exists(svc, ledger_id)
    await svc.delete_topic(topic)
    assert not await ledger_exists(svc, ledger_id)
    assert not await svc.topics.exists(parse_topic(topic))


async def test_refused_delete_keeps_compacted_ledger(standalone) -> None:
    svc = standalone.broker_service
    topic = "persistent://public/default/hooks-busy"
    await asyncio.to_thread(produce, standalone.broker_url, topic, 40, 4)
    ledger_id = await compacted_ledger(svc, topic)

    def hold_and_delete() -> None:
        client = pulsar.Client(standalone.broker_url, operation_timeout_seconds=10)
        consumer = client.subscribe(topic, "holder")
        try:
            fut = asyncio.run_coroutine_threadsafe(svc.delete_topic(topic), loop)
            with pytest.raises(errors.PreconditionFailedError):
                fut.result(TIMEOUT_S)
        finally:
            consumer.close()
            client.close()

    loop = asyncio.get_running_loop()
    await asyncio.to_thread(hold_and_delete)
    assert await ledger_exists(svc, ledger_id)
    assert read_horizon(svc.topics.get_loaded(topic).ml).ledger_id == ledger_id


async def test_threshold_check(standalone) -> None:
    svc = standalone.broker_service
    topic = "persistent://public/default/hooks-threshold"
    await asyncio.to_thread(produce, standalone.broker_url, topic, 20, 2)
    assert await svc.compaction.check_thresholds() == []  # no threshold anywhere: off
    ns = svc.resources.namespaces

    async def set_threshold(value: int | None) -> None:
        def fn(doc: dict) -> dict:
            doc = dict(doc)
            doc["compaction_threshold"] = value
            return doc

        await ns.update("public/default", fn)

    backlog = svc.topics.get_loaded(topic).ml.total_size
    await set_threshold(backlog * 2)
    assert await svc.compaction.check_thresholds() == []  # below the threshold
    await set_threshold(backlog // 2)
    assert await svc.compaction.check_thresholds() == [topic]
    await asyncio.wait_for(_wait_success(svc, topic), TIMEOUT_S)
    await set_threshold(None)
    # A topic policy overrides the namespace: a huge namespace threshold, a small topic one.
    await set_threshold(backlog * 100)
    await asyncio.to_thread(produce, standalone.broker_url, topic, 20, 2)
    async with httpx.AsyncClient(base_url=standalone.web_url, timeout=10) as http:
        local = topic.split("://", 1)[1]
        r = await http.post(f"/admin/v2/persistent/{local}/compactionThreshold", json=1)
        assert r.status_code == 204, r.text
        assert await svc.compaction.threshold_of(svc.topics.get_loaded(topic)) == 1
        assert await svc.compaction.check_thresholds() == [topic]
        await asyncio.wait_for(_wait_success(svc, topic), TIMEOUT_S)
        assert (await http.delete(f"/admin/v2/persistent/{local}/compactionThreshold")).status_code == 204
    await set_threshold(None)


async def _wait_success(svc, topic: str) -> None:  # type: ignore[no-untyped-def]
    while svc.compaction.service.status(topic)["status"] != "SUCCESS":  # noqa: ASYNC110 - polls as REST users do
        await asyncio.sleep(0.05)


async def test_schema_goes_with_topic_not_with_partition(standalone) -> None:
    svc = standalone.broker_service
    info = SchemaInfo("s", SchemaType.STRING, b"", {})
    await svc.create_partitioned_topic("persistent://public/default/hooks-part", 2)
    await svc.schemas.put_schema_if_compatible("persistent://public/default/hooks-part", info, "FULL")
    await svc.create_non_partitioned_topic("persistent://public/default/hooks-plain")
    await svc.schemas.put_schema_if_compatible("persistent://public/default/hooks-plain", info, "FULL")
    await svc.delete_topic("persistent://public/default/hooks-plain")
    assert not await svc.schemas.has_schema("persistent://public/default/hooks-plain")
    assert await svc.schemas.has_schema("persistent://public/default/hooks-part-partition-1")
    await svc.delete_partitioned_topic("persistent://public/default/hooks-part")
    assert not await svc.schemas.has_schema("persistent://public/default/hooks-part")


async def test_last_message_id_after_rollover(tmp_path) -> None:
    """A topic whose current ledger just rolled over (empty) still answers its last *stored*
    entry to GET_LAST_MESSAGE_ID: the client reads "(L, -1)" as "nothing there", so readers'
    has_message_available (and a TableView's start) stopped short of existing data."""
    props = {"managedLedgerMaxEntriesPerLedger": "10", "managedLedgerMinLedgerRolloverTimeMinutes": "0"}
    async with running_standalone(tmp_path / "roll", props) as s:
        topic = "persistent://public/default/rolled"

        def scenario() -> tuple[bool, int]:
            client = pulsar.Client(s.broker_url, operation_timeout_seconds=10)
            try:
                hold = client.subscribe(topic, "hold")  # keeps the full ledger from being trimmed
                producer = client.create_producer(topic, batching_enabled=False)
                for i in range(10):
                    producer.send(f"m{i}".encode())
                # Wait for the rollover to the next (empty) ledger (a plain read of the loop's state).
                ml = s.broker_service.topics.get_loaded(topic).ml
                deadline = time.monotonic() + TIMEOUT_S
                while ml.last_confirmed_entry.entry_id != -1:
                    assert time.monotonic() < deadline, ml.last_confirmed_entry
                    time.sleep(0.01)
                reader = client.create_reader(topic, pulsar.MessageId.earliest)
                n = 0
                while reader.has_message_available():
                    reader.read_next(10_000)
                    n += 1
                hold.close()
                return True, n
            finally:
                client.close()

        ok, n = await asyncio.to_thread(scenario)
        ml = s.broker_service.topics.get_loaded(topic).ml
        assert ml.last_confirmed_entry.entry_id == -1  # the rollover happened
        assert ok and n == 10
