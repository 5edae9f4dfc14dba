"""Deterministic simulation of bundle ownership under broker crashes, pauses and session expiries.

Theory of operation: three simulated brokers share one in-memory metadata
service (:class:`~magnetar.metadata.memory.MemoryMetadataServer`, one session
each) and five fake bookies on a simulated network; each broker runs the real
:class:`~magnetar.broker.ownership.cluster.ClusterNamespaceService` (registry,
election, bundle locks, lookup, placement) and a real managed-ledger factory
over the real BookKeeper client.  Everything runs on a virtual-time loop, so a
seed replays exactly.

Clients pick a topic and a random broker, follow lookups (``Redirect`` ->
the owner, copying ``authoritative``) and write through the owner: the
owner's namespace service checks ownership, opens the managed ledger (with
recovery, which fences the previous owner's last ledger), adds the entry.

Faults (their mix drawn from the seed): a broker *crashes* (its session
expires; the process never runs again: its pending receipts are lost), a
broker *pauses* (its gate closes: requests it was serving stop mid-way, in
particular between its ownership check and its add -- the stale-owner race;
while paused its session may expire and another broker takes its bundles),
a broker's session *expires* while it runs (``reconnect`` policy: it loses its
bundles, then registers again).  A liveness phase follows: faults stop, paused
brokers resume, and every topic must take a write again.

Checked: every ledger received acknowledged adds from at most one broker
(never two owners writing one ledger); every acknowledged entry is read back,
at its position, by a fresh broker opening each managed ledger at the end; no
entry is in a log twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from magnetar.bookie.api import AVAILABLE_PATH
from magnetar.bookkeeper.client import BookKeeperClient
from magnetar.bookkeeper.config import ClientConfig
from magnetar.broker import errors
from magnetar.broker.ownership.bundles import even_boundaries, to_hex
from magnetar.broker.ownership.cluster import ClusterNamespaceService
from magnetar.broker.service.names import TopicRef, parse_topic
from magnetar.managed_ledger.api import ManagedLedgerConfig, ManagedLedgerError, Position
from magnetar.managed_ledger.factory import ManagedLedgerFactoryImpl
from magnetar.managed_ledger.state import MLState
from magnetar.metadata.api import MetadataError
from magnetar.metadata.memory import MemoryMetadataServer
from magnetar.runtime import Rng, TaskSupervisor, wait_for
from magnetar.testing.clock import VirtualClock, run_virtual
from magnetar.testing.fake_bookie import FakeBookie
from magnetar.testing.simnet import NetworkFaults, SimBookieClientPool, SimNetwork

log = logging.getLogger(__name__)

NAMESPACE = "sim/ns"
BK_CONFIG = ClientConfig(
    add_timeout_ms=400,
    read_timeout_ms=400,
    speculative_read_timeout_ms=100,
    ensemble_change_attempts_max=4,
    ensemble_change_backoff_ms=100,
    bookie_list_refresh_ms=500,
    bookie_quarantine_ms=1_000,
)
OP_TIMEOUT_S = 5.0
FAILURES = (errors.BrokerError, ManagedLedgerError, MetadataError, TimeoutError)


class _Namespaces:
    def __init__(self, bundles: int) -> None:
        self._policies = {"bundles": {"boundaries": to_hex(even_boundaries(bundles)), "numBundles": bundles}}

    async def get(self, namespace: str, *, fresh: bool = False) -> dict | None:
        return self._policies if namespace == NAMESPACE else None


class _Topics:
    """The broker's loaded topics: one managed ledger per topic it serves."""

    def __init__(self, broker: SimBroker) -> None:
        self._b = broker
        self._open: dict[str, tuple[TopicRef, Any]] = {}

    def loaded(self) -> list[Any]:
        return [SimpleNamespace(ref=ref) for ref, _ in self._open.values()]

    async def unload(self, ref: TopicRef) -> bool:
        if self._b.dead:
            return False  # a crashed process does nothing any more
        await self._b.wait_running()  # a paused process acts on nothing, its own unloads included
        got = self._open.pop(ref.full_name, None)
        if got is None:
            return False
        try:
            await got[1].close()
        except ManagedLedgerError:
            pass  # fenced: the next owner has it
        return True

    async def ledger_of(self, ref: TopicRef) -> Any:
        await self._b.ns.check_owned(ref)
        got = self._open.get(ref.full_name)
        if got is not None and got[1].state in (MLState.CLOSED, MLState.FENCED):
            got = None  # closed under us (an unload raced this open): open it afresh
        if got is None:
            ml = await self._b.factory.open(ref.managed_ledger_name)
            self._open[ref.full_name] = (ref, ml)
            return ml
        return got[1]


