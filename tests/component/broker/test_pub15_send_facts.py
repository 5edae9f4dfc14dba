"""The SEND path after pub15: one CRC check, facts kept beside the entry, callbacks in order.

Driven frame by frame against the in-process broker (real managed ledger, real
in-process bookie): the facts read at the SEND (message count, marker type) must
make dispatch behave exactly as parsing the stored entry did -- a batch counts its
messages against permits, a server-only marker a client sent is never delivered, a
SEND whose count disagrees with its metadata still counts by the metadata -- and a
bad checksum in the middle of a pipeline is still the one soft SEND_ERROR, in order
with the receipts around it.
"""

from __future__ import annotations

from broker_harness import raw  # noqa: F401  (fixture)

from magnetar.broker.admin.topic_ops import TopicOps
from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType as T
from magnetar.protocol.enums import ServerError
from magnetar.protocol.markers import SNAPSHOT
from magnetar.protocol.payload import build_headers_and_payload, new_message_metadata

TOPIC = "persistent://public/default/pub15-facts"


def _send(c, seq: int, payload: bytes, *, meta_batch=None, cmd_batch=None, marker=None, corrupt=False):  # noqa: ANN001, ANN202
    meta = new_message_metadata(producer_name="px", sequence_id=seq, publish_time=1_700_000_000_000 + seq)
    if meta_batch is not None:
        meta.num_messages_in_batch = meta_batch
    if marker is not None:
        meta.marker_type = marker
    data = build_headers_and_payload(meta, payload)
    if corrupt:
        data = data[:-1] + bytes([data[-1] ^ 0xFF])
    c.send(commands.send(1, seq, data, num_messages=cmd_batch))


async def test_a_bad_checksum_mid_pipeline_is_a_soft_error_in_order(raw) -> None:  # noqa: F811
    c = await raw()
    await c.create_producer(TOPIC)
    for seq in range(40):
        _send(c, seq, b"m%d" % seq, corrupt=(seq == 17))
    got = [await c.next() for _ in range(40)]
    # The refusal is answered at once (as ever: it is not stored, so it waits for nothing);
    # the receipts keep their order around it.
    errors = [f for f in got if f.type == T.SEND_ERROR]
    receipts = [f for f in got if f.type == T.SEND_RECEIPT]
    assert [f.command.sequence_id for f in errors] == [17]
    assert errors[0].command.error == ServerError.ChecksumError
    assert [f.command.sequence_id for f in receipts] == [s for s in range(40) if s != 17]
    assert [f.command.message_id.entryId for f in receipts] == list(range(39))  # 17 was not stored


async def test_dispatch_uses_the_send_facts_as_it_used_the_parsed_entry(broker, raw) -> None:  # noqa: F811
    c = await raw()
    await c.subscribe(TOPIC, "s", 0, 1)
    await c.create_producer(TOPIC)
    _send(c, 0, b"a batch of four", meta_batch=4, cmd_batch=4)  # entry 0: 4 messages
    _send(c, 1, b"marker", marker=SNAPSHOT)  # entry 1: a server-only marker from a client
    _send(c, 2, b"plain")  # entry 2: 1 message
    _send(c, 3, b"disagrees", meta_batch=3)  # entry 3: the SEND says 1, the metadata 3
    _send(c, 4, b"last")  # entry 4
    for _ in range(5):
        await c.expect(T.SEND_RECEIPT)
    c.send(commands.flow(1, 1))
    f = await c.expect(T.MESSAGE)
    assert f.command.message_id.entryId == 0
    await c.nothing()  # the batch counts 4 messages: permits are now -3
    c.send(commands.flow(1, 3))
    await c.nothing()  # back to 0
    c.send(commands.flow(1, 1))
    f = await c.expect(T.MESSAGE)
    assert f.command.message_id.entryId == 2  # the marker (entry 1) is never delivered
    c.send(commands.flow(1, 1))
    f = await c.expect(T.MESSAGE)
    assert f.command.message_id.entryId == 3
    await c.nothing()  # entry 3 counts 3 messages (its metadata's count): permits are now -2
    c.send(commands.flow(1, 2))
    await c.nothing()
    c.send(commands.flow(1, 1))
    f = await c.expect(T.MESSAGE)
    assert f.command.message_id.entryId == 4
    stats = await TopicOps(broker.service).topic_stats(TOPIC)
    assert stats["msgInCounter"] == 4 + 1 + 1 + 1 + 1  # counted by the SEND, as before


async def test_receipts_of_a_long_pipeline_leave_in_order(raw) -> None:  # noqa: F811
    c = await raw()
    await c.create_producer(TOPIC)
    n = 600
    for seq in range(n):
        _send(c, seq, b"x" * 100)
    got = [await c.expect(T.SEND_RECEIPT) for _ in range(n)]
    assert [f.command.sequence_id for f in got] == list(range(n))
    assert [f.command.message_id.entryId for f in got] == list(range(n))
