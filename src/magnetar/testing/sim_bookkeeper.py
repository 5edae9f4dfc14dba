"""Deterministic simulation of the ledger client against faulty bookies.

Theory of operation (FoundationDB/TigerBeetle style, scaled down): one seed
decides everything -- the cluster shape (bookies, E/Qw/Qa), the fault mix
(message delay and loss, slow messages, fsync latency and slow-fsync
episodes, bookie crashes that lose unsynced adds, partitions between the
writer and bookies) and the workload.  The production ledger client
(:mod:`magnetar.bookkeeper`) runs unmodified over a
:class:`~magnetar.testing.simnet.SimNetwork` to
:class:`~magnetar.testing.fake_bookie.FakeBookie` bookies, with a memory
metadata store, on a virtual-time event loop, so a seed replays exactly.

Actors during the *safety phase*:

* the writer adds entries pipelined (a window of outstanding adds) and rolls
  over to a new ledger when its handle fails (as a managed ledger does);
* a recoverer opens the writer's current ledger with recovery once or twice
  (fencing it), retrying retriable errors;
* a tailing reader opens the current ledger without recovery and follows
  the LAC;
* the fault driver crashes/restarts bookies (and removes/re-adds their
  registration) and cuts/heals links; in some seeds the clients' metadata
  calls fail with ConnectionLoss or are applied with their answer lost;
* in half the seeds, an auto-recovery service (elected auditor + replication
  worker) runs throughout, racing the writer and the recoverer on metadata.

Then the *liveness phase*: faults stop, every bookie is back, and a fresh
client recovers and reads every ledger.  With auto-recovery (and Qa >= 2, so
every acknowledged entry has a second copy) one bookie is first
decommissioned for good: auto-recovery must stop naming it everywhere, and
for Qw == Qa ledgers every entry must then be on every bookie of its write
set.

Invariants (any breach is a :class:`Violation` string in the report):

1. no acknowledged entry is lost: each acked id is <= the ledger's final last
   entry and reads back with the exact bytes the writer pushed for that id;
2. entries are read in order: every id 0..last reads back as the writer's
   data for that id (tailing reads too);
3. the LAC never goes backwards (writer handle and tailing reader);
4. a fenced ledger accepts no adds: no add issued after a recovery finished
   succeeds, no bookie accepted a normal add on a fenced ledger, and the
   recovered last entry never changes afterwards.
"""

from __future__ import annotations

import asyncio
import inspect
from collections import deque
from typing import Any

from magnetar.bookie.api import AVAILABLE_PATH, READONLY_PATH
from magnetar.bookie.entry_format import decode_entry
from magnetar.bookkeeper import api
from magnetar.bookkeeper.autorecovery import AutoRecovery
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.bookkeeper.underreplication import UnderReplicationManager
from magnetar.metadata.api import NotFound
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import Rng
from magnetar.testing.clock import VirtualClock, run_virtual
from magnetar.testing.fake_bookie import FakeBookie
from magnetar.testing.faults import FaultPlan
from magnetar.testing.metadata_faults import FaultInjectingMetadataStore
from magnetar.testing.sim_bookkeeper_model import LedgerRecord, SimReport, SimSettings
from magnetar.testing.sim_storage_bookie import StorageSimBookie
from magnetar.testing.simnet import NetworkFaults, SimBookieClientPool, SimNetwork

RETRIABLE = (
    api.LedgerRecoveryError,
    api.NotEnoughBookiesError,
    api.BKTimeoutError,
    api.MetadataVersionError,
    api.BKMetadataError,
)


