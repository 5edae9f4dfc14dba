"""A simulated network between ledger clients and bookies, on virtual time.

Theory of operation: every request a client makes to a bookie goes through
a :class:`SimNetwork`.  The network draws, from its own seeded
:class:`~magnetar.runtime.Rng`, a one-way delay for the request and one for
the response, and whether either is lost; it also knows which links are cut
(partitions) and which bookies are down.  A lost message or a cut link looks
to the client like a silent peer (the call hangs until the client's own
timeout, bounded here by ``hang_max_s``); a down bookie refuses the
connection at once (BookieUnavailableError), like a closed port.  A lost
*response* still executes the request on the bookie -- the client cannot
tell the difference, which is exactly the ambiguity real clients face.

All time is the injected clock's (a :class:`~magnetar.testing.clock.VirtualClock`
in simulations), so a seed replays the same schedule of delays, losses and
faults, and hours of simulated timeouts take milliseconds.

:class:`SimBookieClientPool` is a ``BookieClientPool`` for one named client
node; bookies are :class:`~magnetar.testing.fake_bookie.FakeBookie` objects
(with a simulated journal: fsync delay, crash loses unsynced adds) or
:class:`~magnetar.testing.sim_storage_bookie.StorageSimBookie` (the real
bookie storage over a memory disk).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from magnetar.bookie import api as bookie_api
from magnetar.bookie.api import BookieInfo
from magnetar.runtime import Clock, Rng

T = TypeVar("T")


class SimBookieNode(Protocol):
    """What the network needs of a bookie: FakeBookie or StorageSimBookie."""

    bookie_id: str
    down: bool
    epoch: int

    def __getattr__(self, name: str) -> Any: ...


@dataclass(frozen=True)
class NetworkFaults:
    delay_min_s: float = 0.0005
    delay_max_s: float = 0.005
    loss_probability: float = 0.0
    # A message is occasionally much slower than the rest (a GC pause, a retransmit).
    slow_probability: float = 0.0
    slow_delay_s: float = 0.5

    @classmethod
    def draw(cls, rng: Rng) -> NetworkFaults:
        """Swarm testing: the fault mix itself comes from the seed."""
        return cls(
            delay_min_s=0.0002,
            delay_max_s=rng.choice([0.001, 0.005, 0.02]),
            loss_probability=rng.choice([0.0, 0.0, 0.002, 0.01, 0.03]),
            slow_probability=rng.choice([0.0, 0.01, 0.05]),
            slow_delay_s=rng.choice([0.2, 1.0, 3.0]),
        )


class SimNetwork:
    def __init__(
        self, clock: Clock, rng: Rng, faults: NetworkFaults | None = None, hang_max_s: float = 120.0
    ) -> None:
        self.clock = clock
        self.rng = rng
        self.faults = faults or NetworkFaults()
        self.hang_max_s = hang_max_s
        self.bookies: dict[str, Any] = {}
        self._cut: set[tuple[str, str]] = set()
        self.enabled = True  # False: no losses, no slow messages (liveness phase)
        self.counters = {"messages": 0, "lost": 0, "refused": 0, "cut": 0}

    def add_bookie(self, bookie: T) -> T:
        self.bookies[bookie.bookie_id] = bookie
        return bookie

    def partition(self, node: str, bookie_id: str) -> None:
        self._cut.add((node, bookie_id))

    def heal(self, node: str | None = None, bookie_id: str | None = None) -> None:
        self._cut = {
            (n, b)
            for n, b in self._cut
            if not ((node is None or n == node) and (bookie_id is None or b == bookie_id))
        }

    def is_cut(self, node: str, bookie_id: str) -> bool:
        return (node, bookie_id) in self._cut

    def _delay(self) -> float:
        f = self.faults
        d = self.rng.uniform(f.delay_min_s, f.delay_max_s)
        if self.enabled and f.slow_probability and self.rng.chance(f.slow_probability):
            d += f.slow_delay_s
        return d

    def _lost(self) -> bool:
        return (
            self.enabled
            and self.faults.loss_probability > 0
            and self.rng.chance(self.faults.loss_probability)
        )

    async def _hang(self, bookie_id: str) -> None:
        await self.clock.sleep(self.hang_max_s)
        raise bookie_api.BookieTimeoutError("simulated network: no answer", bookie_id)

    async def call(self, node: str, bookie_id: str, op: Callable[[Any], Awaitable[T]]) -> T:
        self.counters["messages"] += 1
        bookie = self.bookies.get(bookie_id)
        if bookie is None:
            raise bookie_api.BookieUnavailableError(f"no route to {bookie_id}", bookie_id)
        request_lost = self._lost()
        await self.clock.sleep(self._delay())
        if self.is_cut(node, bookie_id):
            self.counters["cut"] += 1
            await self._hang(bookie_id)
        if request_lost:
            self.counters["lost"] += 1
            await self._hang(bookie_id)
        if bookie.down:
            self.counters["refused"] += 1
            raise bookie_api.BookieUnavailableError("connection refused", bookie_id)
        epoch = bookie.epoch
        try:
            result = await op(bookie)
        finally:
            response_lost = self._lost()
        await self.clock.sleep(self._delay())
        if bookie.epoch != epoch:
            # the bookie crashed after answering but before the answer left: connection reset
            raise bookie_api.BookieUnavailableError("connection reset", bookie_id)
        if response_lost or self.is_cut(node, bookie_id):
            self.counters["lost"] += 1
            await self._hang(bookie_id)
        return result


class SimBookieClient:
    def __init__(self, net: SimNetwork, node: str, bookie_id: str) -> None:
        self._net = net
        self._node = node
        self._id = bookie_id

    @property
    def bookie_id(self) -> str:
        return self._id

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        await self._net.call(
            self._node,
            self._id,
            lambda b: b.add_entry(ledger_id, entry_id, master_key, entry, recovery=recovery),
        )

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        return await self._net.call(
            self._node,
            self._id,
            lambda b: b.read_entry(ledger_id, entry_id, fence=fence, master_key=master_key),
        )

    async def read_lac(self, ledger_id: int) -> int:
        return await self._net.call(self._node, self._id, lambda b: b.read_lac(ledger_id))

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        return await self._net.call(
            self._node, self._id, lambda b: b.wait_lac(ledger_id, previous_lac, timeout_ms)
        )

    async def get_info(self) -> BookieInfo:
        return await self._net.call(self._node, self._id, lambda b: b.get_info())

    async def aclose(self) -> None:
        return None


class SimBookieClientPool:
    """The bookies as seen from one client node."""

    def __init__(self, net: SimNetwork, node: str) -> None:
        self._net = net
        self.node = node

    def get(self, bookie_id: str) -> SimBookieClient:
        return SimBookieClient(self._net, self.node, bookie_id)

    async def aclose(self) -> None:
        return None
