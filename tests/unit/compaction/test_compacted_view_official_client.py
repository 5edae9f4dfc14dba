"""The official client's read_compacted reader over a CompactedTopicReader, through a minimal broker.

A tiny server on the protocol's ServerConnection answers CONNECT, PARTITIONED_METADATA, LOOKUP,
SUBSCRIBE and FLOW; FLOW is served from a :class:`CompactedTopicReader` over a compacted topic
whose batches had messages compacted out.  This shows with the real C++ client which stored bytes
it accepts: the re-encoded batches (fresh CRC, re-compressed) in both batch modes, and whether it
skips records marked ``compacted_out`` (Pulsar's way; it does not: they come out as empty
messages) -- with BatchMode.DROP the reader sees exactly the latest value of each live key,
then the live messages.
"""

from __future__ import annotations

import asyncio

import pytest
from compaction_helpers import CODECS, batch, single

from magnetar.broker.compaction import BatchMode, CompactedTopicReader, Compactor, CompactorConfig
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position
from magnetar.protocol import commands
from magnetar.protocol.enums import CommandType
from magnetar.testing.mini_broker import MiniBroker

pulsar = pytest.importorskip("pulsar")
pytestmark = pytest.mark.compat

TOPIC = "persistent://public/default/compacted-view"
CLIENT_RUN_TIMEOUT_S = 60


class ViewServer(MiniBroker):
    def __init__(self, view: CompactedTopicReader) -> None:
        super().__init__()
        self.view = view
        self.subscribe = None

    async def handle(self, conn, frame) -> bytes | None:  # type: ignore[no-untyped-def]
        cmd, t = frame.command, frame.type
        if t is CommandType.SUBSCRIBE:
            self.subscribe = cmd
            return conn.send(commands.success(cmd.request_id))
        if t is CommandType.FLOW:
            entries = await self.view.read_entries(min(cmd.messagePermits, 100))
            return b"".join(
                conn.send(commands.message(cmd.consumer_id, e.ledger_id, e.entry_id, -1, e.data))
                for e in entries
            )
        return None


def run_reader(url: str) -> list[tuple[str, bytes]]:
    client = pulsar.Client(
        url, operation_timeout_seconds=10, logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Error)
    )
    out = []
    try:
        reader = client.create_reader(
            TOPIC, pulsar.MessageId.earliest, is_read_compacted=True, receiver_queue_size=10
        )
        while True:
            try:
                msg = reader.read_next(timeout_millis=1500)
            except pulsar.Timeout:
                break
            out.append((msg.partition_key(), msg.data()))
        reader.close()
    finally:
        client.close()
    return out


@pytest.mark.parametrize("mode", list(BatchMode))
async def test_official_reader_sees_latest_per_key_then_live(harness, mode):
    ml = await (await harness.new_factory(ManagedLedgerConfig(max_entries_per_ledger=5))).open(
        "public/default/persistent/cv"
    )
    seq = 0
    expected: dict[str, bytes] = {}
    for round_ in range(6):
        recs = [(f"k{i}", b"r%d-%d" % (round_, i), False) for i in range(8)]
        if round_ == 5:
            recs[3] = ("k3", b"", False)  # delete k3 in the last batch
        codec = CODECS[round_ % len(CODECS)]
        await ml.add_entry(batch(recs, seq, codec=codec), num_messages=len(recs))
        seq += len(recs)
        await ml.add_entry(single(f"s{round_ % 2}", b"single-%d" % round_, seq))
        seq += 1
        for k, v, _ in recs:
            if v:
                expected[k] = v
            else:
                expected.pop(k, None)
        expected[f"s{round_ % 2}"] = b"single-%d" % round_
    # Rewrite a middle batch partially: k0 updated again after the batches.
    await ml.add_entry(single("k0", b"k0-final", seq))
    expected["k0"] = b"k0-final"
    await Compactor(harness.bk, harness.clock, CompactorConfig(batch_mode=mode)).compact(ml)
    await ml.add_entry(single("k1", b"live-after-horizon", seq + 1))

    cursor = await ml.open_cursor("reader", InitialPosition.EARLIEST)
    server = ViewServer(CompactedTopicReader(ml, cursor, harness.bk, start=Position.EARLIEST))
    await server.start()
    try:
        got = await asyncio.wait_for(asyncio.to_thread(run_reader, server.url), CLIENT_RUN_TIMEOUT_S)
    finally:
        await server.stop()
    assert server.errors == []
    assert server.subscribe is not None and server.subscribe.read_compacted
    compacted, live = got[:-1], got[-1:]
    assert live == [("k1", b"live-after-horizon")]
    if mode is BatchMode.MARK_COMPACTED_OUT:
        # What the C++ client (3.13) does with Pulsar's marking: it does not skip records with
        # compacted_out=true but delivers them as empty messages -- why DROP is the default.
        empties = [k for k, v in compacted if not v]
        assert empties, "the client skipped compacted-out records: MARK could become the default"
        compacted = [(k, v) for k, v in compacted if v]
    assert len(compacted) == len({k for k, _ in compacted}), f"one message per key: {compacted}"
    assert dict(compacted) == expected
