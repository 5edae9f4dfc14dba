"""The bookie process: storage + cookie/registration + server + GC + disk checks.

Theory of operation: :class:`Bookie` is the composition of one bookie.  It is
given a config and a metadata store (the composition root chose the backend)
and, optionally, a disk, clock and rng (tests and the simulator inject
theirs).  ``start`` runs, in order:

1. bind the TCP server (with port 0 the bookie id is taken from the bound
   port; until the storage is open requests get BookieUnavailableError);
2. check or create the cookie -- a mismatch raises CookieMismatchError and
   the bookie does not start;
3. open the storage (journal replay);
4. start the disk checker and the garbage collector timers;
5. register under the available (or read-only) path.

Storage state changes (disk full, journal broken, space freed) re-register
the bookie under the matching path.  ``stop`` undoes it in reverse and is
idempotent; its unregistering waits at most UNREGISTER_TIMEOUT_S (a bookie whose
ZooKeeper is gone still stops promptly on SIGTERM).  Standalone does not need the server: ``serve=False`` skips it
and ``local_client()`` gives the in-process BookieClient.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from magnetar.bookie.api import BookieInfo, BookieUnavailableError
from magnetar.bookie.config import BookieConfig
from magnetar.bookie.disk import Disk, RealDisk
from magnetar.bookie.disk_check import DiskChecker
from magnetar.bookie.gc import GarbageCollector
from magnetar.bookie.index import IndexStore
from magnetar.bookie.local_client import LocalBookieClient
from magnetar.bookie.registration import Registration
from magnetar.bookie.server import BookieServer
from magnetar.bookie.storage import LedgerStorage, StorageState
from magnetar.metadata.api import MetadataStore, SessionEvent
from magnetar.runtime import BlockingExecutor, Clock, RealClock, Rng, TaskSupervisor
from magnetar.runtime.clock import wait_for

log = logging.getLogger(__name__)
UNREGISTER_TIMEOUT_S = 5.0  # how long stop() waits for the metadata store to drop the registration


class _Service:
    """The server's view of the bookie: storage operations plus get_info."""

    def __init__(self, bookie: Bookie) -> None:
        self._bookie = bookie

    def _storage(self) -> LedgerStorage:
        st = self._bookie.storage
        if st.state not in (StorageState.WRITABLE, StorageState.READ_ONLY):
            raise BookieUnavailableError(f"bookie is {st.state.value}", st.bookie_id)
        return st

    async def add_entry(self, ledger_id, entry_id, master_key, entry, *, recovery=False):  # type: ignore[no-untyped-def]
        await self._storage().add_entry(ledger_id, entry_id, master_key, entry, recovery=recovery)

    async def read_entry(self, ledger_id, entry_id, *, fence=False, master_key=b""):  # type: ignore[no-untyped-def]
        return await self._storage().read_entry(ledger_id, entry_id, fence=fence, master_key=master_key)

    async def read_lac(self, ledger_id: int) -> int:
        return await self._storage().read_lac(ledger_id)

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        return await self._storage().wait_lac(ledger_id, previous_lac, min(timeout_ms, 600_000))

    async def get_info(self) -> BookieInfo:
        st = self._storage()
        usage = await st.disk_usage()
        return BookieInfo(st.bookie_id, usage.total_bytes, usage.free_bytes, st.read_only)


