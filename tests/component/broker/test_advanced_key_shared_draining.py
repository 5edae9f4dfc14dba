"""Key_Shared over raw frames: a moved key waits for the old owner's acks; the stats say why."""

from __future__ import annotations

from broker_harness import RawClient

from magnetar.broker.service.key_shared_selector import ConsistentHashingSelector
from magnetar.common.murmur3 import sticky_key_slot
from magnetar.protocol import commands
from magnetar.protocol.client_commands import KeySharedPolicy
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import KeySharedMode
from magnetar.protocol.message_id import MessageId
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

TOPIC = "persistent://public/default/ks-draining"


class _C:
    def __init__(self, name: str) -> None:
        self.consumer_name = name


def _key_moving_to_b() -> str:
    """A key owned by "a" alone that "b" takes over when it joins (consistent hashing, 100 points)."""
    sel = ConsistentHashingSelector()
    a, b = _C("a"), _C("b")
    sel.add_consumer(a)
    sel.add_consumer(b)
    for i in range(10_000):
        key = f"key-{i}"
        if sel.select(sticky_key_slot(key)) is b:
            return key
    raise AssertionError("no key moves to b")


def _send(c: RawClient, seq: int, key: str) -> None:
    md = new_message_metadata(producer_name="p", sequence_id=seq, publish_time=1, partition_key=key)
    c.send(commands.send(1, seq, build_headers_and_payload(md, f"{key}:{seq}".encode())))


async def _messages(c: RawClient, n: int) -> list:
    return [await c.expect(T.MESSAGE) for _ in range(n)]


async def test_moved_key_is_blocked_until_the_old_owner_acks(broker, raw) -> None:
    key = _key_moving_to_b()
    c = await raw()
    policy = KeySharedPolicy()
    await c.subscribe(TOPIC, "ks", 3, 1, consumer_name="a", key_shared=policy)
    c.send(commands.flow(1, 100))
    await c.create_producer(TOPIC, 1)
    for seq in range(3):
        _send(c, seq, key)
    frames = [await c.next() for _ in range(6)]  # 3 receipts and 3 messages, interleaved
    got_a = [f for f in frames if f.type == T.MESSAGE]
    assert len(got_a) == 3 and all(f.command.consumer_id == 1 for f in got_a)

    await c.subscribe(TOPIC, "ks", 3, 2, consumer_name="b", key_shared=policy)
    c.send(commands.flow(2, 100))
    for seq in range(3, 6):
        _send(c, seq, key)
    for _ in range(3):
        await c.expect(T.SEND_RECEIPT)
    await c.nothing(0.5)  # b owns the key now, but a has not acked: b must wait

    sub = broker.service.topics.get_loaded(TOPIC).subscriptions["ks"]
    stats = sub.to_stats()
    assert stats["keySharedMode"] == "AUTO_SPLIT"
    slot = sticky_key_slot(key)
    blocked = {h["hash"]: h for h in stats["blockedHashes"]}
    assert slot in blocked and blocked[slot]["parkedEntries"] == 3 and blocked[slot]["owner"] == "b"
    assert blocked[slot]["reason"].startswith("draining: 3 unacked entries at consumer 'a'")
    per_consumer = {x["consumerName"]: x for x in stats["keySharedConsumers"]}
    assert per_consumer["a"]["drainingHashes"] == [{"hash": slot, "unackedMessages": 3}]
    assert any(s <= slot <= e for s, e in per_consumer["b"]["keyHashRangeArrays"])

    ids = [MessageId(f.command.message_id.ledgerId, f.command.message_id.entryId) for f in got_a]
    c.send(commands.ack(1, 0, ids))  # individual
    got_b = await _messages(c, 3)
    assert [f.command.consumer_id for f in got_b] == [2, 2, 2]
    payloads = [bytes(f.headers_and_payload) for f in got_b]
    assert all(p.endswith(f"{key}:{seq}".encode()) for p, seq in zip(payloads, range(3, 6), strict=True))
    assert sub.to_stats()["blockedHashes"] == []


async def test_split_range_mode_and_sticky_ranges_in_stats() -> None:
    from broker_harness import running_broker

    async with running_broker(subscriptionKeySharedUseConsistentHashing="false") as b:
        c = await RawClient.connect(b.port)
        try:
            t = "persistent://public/default/ks-split"
            await c.subscribe(t, "auto", 3, 1, consumer_name="first", key_shared=KeySharedPolicy())
            await c.subscribe(t, "auto", 3, 2, consumer_name="second", key_shared=KeySharedPolicy())
            stats = b.service.topics.get_loaded(t).subscriptions["auto"].to_stats()
            ranges = {x["consumerName"]: x["keyHashRangeArrays"] for x in stats["keySharedConsumers"]}
            assert ranges == {"first": [[32768, 65535]], "second": [[0, 32767]]}

            sticky = KeySharedPolicy(mode=KeySharedMode.STICKY, hash_ranges=((0, 999),))
            await c.subscribe(t, "st", 3, 3, consumer_name="s1", key_shared=sticky)
            rid = c.rid()
            overlapping = KeySharedPolicy(mode=KeySharedMode.STICKY, hash_ranges=((500, 1500),))
            c.send(commands.subscribe(t, "st", 3, 4, rid, "s2", key_shared=overlapping))
            err = await c.response(T.ERROR, rid)
            assert err.command.error == 19  # ConsumerAssignError
            stats = b.service.topics.get_loaded(t).subscriptions["st"].to_stats()
            assert stats["keySharedMode"] == "STICKY"
            assert [x["keyHashRanges"] for x in stats["keySharedConsumers"]] == [["[0, 999]"]]
        finally:
            await c.aclose()


async def test_allow_out_of_order_delivery_skips_the_draining_wait(broker, raw) -> None:
    key = _key_moving_to_b()
    topic = TOPIC + "-ooo"
    c = await raw()
    policy = KeySharedPolicy(allow_out_of_order_delivery=True)
    await c.subscribe(topic, "ks", 3, 1, consumer_name="a", key_shared=policy)
    c.send(commands.flow(1, 100))
    await c.create_producer(topic, 1)
    _send(c, 0, key)
    frames = [await c.next() for _ in range(2)]
    assert sorted(f.type for f in frames) == sorted([T.SEND_RECEIPT, T.MESSAGE])
    await c.subscribe(topic, "ks", 3, 2, consumer_name="b", key_shared=policy)
    c.send(commands.flow(2, 100))
    _send(c, 1, key)
    frames = [await c.next() for _ in range(2)]
    msg = next(f for f in frames if f.type == T.MESSAGE)
    assert msg.command.consumer_id == 2, "out-of-order allowed: the new owner gets it while a holds seq 0"
    stats = broker.service.topics.get_loaded(topic).subscriptions["ks"].to_stats()
    assert stats["allowOutOfOrderDelivery"] is True and stats["blockedHashes"] == []
