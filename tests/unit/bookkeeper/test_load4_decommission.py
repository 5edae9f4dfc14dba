"""``decommission_bookie`` against an in-memory metadata store: what it refuses, and that it
marks the bookie's ledgers, waits until none names it, then deletes the cookie.  The
replication worker is played by the test (it rewrites the ensembles); the real-process run
is tests/integration/test_bookie_decommission_cluster.py."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from magnetar.bookie.api import AVAILABLE_PATH, COOKIES_PATH, READONLY_PATH
from magnetar.bookkeeper.api import LedgerMetadata, LedgerState
from magnetar.bookkeeper.decommission import DecommissionError, decommission_bookie
from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.bookkeeper.underreplication import AUDITOR_ELECTION_PATH, UnderReplicationManager
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock

GONE, KEPT, OTHER = "10.0.0.1:3181", "10.0.0.2:3181", "10.0.0.3:3181"


async def _store():  # type: ignore[no-untyped-def]
    return await create_metadata_store("memory:", clock=RealClock())


async def _ledger(ml: LedgerMetadataStore, ensemble: tuple[str, ...]) -> int:
    def make(lid: int) -> LedgerMetadata:
        return LedgerMetadata(
            ledger_id=lid,
            ensemble_size=2,
            write_quorum=2,
            ack_quorum=2,
            state=LedgerState.CLOSED,
            ensembles=((0, ensemble),),
        )

    md, _ = await ml.create(make)
    return md.ledger_id


async def test_refusals() -> None:
    store = await _store()
    try:
        with pytest.raises(DecommissionError, match="unknown"):
            await decommission_bookie(store, GONE, timeout_s=1)
        await store.put(f"{AVAILABLE_PATH}/{GONE}", b"{}", -1)
        with pytest.raises(DecommissionError, match="still running \\(registered writable\\)"):
            await decommission_bookie(store, GONE, timeout_s=1)
        await store.delete(f"{AVAILABLE_PATH}/{GONE}")
        await store.put(f"{READONLY_PATH}/{GONE}", b"{}", -1)
        with pytest.raises(DecommissionError, match="read-only"):
            await decommission_bookie(store, GONE, timeout_s=1)
        await store.delete(f"{READONLY_PATH}/{GONE}")
        await _ledger(LedgerMetadataStore(store), (GONE, KEPT))
        with pytest.raises(DecommissionError, match="no auto-recovery"):
            await decommission_bookie(store, GONE, timeout_s=1)
        await store.put(AUDITOR_ELECTION_PATH, b"auditor", -1)
        with pytest.raises(DecommissionError, match="timed out .* 1 ledgers still name"):
            await decommission_bookie(store, GONE, timeout_s=0.3, poll_s=0.1)
    finally:
        await store.aclose()


async def test_marks_waits_for_the_copies_then_deletes_the_cookie() -> None:
    store = await _store()
    ml = LedgerMetadataStore(store)
    try:
        await store.put(f"{COOKIES_PATH}/{GONE}", b"cookie", -1)
        await store.put(AUDITOR_ELECTION_PATH, b"auditor", -1)
        on_it = [await _ledger(ml, (GONE, KEPT)) for _ in range(3)]
        elsewhere = await _ledger(ml, (KEPT, OTHER))
        marks = UnderReplicationManager(store)
        seen: list[int] = []

        async def worker() -> None:  # repairs what is marked, as the replication worker does
            while True:
                for lid in await marks.marked():
                    assert await marks.lost_bookies(lid) == [GONE]
                    await ml.update(lid, lambda m: replace(m, ensembles=((0, (OTHER, KEPT)),)))
                    await marks.unmark(lid)
                    seen.append(lid)
                await asyncio.sleep(0.05)

        task = asyncio.create_task(worker())
        try:
            progress: list[int] = []
            done = await decommission_bookie(
                store, GONE, timeout_s=10, poll_s=0.1, progress=lambda left: progress.append(len(left))
            )
        finally:
            task.cancel()
        assert sorted(done.ledgers_rereplicated) == on_it and sorted(set(seen)) == on_it
        assert elsewhere not in seen and progress[0] == 3 and progress[-1] == 0
        assert await store.get(f"{COOKIES_PATH}/{GONE}") is None
    finally:
        await store.aclose()
