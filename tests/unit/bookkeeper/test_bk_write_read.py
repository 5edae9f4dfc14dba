"""Write handle and reads over fake bookies: quorums, ordering, LAC, close, reads."""

from __future__ import annotations

import asyncio

import pytest
from bk_helpers import make_env

from magnetar.bookkeeper import api
from magnetar.bookkeeper.errors import UnauthorizedError
from magnetar.bookkeeper.metadata import from_json, to_json
from magnetar.testing.clock import virtual_time


@virtual_time
async def test_pipelined_adds_complete_in_order_on_their_write_sets() -> None:
    env = await make_env(5)
    wh = await env.bk.create_ledger(3, 2, 2)
    datas = [f"entry-{i}".encode() * (i + 1) for i in range(20)]
    ids = await asyncio.gather(*(wh.add_entry(d) for d in datas))
    assert ids == list(range(20))
    assert wh.last_add_confirmed == 19 and wh.last_add_pushed == 19
    assert wh.length == sum(len(d) for d in datas)
    for e in range(20):
        assert env.holders(wh.ledger_id, e) == sorted(wh.metadata.write_set(e))
    entries = await wh.read(0, 19)
    assert [x.entry_id for x in entries] == list(range(20))
    assert [x.data for x in entries] == datas


@virtual_time
async def test_completion_order_is_call_order_even_when_bookies_answer_out_of_order() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 3, 2)
    # entry 0's write set is all three; make the first two slow so later entries ack first
    slow = wh.metadata.ensemble_for(0)
    env.pool[slow[0]].add_delay_s = 0.3
    env.pool[slow[1]].add_delay_s = 0.3
    first = asyncio.ensure_future(wh.add_entry(b"a"))
    await asyncio.sleep(0.01)
    env.pool[slow[0]].add_delay_s = 0.0
    env.pool[slow[1]].add_delay_s = 0.0
    done_order: list[int] = []
    second = asyncio.ensure_future(wh.add_entry(b"b"))
    second.add_done_callback(lambda f: done_order.append(f.result()))
    first.add_done_callback(lambda f: done_order.append(f.result()))
    await asyncio.gather(first, second)
    assert done_order == [0, 1]


def test_quorum_sizes_are_validated() -> None:
    async def main() -> None:
        env = await make_env(3)
        for e, qw, qa in ((3, 2, 3), (2, 3, 2), (3, 3, 0)):
            with pytest.raises(ValueError):
                await env.bk.create_ledger(e, qw, qa)
        with pytest.raises(api.NotEnoughBookiesError):
            await env.bk.create_ledger(4, 2, 2)

    virtual_time(main)()


@virtual_time
async def test_close_records_last_entry_and_length_and_refuses_adds() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 2, 2, password=b"pw", custom_metadata={"k": b"v"})
    for i in range(5):
        await wh.add_entry(bytes([i]) * 10)
    await wh.close()
    await wh.close()  # idempotent
    md = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert md.state is api.LedgerState.CLOSED
    assert (md.last_entry_id, md.length) == (4, 50)
    assert md.custom_metadata == {"k": b"v"}
    assert from_json(to_json(md)) == md
    with pytest.raises(api.LedgerClosedError):
        await wh.add_entry(b"late")
    rh = await env.client().open_ledger(wh.ledger_id, password=b"pw", recovery=False)
    assert rh.last_add_confirmed == 4 and rh.length == 50
    assert [e.data for e in await rh.read(0, 4)] == [bytes([i]) * 10 for i in range(5)]
    with pytest.raises(api.LedgerClosedError):
        await rh.read(3, 5)
    with pytest.raises(UnauthorizedError):
        await env.client().open_ledger(wh.ledger_id, password=b"wrong", recovery=False)


@virtual_time
async def test_open_without_recovery_reads_up_to_the_piggybacked_lac() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 3, 2)
    for i in range(10):
        await wh.add_entry(b"x%d" % i)
    reader = await env.client().open_ledger(wh.ledger_id, recovery=False)
    # the last entry carried LAC 8: the bookies know 8 is confirmed, not 9 (yet)
    assert reader.last_add_confirmed == 8
    assert [e.data for e in await reader.read(0, 8)] == [b"x%d" % i for i in range(9)]
    with pytest.raises(api.NoSuchEntryError):
        await reader.read(0, 9)
    await wh.add_entry(b"x10")
    assert await reader.read_last_add_confirmed() == 9
    md = await env.bk.get_ledger_metadata(wh.ledger_id)
    assert md.state is api.LedgerState.OPEN  # opening without recovery does not fence or close
    assert await wh.add_entry(b"x11") == 11


