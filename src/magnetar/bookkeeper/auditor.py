"""The auditor: notices lost bookies and marks their ledgers under-replicated.

Theory of operation: every auto-recovery process runs an :class:`Auditor`;
exactly one of them leads (a :class:`~magnetar.metadata.coordination.election.LeaderElection`
on ``AUDITOR_ELECTION_PATH``) and only the leader audits.  The leader watches
``AVAILABLE_PATH`` (notifications, plus a poll every
``replication_poll_interval_ms`` in case one was missed) and keeps, per
bookie named by some ledger but not registered, the time it was first seen
missing.  Once a bookie has been missing for ``lost_bookie_recovery_delay_ms``
it is *lost*: every ledger with a fragment on it gets an under-replication
mark listing the lost bookies (see :mod:`.underreplication`).  A bookie that
comes back before the delay is forgotten.

A full pass reads every ledger's metadata, so the loop only makes one when
the registered bookies changed, a missing bookie is waiting out its delay,
or ``auditor_periodic_check_ms`` passed (BK: auditorPeriodicCheckInterval).
``audit_once`` does one pass and returns the ledgers it marked.
"""

from __future__ import annotations

import asyncio
import logging

from magnetar.bookie.api import AVAILABLE_PATH
from magnetar.bookkeeper.context import ClientContext
from magnetar.bookkeeper.underreplication import AUDITOR_ELECTION_PATH, UnderReplicationManager
from magnetar.metadata.api import MetadataError, MetadataStore, Notification
from magnetar.metadata.coordination.election import LeaderElection, LeaderEvent

log = logging.getLogger(__name__)


class Auditor:
    def __init__(self, ctx: ClientContext, store: MetadataStore, auditor_id: str) -> None:
        self._ctx = ctx
        self._store = store
        self.auditor_id = auditor_id
        self._marks = UnderReplicationManager(store)
        self._missing_since: dict[str, float] = {}
        self._wakeup = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._sup = ctx.supervisor.child(f"auditor-{auditor_id}")
        self._election = LeaderElection(
            store,
            AUDITOR_ELECTION_PATH,
            auditor_id.encode(),
            self._on_leader_event,
            clock=ctx.clock,
            supervisor=self._sup,
            retry_interval_ms=ctx.config.replication_poll_interval_ms,
        )
        self.audits = 0  # statistics
        self._last_registered: set[str] | None = None
        self._last_full_check = float("-inf")

    @property
    def is_leader(self) -> bool:
        return self._election.is_leader

    async def start(self) -> None:
        self._store.add_listener(self._on_notification)
        await self._election.start()

    async def aclose(self) -> None:
        self._store.remove_listener(self._on_notification)
        if self._loop_task is not None:
            self._loop_task.cancel()
        await self._election.close()
        await self._sup.aclose()

    def _on_notification(self, n: Notification) -> None:
        if n.path.startswith(AVAILABLE_PATH):
            self._wakeup.set()

    def _on_leader_event(self, event: LeaderEvent) -> None:
        if event is LeaderEvent.BECAME_LEADER:
            if self._loop_task is None or self._loop_task.done():
                self._loop_task = self._sup.spawn(self._audit_loop(), name="audit")
        elif event is LeaderEvent.LOST_LEADERSHIP and self._loop_task is not None:
            self._loop_task.cancel()

    async def _audit_loop(self) -> None:
        poll_s = self._ctx.config.replication_poll_interval_ms / 1000.0
        while self._election.is_leader:
            self._wakeup.clear()
            try:
                await self.audit_once(only_if_changed=True)
            except (MetadataError, OSError) as exc:
                log.warning("auditor %s: audit failed: %r", self.auditor_id, exc)
            handle = self._ctx.clock.call_later(poll_s, self._wakeup.set)
            try:
                await self._wakeup.wait()
            finally:
                handle.cancel()

    async def _registered(self) -> set[str]:
        return set(await self._ctx.registry.all_bookies())

    async def audit_once(self, only_if_changed: bool = False) -> list[int]:
        """One pass over every ledger; returns the ids newly marked (or extended).

        ``only_if_changed``: skip the (metadata-heavy) pass when the registered bookies are
        the ones of the last pass, no bookie is waiting out its lost delay and the periodic
        full check is not due."""
        now = self._ctx.clock.monotonic()
        delay_s = self._ctx.config.lost_bookie_recovery_delay_ms / 1000.0
        registered = await self._registered()
        periodic_s = self._ctx.config.auditor_periodic_check_ms / 1000.0
        if (
            only_if_changed
            and registered == self._last_registered
            and not self._missing_since
            and now - self._last_full_check < periodic_s
        ):
            return []
        self.audits += 1
        self._last_registered = registered
        self._last_full_check = now
        ledgers = []
        named: set[str] = set()
        for ledger_id in await self._ctx.ledgers.list_ids():
            try:
                md, _ = await self._ctx.ledgers.read(ledger_id)
            except Exception:  # deleted meanwhile, or unreadable: nothing to audit
                continue
            ledgers.append(md)
            for _, ensemble in md.ensembles:
                named.update(ensemble)
        missing = sorted(named - registered)
        for bookie in list(self._missing_since):
            if bookie not in missing:
                del self._missing_since[bookie]
        lost = set()
        for bookie in missing:
            since = self._missing_since.setdefault(bookie, now)
            if now - since >= delay_s:
                lost.add(bookie)
        if not lost:
            return []
        marked = []
        for md in ledgers:
            on_lost = sorted({b for _, ens in md.ensembles for b in ens} & lost)
            if on_lost and await self._marks.mark(md.ledger_id, on_lost, self._ctx.clock.time_ms()):
                log.info("auditor: ledger %d is under-replicated (lost %s)", md.ledger_id, on_lost)
                marked.append(md.ledger_id)
        return marked
