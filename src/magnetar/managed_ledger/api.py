"""The managed-ledger interface, as the broker uses it.

Theory of operation: a topic's log is a :class:`ManagedLedger` -- a list of
BookKeeper ledgers of which only the last is open for writes.  Every entry has
a :class:`Position` (ledger id, entry id) and positions are totally ordered.
The ledger list (with entry counts, sizes and timestamps) is kept in the
metadata store at ``/managed-ledgers/<name>``; only one process may own a
managed ledger at a time (the metadata version fences a second owner).

Each subscription is a :class:`ManagedCursor`:

* ``mark_delete_position`` -- everything at or before it is acknowledged;
* individually acknowledged positions after it are kept as ranges (the "ack
  holes" live between them);
* batch entries may be partly acknowledged: an ack set (list of 64-bit words,
  bit i set = message i still pending, as Pulsar's BitSet) per position;
* ``read_position`` -- the next entry the dispatcher will read.

Durable cursors persist all of that (to a cursor ledger plus a snapshot in
the metadata store) so a restart restores exactly what was acknowledged --
within ``max_unacked_ranges_to_persist`` ranges (Pulsar's
managedLedgerMaxUnackedRangesToPersist, default 10,000): only the ranges
nearest mark-delete are written, so acks beyond the cap are forgotten on
restart and those messages are redelivered, never lost.  With
``mark_delete_rate_per_s == 0`` an ack returns once it is durable; with a
rate, acks return at once and are persisted at most that often.
Non-durable cursors (readers) live in memory only.

Positions are "earliest" (``Position.EARLIEST``, before every entry) and
"latest" (the position after the last entry).  An empty ledger's last
confirmed entry is ``(current_ledger_id, -1)``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from magnetar.managed_ledger.offload import OffloadContext, OffloadPolicies


class ManagedLedgerError(Exception):
    retriable: bool = False


class ManagedLedgerFencedError(ManagedLedgerError):
    """Another owner took this managed ledger (metadata version moved) or BK fenced our ledger."""


class ManagedLedgerTerminatedError(ManagedLedgerError):
    pass


class ManagedLedgerClosedError(ManagedLedgerError):
    pass


class ManagedLedgerNotFoundError(ManagedLedgerError):
    pass


class ManagedLedgerStorageError(ManagedLedgerError):
    """A write/read to bookies failed; the add may be retried after a ledger rollover."""

    retriable = True


class CursorNotFoundError(ManagedLedgerError):
    pass


class CursorAlreadyClosedError(ManagedLedgerError):
    pass


class InvalidCursorPositionError(ManagedLedgerError):
    pass


class NoMoreEntriesError(ManagedLedgerError):
    """Reading past the end of a terminated ledger."""


@dataclass(frozen=True, order=True, slots=True)
class Position:
    ledger_id: int
    entry_id: int

    def next(self) -> Position:
        return Position(self.ledger_id, self.entry_id + 1)

    def __str__(self) -> str:
        return f"{self.ledger_id}:{self.entry_id}"


Position.EARLIEST = Position(-1, -1)  # type: ignore[attr-defined]
Position.LATEST = Position(2**63 - 1, 2**63 - 1)  # type: ignore[attr-defined]


class InitialPosition(enum.Enum):
    LATEST = 0
    EARLIEST = 1


@dataclass(frozen=True, slots=True)
class EntryMetadata:
    """Facts about an entry its writer already knows, kept beside it so readers (dispatch)
    need not parse the entry again: the message count (a batch's size) and the marker type
    (None: not a marker) -- the broker's SEND path fills these two -- and, where a writer
    computes them, the key hash (the Key_Shared slot) and the deliver-at time (ms since the
    epoch).  None in those two means "not given": a reader that needs them parses the entry."""

    num_messages: int = 1
    key_hash: int | None = None
    deliver_at_ms: int | None = None
    marker_type: int | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    position: Position
    data: bytes
    # As given to add_entry(metadata=), while the entry is in the entry cache; None when the
    # entry was read from the bookies (or written without it): parse ``data`` then.
    metadata: EntryMetadata | None = None

    @property
    def ledger_id(self) -> int:
        return self.position.ledger_id

    @property
    def entry_id(self) -> int:
        return self.position.entry_id


@dataclass(frozen=True)
class ManagedLedgerConfig:
    """Per-ledger settings; names follow Pulsar's managedLedger* keys."""

    ensemble_size: int = 1
    write_quorum: int = 1
    ack_quorum: int = 1
    max_entries_per_ledger: int = 50_000
    max_size_per_ledger_bytes: int = 2048 * 1024 * 1024
    min_ledger_rollover_time_ms: int = 10 * 60 * 1000
    max_ledger_rollover_time_ms: int = 240 * 60 * 1000
    retention_time_ms: int = 0  # -1 = infinite
    retention_size_bytes: int = 0  # -1 = infinite
    max_unacked_ranges_to_persist: int = 10_000
    cursor_max_entries_per_ledger: int = 50_000
    # How long an add may wait for bookies before failing (the ledger is then rolled).
    add_entry_timeout_ms: int = 30_000
    password: bytes = b""
    # Pulsar's managedLedgerDefaultMarkDeleteRateLimit: cursor snapshots per second.  0 = no
    # throttling, and an ack returns only once a snapshot containing it is durable; > 0: acks
    # return at once and are persisted at most this often (a crash loses <= 1/rate s of acks,
    # which are then redelivered).
    mark_delete_rate_per_s: float = 0.0
    # Entries a cursor read fetches beyond what it asked for, into the entry cache.
    read_ahead_entries: int = 100
    # Ensemble placement asked of new ledgers (bookie affinity groups; the value of the
    # ledger's "EnsemblePlacementPolicyConfig" custom metadata, see bookkeeper.isolation).
    placement_config: bytes = b""
    # Tiered storage (driver, thresholds, deletion lag); driver "" = off.
    offload_policies: OffloadPolicies = OffloadPolicies()


_SHARED_CONFIGS: dict[ManagedLedgerConfig, ManagedLedgerConfig] = {}
_SHARED_CONFIGS_MAX = 1024


def shared_config(config: ManagedLedgerConfig) -> ManagedLedgerConfig:
    """The one instance equal to ``config`` (configs are frozen): ten thousand topics with the
    same policies hold one config, not ten thousand equal copies (~0.4 KB each)."""
    got = _SHARED_CONFIGS.get(config)
    if got is None:
        if len(_SHARED_CONFIGS) >= _SHARED_CONFIGS_MAX:  # many distinct configs: start again
            _SHARED_CONFIGS.clear()
        got = _SHARED_CONFIGS[config] = config
    return got


@dataclass(frozen=True)
class LedgerInfo:
    ledger_id: int
    entries: int
    size_bytes: int
    timestamp_ms: int
    offloaded: bool = False  # the offloaded copy is complete: reads go to the tier
    # Pulsar's offload_context: uid, complete, bookkeeperDeleted, driver name and metadata.
    offload_context: OffloadContext | None = None


@runtime_checkable
class ManagedCursor(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def durable(self) -> bool: ...

    @property
    def mark_delete_position(self) -> Position: ...

    @property
    def read_position(self) -> Position: ...

    @property
    def properties(self) -> Mapping[str, int]: ...

    def has_more_entries(self) -> bool: ...

    async def read_entries(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Read from ``read_position`` onward (skipping individually acked entries), advance it.
        Returns [] when caught up."""

    async def read_entries_or_wait(self, max_entries: int, max_bytes: int | None = None) -> list[Entry]:
        """Like read_entries but waits for new entries when caught up (cancel to stop)."""

    async def peek_entries(self, n: int) -> list[Entry]:
        """The first ``n`` unacked entries after mark-delete; the read position does not move."""

    async def replay_entries(self, positions: Sequence[Position]) -> list[Entry]:
        """Read specific positions (redelivery); acked ones are skipped."""

    async def mark_delete(self, position: Position, properties: Mapping[str, int] | None = None) -> None:
        """Cumulative ack up to and including ``position``."""

    async def delete(self, positions: Sequence[Position]) -> None:
        """Individual acks; moves mark-delete when the first hole closes."""

    async def ack_batch_indexes(self, position: Position, ack_set: Sequence[int]) -> None:
        """Partial ack of a batch entry: ``ack_set`` words with 1 = still pending.  All-zero
        (or empty) acks the whole entry."""

    def get_ack_set(self, position: Position) -> list[int] | None:
        """The pending-bits set of a partly acked batch entry, or None."""

    def is_acknowledged(self, position: Position) -> bool: ...

    def individually_deleted_ranges(self) -> list[tuple[Position, Position]]:
        """Acked ranges after mark-delete, as (open lower, closed upper] pairs like Pulsar prints."""

    def rewind(self) -> None:
        """Read position back to the first unacked entry after mark-delete."""

    async def seek(self, position: Position) -> None:
        """Move the read position (not the mark-delete)."""

    async def reset_cursor(self, position: Position) -> None:
        """Move mark-delete and read position so that ``position`` is the next entry delivered."""

    async def skip_entries(self, n: int) -> None: ...

    async def clear_backlog(self) -> None: ...

    async def find_position_by_publish_time(self, timestamp_ms: int, publish_time_of) -> Position:
        """First position whose publish time >= timestamp_ms.  ``publish_time_of(data) -> int``
        extracts the time from an entry, so the managed ledger stays payload-agnostic."""

    def number_of_entries_in_backlog(self) -> int: ...

    def estimated_backlog_size_bytes(self) -> int:
        """Bytes of the entries after mark-delete (Pulsar's backlogSize estimate)."""

    def backlog_size_bytes(self) -> int:
        """Bytes of the unacknowledged entries, ack holes subtracted (admin ``backlogSize``)."""

    def number_of_messages_in_backlog(self) -> int:
        """Unacked messages, using the batch sizes given to ``add_entry(num_messages=)``
        (one per entry where unknown) minus acked indexes of partly acked batches."""

    async def expire_messages(self, ttl_ms: int, publish_time_of) -> bool:
        """Message TTL: move mark-delete to the newest entry published at or before
        ``now - ttl_ms`` (``publish_time_of(data) -> ms``).  True if it moved."""

    async def flush(self) -> None:
        """Wait until every acknowledgement so far is durably persisted (durable cursors)."""

    def stats(self) -> dict:
        """Internal stats as Pulsar's ``internalStats.cursors[name]`` shows them."""

    async def close(self) -> None: ...


@runtime_checkable
class ManagedLedger(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def last_confirmed_entry(self) -> Position: ...

    @property
    def number_of_entries(self) -> int: ...

    @property
    def total_size(self) -> int: ...

    @property
    def is_terminated(self) -> bool: ...

    @property
    def cursors(self) -> Mapping[str, ManagedCursor]: ...

    def ledgers(self) -> list[LedgerInfo]: ...

    async def add_entry(
        self, data: bytes, *, num_messages: int = 1, metadata: EntryMetadata | None = None
    ) -> Position:
        """Append; pipelined calls complete in call order.  ``num_messages``: messages in the
        entry (batch size from its metadata), for message counts and message backlogs.
        ``metadata`` (optional) is kept beside the entry and returned with it on reads while
        the entry is cached (its ``num_messages`` then counts, not the keyword's)."""

    async def check_writable(self) -> None:
        """If creating the current ledger failed (WriteFailed: e.g. fewer bookies than the
        ensemble), try again now; raise ManagedLedgerStorageError with the cause if it fails
        again.  Lets the broker refuse a producer with a clear error instead of accepting
        sends that can only fail."""

    @property
    def number_of_messages(self) -> int: ...

    def estimated_backlog_size_bytes(self) -> int:
        """Bytes after the slowest durable cursor (backlogSize; ``total_size`` is storageSize)."""

    async def offload_ledger(self, ledger_id: int, *, delete_from_bookkeeper: bool = False) -> None:
        """Copy a closed ledger through the factory's offloader and mark it offloaded."""

    async def open_cursor(
        self,
        name: str,
        initial_position: InitialPosition = InitialPosition.LATEST,
        properties: Mapping[str, int] | None = None,
    ) -> ManagedCursor: ...

    async def new_non_durable_cursor(self, start: Position, name: str | None = None) -> ManagedCursor:
        """A cursor whose next entry is the one after ``start`` (EARLIEST = from the beginning)."""

    async def delete_cursor(self, name: str) -> None: ...

    async def read_entry(self, position: Position) -> Entry: ...

    async def read_entries_from(self, start: Position, max_entries: int) -> list[Entry]:
        """Entries from the first existing position >= ``start`` (admin peek/examine)."""

    def position_after(self, start: Position, n: int) -> Position:
        """The existing position ``n`` entries after the first existing one >= ``start``."""

    def backlog_size_from(self, position: Position) -> int:
        """Estimated bytes from ``position`` to the end (admin ``backlogSize``)."""

    async def wait_for_entries_after(self, position: Position) -> None:
        """Return once an entry after ``position`` exists (or the ledger is closed/terminated)."""

    async def terminate(self) -> Position: ...

    async def trim_consumed_ledgers(self) -> None:
        """Delete ledgers every durable cursor has passed and retention no longer keeps."""

    async def set_config(self, config: ManagedLedgerConfig) -> None:
        """Apply new settings (retention etc.) to a live ledger."""

    def counters(self) -> dict[str, int]:
        """Cumulative counters (entriesAdded, bytesAdded, addEntryErrors, ...) for /metrics."""

    async def internal_stats_with_metadata(self) -> dict:
        """internal_stats plus each ledger's BookKeeper metadata as a ``metadata`` string
        (Pulsar's ``internalStats?metadata=true``)."""

    def internal_stats(self) -> dict:
        """As Pulsar's ``/internalStats``: entriesAddedCounter, numberOfEntries, totalSize,
        currentLedgerEntries, currentLedgerSize, lastConfirmedEntry, ledgers, cursors, ..."""

    async def close(self) -> None: ...

    async def delete(self) -> None: ...


@runtime_checkable
class ManagedLedgerFactory(Protocol):
    async def open(self, name: str, config: ManagedLedgerConfig | None = None) -> ManagedLedger: ...

    async def exists(self, name: str) -> bool: ...

    async def delete(self, name: str) -> None: ...

    async def list_names(self, prefix: str = "") -> list[str]: ...

    async def aclose(self) -> None: ...