@virtual_time
async def test_delete_and_list_ledgers() -> None:
    env = await make_env(3)
    ids = []
    for _ in range(3):
        wh = await env.bk.create_ledger(2, 2, 1)
        ids.append(wh.ledger_id)
    assert len(set(ids)) == 3
    assert list(await env.bk.list_ledgers()) == sorted(ids)
    await env.bk.delete_ledger(ids[1])
    await env.bk.delete_ledger(ids[1])  # missing is not an error
    assert list(await env.bk.list_ledgers()) == [ids[0], ids[2]]
    with pytest.raises(api.NoSuchLedgerError):
        await env.bk.get_ledger_metadata(ids[1])
    with pytest.raises(api.NoSuchLedgerError):
        await env.bk.open_ledger(ids[1])


@virtual_time
async def test_ledger_ids_are_unique_across_clients() -> None:
    env = await make_env(3)
    clients = [env.bk, env.client(3), env.client(4)]
    handles = await asyncio.gather(*(c.create_ledger(2, 2, 2) for c in clients for _ in range(5)))
    ids = [h.ledger_id for h in handles]
    assert len(set(ids)) == 15


@virtual_time
async def test_digest_mismatch_falls_back_to_another_replica() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 3, 3)
    await wh.add_entry(b"payload-0")
    first = wh.metadata.write_set(0)[0]
    env.pool[first].corrupt(wh.ledger_id, 0)
    assert [e.data for e in await wh.read(0, 0)] == [b"payload-0"]
    for b in wh.metadata.write_set(0):
        env.pool[b].corrupt(wh.ledger_id, 0) if b != first else None
    with pytest.raises(api.DigestMismatchError):
        await wh.read(0, 0)


@virtual_time
async def test_speculative_read_asks_the_next_replica_after_the_delay() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 2, 2)
    await wh.add_entry(b"e0")
    slow = wh.metadata.write_set(0)[0]
    env.pool[slow].read_delay_s = 0.9  # below the read timeout: only speculation makes it fast
    t0 = env.clock.monotonic()
    assert [e.data for e in await wh.read(0, 0)] == [b"e0"]
    elapsed = env.clock.monotonic() - t0
    assert 0.19 <= elapsed < 0.25  # speculative_read_timeout_ms=200 in virtual time


@virtual_time
async def test_read_of_missing_entry_everywhere_is_no_such_entry() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 2, 2)
    await wh.add_entry(b"e0")
    for b in wh.metadata.write_set(0):
        env.pool[b].ledgers[wh.ledger_id].entries.pop(0)
    with pytest.raises(api.NoSuchEntryError):
        await wh.read(0, 0)


@virtual_time
async def test_closing_the_client_fails_pending_adds_instead_of_hanging() -> None:
    env = await make_env(3)
    wh = await env.bk.create_ledger(3, 3, 3)
    for b in env.pool.bookies.values():
        b.add_delay_s = 0.5
    pending = asyncio.ensure_future(wh.add_entry(b"in flight"))
    await asyncio.sleep(0.1)
    await env.bk.aclose()
    with pytest.raises(api.BKClosedError):
        await pending
    with pytest.raises(api.BKClosedError):
        await wh.add_entry(b"after")
    with pytest.raises(api.BKClosedError):
        await env.bk.create_ledger(3, 3, 3)


@virtual_time
async def test_metadata_store_failures_surface_as_bk_errors() -> None:
    env = await make_env(3)
    store = env.server.session()
    from magnetar.bookkeeper.client import BookKeeperClient
    from magnetar.runtime import Rng

    bk = BookKeeperClient(store, env.pool, env.clock, Rng(3), env.config)
    await store.aclose()  # every later store call raises MetadataStoreClosed
    with pytest.raises(api.BKMetadataError) as info:
        await bk.create_ledger(3, 2, 2)
    assert info.value.retriable


@virtual_time
async def test_a_tailing_reader_follows_ensemble_changes_and_the_close() -> None:
    env = await make_env(5)
    wh = await env.bk.create_ledger(3, 2, 2)
    for i in range(5):
        await wh.add_entry(b"a%d" % i)
    reader = await env.client().open_ledger(wh.ledger_id, recovery=False)
    assert reader.last_add_confirmed == 3
    env.pool[wh.metadata.ensembles[0][1][0]].crash()
    for i in range(5, 20):
        await wh.add_entry(b"a%d" % i)
    assert len(wh.metadata.ensembles) == 2
    assert await reader.read_last_add_confirmed() == 18
    # entries after the ensemble change are found although the reader opened before it
    assert [e.data for e in await reader.read(0, 18)] == [b"a%d" % i for i in range(19)]
    await wh.close()
    # the final LAC never reaches the bookies; the reader learns it from the metadata
    assert await reader.read_last_add_confirmed() == 19
    assert reader.metadata.is_closed
    assert (await reader.read(19, 19))[0].data == b"a19"
