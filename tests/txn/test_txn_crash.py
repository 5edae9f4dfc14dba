"""Exactly-once consume-transform-produce across two topics while ``magnetar standalone`` is
killed with ``kill -9`` at random points.

A worker reads ``in-i`` from the input topic and, in one transaction, sends ``out-in-i`` to
the output topic and acknowledges the input.  Meanwhile the test kills the standalone
(SIGKILL: no flush, no goodbye) at random moments and restarts it on the same data dir and
ports; the worker recreates its client after any failure (a transaction cut off by a
crash is aborted by the client or, if the client could not reach it, times out on the
recovered coordinator).  At the end:

* every input is in the output exactly once (nothing lost, nothing from an aborted
  transaction visible -- an aborted attempt's output would show up as a duplicate);
* the input subscription has no backlog and nothing is redelivered (no ack lost; an ack
  applied twice would have had to come from two committed transactions = a duplicate).

CI runs a few kills over a short input; ``MAGNETAR_SLOW=1`` runs many more (the ``slow`` test).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import urllib.request

import pytest
from txn_helpers import txn_standalone

from magnetar.client import Client
from magnetar.client.errors import Timeout

TXN_TIMEOUT_S = 3.0
# After many kill -9 the bookie replays a long journal on start (15-30 s on a busy machine).
RESTART_TIMEOUT_S = 120.0


async def _preload(url: str, topic: str, out_topic: str, n: int) -> list[bytes]:
    client = Client(url, operation_timeout_seconds=10)
    try:
        producer = await client.create_producer(topic, batching_enabled=False)
        inputs = [f"in-{i}".encode() for i in range(n)]
        futs = [await producer.send_async(m) for m in inputs]
        await asyncio.gather(*futs)
        # the input subscription exists before the worker starts
        await (await client.subscribe(topic, "xform", initial_position="earliest")).close()
        # and the output's reader, so the output is retained (no subscription = no retention)
        await (await client.subscribe(out_topic, "verify", initial_position="earliest")).close()
        await (await client.subscribe(out_topic, "verify-official", initial_position="earliest")).close()
        return inputs
    finally:
        await client.close()


async def _worker(
    url: str, in_topic: str, out_topic: str, stop: asyncio.Event, rng: random.Random, stats: dict
) -> None:
    while not stop.is_set():
        client = Client(url, operation_timeout_seconds=4, connection_timeout_ms=2000)
        try:
            consumer = await client.subscribe(in_topic, "xform", initial_position="earliest")
            producer = await client.create_producer(
                out_topic, batching_enabled=False, send_timeout_millis=4000
            )
            while not stop.is_set():
                try:
                    msg = await consumer.receive(300)
                except Timeout:
                    continue
                async with client.transaction(timeout=TXN_TIMEOUT_S) as txn:
                    await producer.send(b"out-" + msg.data(), txn=txn)
                    await asyncio.sleep(rng.uniform(0, 0.05))  # widen the window a crash can hit
                    await consumer.acknowledge(msg, txn=txn)
                stats["committed"] += 1
        except Exception as exc:  # a crash: start over with a new client
            stats["failures"] += 1
            stats["last_error"] = f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.close(), 5)
        if not stop.is_set():
            await asyncio.sleep(0.2)


async def _collect(url: str, topic: str, expected: int, deadline_s: float) -> list[bytes]:
    client = Client(url, operation_timeout_seconds=10)
    got: list[bytes] = []
    try:
        consumer = await client.subscribe(topic, "verify", initial_position="earliest")
        loop = asyncio.get_running_loop()
        end = loop.time() + deadline_s
        quiet_until = None
        while loop.time() < end:
            try:
                msg = await consumer.receive(500)
            except Timeout:
                if len(set(got)) >= expected:
                    # all there: keep listening past a transaction timeout for duplicates
                    quiet_until = quiet_until or loop.time() + TXN_TIMEOUT_S + 1.5
                    if loop.time() >= quiet_until:
                        break
                continue
            got.append(msg.data())
            await consumer.acknowledge(msg)
    finally:
        await client.close()
    return got


def _sub_stats(web_url: str, topic: str, sub: str) -> dict:
    path = topic.replace("persistent://", "")
    with urllib.request.urlopen(f"{web_url}/admin/v2/persistent/{path}/stats", timeout=10) as resp:
        return json.loads(resp.read())["subscriptions"][sub]


def _txn_admin(web_url: str, path: str) -> dict:
    with urllib.request.urlopen(f"{web_url}/admin/v3/transactions/{path}", timeout=10) as resp:
        return json.loads(resp.read())


def _official_read(url: str, topic: str, expected: int) -> list[bytes]:
    pulsar = pytest.importorskip("pulsar")
    client = pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn)
    )
    try:
        consumer = client.subscribe(
            topic, "verify-official", initial_position=pulsar.InitialPosition.Earliest
        )
        got: list[bytes] = []
        while True:
            try:
                msg = consumer.receive(3000 if len(got) < expected else 1000)
            except pulsar.Timeout:
                return got
            got.append(msg.data())
            consumer.acknowledge(msg)
    finally:
        client.close()


async def _run(tmp_path, n_inputs: int, kills: int, seed: int) -> None:
    rng = random.Random(seed)
    proc = txn_standalone(tmp_path)
    proc.start()
    try:
        suffix = f"{seed}-{rng.randrange(1 << 30)}"
        in_topic = f"persistent://public/default/ctp-in-{suffix}"
        out_topic = f"persistent://public/default/ctp-out-{suffix}"
        inputs = await _preload(proc.broker_url, in_topic, out_topic, n_inputs)
        stop = asyncio.Event()
        stats = {"committed": 0, "failures": 0, "last_error": ""}
        worker = asyncio.create_task(_worker(proc.broker_url, in_topic, out_topic, stop, rng, stats))
        for _ in range(kills):
            await asyncio.sleep(rng.uniform(0.2, 1.5))
            await asyncio.to_thread(proc.kill)
            await asyncio.sleep(rng.uniform(0, 0.5))
            await asyncio.to_thread(proc.restart, timeout_s=RESTART_TIMEOUT_S)
        got = await _collect(proc.broker_url, out_topic, n_inputs, deadline_s=90 + 10 * kills)
        stop.set()
        await asyncio.wait_for(worker, 30)
        expected = sorted(b"out-" + m for m in inputs)
        dups = sorted({m for m in got if got.count(m) > 1})
        missing = sorted(set(expected) - set(got))
        print(
            f"inputs={n_inputs} kills={kills} committed={stats['committed']} "
            f"failures={stats['failures']} last_error={stats['last_error']!r}"
        )
        assert not dups, f"duplicates in the output: {dups[:10]}"
        assert not missing, f"missing from the output: {missing[:10]} ({len(missing)} of {n_inputs})"
        assert sorted(got) == expected
        sub = _sub_stats(proc.web_url, in_topic, "xform")
        assert sub["msgBacklog"] == 0, sub
        held = _txn_admin(proc.web_url, f"pendingAckStats/{in_topic[len('persistent://') :]}/xform")
        assert held["pendingAckPositions"] == 0, held  # no ack left hanging in a transaction
        # the official client reads the same output: every input once, nothing aborted
        official = await asyncio.to_thread(_official_read, proc.broker_url, out_topic, n_inputs)
        assert sorted(official) == expected
    except BaseException:
        print(proc.log_tail(60))
        raise
    finally:
        proc.terminate()


async def test_consume_transform_produce_exactly_once_across_kill9(tmp_path):
    slow = bool(os.environ.get("MAGNETAR_SLOW"))
    await _run(tmp_path, n_inputs=200 if slow else 60, kills=10 if slow else 3, seed=20)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_consume_transform_produce_soak(tmp_path, seed):
    await _run(tmp_path, n_inputs=300, kills=15, seed=seed)