async def _accepts(sim: OwnershipSim, url: str) -> bool:
    return any(b.broker_service_url() == url and not b.dead for b in sim.brokers)


class SimBroker:
    def __init__(self, sim: OwnershipSim, name: str) -> None:
        self.name = name
        self.clock = sim.clock
        self.config = SimpleNamespace(default_number_of_namespace_bundles=4, advertised_address=name)
        self.resources = SimpleNamespace(namespaces=sim.namespaces)
        self.metadata_store = sim.server.session()
        self.supervisor = TaskSupervisor(f"sim:{name}")
        bk = BookKeeperClient(
            self.metadata_store, SimBookieClientPool(sim.net, name), sim.clock, sim.rng.fork(name), BK_CONFIG
        )
        self.factory = ManagedLedgerFactoryImpl(
            self.metadata_store, bk, sim.clock, sim.ml_config, check_interval_s=0
        )
        self.topics = _Topics(self)
        self.transactions = None  # BrokerFace: no transaction coordinators here
        self.ns = ClusterNamespaceService(self)
        self.running = asyncio.Event()
        self.running.set()
        self.dead = False
        # The dead-owner probe (ownership.dead_owner): a crashed broker refuses connections,
        # a paused one still accepts them (the kernel does) -- no real socket in a simulation.
        self.ns.dead_owners.probe = lambda url: _accepts(sim, url)
        self._closers = [self.factory.aclose, bk.aclose]

    # BrokerFace ------------------------------------------------------------------------------
    def broker_service_url(self, listener: str | None = None) -> str:
        return f"pulsar://{self.name}:6650"

    def broker_service_url_tls(self) -> str | None:
        return None

    def web_service_url(self) -> str:
        return f"http://{self.name}:8080"

    def web_service_url_tls(self) -> str | None:
        return None

    # the process -----------------------------------------------------------------------------
    async def wait_running(self) -> None:
        await wait_for(self.clock, self.running.wait(), OP_TIMEOUT_S)

    async def aclose(self) -> None:
        for close in [self.ns.aclose, self.supervisor.aclose, *self._closers]:
            try:
                await wait_for(self.clock, close(), OP_TIMEOUT_S)
            except Exception:  # noqa: BLE001 -- teardown of crashed or fenced brokers
                pass


@dataclass
class OwnershipReport:
    seed: int
    settings: dict[str, Any]
    acked: int = 0
    failed: int = 0
    counters: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def describe(self) -> str:
        return (
            f"seed {self.seed} settings {self.settings} acked {self.acked} failed {self.failed} "
            f"counters {dict(self.counters)} violations {self.violations[:5]}\n"
            f"replay: MAGNETAR_SIM_SEED={self.seed} .venv/bin/python -m pytest -q "
            "tests/simulation/test_own_simulation.py::test_replay_seed -s"
        )