class Simulation:
    def __init__(self, seed: int, *, storage: bool = False) -> None:
        self.seed = seed
        self.storage = storage
        self.rng = Rng(seed)
        self.settings = SimSettings.draw(seed, self.rng.fork("settings"), storage)
        self.clock = VirtualClock()
        self.server = MemoryMetadataServer(clock=self.clock)
        self.net = SimNetwork(self.clock, self.rng.fork("net"), NetworkFaults.draw(self.rng.fork("swarm")))
        self.config = ClientConfig(
            add_timeout_ms=400,
            read_timeout_ms=400,
            speculative_read_timeout_ms=100,
            ensemble_change_attempts_max=4,
            ensemble_change_backoff_ms=100,
            bookie_list_refresh_ms=500,
            bookie_quarantine_ms=1_000,
            replication_poll_interval_ms=200,
            open_ledger_rereplication_grace_ms=1_000,
        )
        self.ledgers: dict[int, LedgerRecord] = {}
        self._registered: dict[str, str | None] = {}
        self._metadata_plans: list[FaultPlan] = []
        self.extra_counters: dict[str, int] = {}
        self.violations: list[str] = []
        self.current: int | None = None
        self.safety_over = False
        disk = self.rng.fork("disk")
        slow_p = self.settings.fsync_slow_probability

        def fsync_delay() -> float:
            return disk.uniform(0.0005, 0.002) + (
                disk.uniform(0.05, 0.6) if slow_p and disk.chance(slow_p) else 0.0
            )

        self.bookie_ids = [f"bookie-{i}:3181" for i in range(self.settings.bookies)]
        small = self.settings.small_disk_bytes
        for i, bid in enumerate(self.bookie_ids):
            if storage:
                node: Any = StorageSimBookie(
                    bid,
                    self.clock,
                    self.rng.fork(f"power-{bid}"),
                    device_delay_s=fsync_delay,
                    capacity_bytes=small if small and i == 0 else 1 << 40,
                )
            else:
                node = FakeBookie(bid, self.clock, journal_delay_s=fsync_delay)
            self.net.add_bookie(node)

    def violation(self, text: str) -> None:
        self.violations.append(f"t={self.clock.monotonic():.3f} {text}")

    def client(self, node: str) -> BookKeeperClient:
        store: Any = self.server.session()
        p = self.settings.metadata_fault_probability
        if p and not self.safety_over:
            # ZooKeeper trouble, as seen by a client: calls fail with ConnectionLoss, and
            # writes may be applied with their answer lost (the CAS loops must cope).
            plan = FaultPlan(self.rng.fork(f"metadata-{node}"))
            plan.fail("*", "/ledgers*", probability=p)
            plan.drop("put", "/ledgers*", probability=p)
            self._metadata_plans.append(plan)
            store = FaultInjectingMetadataStore(store, plan, clock=self.clock)
        return BookKeeperClient(
            store, SimBookieClientPool(self.net, node), self.clock, self.rng.fork(node), self.config
        )

    # --- actors ---------------------------------------------------------------------------
    async def writer(self) -> None:
        s = self.settings
        bk = self.client("writer")
        data_rng = self.rng.fork("data")
        pushed_total = 0
        deadline = self.clock.monotonic() + s.safety_s
        try:
            while pushed_total < s.entries_max and self.clock.monotonic() < deadline:
                try:
                    wh = await bk.create_ledger(s.ensemble, s.write_quorum, s.ack_quorum, password=b"sim")
                except RETRIABLE:
                    await self.clock.sleep(0.1)
                    continue
                rec = self.ledgers[wh.ledger_id] = LedgerRecord(wh.ledger_id)
                self.current = wh.ledger_id
                window: deque[asyncio.Task[bool]] = deque()
                failed = False
                last_lac = -1
                while pushed_total < s.entries_max and self.clock.monotonic() < deadline and not failed:
                    eid = wh.last_add_pushed + 1
                    data = b"s%d-l%d-e%d-" % (self.seed, wh.ledger_id, eid) + data_rng.randbytes(
                        data_rng.randint(0, 64)
                    )
                    rec.pushed[eid] = data
                    pushed_total += 1
                    window.append(asyncio.ensure_future(self._add(wh, rec, eid, data)))
                    if wh.last_add_confirmed < last_lac:
                        self.violation(
                            f"ledger {wh.ledger_id}: writer LAC went back {last_lac} -> {wh.last_add_confirmed}"
                        )
                    last_lac = wh.last_add_confirmed
                    while len(window) >= s.window or (window and window[0].done()):
                        failed = not await window.popleft() or failed
                    await self.clock.sleep(data_rng.uniform(0.0, 0.01))
                for t in window:
                    failed = not await t or failed
                if not failed:
                    try:
                        await wh.close()
                        rec.writer_closed_at = wh.last_add_confirmed
                    except api.BKError:
                        pass
        finally:
            await bk.aclose()

    async def _add(self, wh, rec: LedgerRecord, eid: int, data: bytes) -> bool:  # type: ignore[no-untyped-def]
        issued_at = self.clock.monotonic()
        try:
            got = await wh.add_entry(data)
        except api.BKError:
            return False
        if got != eid:
            self.violation(f"ledger {rec.ledger_id}: add of entry {eid} returned id {got}")
        rec.acked.add(eid)
        if wh.last_add_confirmed < eid:
            self.violation(f"ledger {rec.ledger_id}: entry {eid} acked with LAC {wh.last_add_confirmed}")
        if rec.recovered_at is not None and issued_at >= rec.recovered_at:
            self.violation(f"ledger {rec.ledger_id}: add of entry {eid} issued after recovery succeeded")
        if rec.recovered_last is not None and eid > rec.recovered_last:
            self.violation(
                f"ledger {rec.ledger_id}: entry {eid} acked beyond recovered end {rec.recovered_last}"
            )
        return True

    async def recover(self, ledger_id: int, node: str, attempts: int) -> api.ReadHandle | None:
        bk = self.client(node)
        try:
            return await self.recover_with(bk, ledger_id, attempts)
        finally:
            await bk.aclose()

    async def recover_with(
        self, bk: BookKeeperClient, ledger_id: int, attempts: int
    ) -> api.ReadHandle | None:
        for _ in range(attempts):
            try:
                return await bk.open_ledger(ledger_id, password=b"sim", recovery=True)
            except RETRIABLE:
                await self.clock.sleep(0.2)
            except api.BKError as exc:
                if not getattr(exc, "retriable", False):
                    raise
                await self.clock.sleep(0.2)
        return None

    async def recoverer(self) -> None:
        s = self.settings
        r = self.rng.fork("recoverer")
        for i in range(s.recoveries):
            await self.clock.sleep(r.uniform(0.1, s.safety_s / max(1, s.recoveries)))
            lid = self.current
            if lid is None or self.ledgers[lid].recovered_at is not None:
                continue
            rh = await self.recover(lid, f"recoverer-{i}", attempts=10)
            if rh is not None:
                rec = self.ledgers[lid]
                rec.recovered_last = rh.metadata.last_entry_id
                rec.recovered_at = self.clock.monotonic()
                lost = sorted(e for e in rec.acked if e > rec.recovered_last)
                if lost:
                    self.violation(
                        f"ledger {lid}: recovery closed at {rec.recovered_last} but {lost[:5]} were acked"
                    )

    async def tailer(self) -> None:
        bk = self.client("tailer")
        r = self.rng.fork("tailer")
        try:
            while not self.safety_over:
                await self.clock.sleep(r.uniform(0.05, 0.3))
                lid = self.current
                if lid is None:
                    continue
                try:
                    rh = await bk.open_ledger(lid, password=b"sim", recovery=False)
                except api.BKError:
                    continue
                next_id, last_lac = 0, -1
                for _ in range(8):
                    try:
                        lac = await rh.read_last_add_confirmed()
                        if lac < last_lac:
                            self.violation(f"ledger {lid}: tailing LAC went back {last_lac} -> {lac}")
                        last_lac = lac
                        if lac >= next_id:
                            for e in await rh.read(next_id, lac):
                                if e.data != self.ledgers[lid].pushed.get(e.entry_id):
                                    self.violation(
                                        f"ledger {lid}: tail read entry {e.entry_id} has wrong data"
                                    )
                            next_id = lac + 1
                    except api.BKError:
                        pass
                    await self.clock.sleep(r.uniform(0.02, 0.1))
        finally:
            await bk.aclose()

    async def faults(self) -> None:
        s = self.settings
        r = self.rng.fork("faults")
        self.registrar = self.server.session()
        down: dict[str, float] = {}
        cut: dict[str, float] = {}
        for bid in self.bookie_ids:
            await self.register(bid)
        deadline = self.clock.monotonic() + s.safety_s
        while self.clock.monotonic() < deadline:
            await self.clock.sleep(r.uniform(0.02, 0.2))
            now = self.clock.monotonic()
            for bid in [b for b, until in down.items() if until <= now]:
                del down[bid]
                await _maybe_await(self.net.bookies[bid].restart())
            for bid in [b for b, until in cut.items() if until <= now]:
                del cut[bid]
                self.net.heal("writer", bid)
            if len(down) < s.max_down and r.chance(s.crash_probability):
                bid = r.choice([b for b in self.bookie_ids if b not in down])
                self.net.bookies[bid].crash()
                down[bid] = now + r.uniform(0.1, 1.5)
            if r.chance(s.partition_probability):
                bid = r.choice(self.bookie_ids)
                self.net.partition("writer", bid)
                cut[bid] = now + r.uniform(0.05, 1.0)
            for bid in self.bookie_ids:  # crashed: unregistered; full disk: read-only
                await self.register(bid)
        # End of the fault schedule: crashed bookies come back, cut links heal (message
        # loss and slow messages go on until the liveness phase).
        self.net.heal()
        for bid in sorted(down):
            await _maybe_await(self.net.bookies[bid].restart())
        for bid in self.bookie_ids:
            await self.register(bid)

    async def register(self, bid: str, up: bool = True) -> None:
        """Keep ``bid``'s registration as a bookie does: writable, read-only, or gone."""
        node = self.net.bookies[bid]
        want = None if not up or node.down else ("ro" if getattr(node, "read_only", False) else "rw")
        have = self._registered.get(bid)
        if want == have:
            return
        paths = {"rw": f"{AVAILABLE_PATH}/{bid}", "ro": f"{READONLY_PATH}/{bid}"}
        if have is not None:
            try:
                await self.registrar.delete(paths[have])
            except NotFound:
                pass
        if want is not None:
            await self.registrar.put(paths[want], b"", ephemeral=True)
        self._registered[bid] = want

    async def heal_all(self) -> None:
        self.net.enabled = False
        for plan in self._metadata_plans:
            plan.pause()
        self.net.heal()
        for bid in self.bookie_ids:
            b = self.net.bookies[bid]
            if b.down:
                await _maybe_await(b.restart())
            if hasattr(b, "grow_disk"):
                b.grow_disk()
            await self.register(bid)

    # --- auto-recovery ----------------------------------------------------------------------
    async def _start_autorecovery(self) -> AutoRecovery:
        self._autorecovery_client = self.client("autorecovery")
        service = AutoRecovery(self._autorecovery_client, self.server.session(), "autorecovery-0")
        await service.start()
        return service

    async def _decommission_and_wait(self) -> str:
        """One bookie dies for good; wait (bounded) until no metadata names it."""
        victim = self.rng.fork("decommission").choice(self.bookie_ids)
        self.net.bookies[victim].crash()
        await self.register(victim, up=False)
        store = self.server.session()
        marks = UnderReplicationManager(store)
        ledgers = LedgerMetadataStore(store)
        deadline = self.clock.monotonic() + 300.0
        while self.clock.monotonic() < deadline:
            await self.clock.sleep(0.5)
            if await marks.marked():
                continue
            named = False
            for lid in await ledgers.list_ids():
                md, _ = await ledgers.read(lid)
                named = named or any(victim in ens for _, ens in md.ensembles)
            if not named:
                return victim
        self.violation(f"auto-recovery did not repair the ledgers of decommissioned bookie {victim} in 300 s")
        return victim

    async def verify_replicas(self, victim: str) -> None:
        """After auto-recovery: nothing names the dead bookie, and with Qw == Qa every entry of a
        closed ledger is on every bookie of its write set (digest-verified)."""
        pool = SimBookieClientPool(self.net, "replica-checker")
        ledgers = LedgerMetadataStore(self.server.session())
        for lid in sorted(self.ledgers):
            md, _ = await ledgers.read(lid)
            if any(victim in ens for _, ens in md.ensembles):
                self.violation(f"ledger {lid}: still names decommissioned bookie {victim}: {md.ensembles}")
                continue
            if md.write_quorum != md.ack_quorum or not md.is_closed:
                continue
            for e in range(md.last_entry_id + 1):
                for b in md.write_set(e):
                    try:
                        decode_entry(await pool.get(b).read_entry(lid, e), lid, e)
                    except Exception as exc:
                        self.violation(f"ledger {lid} entry {e}: missing/bad on {b} after repair: {exc!r}")
                        return

    # --- final check ----------------------------------------------------------------------
    async def verify(self) -> None:
        for bid in self.bookie_ids:
            for lid, eid, recovery, fenced in self.net.bookies[bid].accepted_adds:
                if fenced and not recovery:
                    self.violation(f"bookie {bid} accepted a normal add of {lid}:{eid} on a fenced ledger")
        checker = self.client("checker")
        try:
            for lid, rec in sorted(self.ledgers.items()):
                await self._verify_ledger(checker, lid, rec)
        finally:
            await checker.aclose()

    async def _verify_ledger(self, checker: BookKeeperClient, lid: int, rec: LedgerRecord) -> None:
        rh = await self.recover_with(checker, lid, attempts=20)
        if rh is None:
            self.violation(f"ledger {lid}: could not be recovered after faults stopped")
            return
        last = rh.metadata.last_entry_id
        if rec.recovered_last is not None and last != rec.recovered_last:
            self.violation(f"ledger {lid}: closed at {rec.recovered_last}, later seen closed at {last}")
        if rec.writer_closed_at is not None and last != rec.writer_closed_at:
            self.violation(f"ledger {lid}: writer closed at {rec.writer_closed_at}, metadata says {last}")
        lost = sorted(e for e in rec.acked if e > last)
        if lost:
            self.violation(f"ledger {lid}: acked entries {lost[:5]} beyond the final last entry {last}")
        if last < 0:
            return
        try:
            entries = await rh.read(0, last)
        except api.BKError as exc:
            self.violation(f"ledger {lid}: reading 0..{last} failed after recovery: {exc!r}")
            return
        for expect, e in enumerate(entries):
            if e.entry_id != expect:
                self.violation(f"ledger {lid}: read returned entry {e.entry_id} at position {expect}")
                break
            if e.data != rec.pushed.get(expect):
                what = "an acked" if expect in rec.acked else "an unacked"
                self.violation(f"ledger {lid}: {what} entry {expect} reads back different bytes")
                break

    async def run(self) -> SimReport:
        if self.storage:
            for bid in self.bookie_ids:
                await self.net.bookies[bid].start()
        try:
            return await self._run()
        finally:
            for bid in self.bookie_ids:
                node = self.net.bookies[bid]
                if hasattr(node, "aclose"):
                    await node.aclose()

    async def _run(self) -> SimReport:
        fault_task = asyncio.ensure_future(self.faults())
        await asyncio.sleep(0)
        service = await self._start_autorecovery() if self.settings.autorecovery else None
        actors = [asyncio.ensure_future(c) for c in (self.writer(), self.recoverer(), self.tailer())]
        await fault_task
        await asyncio.gather(actors[0], actors[1])
        self.safety_over = True
        await actors[2]
        await self.heal_all()
        victim = None
        if service is not None:
            if self.settings.decommission:
                victim = await self._decommission_and_wait()
            await service.aclose()
            await self._autorecovery_client.aclose()
            self.extra_counters["replicated_fragments"] = service.worker.replicated_fragments
            self.extra_counters["replicated_entries"] = service.worker.replicated_entries
        await self.verify()
        if victim is not None:
            await self.verify_replicas(victim)
        counters = dict(self.net.counters)
        counters["crashes"] = sum(b.counters["crashes"] for b in self.net.bookies.values())
        counters.update(self.extra_counters)
        return SimReport(
            self.settings, [self.ledgers[k] for k in sorted(self.ledgers)], self.violations, counters
        )


async def _maybe_await(result: object) -> None:
    if inspect.isawaitable(result):
        await result


def run_seed(seed: int, *, storage: bool = False) -> SimReport:
    """Run one seed on a fresh virtual-time loop (``storage=True``: real bookie storage)."""

    async def main() -> SimReport:
        sim = Simulation(seed, storage=storage)
        try:
            return await sim.run()
        finally:
            await sim.server.aclose()

    return run_virtual(main())
