"""Compaction over the real storage stack: a LedgerStorage bookie (journal, entry logs, index)
reached through the in-process bookie client and the real BookKeeperClient.

10,000 updates over 100 keys (batched and single, every codec, deletes) are compacted; the
compacted view has one latest value per live key, then the live messages; after a "restart"
(a new ledger client and managed-ledger factory over the same bookie and metadata) the view is
still served from the compacted ledger, retention 0 lets the consumed ledgers go so the topic's
storage shrinks, and a second compaction folds the first compacted ledger in.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "compaction"))

from compaction_helpers import Workload, read_view, single  # noqa: E402

from magnetar.broker.compaction import (  # noqa: E402
    COMPACTION_SUBSCRIPTION,
    CompactedTopicReader,
    Compactor,
    read_horizon,
)
from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerConfig, Position  # noqa: E402
from magnetar.testing.ml_conformance import LocalBookieHarness  # noqa: E402

NAME = "public/default/persistent/compacted-real"
CONFIG = ManagedLedgerConfig(
    max_entries_per_ledger=200, min_ledger_rollover_time_ms=0, retention_time_ms=0, retention_size_bytes=0
)


def latest_per_key(view) -> dict[str, bytes]:
    keys = [k for _p, k, _v, _n in view]
    assert len(keys) == len(set(keys)), "one message per key"
    return {k: v for _p, k, v, _n in view}


async def view_of(ml, bk, name):
    cursor = await ml.open_cursor(name, InitialPosition.EARLIEST)
    reader = CompactedTopicReader(ml, cursor, bk, start=Position.EARLIEST)
    try:
        return await read_view(reader)
    finally:
        await reader.close()
        await ml.delete_cursor(name)


async def test_compaction_over_the_real_bookie(tmp_path):
    h = await LocalBookieHarness(str(tmp_path / "bookie")).start()
    try:
        f1 = await h.new_factory(CONFIG)
        bk1 = f1.ctx.bookkeeper
        ml = await f1.open(NAME)
        await ml.open_cursor(COMPACTION_SUBSCRIPTION, InitialPosition.EARLIEST)
        w = Workload(seed=21)
        await w.append(ml, 10_000)
        size_before, ledgers_before = ml.total_size, len(ml.ledgers())
        result = await Compactor(bk1, h.clock).compact(ml)
        assert result.messages_read == 10_000 and result.keys == len(w.model)
        view = await view_of(ml, bk1, "check")
        assert latest_per_key(view) == w.model
        await ml.add_entry(single("key-001", b"after", 1))
        tail = (await view_of(ml, bk1, "check2"))[len(view) :]
        assert [(k, v) for _p, k, v, _n in tail] == [("key-001", b"after")]
        horizon = read_horizon(ml)
        await f1.aclose()

        # Restart: a new ledger client and factory over the same bookie and metadata.
        f2 = await h.new_factory(CONFIG)
        bk2 = f2.ctx.bookkeeper
        ml2 = await f2.open(NAME)
        assert read_horizon(ml2) == horizon
        await ml2.trim_consumed_ledgers()
        assert len(ml2.ledgers()) < ledgers_before and ml2.total_size < size_before / 5
        view2 = await view_of(ml2, bk2, "check3")
        assert view2 == view + tail, "served from the compacted ledger although its ledgers are gone"

        await w.append(ml2, 1_000)
        second = await Compactor(bk2, h.clock).compact(ml2)
        assert horizon.ledger_id in second.deleted_ledgers
        final = latest_per_key(await view_of(ml2, bk2, "check4"))
        # key-001 may have been updated or deleted by the second workload round: trust the model.
        assert {k: v for k, v in final.items() if k != "key-001"} == {
            k: v for k, v in w.model.items() if k != "key-001"
        }
    finally:
        await h.aclose()
