"""The ledger client: :class:`BookKeeperClient` implements ``bookkeeper.api.BookKeeper``.

Theory of operation: the client owns a :class:`ClientContext` (metadata
access, bookie pool, clock, rng, config, a task supervisor, the bookie
registry and the placement policy) and hands it to every handle it creates.

* ``create_ledger`` validates ``Qa <= Qw <= E``, asks the placement policy
  for E writable bookies, allocates a ledger id and creates the metadata
  node (state OPEN, one fragment starting at entry 0).
* ``open_ledger(recovery=True)`` runs :class:`LedgerRecovery` and returns a
  read handle on the CLOSED ledger; ``recovery=False`` returns a read handle
  whose LAC is what the bookies of the last ensemble report.
* ``delete_ledger`` removes the metadata node (bookies garbage-collect the
  data) and any under-replication mark.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence

from magnetar.bookie.api import BookieClientPool
from magnetar.bookkeeper import api
from magnetar.bookkeeper.config import ClientConfig
from magnetar.bookkeeper.context import ClientContext
from magnetar.bookkeeper.errors import UnauthorizedError, translate
from magnetar.bookkeeper.isolation import PLACEMENT_CONFIG_KEY, excluded_bookies, groups_of
from magnetar.bookkeeper.ledger_handle import LedgerHandle
from magnetar.bookkeeper.metadata import LedgerMetadataStore
from magnetar.bookkeeper.placement import BookieRegistry, make_policy
from magnetar.bookkeeper.read_handle import ReadOnlyLedgerHandle
from magnetar.bookkeeper.reader import EntryReader
from magnetar.bookkeeper.recovery import LedgerRecovery
from magnetar.bookkeeper.timeouts import with_timeout
from magnetar.bookkeeper.underreplication import UnderReplicationManager
from magnetar.metadata.api import MetadataError, MetadataStore
from magnetar.runtime import Clock, Rng, TaskSupervisor

log = logging.getLogger(__name__)


class BookKeeperClient:
    def __init__(
        self,
        metadata_store: MetadataStore,
        bookie_pool: BookieClientPool,
        clock: Clock,
        rng: Rng,
        config: ClientConfig | None = None,
        supervisor: TaskSupervisor | None = None,
    ) -> None:
        config = config or ClientConfig()
        self._store = metadata_store
        self._owns_supervisor = supervisor is None
        sup = supervisor.child("bookkeeper") if supervisor is not None else TaskSupervisor("bookkeeper")
        self.ctx = ClientContext(
            ledgers=LedgerMetadataStore(metadata_store, config.metadata_retries_max),
            pool=bookie_pool,
            clock=clock,
            rng=rng,
            config=config,
            supervisor=sup,
            registry=BookieRegistry(
                metadata_store, clock, config.bookie_list_refresh_ms, config.bookie_quarantine_ms
            ),
            placement=make_policy(config.placement_policy, rng.fork("placement")),
        )
        self._closed = False
        self._handles: weakref.WeakSet[LedgerHandle] = weakref.WeakSet()

    def _check_open(self) -> None:
        if self._closed:
            raise api.BKClosedError("the BookKeeper client is closed")

    async def _meta(self, aw, what: str):  # type: ignore[no-untyped-def]
        try:
            return await with_timeout(
                self.ctx.clock,
                aw,
                self.ctx.config.metadata_timeout_ms,
                lambda: api.BKTimeoutError(f"metadata store timed out: {what}"),
            )
        except MetadataError as exc:
            raise translate(exc, -1) from exc

    async def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        *,
        digest_type: api.DigestType = api.DigestType.CRC32C,
        password: bytes = b"",
        custom_metadata: Mapping[str, bytes] | None = None,
    ) -> LedgerHandle:
        self._check_open()
        if not 1 <= ack_quorum <= write_quorum <= ensemble_size:
            raise ValueError(
                f"need 1 <= Qa <= Qw <= E, got E={ensemble_size} Qw={write_quorum} Qa={ack_quorum}"
            )
        ctx = self.ctx
        bookies = await self._meta(ctx.registry.writable_bookies(), "list bookies")
        racks = await self._meta(ctx.registry.racks(), "read racks")
        isolation = groups_of((custom_metadata or {}).get(PLACEMENT_CONFIG_KEY, b""))
        if isolation is not None:  # a namespace's bookie affinity groups (see .isolation)
            groups = await self._meta(ctx.registry.bookie_groups(), "read bookie groups")
            excluded = excluded_bookies(groups, *isolation, bookies, ensemble_size)
            bookies = [b for b in bookies if b not in excluded]
        quarantined = ctx.registry.quarantined()
        if len([b for b in bookies if b not in quarantined]) < ensemble_size:
            quarantined = set()  # better a recently sick bookie than no ledger
        ensemble = ctx.placement.new_ensemble(ensemble_size, write_quorum, bookies, racks, quarantined)
        now_ms = ctx.clock.time_ms()

        def make(ledger_id: int) -> api.LedgerMetadata:
            return api.LedgerMetadata(
                ledger_id=ledger_id,
                ensemble_size=ensemble_size,
                write_quorum=write_quorum,
                ack_quorum=ack_quorum,
                state=api.LedgerState.OPEN,
                ensembles=((0, ensemble),),
                digest_type=digest_type,
                password=password,
                ctime_ms=now_ms,
                custom_metadata=dict(custom_metadata or {}),
            )

        md, version = await self._meta(ctx.ledgers.create(make), "create ledger")
        log.debug("created ledger %d on %s", md.ledger_id, ensemble)
        handle = LedgerHandle(ctx, md, version)
        self._handles.add(handle)
        return handle

    async def open_ledger(
        self, ledger_id: int, *, password: bytes = b"", recovery: bool = True
    ) -> ReadOnlyLedgerHandle:
        self._check_open()
        md, version = await self._meta(self.ctx.ledgers.read(ledger_id), f"read ledger {ledger_id}")
        if md.password != password:
            raise UnauthorizedError(f"wrong password for ledger {ledger_id}")
        if recovery and not md.is_closed:
            try:
                md, version = await LedgerRecovery(self.ctx, ledger_id).run()
            except MetadataError as exc:
                raise translate(exc, ledger_id) from exc
        if md.is_closed:
            return ReadOnlyLedgerHandle(self.ctx, md, md.last_entry_id, md.length)
        lac = await EntryReader(self.ctx, ledger_id, md.password).read_lac(md.ensembles[-1][1])
        return ReadOnlyLedgerHandle(self.ctx, md, lac)

    async def delete_ledger(self, ledger_id: int) -> None:
        self._check_open()
        await self._meta(self.ctx.ledgers.delete(ledger_id), f"delete ledger {ledger_id}")
        await self._meta(UnderReplicationManager(self._store).unmark(ledger_id), "delete mark")

    async def get_ledger_metadata(self, ledger_id: int) -> api.LedgerMetadata:
        self._check_open()
        md, _ = await self._meta(self.ctx.ledgers.read(ledger_id), f"read ledger {ledger_id}")
        return md

    async def list_ledgers(self) -> Sequence[int]:
        self._check_open()
        return await self._meta(self.ctx.ledgers.list_ids(), "list ledgers")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for handle in list(self._handles):
            handle.abort(api.BKClosedError("the BookKeeper client was closed"))
        self.ctx.registry.close()
        await self.ctx.supervisor.aclose()
