"""ManagedLedgerFactoryImpl: opens managed ledgers by name and shares what they share.

Theory of operation: one factory per broker.  It owns the shared
:class:`~magnetar.managed_ledger.cache.EntryCache`, a task supervisor (every
managed ledger's background tasks -- issued adds, rollovers, cursor persists,
trims -- belong to it) and the dependencies bundled in an
:class:`~magnetar.managed_ledger.context.MLContext`.  ``open`` returns the
already-open instance for a name (concurrent opens of one name share one
initialization); a closed or fenced instance is forgotten so the next open
starts over (re-reading the metadata, recovering the ledger).

A periodic check (every ``check_interval_s`` of the injected clock) rolls
ledgers past the maximum rollover time and trims consumed ledgers, as Pulsar's
scheduled ``checkConsumedLedgers`` does (only where there is a ledger besides
the one being written: an idle topic's managed ledger costs no trim task).
"""

from __future__ import annotations

import asyncio

from magnetar.bookkeeper.api import BookKeeper
from magnetar.managed_ledger.api import ManagedLedgerConfig, ManagedLedgerError, ManagedLedgerStorageError
from magnetar.managed_ledger.cache import EntryCache
from magnetar.managed_ledger.context import MLContext
from magnetar.managed_ledger.ledger import ManagedLedgerImpl
from magnetar.managed_ledger.metadata import ML_KIND, ROOT, ledger_path
from magnetar.managed_ledger.offload import Offloader
from magnetar.managed_ledger.offload_blob import OffloaderRegistry
from magnetar.managed_ledger.offload_process import schedule as schedule_offload
from magnetar.managed_ledger.state import MLState
from magnetar.metadata.api import MetadataError, MetadataStore
from magnetar.runtime import Clock, TaskSupervisor

_LIST_DEPTH_MAX = 8


class ManagedLedgerFactoryImpl:
    def __init__(
        self,
        metadata_store: MetadataStore,
        bookkeeper: BookKeeper,
        clock: Clock,
        config: ManagedLedgerConfig | None = None,
        *,
        cache_bytes_max: int = 64 * 1024 * 1024,
        offloader: Offloader | None = None,
        offloaders: OffloaderRegistry | None = None,
        supervisor: TaskSupervisor | None = None,
        check_interval_s: float = 60.0,
    ) -> None:
        self.default_config = config or ManagedLedgerConfig()
        self.cache = EntryCache(cache_bytes_max)
        self._supervisor = (
            supervisor.child("managed-ledgers") if supervisor else TaskSupervisor("managed-ledgers")
        )
        self.ctx = MLContext(
            store=metadata_store,
            bookkeeper=bookkeeper,
            clock=clock,
            cache=self.cache,
            supervisor=self._supervisor,
            offloader=offloader,
            offloaders=offloaders,
            read_ahead_entries=self.default_config.read_ahead_entries,
        )
        self._ledgers: dict[str, ManagedLedgerImpl] = {}
        self._opening: dict[str, asyncio.Future[ManagedLedgerImpl]] = {}
        self._check_interval_s = check_interval_s
        self._checker: asyncio.Task[None] | None = None
        self._closed = False

    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedgerImpl:
        if self._closed:
            raise ManagedLedgerError("managed ledger factory is closed")
        ledger_path(name)  # validates the name
        ml = self._ledgers.get(name)
        if ml is not None and ml.state not in (MLState.CLOSED, MLState.FENCED):
            if config is not None:
                await ml.set_config(config)
            return ml
        pending = self._opening.get(name)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[ManagedLedgerImpl] = asyncio.get_running_loop().create_future()
        self._opening[name] = fut
        ml = ManagedLedgerImpl(name, config or self.default_config, self.ctx)
        try:
            await ml.initialize()
        except BaseException as e:
            fut.set_exception(e)
            fut.exception()  # mark retrieved
            if ml.state is not MLState.NONE:  # got as far as a new ledger: release it
                try:
                    await ml.close()
                except ManagedLedgerError:
                    pass
            raise
        finally:
            self._opening.pop(name, None)
        ml.on_closed = self._forget
        self._ledgers[name] = ml
        fut.set_result(ml)
        if self._checker is None and self._check_interval_s > 0:
            self._checker = self._supervisor.spawn(self._periodic_check(), name="check-ledgers")
        return ml

    def _forget(self, ml: ManagedLedgerImpl) -> None:
        if self._ledgers.get(ml.name) is ml:
            del self._ledgers[ml.name]

    def get_if_open(self, name: str) -> ManagedLedgerImpl | None:
        return self._ledgers.get(name)

    async def exists(self, name: str) -> bool:
        try:
            return await self.ctx.store.exists(ledger_path(name)) is not None
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot check {name}: {e!r}") from e

    async def delete(self, name: str) -> None:
        ml = self._ledgers.get(name)
        if ml is None:
            ml = await self.open(name)
        await ml.delete()
        self._forget(ml)

    async def list_names(self, prefix: str = "") -> list[str]:
        """Names of every managed ledger in the store whose name starts with ``prefix``."""
        out: list[str] = []
        store = self.ctx.store
        marker = b'"kind":"' + ML_KIND.encode() + b'"'

        async def walk(path: str, depth: int) -> None:
            if depth > _LIST_DEPTH_MAX:
                return
            for child in await store.children(path):
                p = f"{path}/{child}"
                name = p[len(ROOT) + 1 :]
                if prefix and not (name.startswith(prefix) or prefix.startswith(name + "/")):
                    continue
                got = await store.get(p)
                if got is not None and marker in got.value:
                    if name.startswith(prefix):
                        out.append(name)
                    continue  # children of a managed ledger are its cursors
                await walk(p, depth + 1)

        try:
            await walk(ROOT, 0)
        except MetadataError as e:
            raise ManagedLedgerStorageError(f"cannot list managed ledgers: {e!r}") from e
        return sorted(out)

    async def _periodic_check(self) -> None:
        clock = self.ctx.clock
        while not self._closed:
            await clock.sleep(self._check_interval_s)
            for ml in list(self._ledgers.values()):
                ml.check_rollover_by_time()
                ll = ml.ledger_list
                if len(ll) > 1 or (len(ll) == 1 and ll.current_id not in ll):
                    # (the ledger being written is never trimmed: a managed ledger that has
                    # only that one costs no trim task -- 10,000 idle topics, 10,000 tasks)
                    ml.schedule_trim()
                schedule_offload(ml)

    def stats(self) -> dict:
        return {"openLedgers": len(self._ledgers), **self.cache.stats()}

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for ml in list(self._ledgers.values()):
            try:
                await ml.close()
            except ManagedLedgerError:
                pass
        await self._supervisor.aclose()
        self.cache.clear()
        if self.ctx.offloaders is not None:
            await self.ctx.offloaders.aclose()
