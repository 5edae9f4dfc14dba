"""Transaction admin (REST ``/admin/v3/transactions`` and ``magnetar admin transactions``) and
recovery: after a restart -- clean or ``kill -9`` -- the coordinator's log brings back open
transactions, the topic's aborted-transaction index comes from its snapshot (the topic is not
rescanned), and aborted messages stay invisible.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import urllib.error
import urllib.request

import pytest
from txn_helpers import txn_standalone

from magnetar.client import Client
from magnetar.client.errors import Timeout


def _get(web: str, path: str) -> dict:
    # 60 s: the broker builds its admin routes on the first request (>10 s seen on a loaded 2-core box)
    with urllib.request.urlopen(f"{web}/admin/v3/transactions/{path}", timeout=60) as resp:
        return json.loads(resp.read())


def _text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=60) as resp:
        return resp.read().decode()


def _cli(web: str, *args: str) -> str:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "magnetar.cli.main",
            "admin",
            "--admin-url",
            web,
            "-o",
            "json",
            "transactions",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


async def _drain(consumer, wait_ms: int = 1500) -> list[bytes]:
    got = []
    while True:
        try:
            msg = await consumer.receive(wait_ms)
        except Timeout:
            return got
        got.append(msg.data())
        await consumer.acknowledge(msg)


async def test_admin_rest_and_cli(client, topic, txn_broker):
    web = txn_broker.web_url
    producer = await client.create_producer(topic, batching_enabled=False)
    consumer = await client.subscribe(topic, "adm", consumer_type="Shared", initial_position="earliest")
    await producer.send(b"m0")
    msg = await consumer.receive(2000)
    txn = await client.transaction(timeout=60)
    most, least = txn.txn_id
    await producer.send(b"t1", txn=txn)
    await consumer.acknowledge(msg, txn=txn)

    stats = _get(web, "coordinatorStats")
    assert set(stats) == {"0", "1"} and stats[str(most)]["ongoingTxnSize"] >= 1
    meta = _get(web, f"transactionMetadata/{most}/{least}")
    assert meta["status"] == "OPEN" and topic in meta["producedPartitions"]
    assert meta["ackedPartitions"] == {topic: {"adm": {}}}
    assert f"({most},{least})" in _get(web, "slowTransactions/0")
    assert f"({most},{least})" not in _get(web, "slowTransactions/1h")
    path = topic.replace("persistent://", "")
    buf = _get(web, f"transactionBufferStats/{path}")
    assert buf["ongoingTxnSize"] == 1
    assert _get(web, f"transactionInBufferStats/{path}/{most}/{least}")["startPosition"] is not None
    pending = _get(web, f"pendingAckStats/{path}/adm")
    assert pending["pendingAckPositions"] == 1
    held = _get(web, f"transactionInPendingAckStats/{path}/adm/{most}/{least}")
    assert held["individuallyAckedPositions"] == [f"{msg.message_id().ledger_id}:{msg.message_id().entry_id}"]

    # /metrics in Pulsar's names
    metrics = await asyncio.to_thread(_text, f"{web}/metrics")
    assert f'pulsar_txn_active_count{{cluster="standalone",coordinator_id="{most}"}}' in metrics
    assert "pulsar_txn_created_total{" in metrics and "pulsar_txn_execution_latency_le_10{" in metrics
    assert (
        f'pulsar_txn_tb_active_total{{cluster="standalone",namespace="public/default",topic="{topic}"}} 1.0'
        in metrics
    )

    # the same through the CLI, then abort it there
    cli_meta = json.loads(
        await asyncio.to_thread(_cli, web, "transaction-metadata", "-m", str(most), "-l", str(least))
    )
    assert cli_meta["status"] == "OPEN"
    cli_stats = json.loads(await asyncio.to_thread(_cli, web, "coordinator-stats", "-c", str(most)))
    assert cli_stats["ongoingTxnSize"] >= 1
    buf_cli = json.loads(await asyncio.to_thread(_cli, web, "transaction-buffer-stats", "-t", topic))
    assert buf_cli["ongoingTxnSize"] == 1
    json.loads(await asyncio.to_thread(_cli, web, "pending-ack-stats", "-t", topic, "-s", "adm"))
    await asyncio.to_thread(_cli, web, "abort-transaction", "-m", str(most), "-l", str(least))
    with pytest.raises(urllib.error.HTTPError) as err:
        _get(web, f"transactionMetadata/{most}/{least}")
    assert err.value.code == 404
    again = await consumer.receive(3000)  # the abort released the ack
    assert again.data() == b"m0"
    assert _get(web, f"transactionBufferStats/{path}")["ongoingTxnSize"] == 0


async def test_recovery_from_snapshot_and_log_after_restart_and_kill9(tmp_path):
    proc = txn_standalone(tmp_path, "transactionBufferSnapshotMinTimeInMillis=0\n")
    proc.start()
    topic = "persistent://public/default/recover-topic"
    path = "public/default/recover-topic"
    try:
        client = Client(proc.broker_url, operation_timeout_seconds=10)
        producer = await client.create_producer(topic, batching_enabled=False)
        await (await client.subscribe(topic, "rec", initial_position="earliest")).close()
        expected = []
        for i in range(10):
            txn = await client.transaction(timeout=60)
            await producer.send(f"m{i}".encode(), txn=txn)
            if i % 2:
                await txn.abort()
            else:
                await txn.commit()
                expected.append(f"m{i}".encode())
        survivor = await client.transaction(timeout=60)  # open across the restart
        await producer.send(b"survivor", txn=survivor)
        most, least = survivor.txn_id
        await client.close()

        proc.terminate()  # clean: the buffer's snapshot was written at each end (min time 0)
        proc.restart()
        buf = _get(proc.web_url, f"transactionBufferStats/{path}")
        # the index came from the snapshot: only the entries after the open transaction's first
        # entry were read again (its one message), not the 20 entries before it
        assert buf["abortedTxnIndexSize"] == 5, buf
        assert buf["entriesScannedOnRecovery"] == 1, buf
        assert buf["ongoingTxnSize"] == 1
        assert _get(proc.web_url, f"transactionMetadata/{most}/{least}")["status"] == "OPEN"

        await asyncio.to_thread(proc.kill)  # kill -9 now: the log and the snapshot still hold
        await asyncio.to_thread(proc.restart)
        client = Client(proc.broker_url, operation_timeout_seconds=10)
        consumer = await client.subscribe(topic, "rec", initial_position="earliest")
        assert await _drain(consumer, 800) == expected  # the open transaction holds the rest back
        assert _get(proc.web_url, f"transactionMetadata/{most}/{least}")["status"] == "OPEN"
        # the client that owned it is gone; an operator aborts it
        await asyncio.to_thread(_cli, proc.web_url, "abort-transaction", "-m", str(most), "-l", str(least))
        await producer_after(client, topic)
        assert await _drain(consumer) == [b"after"]
        await client.close()
    except BaseException:
        print(proc.log_tail(60))
        raise
    finally:
        proc.terminate()


async def producer_after(client, topic) -> None:
    producer = await client.create_producer(topic, batching_enabled=False)
    await producer.send(b"after")


async def test_admin_answers_503_when_transactions_are_disabled(tmp_path):
    from magnetar.testing.standalone import running_standalone

    async with running_standalone(tmp_path) as sa:
        with pytest.raises(urllib.error.HTTPError) as err:
            await asyncio.to_thread(_get, sa.web_url, "coordinatorStats")
        assert err.value.code == 503
        client = Client(sa.broker_url, operation_timeout_seconds=5)
        try:
            from magnetar.client.errors import PulsarException

            with pytest.raises(PulsarException):
                await client.transaction(timeout=5)
        finally:
            await client.close()
