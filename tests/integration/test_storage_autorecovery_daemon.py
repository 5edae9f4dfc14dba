"""Auto-recovery as an operator runs it: nobody calls the auditor, the processes heal themselves.

Real processes only: a ZooKeeper, four ``magnetar bookie`` processes with
``autoRecoveryDaemonEnabled=true`` (each runs an auditor candidate and a
replication worker; one auditor is elected) and, in the second test, one
``magnetar autorecovery`` process next to plain bookies.  The test writes
ledgers at E=3/Qw=2/Qa=2 with its own ledger client, closes them, and kills one
bookie with ``kill -9``.  It then only WATCHES the metadata store: the dead
bookie's session expires (``zkTimeout``), the auditor marks its ledgers
under-replicated once ``lostBookieRecoveryDelay`` has passed, and a worker
copies the fragments to a live bookie and rewrites the ensembles.  At the end
no ledger metadata names the dead bookie, and every entry is read directly from
each of the two bookies its write set names (digest and bytes checked).
"""

from __future__ import annotations

import asyncio
import sys
import time

import pytest
from bookie_proc import BookieProcess, free_port, start_bookie

from magnetar.bookie.api import AVAILABLE_PATH
from magnetar.bookie.entry_format import decode_entry
from magnetar.bookie.wire_client import WireBookieClient, WireBookieClientPool
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.bookkeeper.underreplication import UnderReplicationManager
from magnetar.metadata.factory import create_metadata_store
from magnetar.runtime import RealClock, Rng
from magnetar.testing.zookeeper import zookeeper_server_fixture  # noqa: F401 - fixture

pytestmark = pytest.mark.zookeeper

BOOKIE_CONF = """journalMaxGroupWaitMSec=1
flushInterval=500
zkTimeout=3000
lostBookieRecoveryDelay=1
auditorPeriodicCheckInterval=60
"""
LEDGERS = 3
ENTRIES = 150
WRITER = ClientConfig(add_timeout_ms=3_000, read_timeout_ms=3_000, bookie_list_refresh_ms=500)


async def _wait_until(predicate, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if await predicate():
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


async def _start_autorecovery(meta_url: str, conf: str, log_path: str) -> asyncio.subprocess.Process:
    args = [sys.executable, "-m", "magnetar.cli.main", "autorecovery", "--metadata-url", meta_url]
    args += ["--config", conf, "--id", "autorecovery-process"]
    log = _open_log(log_path)
    try:
        proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE, stderr=log)
    finally:
        log.close()
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    assert line.decode().startswith("magnetar autorecovery ready:"), line
    return proc


@pytest.mark.parametrize("mode", ["in-bookie", "process"])
async def test_killed_bookie_is_rereplicated_without_help(tmp_path, zookeeper_server, mode) -> None:  # type: ignore[no-untyped-def]
    meta_url = f"{zookeeper_server.url}/autorecovery-{mode}-{time.time_ns()}"
    conf = tmp_path / "bookie.conf"
    daemon = "true" if mode == "in-bookie" else "false"
    conf.write_text(BOOKIE_CONF + f"autoRecoveryDaemonEnabled={daemon}\n")
    bookies: list[BookieProcess] = []
    ar_proc = None
    store = await create_metadata_store(meta_url, clock=RealClock(), session_timeout_ms=4_000)
    pool = WireBookieClientPool(timeout_ms=5_000, connect_timeout_ms=1_000)
    bk = BookKeeperClient(store, pool, RealClock(), Rng(3), WRITER)
    direct: dict[str, WireBookieClient] = {}
    try:
        for i in range(4):
            bookies.append(
                await start_bookie(str(tmp_path / f"b{i}"), free_port(), meta_url, config=str(conf))
            )
        if mode == "process":
            ar_proc = await _start_autorecovery(meta_url, str(conf), str(tmp_path / "autorecovery.log"))
        await _wait_until(lambda: _count_available(store, 4), 30, "four bookies registered")

        rng = Rng(5)
        written: dict[int, list[bytes]] = {}
        for _ in range(LEDGERS):
            h = await bk.create_ledger(3, 2, 2)
            data = [
                b"L%d-E%d-" % (h.ledger_id, e) + rng.randbytes(rng.randint(10, 3000)) for e in range(ENTRIES)
            ]
            await asyncio.gather(*(h.add_entry(d) for d in data))
            await h.close()
            written[h.ledger_id] = data
        first = await bk.get_ledger_metadata(next(iter(written)))
        victim_id = first.ensembles[0][1][0]
        victim = next(b for b in bookies if b.bookie_id == victim_id)
        on_victim = [
            lid for lid in written if victim_id in (await bk.get_ledger_metadata(lid)).ensembles[0][1]
        ]
        assert on_victim

        await victim.kill9()  # no goodbye: its registration goes only when its session expires

        marks = UnderReplicationManager(store)

        async def healed() -> bool:
            if await marks.marked():
                return False
            for lid in written:
                md = await bk.get_ledger_metadata(lid)
                if any(victim_id in ens for _, ens in md.ensembles):
                    return False
            return True

        await _wait_until(
            healed, 90, "the auditor to mark and a worker to re-replicate the dead bookie's ledgers"
        )
        # The marks come and go quickly; the auditor's log says which ledgers it marked.
        logs = [b.log_path for b in bookies] + ([str(tmp_path / "autorecovery.log")] if ar_proc else [])
        text = "".join(_read(p) for p in logs)
        for lid in on_victim:
            assert f"ledger {lid} is under-replicated (lost ['{victim_id}'])" in text, lid
            assert f"replicated ledger {lid} fragment" in text, lid

        for lid, data in written.items():
            md = await bk.get_ledger_metadata(lid)
            assert md.is_closed and md.last_entry_id == ENTRIES - 1
            for e in range(ENTRIES):
                replicas = md.write_set(e)
                assert len(set(replicas)) == 2 and victim_id not in replicas, (lid, e, replicas)
                for b in replicas:
                    if b not in direct:
                        host, port = b.rsplit(":", 1)
                        direct[b] = WireBookieClient(b, host, int(port), timeout_ms=5_000)
                    _, payload = decode_entry(await direct[b].read_entry(lid, e), lid, e)
                    assert payload == data[e], f"ledger {lid} entry {e} on {b}"
        # and through the ledger client, with the dead bookie gone for good
        for lid, data in written.items():
            rh = await bk.open_ledger(lid)
            assert [x.data for x in await rh.read(0, ENTRIES - 1)] == data
    finally:
        for c in direct.values():
            await c.aclose()
        await bk.aclose()
        await pool.aclose()
        await store.aclose()
        if ar_proc is not None and ar_proc.returncode is None:
            ar_proc.terminate()
            assert await asyncio.wait_for(ar_proc.wait(), 30) == 0
        for b in bookies:
            if b.proc.returncode is None:
                assert await b.terminate() == 0, _read(b.log_path)[-2000:]


async def _count_available(store, n: int) -> bool:  # type: ignore[no-untyped-def]
    names = [c for c in await store.children(AVAILABLE_PATH) if c != "readonly"]
    return len(names) >= n


def _open_log(path: str):  # type: ignore[no-untyped-def]
    return open(path, "ab")  # noqa: SIM115 - handed to the child, closed right after the spawn


def _read(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")
