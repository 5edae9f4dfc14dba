"""Replicated subscriptions: a subscription's position in one cluster moves it in the others.

Theory of operation (Pulsar's ReplicatedSubscriptionsController, one per
topic that replicates and has a replicated subscription -- a durable cursor
whose property ``pulsar.replicated.subscription`` is 1, set when a consumer
subscribes with ``replicate_subscription_state``).  Clusters exchange markers
in the data stream (:mod:`magnetar.protocol.markers`); the replicators carry
them like messages, to the clusters the marker's ``replicate_to`` names:

1. every ``replicatedSubscriptionsSnapshotFrequencyMillis``, if messages were
   published since the last snapshot started, cluster A writes a SNAPSHOT_REQUEST
   (id, A) into its topic, for every remote cluster;
2. a cluster B that receives the request (the replicator's write into B's
   topic) answers with a SNAPSHOT_RESPONSE (id, B, B's last position pB) for A.
   Everything in B up to pB reached B before the request did, so it is in A
   *before the response*;
3. when every remote answered, A writes a local-only SNAPSHOT marker at sA
   recording {B: pB} (a request unanswered within
   ``replicatedSubscriptionsSnapshotTimeoutSeconds`` is dropped);
4. when a replicated subscription's mark-delete in A reaches sA, everything
   B holds up to pB was consumed in A: A writes an UPDATE (subscription,
   {B: pB}) for B, and B moves that subscription's mark-delete to pB
   (creating its cursor when B has none yet).

A consumer that fails over to B therefore re-receives at most what was
acknowledged in A since the last snapshot -- about one snapshot interval --
and skips nothing.  Markers never reach consumers: the dispatcher acknowledges
server-only markers instead of delivering them.

What survives a restart is what Pulsar keeps: the markers are entries of the
topic, so the snapshots are too.  The list above is a cache (at most
``MAX_SNAPSHOTS`` per topic); a controller created after the topic was loaded
again (a broker restart, an unload) first rebuilds it (:meth:`restore`) from
the SNAPSHOT markers stored in the topic, reading from up to
``RESTORE_BEHIND_ENTRIES`` entries before the lowest replicated mark-delete
position (in its ledger: the last snapshot a cursor already passed, whose
UPDATE is sent again -- harmless, B ignores a position it has passed) to at
most ``RESTORE_MAX_ENTRIES`` entries in all.  Snapshots beyond that window are
not recovered: the next snapshot taken replaces them.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerError, Position
from magnetar.protocol import markers as mk
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.payload import parse_headers_and_payload

if TYPE_CHECKING:
    from magnetar.broker.service.topic import PersistentTopic
    from magnetar.runtime import Clock

log = logging.getLogger(__name__)

REPLICATED_PROPERTY = "pulsar.replicated.subscription"
MAX_SNAPSHOTS = 1000
RESTORE_BEHIND_ENTRIES = 1000
RESTORE_MAX_ENTRIES = 20_000
RESTORE_BATCH_ENTRIES = 500


@dataclass
class _Pending:
    snapshot_id: str
    started_ms: int
    remotes: set[str]
    responses: dict[str, mk.Pos] = field(default_factory=dict)


class ReplicatedSubscriptions:
    def __init__(
        self, topic: PersistentTopic, local_cluster: str, clock: Clock, *, snapshot_timeout_s: float = 30.0
    ) -> None:
        self.topic = topic
        self.local_cluster = local_cluster
        self.clock = clock
        self.snapshot_timeout_ms = int(snapshot_timeout_s * 1000)
        self.producer_name = f"pulsar.marker.{local_cluster}"
        self._seq = 0
        self.pending: _Pending | None = None
        self.snapshots: list[tuple[Position, dict[str, mk.Pos]]] = []  # (sA, {cluster: position})
        self.last_update: dict[str, Position] = {}  # subscription -> sA of its last UPDATE
        self.inbound_markers = 0  # marker entries the replicators wrote here (not "new messages")
        self._published_at_last_snapshot = -1
        self.restored = False  # the snapshots stored in the topic were read back (restore)
        self.counters = {"snapshots_started": 0, "snapshots_completed": 0, "snapshots_timed_out": 0,
                         "updates_sent": 0, "updates_applied": 0, "snapshots_restored": 0}  # fmt: skip

    # ------------------------------------------------------------ subscriptions
    def replicated_names(self) -> list[str]:
        return [n for n, c in self.topic.ml.cursors.items() if c.properties.get(REPLICATED_PROPERTY) == 1]

    @staticmethod
    async def mark(topic: PersistentTopic, name: str, enabled: bool = True) -> None:
        """Persist the subscription's replicated flag as its cursor property (Pulsar's)."""
        cursor = topic.ml.cursors.get(name)
        if cursor is None or (cursor.properties.get(REPLICATED_PROPERTY) == 1) == enabled:
            return
        props = dict(cursor.properties)
        if enabled:
            props[REPLICATED_PROPERTY] = 1
        else:
            props.pop(REPLICATED_PROPERTY, None)
        await cursor.mark_delete(cursor.mark_delete_position, props)

    # ------------------------------------------------------------ writing markers
    async def _write(self, marker: mk.SnapshotRequest | mk.SnapshotResponse | mk.Snapshot | mk.Update,
                     replicate_to: list[str]) -> Position:  # fmt: skip
        now = self.clock.time_ms()
        self._seq = max(self._seq + 1, now * 1000)  # above every earlier one, across restarts
        data = mk.marker_entry(
            marker,
            producer_name=self.producer_name,
            sequence_id=self._seq,
            publish_time_ms=now,
            replicate_to=replicate_to,
        )
        pos = await self.topic.ml.add_entry(data, num_messages=1)
        self.topic.notify_dispatchers()
        return pos

    # ------------------------------------------------------------ the periodic step
    async def tick(self) -> None:
        remotes = sorted(self.topic.replicators)
        if not remotes or not self.topic.active:
            return
        names = self.replicated_names()
        if not names:
            return
        if not self.restored:
            await self.restore(names)
        now = self.clock.time_ms()
        if self.pending is not None and now - self.pending.started_ms > self.snapshot_timeout_ms:
            log.info("snapshot %s of %s timed out", self.pending.snapshot_id, self.topic.name)
            self.counters["snapshots_timed_out"] += 1
            self.pending = None
        published = self.topic.msg_in_counter - self.inbound_markers
        if self.pending is None and published != self._published_at_last_snapshot:
            self._published_at_last_snapshot = published
            snapshot_id = str(uuid.uuid4())
            self.pending = _Pending(snapshot_id, now, set(remotes))
            self.counters["snapshots_started"] += 1
            await self._write(mk.SnapshotRequest(snapshot_id, self.local_cluster), remotes)
        await self._send_updates(names)

    async def _send_updates(self, names: list[str]) -> None:
        for name in names:
            cursor = self.topic.ml.cursors.get(name)
            if cursor is None:
                continue
            md = cursor.mark_delete_position
            best: tuple[Position, dict[str, mk.Pos]] | None = None
            for snap in self.snapshots:
                if snap[0] > md:
                    break
                best = snap
            if best is None or self.last_update.get(name, Position(-1, -1)) >= best[0]:
                continue
            self.last_update[name] = best[0]
            self.counters["updates_sent"] += 1
            await self._write(mk.Update(name, dict(best[1])), sorted(best[1]))
        if self.snapshots and names:
            floor = min((self.last_update.get(n, Position(-1, -1)) for n in names), default=Position(-1, -1))
            keep = [s for s in self.snapshots if s[0] >= floor]  # the one reached stays: later acks
            self.snapshots = keep[-MAX_SNAPSHOTS:]

    # ------------------------------------------------------------ after a restart
    async def restore(self, names: list[str]) -> None:
        """Read the SNAPSHOT markers stored in the topic back into ``snapshots`` (see the module
        docstring for the window read)."""
        self.restored = True
        ml = self.topic.ml
        floors = [ml.cursors[n].mark_delete_position for n in names if n in ml.cursors]
        if not floors:
            return
        floor = min(floors)
        pos = Position(floor.ledger_id, max(0, floor.entry_id - RESTORE_BEHIND_ENTRIES))
        found: dict[Position, dict[str, mk.Pos]] = {}
        scanned = 0
        while scanned < RESTORE_MAX_ENTRIES and pos <= ml.last_confirmed_entry:
            try:
                entries = await ml.read_entries_from(pos, RESTORE_BATCH_ENTRIES)
            except ManagedLedgerError as exc:
                log.info("reading the snapshots of %s back failed: %s", self.topic.name, exc)
                break
            if not entries:
                break
            for entry in entries:
                snapshot = _snapshot_of(entry.data)
                if snapshot is not None:
                    found[entry.position] = snapshot
            scanned += len(entries)
            pos = entries[-1].position.next()
        known = {p for p, _ in self.snapshots}
        merged = self.snapshots + [(p, c) for p, c in found.items() if p not in known]
        self.snapshots = sorted(merged, key=lambda s: s[0])[-MAX_SNAPSHOTS:]
        self.counters["snapshots_restored"] += len(found)
        if found:
            log.info("%s: %d replicated-subscription snapshots read back", self.topic.name, len(found))

    # ------------------------------------------------------------ markers from other clusters
    async def received(self, marker_type: int, payload: bytes) -> None:
        """A replicator of another cluster stored a replicated-subscription marker here (the
        caller counted it in ``inbound_markers`` as it was stored)."""
        marker = mk.decode(marker_type, payload)
        if isinstance(marker, mk.SnapshotRequest):
            last = self.topic.ml.last_confirmed_entry
            response = mk.SnapshotResponse(
                marker.snapshot_id, self.local_cluster, (last.ledger_id, last.entry_id)
            )
            await self._write(response, [marker.source_cluster])
        elif isinstance(marker, mk.SnapshotResponse):
            pending = self.pending
            if pending is None or pending.snapshot_id != marker.snapshot_id:
                return
            pending.responses[marker.cluster] = marker.position
            if set(pending.responses) >= pending.remotes:
                self.pending = None
                pos = await self._write(mk.Snapshot(pending.snapshot_id, (0, 0), dict(pending.responses)), [])
                self.snapshots.append((pos, dict(pending.responses)))
                self.counters["snapshots_completed"] += 1
        elif isinstance(marker, mk.Update):
            target = marker.clusters.get(self.local_cluster)
            if target is not None:
                await self._apply_update(marker.subscription, Position(*target))

    async def _apply_update(self, name: str, position: Position) -> None:
        topic = self.topic
        cursor = topic.ml.cursors.get(name)
        if cursor is None:
            cursor = await topic.ml.open_cursor(name, InitialPosition.EARLIEST)
            await self.mark(topic, name)
        if position <= cursor.mark_delete_position:
            return
        if position > topic.ml.last_confirmed_entry:
            log.warning("update of %s on %s to %s: beyond the last entry", name, topic.name, position)
            return
        try:
            await cursor.mark_delete(position)
        except ManagedLedgerError as exc:
            log.info("update of %s on %s failed: %s", name, topic.name, exc)
            return
        self.counters["updates_applied"] += 1
        sub = topic.subscriptions.get(name)
        if sub is not None and sub.dispatcher is not None:
            sub.dispatcher.forget_up_to(position)
            sub.dispatcher.notify()


def _snapshot_of(stored: bytes) -> dict[str, mk.Pos] | None:
    """The cluster positions of a stored SNAPSHOT marker entry, None for anything else."""
    try:
        parsed = parse_headers_and_payload(stored, verify=False)
    except ProtocolError:
        return None
    meta = parsed.metadata
    if not meta.HasField("marker_type") or meta.marker_type != mk.SNAPSHOT:
        return None
    try:
        marker = mk.decode(mk.SNAPSHOT, parsed.payload)
    except (ProtocolError, ValueError):
        return None
    return dict(marker.clusters) if isinstance(marker, mk.Snapshot) else None