class OwnershipSim:
    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.rng = Rng(seed)
        swarm = self.rng.fork("swarm")
        self.settings = {
            "crash_p": swarm.choice([0.0, 0.05, 0.15]),
            "pause_p": swarm.choice([0.0, 0.1, 0.25]),
            "expire_p": swarm.choice([0.0, 0.1, 0.25]),
            "topics": swarm.choice([3, 8]),
            "max_entries_per_ledger": swarm.choice([5, 50]),
        }
        self.clock = VirtualClock()
        self.server = MemoryMetadataServer(clock=self.clock)
        self.net = SimNetwork(self.clock, self.rng.fork("net"), NetworkFaults())
        self.bookie_ids = [f"bookie-{i}:3181" for i in range(5)]
        for bid in self.bookie_ids:
            self.net.add_bookie(FakeBookie(bid, self.clock, journal_delay_s=0.001))
        self.ml_config = ManagedLedgerConfig(
            ensemble_size=3,
            write_quorum=2,
            ack_quorum=2,
            max_entries_per_ledger=self.settings["max_entries_per_ledger"],
            min_ledger_rollover_time_ms=0,
            add_entry_timeout_ms=5_000,
            retention_time_ms=-1,  # keep everything: the end reads every acknowledged entry back
            retention_size_bytes=-1,
        )
        self.namespaces = _Namespaces(4)
        self.topics = [parse_topic(f"persistent://{NAMESPACE}/t{i}") for i in range(self.settings["topics"])]
        self.brokers: list[SimBroker] = []
        self.report = OwnershipReport(seed, self.settings)
        self.acked: list[tuple[str, Position, bytes, str]] = []
        self.safety_over = False
        self.last_failure = ""

    # -- clients ---------------------------------------------------------------------------------
    def _live(self) -> list[SimBroker]:
        return [b for b in self.brokers if not b.dead]

    async def _route(self, entry: SimBroker, ref: TopicRef) -> SimBroker:
        by_url = {b.web_service_url(): b for b in self.brokers}
        broker, authoritative = entry, False
        for _hop in range(4):
            await broker.wait_running()
            answer = await wait_for(self.clock, broker.ns.lookup(ref, authoritative), OP_TIMEOUT_S)
            if not answer.redirect:
                return broker
            self.report.counters["redirects"] += 1
            broker, authoritative = by_url[answer.owner.http_url], answer.authoritative
            if broker.dead:
                raise TimeoutError(f"redirected to {broker.name}, which is down")
        raise errors.ServiceNotReadyError("too many redirects")

    async def write(self, entry: SimBroker, ref: TopicRef, payload: bytes) -> bool:
        try:
            target = await self._route(entry, ref)
            await target.wait_running()
            ml = await wait_for(self.clock, target.topics.ledger_of(ref), OP_TIMEOUT_S)
            await target.wait_running()  # paused here: the stale-owner race
            pos = await wait_for(self.clock, ml.add_entry(payload), OP_TIMEOUT_S)
        except FAILURES as exc:
            self.report.failed += 1
            self.last_failure = f"{type(exc).__name__}: {exc}"
            self.report.counters[f"fail:{type(exc).__name__}"] += 1
            return False
        if target.dead or not target.running.is_set():
            # The process died (or froze) before its receipt left: the client never hears of it.
            self.report.counters["receipts_lost"] += 1
            return False
        self.acked.append((ref.full_name, pos, payload, target.name))
        return True

    async def client(self, cid: int) -> None:
        r = self.rng.fork(f"client-{cid}")
        n = 0
        while not self.safety_over:
            live = self._live()
            ref = r.choice(self.topics)
            await self.write(r.choice(live), ref, b"c%d-%06d" % (cid, n))
            n += 1
            await self.clock.sleep(r.uniform(0.005, 0.05))

    # -- faults ----------------------------------------------------------------------------------
    async def faults(self) -> None:
        r = self.rng.fork("faults")
        s = self.settings
        deadline = self.clock.monotonic() + r.uniform(3.0, 6.0)
        crashed = 0
        while self.clock.monotonic() < deadline:
            await self.clock.sleep(r.uniform(0.1, 0.4))
            running = [b for b in self._live() if b.running.is_set()]
            if len(running) < 2:
                continue
            victim = r.choice(running)
            if crashed == 0 and r.chance(s["crash_p"]):
                crashed += 1
                self.report.counters["crashes"] += 1
                victim.dead = True
                victim.running.clear()
                # Its session ends (the service expires it) and the process never opens another.
                self._expire_and_close(victim)
            elif r.chance(s["pause_p"]):
                self.report.counters["pauses"] += 1
                victim.running.clear()
                pause_s = r.uniform(0.2, 1.5)
                if r.chance(0.7):  # longer than its session timeout: the service expires it
                    self.clock.call_later(pause_s / 2, lambda v=victim: self._expire(v))
                self.clock.call_later(pause_s, victim.running.set)
            elif r.chance(s["expire_p"]):
                self._expire(victim)
        for b in self._live():
            b.running.set()
        self.safety_over = True

    def _expire_and_close(self, broker: SimBroker) -> None:
        store = broker.metadata_store
        self.server.expire_session(store.session_id)
        broker.supervisor.spawn(store.aclose(), name="crashed-store")

    def _expire(self, broker: SimBroker) -> None:
        if broker.dead:
            return
        self.report.counters["expiries"] += 1
        self.server.expire_session(broker.metadata_store.session_id)

    # -- run and check ---------------------------------------------------------------------------
    async def run(self) -> None:
        registrar = self.server.session()
        for bid in self.bookie_ids:
            await registrar.put(f"{AVAILABLE_PATH}/{bid}", b"", ephemeral=True)
        self.brokers = [SimBroker(self, f"broker-{i}") for i in range(3)]
        for b in self.brokers:
            await b.ns.start()
        await asyncio.gather(*(self.client(i) for i in range(4)), self.faults())
        await self.clock.sleep(1.0)  # re-registrations after the last expiry settle
        for ref in self.topics:  # liveness: every topic takes a write again
            for attempt in range(20):
                if await self.write(
                    self._live()[attempt % len(self._live())], ref, b"final-" + ref.local_name.encode()
                ):
                    break
                await self.clock.sleep(0.5)
            else:
                self.report.violations.append(
                    f"no write to {ref.full_name} succeeded after the faults ({self.last_failure})"
                )
        self.report.acked = len(self.acked)
        self._check_single_writer()
        verifier = SimBroker(self, "verifier")
        self.brokers.append(verifier)
        await self._check_readable(verifier)
        for b in self.brokers:
            await b.aclose()
        await self.server.aclose()

    def _check_single_writer(self) -> None:
        writers: dict[int, set[str]] = defaultdict(set)
        for _, pos, _, broker in self.acked:
            writers[pos.ledger_id].add(broker)
        for lid, names in sorted(writers.items()):
            if len(names) > 1:
                self.report.violations.append(f"ledger {lid} took acknowledged adds from {sorted(names)}")

    async def _check_readable(self, verifier: SimBroker) -> None:
        for ref in self.topics:
            ml = await verifier.factory.open(ref.managed_ledger_name)
            reader = await ml.new_non_durable_cursor(Position.EARLIEST)
            log_entries: dict[Position, bytes] = {}
            while batch := await reader.read_entries(500):
                for e in batch:
                    log_entries[e.position] = e.data
            datas = list(log_entries.values())
            if len(datas) != len(set(datas)):
                self.report.violations.append(f"{ref.full_name}: an entry is in the log twice")
            for topic, pos, payload, broker in self.acked:
                if topic == ref.full_name and log_entries.get(pos) != payload:
                    self.report.violations.append(
                        f"{topic}: acknowledged {payload!r} at {pos} (by {broker}) is not readable"
                    )


def run_seed(seed: int) -> OwnershipReport:
    async def main() -> OwnershipReport:
        sim = OwnershipSim(seed)
        await sim.run()
        return sim.report

    return run_virtual(main())