class Bookie:
    def __init__(
        self,
        config: BookieConfig,
        metadata_store: MetadataStore,
        *,
        disk: Disk | None = None,
        clock: Clock | None = None,
        rng: Rng | None = None,
        serve: bool = True,
        index_factory: Callable[[str], IndexStore] | None = None,
        executor_factory: Callable[[str, int], BlockingExecutor] | None = None,
    ) -> None:
        self.config = config
        self.metadata_store = metadata_store
        self.disk = disk or RealDisk()
        self.clock = clock or RealClock()
        self.rng = rng or Rng()
        self.serve = serve
        self.supervisor = TaskSupervisor("bookie")
        self.io_executor = (executor_factory or BlockingExecutor)("bookie-io", 1)
        self.storage = LedgerStorage(
            config,
            disk=self.disk,
            clock=self.clock,
            index_factory=index_factory,
            executor_factory=executor_factory,
        )
        self.server: BookieServer | None = None
        self.registration: Registration | None = None
        self.gc: GarbageCollector | None = None
        self.disk_checker: DiskChecker | None = None
        self._started = False
        self._stopped = False
        self._session_down = False  # the metadata store said SUSPENDED/SESSION_LOST last

    @property
    def bookie_id(self) -> str:
        return self.storage.bookie_id

    async def start(self) -> str:
        cfg = self.config
        if self.serve:
            self.server = BookieServer(
                _Service(self),
                "0.0.0.0"
                if cfg.advertised_address not in ("127.0.0.1", "localhost")
                else cfg.advertised_address,
                cfg.bookie_port,
                max_frame_bytes=cfg.max_frame_size_bytes,
                max_in_flight=cfg.max_pending_requests_per_connection,
            )
            port = await self.server.start()
            if not cfg.bookie_id:
                self.storage.bookie_id = f"{cfg.advertised_address}:{port}"
        self.registration = Registration(
            self.metadata_store,
            self.bookie_id,
            cfg.journal_directory,
            cfg.ledger_directories,
            disk=self.disk,
            executor=self.io_executor,
            clock=self.clock,
            rng=self.rng,
            supervisor=self.supervisor,
        )
        try:
            await self.registration.check_cookie()
            await self.storage.open()
            self._started = True
            await self._start_services()
        except BaseException:
            self._stopped = True
            if self._started and self.registration is not None:
                await self._unregister_bounded(self.registration)
            await self._teardown()
            raise
        return self.bookie_id

    async def _start_services(self) -> None:
        assert self.registration is not None
        cfg = self.config
        self.disk_checker = DiskChecker(
            self.storage,
            self.disk,
            [cfg.journal_directory, *cfg.ledger_directories],
            self.io_executor,
            self.clock,
            threshold=cfg.disk_usage_threshold,
            lwm_threshold=cfg.disk_usage_lwm_threshold,
            interval_ms=cfg.disk_check_interval_ms,
        )
        registration = self.registration
        self.disk_checker.usage_listeners.append(
            lambda usage: registration.publish_space(usage.total_bytes, usage.free_bytes)
        )
        await self.disk_checker.check_once()
        self.supervisor.spawn(self.disk_checker.run(), name="disk-checker")
        self.gc = GarbageCollector(self.storage, self.metadata_store, cfg, self.clock)
        self.supervisor.spawn(self.gc.run(), name="gc")
        self.storage.state_listeners.append(self._on_storage_state)
        self.metadata_store.add_session_listener(self.registration.on_session_event)
        self.metadata_store.add_session_listener(self._on_session_event)
        await self.registration.register(read_only=self.storage.read_only)

    def _on_storage_state(self, state: StorageState) -> None:
        if state in (StorageState.WRITABLE, StorageState.READ_ONLY) and self.registration is not None:
            if not self.supervisor.closed:
                self.supervisor.spawn(self._reregister(state == StorageState.READ_ONLY), name="reregister")

    async def _reregister(self, read_only: bool) -> None:
        assert self.registration is not None
        try:
            await self.registration.register(read_only=read_only)
        except Exception:
            log.exception("bookie %s: re-registration as %s failed", self.bookie_id, read_only)

    def local_client(self, timeout_ms: int = 30_000) -> LocalBookieClient:
        return LocalBookieClient(self.storage, timeout_ms=timeout_ms)

    async def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if self.registration is not None and self._started:
            await self._unregister_bounded(self.registration)
        await self._teardown()

    def _on_session_event(self, event: SessionEvent) -> None:
        self._session_down = event in (SessionEvent.SUSPENDED, SessionEvent.SESSION_LOST)

    async def _unregister_bounded(self, registration: Registration) -> None:
        """Unregistering is a courtesy (the session's end removes the ephemeral nodes too), so
        a metadata store that does not answer -- ZooKeeper gone -- must not hold the stop for
        two operation timeouts: wait at most UNREGISTER_TIMEOUT_S."""
        if self._session_down:
            log.info("bookie %s: metadata session down; stopping without unregistering", self.bookie_id)
            return
        try:
            await wait_for(self.clock, registration.unregister(), UNREGISTER_TIMEOUT_S)
        except TimeoutError:
            log.warning(
                "bookie %s: metadata store did not answer within %.0f s; stopping without "
                "unregistering (the session's end removes the registration)",
                self.bookie_id,
                UNREGISTER_TIMEOUT_S,
            )

    async def _teardown(self) -> None:
        await self.supervisor.aclose()
        if self.server is not None:
            await self.server.aclose()
        await self.storage.aclose()
        await self.io_executor.aclose()
