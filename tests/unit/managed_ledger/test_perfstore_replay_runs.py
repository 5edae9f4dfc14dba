"""Redelivery reads runs of consecutive positions in one read, not one entry per await."""

from __future__ import annotations

from magnetar.managed_ledger.api import InitialPosition
from magnetar.testing.ml_conformance import small_config


async def test_redelivery_reads_runs_of_positions_in_one_call(harness) -> None:
    f = await harness.new_factory(small_config())
    ml = await f.open("t/ns/d/replay-runs")
    c = await ml.open_cursor("s", InitialPosition.EARLIEST)
    pos = [await ml.add_entry(b"p%02d" % i) for i in range(12)]
    calls: list[tuple[int, int]] = []
    read_range = ml.reader.read_range

    async def counting(ledger_id, first, last, read_ahead=True):  # type: ignore[no-untyped-def]
        calls.append((first, last))
        return await read_range(ledger_id, first, last, read_ahead)

    ml.reader.read_range = counting
    wanted = [pos[1], pos[2], pos[3], pos[7], pos[8], pos[10]]
    got = await c.replay_entries(list(reversed(wanted)))
    assert [e.position for e in got] == wanted
    assert [e.data for e in got] == [b"p01", b"p02", b"p03", b"p07", b"p08", b"p10"]
    assert len(calls) == 3  # 1..3, 7..8, 10
