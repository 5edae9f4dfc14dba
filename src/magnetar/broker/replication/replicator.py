"""One replicator: a persistent topic's entries, read through its own cursor, sent to one remote cluster.

Theory of operation (Pulsar's PersistentReplicator): the replicator of topic
``T`` towards cluster ``R`` owns the durable cursor ``pulsar.repl.R`` of
``T``'s managed ledger and a :class:`RemoteProducer` named
``pulsar.repl.<local>`` on ``T`` in ``R``.  Its loop::

    connect (backoff 0.1 s .. 30 s) -> pump -> on any failure: rewind the cursor
    to its mark-delete position, drop the producer, connect again

The pump reads entries (``read_entries_or_wait``), and for each one decides:

* skip -- it came from another cluster (``replicated_from`` set: never
  replicate a replica, so two clusters never loop), its ``replicate_to`` list
  does not name ``R`` (message-level replication clusters; a client's
  ``disable_replication`` sends ``["__local__"]``), or it is a marker that
  is not for ``R`` (replicated-subscription snapshot markers are sent only to
  the clusters they name);
* send -- the stored bytes with the metadata rewritten once: everything kept
  (producer name, sequence id, publish and event time, key, properties, a
  batch stays one batch) plus ``replicated_from = <local>``.  The remote's
  deduplication keys on the metadata's producer name and sequence id, so a
  re-send after a reconnect is dropped there.

Entries are acknowledged in order: the cursor's mark-delete moves to the
last entry whose receipt (or skip) is in, never past a send still in flight.
At most ``max_pending`` sends are in flight (``replicationProducerQueueSize``).
While the remote is down nothing moves the cursor, so the backlog grows; the
topic's backlog quota counts this cursor like any subscription's, so the
quota bounds it.

``replicatorDispatchRate`` (topic > namespace, per local cluster) bounds
what each replicator sends: before each send the replicator checks its own
:class:`~magnetar.broker.service.dispatch_rate.DispatchWindow` against the
rate (``rate_of``, read from the topic's effective policies on each entry,
so a policy change applies at once) and, when the period's messages or bytes
are spent, acknowledges what is done and sleeps until the next period.  An
entry (a batch counts its messages) larger than what is left still goes;
the overshoot is debt carried into the next periods, as for consumers.

Schemas: an entry whose metadata names a ``schema_version`` is sent with
that schema known to the remote topic.  Per connection, each local version
is looked up once in the local registry (``schema_of``) and registered on
the remote with GET_OR_CREATE_SCHEMA (as Pulsar's producer does before it
sends a message of a new schema); the copy carries the remote's version
bytes, so a consumer there decodes it with the schema it asks for.  A remote
that refuses the schema (incompatible) fails the pump like a failed send:
the replicator retries with backoff and the backlog waits.

Counters for stats (``replication`` section, metrics) are plain integer
adds; ``sample`` turns them into rates on the broker's stats interval.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from magnetar.broker.replication.remote import RemoteProducer, RemoteProducerError
from magnetar.broker.service.dispatch_rate import NO_LIMIT, DispatchRate, DispatchWindow
from magnetar.managed_ledger.api import ManagedCursor, ManagedLedgerError, Position
from magnetar.protocol.errors import ProtocolError
from magnetar.protocol.markers import REPLICATED_SUBSCRIPTION_MARKERS
from magnetar.protocol.payload import num_messages, parse_headers_and_payload, replica_of
from magnetar.protocol.wire import WireSchema
from magnetar.runtime import Clock

log = logging.getLogger(__name__)

REPLICATOR_PREFIX = "pulsar.repl"
READ_BATCH_ENTRIES = 100
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 30.0
THROTTLE_WAITS_MAX = 100  # bound on back-to-back waits before one send (a clock that does not move)

UrlOf = Callable[[str], Awaitable[str | None]]
SchemaOf = Callable[[bytes], Awaitable[WireSchema | None]]


class _Rate:
    """Messages and bytes per second between two samples (the broker's stats interval)."""

    __slots__ = ("_last", "byte_rate", "msg_rate")

    def __init__(self) -> None:
        self._last = (0, 0)
        self.msg_rate = 0.0
        self.byte_rate = 0.0

    def sample(self, msgs: int, nbytes: int, elapsed_s: float) -> None:
        if elapsed_s > 0:
            self.msg_rate = max(0, msgs - self._last[0]) / elapsed_s
            self.byte_rate = max(0, nbytes - self._last[1]) / elapsed_s
        self._last = (msgs, nbytes)


def cursor_name(remote_cluster: str, prefix: str = REPLICATOR_PREFIX) -> str:
    return f"{prefix}.{remote_cluster}"


class Replicator:
    def __init__(
        self,
        *,
        topic_name: str,
        local_cluster: str,
        remote_cluster: str,
        cursor: ManagedCursor,
        url_of: UrlOf,
        clock: Clock,
        max_pending: int = 1000,
        prefix: str = REPLICATOR_PREFIX,
        credentials: tuple[str, bytes] | None = None,
        rate_of: Callable[[], DispatchRate] | None = None,
        schema_of: SchemaOf | None = None,
    ) -> None:
        self.topic_name = topic_name
        self.local_cluster = local_cluster
        self.remote_cluster = remote_cluster
        self.cursor = cursor
        self.url_of = url_of
        self.clock = clock
        self.max_pending = max(1, max_pending)
        self.credentials = credentials
        self.rate_of: Callable[[], DispatchRate] = rate_of or (lambda: NO_LIMIT)
        self._window = DispatchWindow()  # replicatorDispatchRate
        self.schema_of = schema_of
        self._remote_schema: dict[bytes, bytes] = {}  # local version -> remote version (per connection)
        self.throttled_s = 0.0  # time spent waiting for the rate (stats, tests)
        self.producer_name = f"{prefix}.{local_cluster}"
        self.producer: RemoteProducer | None = None
        self.task: asyncio.Task[None] | None = None
        self._inflight: collections.deque[tuple[Position, asyncio.Future[Any] | None, int, int]] = (
            collections.deque()
        )
        # stats
        self.msg_out = 0
        self.bytes_out = 0
        self.msg_skipped = 0
        self.rate_out = _Rate()
        self.last_error: str | None = None
        self.oldest_pending_publish_ms = 0  # publish time of the oldest entry read but not acknowledged
        self._closed = False

    # ------------------------------------------------------------ lifecycle
    async def close(self) -> None:
        self._closed = True
        task = self.task
        if task is not None and not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self._drop_producer("replicator closed")

    async def run(self) -> None:
        backoff = BACKOFF_MIN_S
        while not self._closed:
            try:
                url = await self.url_of(self.remote_cluster)
                if not url:
                    raise RemoteProducerError(f"cluster {self.remote_cluster} has no brokerServiceUrl")
                producer = RemoteProducer(
                    self.clock, url, self.topic_name, self.producer_name, self.credentials
                )
                self.producer = producer
                self._remote_schema.clear()
                await producer.open()
                log.info("replicator %s -> %s connected (%s)", self.topic_name, self.remote_cluster, url)
                self.last_error = None
                backoff = BACKOFF_MIN_S
                await self._pump(producer)
            except asyncio.CancelledError:
                raise
            except (RemoteProducerError, ProtocolError, OSError, ManagedLedgerError) as exc:
                self.last_error = str(exc)
                log.info("replicator %s -> %s: %s; retrying in %.1fs",
                         self.topic_name, self.remote_cluster, exc, backoff)  # fmt: skip
            await self._drop_producer("reconnecting")
            self._inflight.clear()
            self.cursor.rewind()  # re-read everything not acknowledged (the remote dedups)
            await self._note_oldest_pending()
            await self.clock.sleep(backoff)
            backoff = min(BACKOFF_MAX_S, backoff * 2)

    async def _note_oldest_pending(self) -> None:
        """While disconnected: the publish time of the oldest entry waiting (for the delay stat)."""
        try:
            head = await self.cursor.peek_entries(1) if self.cursor.number_of_entries_in_backlog() else []
            self.oldest_pending_publish_ms = (
                int(parse_headers_and_payload(head[0].data, verify=False).metadata.publish_time)
                if head
                else 0
            )
        except (ManagedLedgerError, ProtocolError):
            pass

    async def _drop_producer(self, reason: str) -> None:
        producer, self.producer = self.producer, None
        if producer is not None:
            await producer.close(reason)

    # ------------------------------------------------------------ the pump
    async def _pump(self, producer: RemoteProducer) -> None:
        while True:
            if not self.cursor.has_more_entries():
                await self._settle(wait_all=True)
            entries = await self.cursor.read_entries_or_wait(READ_BATCH_ENTRIES)
            for entry in entries:
                out = await self._outgoing_with_schema(producer, entry.data)
                if out is None:
                    self.msg_skipped += 1
                    self._inflight.append((entry.position, None, 0, 0))
                    continue
                data, n, publish_ms = out
                rate = self.rate_of()
                if not rate.unlimited:
                    await self._throttle(rate)
                    self._window.current(self.clock.monotonic(), rate)
                    self._window.messages += n
                    self._window.bytes += len(data)
                if not self._inflight:
                    self.oldest_pending_publish_ms = publish_ms
                self._inflight.append((entry.position, producer.send(data, n), n, len(data)))
                if len(self._inflight) >= self.max_pending:
                    await self._settle(wait_all=False)
            await producer.drain()
            await self._settle(wait_all=False)

    async def _throttle(self, rate: DispatchRate) -> None:
        """Wait until the current period of ``rate`` has messages and bytes left."""
        for _ in range(THROTTLE_WAITS_MAX):
            now_s = self.clock.monotonic()
            messages, size, ends_s = self._window.left(now_s, rate)
            if (messages is None or messages > 0) and (size is None or size > 0):
                return
            await self._settle(wait_all=False)  # acknowledge what is done before sleeping
            self.throttled_s += max(0.0, ends_s - now_s)
            await self.clock.sleep(max(0.0, ends_s - now_s))

    async def _outgoing_with_schema(
        self, producer: RemoteProducer, stored: bytes
    ) -> tuple[bytes, int, int] | None:
        meta = parse_headers_and_payload(stored, verify=False).metadata
        version = bytes(meta.schema_version) if meta.HasField("schema_version") else b""
        if not version or self.schema_of is None or meta.HasField("replicated_from"):
            return self.outgoing(stored)
        remote = self._remote_schema.get(version)
        if remote is None:
            schema = await self.schema_of(version)
            remote = version if schema is None else await producer.schema_version_for(schema)
            self._remote_schema[version] = remote
        return self.outgoing(stored, None if remote == version else remote)

    def outgoing(self, stored: bytes, schema_version: bytes | None = None) -> tuple[bytes, int, int] | None:
        """(bytes to send, message count, publish time) or None when the entry stays here."""
        parsed = parse_headers_and_payload(stored, verify=False)
        meta = parsed.metadata
        if meta.HasField("replicated_from"):
            return None
        targets = list(meta.replicate_to)
        if meta.HasField("marker_type"):
            if meta.marker_type not in REPLICATED_SUBSCRIPTION_MARKERS or self.remote_cluster not in targets:
                return None
        elif targets and self.remote_cluster not in targets:
            return None
        copy = replica_of(parsed, self.local_cluster, schema_version)
        return copy, num_messages(meta), int(meta.publish_time)

    async def _settle(self, *, wait_all: bool) -> None:
        """Acknowledge the longest prefix of in-flight entries that is done; wait for the head
        while over the window (or for everything when ``wait_all``)."""
        last: Position | None = None
        inflight = self._inflight
        while inflight:
            pos, fut, n, nbytes = inflight[0]
            if fut is not None:
                if not fut.done():
                    if not (wait_all or len(inflight) >= self.max_pending):
                        break
                    await fut
                fut.result()  # a failed send fails the pump: reconnect and re-send from mark-delete
                self.msg_out += n
                self.bytes_out += nbytes
            inflight.popleft()
            last = pos
        if last is not None:
            if not inflight:
                self.oldest_pending_publish_ms = 0
            await self.cursor.mark_delete(last)

    # ------------------------------------------------------------ stats
    def sample(self, elapsed_s: float) -> None:
        self.rate_out.sample(self.msg_out, self.bytes_out, elapsed_s)

    @property
    def connected(self) -> bool:
        return self.producer is not None and self.producer.connected

    def backlog(self) -> int:
        return self.cursor.number_of_messages_in_backlog()

    def delay_s(self, now_ms: int) -> int:
        """Seconds since the publish of the oldest entry still on its way (0 when caught up)."""
        if not self.oldest_pending_publish_ms or self.backlog() == 0:
            return 0
        return max(0, (now_ms - self.oldest_pending_publish_ms) // 1000)
