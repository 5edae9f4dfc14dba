"""Message deduplication: one stored copy per (producer name, sequence id).

Theory of operation
-------------------
Enabled per topic with Pulsar's precedence: the topic's own
``deduplicationEnabled`` policy (its topic-policies document), else the
namespace policy ``deduplicationEnabled``, else the broker's
``brokerDeduplicationEnabled``; the decision is taken when the topic loads
and again when a producer attaches (:func:`refresh_deduplication`).  Two maps, as Java keeps them:

* ``pushed`` -- per producer name, the highest sequence id *accepted* for
  storing (updated when the add starts);
* ``persisted`` -- per producer name, the highest sequence id *stored*
  (updated when the add completes).

A SEND whose sequence id (the batch's highest: ``highest_sequence_id`` if
set, else ``sequence_id + num_messages - 1``) is not above ``pushed`` is a
duplicate: nothing is stored and the receipt carries message id (-1, -1),
as Java answers -- but only once the original is *stored*.  A resend whose
original is still in flight (a client that reconnected while its add was
running) follows that add: stored -> the duplicate receipt; failed -> the
resend fails too (its producer is closed, the client sends it again, and by
then ``pushed`` has gone back to ``persisted``, so it is stored).  Answering
it as a duplicate before knowing would acknowledge a message that is not in
the log (Java answers such a resend with an error for the same reason: its
status is "unknown").  A chunk other than the last is
never a duplicate and moves nothing (only the last chunk completes the
message).  PRODUCER_SUCCESS.last_sequence_id is ``persisted`` for the name,
so a reconnecting client continues after it.

Durability: the ``persisted`` map is snapshotted as the mark-delete
properties of the managed-ledger cursor ``pulsar.dedup`` (mark-delete = the
last stored position), every ``SNAPSHOT_EVERY_ENTRIES`` stored entries and
when the topic closes.  On load, entries after the snapshot are replayed (their
metadata carries producer name and sequence id) to rebuild the maps; so a
broker killed with -9 still knows every sequence id stored before it died.
The map is bounded by the number of producer names (Java's limit:
``brokerMaxProducerNamesTracked``-like; oldest names dropped beyond
``MAX_PRODUCERS_TRACKED``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from magnetar.managed_ledger.api import InitialPosition, ManagedLedgerError, Position
from magnetar.metadata import api as md
from magnetar.protocol.errors import CorruptPayload
from magnetar.protocol.payload import peek_metadata

if TYPE_CHECKING:
    from magnetar.broker.service.topic import PersistentTopic

log = logging.getLogger(__name__)

DEDUP_CURSOR_NAME = "pulsar.dedup"
SNAPSHOT_EVERY_ENTRIES = 1000
REPLAY_BATCH_ENTRIES = 500
MAX_PRODUCERS_TRACKED = 10_000
DUPLICATE_POSITION = Position(-1, -1)


def highest_sequence_id_of(metadata: Any) -> int:
    seq = int(metadata.sequence_id)
    if metadata.HasField("highest_sequence_id") and metadata.highest_sequence_id > seq:
        return int(metadata.highest_sequence_id)
    if metadata.HasField("num_messages_in_batch") and metadata.num_messages_in_batch > 1:
        return seq + int(metadata.num_messages_in_batch) - 1
    return seq


def _is_non_final_chunk(metadata: Any) -> bool:
    return (
        metadata.HasField("num_chunks_from_msg")
        and metadata.num_chunks_from_msg > 1
        and metadata.chunk_id < metadata.num_chunks_from_msg - 1
    )


async def deduplication_enabled(service: Any, topic: PersistentTopic) -> bool:
    from magnetar.broker.resources.base import JsonStore  # noqa: PLC0415
    from magnetar.broker.service.policies import topic_policies_path  # noqa: PLC0415

    docs = getattr(service, "policy_documents", None)  # cached and watched (None: no watches)
    try:
        if docs is not None:
            own = (await docs.raw(topic.ref))[0] or {}
        else:
            own = await JsonStore(service.metadata_store).get(topic_policies_path(topic.ref)) or {}
    except md.MetadataError:
        log.warning("reading the topic policies of %s failed", topic.name, exc_info=True)
        own = {}
    if own.get("deduplicationEnabled") is not None:
        return bool(own["deduplicationEnabled"])
    enabled = bool(service.config.broker_deduplication_enabled)
    try:
        policies = await service.resources.namespaces.get(topic.ref.namespace)
    except md.MetadataError:  # cannot read the namespace now: the broker's setting decides
        log.warning("reading the namespace policies of %s failed", topic.name, exc_info=True)
        policies = None
    value = (policies or {}).get("deduplicationEnabled")
    if value is not None:
        enabled = bool(value)
    return enabled


async def refresh_deduplication(service: Any, topic: PersistentTopic) -> None:
    """Follow a policy change on a loaded topic (checked when a producer attaches, as Java does).

    Enabling loads the snapshot and replays after it; only done while no producer of the
    topic has publishes in flight, so no stored entry is missed by the replay.
    """
    if not hasattr(topic, "dedup") or not topic.ref.persistent:
        return
    wanted = await deduplication_enabled(service, topic)
    if wanted and topic.dedup is None:
        if any(p.pending_count for p in topic.producers.values()):
            return
        topic.dedup = await MessageDeduplication.load(topic)
    elif not wanted and topic.dedup is not None:
        dedup, topic.dedup = topic.dedup, None
        try:
            await topic.ml.delete_cursor(DEDUP_CURSOR_NAME)  # as Java: the snapshot goes with it
        except (ManagedLedgerError, md.MetadataError):
            log.debug("deleting %s on %s failed", DEDUP_CURSOR_NAME, topic.name, exc_info=True)
        dedup.duplicates = 0


class MessageDeduplication:
    def __init__(self, topic: PersistentTopic, cursor: Any) -> None:
        self.topic = topic
        self.cursor = cursor
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        # per producer name: highest sequence id of each add in flight -> its future
        self._in_flight: dict[str, dict[int, asyncio.Future[Any]]] = {}
        self._since_snapshot = 0
        self.last_snapshot_ms = 0
        self._last_position: Position | None = None
        self._snapshotting = False
        self.duplicates = 0

    # ------------------------------------------------------------ load
    @classmethod
    async def load(cls, topic: PersistentTopic) -> MessageDeduplication:
        cursor = await topic.ml.open_cursor(DEDUP_CURSOR_NAME, InitialPosition.EARLIEST)
        dedup = cls(topic, cursor)
        for name, seq in dict(cursor.properties).items():
            dedup.pushed[name] = dedup.persisted[name] = int(seq)
        replayed = await dedup._replay()
        if replayed:
            log.info("dedup on %s: replayed %d entries after the snapshot", topic.name, replayed)
        return dedup

    async def _replay(self) -> int:
        ml = self.topic.ml
        count = 0
        pos = self.cursor.mark_delete_position
        while True:
            entries = await ml.read_entries_from(pos.next(), REPLAY_BATCH_ENTRIES)
            if not entries:
                break
            for entry in entries:
                try:
                    md = peek_metadata(entry.data)
                except CorruptPayload:
                    continue
                if _is_non_final_chunk(md):
                    continue
                self._record(md.producer_name, highest_sequence_id_of(md))
                count += 1
            pos = entries[-1].position
            self._last_position = pos
        return count

    def _record(self, name: str, seq: int) -> None:
        if seq > self.persisted.get(name, -1):
            self.persisted[name] = seq
        if seq > self.pushed.get(name, -1):
            self.pushed[name] = seq
        if len(self.persisted) > MAX_PRODUCERS_TRACKED:
            oldest = next(iter(self.persisted))
            self.persisted.pop(oldest, None)
            self.pushed.pop(oldest, None)

    # ------------------------------------------------------------ produce path
    def last_sequence_id(self, producer_name: str) -> int:
        return self.persisted.get(producer_name, -1)

    def add(
        self, producer_name: str, data: bytes, start_add: Callable[[], asyncio.Future[Position]]
    ) -> asyncio.Future[Position]:
        """Store ``data`` via ``start_add`` unless it is a duplicate (then a (-1,-1) future)."""
        try:
            md = peek_metadata(data)
        except CorruptPayload:
            return start_add()
        name = md.producer_name or producer_name
        if _is_non_final_chunk(md):
            return start_add()
        seq = highest_sequence_id_of(md)
        if seq <= self.pushed.get(name, -1):
            self.duplicates += 1
            return self._duplicate(name, seq)
        self.pushed[name] = seq
        fut = start_add()
        self._in_flight.setdefault(name, {})[seq] = fut
        fut.add_done_callback(lambda f: self._stored(name, seq, f))
        return fut

    def _duplicate(self, name: str, seq: int) -> asyncio.Future[Position]:
        """The answer to a resend of ``seq``: (-1, -1) once its original is stored; the
        original's error if that add fails (then nothing of it is in the log)."""
        loop = asyncio.get_running_loop()
        out: asyncio.Future[Position] = loop.create_future()
        in_flight = self._in_flight.get(name) or {}
        # The add that stores seq: the first in flight whose highest id covers it (a resend
        # batched differently may end inside an earlier batch).
        covering = min((s for s in in_flight if s >= seq), default=None)
        if seq <= self.persisted.get(name, -1):
            out.set_result(DUPLICATE_POSITION)
            return out
        if covering is None:  # neither stored nor being stored: Java's "unknown" status
            out.set_exception(ManagedLedgerError(f"cannot tell yet whether sequence id {seq} is a duplicate"))
            return out
        original = in_flight[covering]

        def done(f: asyncio.Future[Any]) -> None:
            if out.done():
                return
            if f.cancelled():
                out.set_exception(ManagedLedgerError(f"the first copy of sequence id {seq} was not stored"))
            elif f.exception() is not None:
                out.set_exception(f.exception())  # type: ignore[arg-type]
            else:
                out.set_result(DUPLICATE_POSITION)

        original.add_done_callback(done)
        return out

    def _stored(self, name: str, seq: int, fut: asyncio.Future[Position]) -> None:
        in_flight = self._in_flight.get(name)
        if in_flight is not None and in_flight.get(seq) is fut:
            del in_flight[seq]
            if not in_flight:
                del self._in_flight[name]
        if fut.cancelled() or fut.exception() is not None:
            # Not stored: the client re-sends it, which must not look like a duplicate.
            self.pushed[name] = self.persisted.get(name, -1)
            return
        self._record(name, seq)
        pos = fut.result()
        if self._last_position is None or pos > self._last_position:
            self._last_position = pos
        self._since_snapshot += 1
        if self._since_snapshot >= SNAPSHOT_EVERY_ENTRIES and not self._snapshotting:
            self.topic.supervisor.spawn(self.snapshot(), name=f"dedup-snapshot:{self.topic.name}")

    # ------------------------------------------------------------ snapshot
    async def snapshot(self) -> None:
        pos = self._last_position
        if pos is None or self._snapshotting:
            return
        self._snapshotting = True
        try:
            self._since_snapshot = 0
            self.last_snapshot_ms = self.topic.clock.time_ms()
            if pos > self.cursor.mark_delete_position:
                await self.cursor.mark_delete(pos, dict(self.persisted))
        except ManagedLedgerError:  # the next snapshot tries again
            log.warning("dedup snapshot on %s failed", self.topic.name, exc_info=True)
        finally:
            self._snapshotting = False

    async def snapshot_if_due(self, interval_s: int, now_ms: int) -> None:
        """``deduplicationSnapshotIntervalSeconds``: snapshot what was stored since the last
        snapshot once ``interval_s`` has passed (called by the policy enforcer)."""
        if interval_s <= 0 or not self._since_snapshot:
            return
        if now_ms - self.last_snapshot_ms >= interval_s * 1000:
            await self.snapshot()

    async def close(self) -> None:
        await self.snapshot()

    def stats(self) -> dict[str, Any]:
        return {
            "deduplicationStatus": "Enabled",
            "producers": len(self.persisted),
            "duplicatesDropped": self.duplicates,
        }
