"""The ledger client interface, as the managed ledger uses it.

Theory of operation: a ledger is an append-only sequence of entries with ids
0, 1, 2, ... written by exactly one writer (a :class:`WriteHandle`) to an
ensemble of E bookies; each entry goes to Qw of them (striped round-robin)
and is confirmed once Qa have synced it.  Adds complete strictly in entry-id
order; the last-add-confirmed (LAC) is the highest id such that it and every
id below it are confirmed.

A ledger's metadata (ensembles by first entry id, quorum sizes, state OPEN /
IN_RECOVERY / CLOSED, last entry id and length once closed) lives in the
metadata store under ``/ledgers/...`` and is only changed with
compare-and-set.

Readers open a ledger with :meth:`BookKeeper.open_ledger`.  ``recovery=True``
is what a new owner does: it fences the ledger on the bookies (the old
writer's next add fails with :class:`LedgerFencedError`), finds the last
entry a quorum may have confirmed, re-replicates the tail and closes the
ledger, so after it returns the ledger is CLOSED with a fixed last entry.
``recovery=False`` only reads up to the LAC the bookies report.

Errors are :class:`BKError` subclasses; the managed ledger maps them to its own.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


class BKError(Exception):
    """Base of every ledger-client error."""

    retriable: bool = False


class NoSuchLedgerError(BKError):
    pass


class NoSuchEntryError(BKError):
    pass


class LedgerFencedError(BKError):
    """The ledger was fenced by another client (recovery); this writer must stop."""


class LedgerClosedError(BKError):
    """Add to a closed ledger or read past its last entry."""


class NotEnoughBookiesError(BKError):
    retriable = True


class BKTimeoutError(BKError):
    retriable = True


class DigestMismatchError(BKError):
    pass


class LedgerRecoveryError(BKError):
    retriable = True


class MetadataVersionError(BKError):
    """Ledger metadata changed under us (CAS failed) and could not be reconciled."""


class BKClosedError(BKError):
    """The client itself was closed."""


class BKMetadataError(BKError):
    """The metadata store failed (timeout, connection loss); the outcome may be unknown."""

    retriable = True


class DigestType(enum.Enum):
    CRC32C = "CRC32C"
    DUMMY = "DUMMY"


class LedgerState(enum.Enum):
    OPEN = "OPEN"
    IN_RECOVERY = "IN_RECOVERY"
    CLOSED = "CLOSED"


@dataclass(frozen=True)
class LedgerMetadata:
    ledger_id: int
    ensemble_size: int
    write_quorum: int
    ack_quorum: int
    state: LedgerState
    # (first entry id, ensemble of bookie ids) in increasing first-entry order.
    ensembles: tuple[tuple[int, tuple[str, ...]], ...]
    last_entry_id: int = -1  # meaningful once CLOSED
    length: int = 0  # bytes, meaningful once CLOSED
    digest_type: DigestType = DigestType.CRC32C
    password: bytes = b""
    ctime_ms: int = 0
    custom_metadata: Mapping[str, bytes] = field(default_factory=dict)

    def ensemble_for(self, entry_id: int) -> tuple[str, ...]:
        current = self.ensembles[0][1]
        for first, ensemble in self.ensembles:
            if first > entry_id:
                break
            current = ensemble
        return current

    def write_set(self, entry_id: int) -> list[str]:
        """The Qw bookies that store ``entry_id`` (round-robin striping)."""
        ensemble = self.ensemble_for(entry_id)
        n = len(ensemble)
        return [ensemble[(entry_id + i) % n] for i in range(self.write_quorum)]

    @property
    def is_closed(self) -> bool:
        return self.state is LedgerState.CLOSED


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    ledger_id: int
    entry_id: int
    data: bytes


@runtime_checkable
class ReadHandle(Protocol):
    @property
    def ledger_id(self) -> int: ...

    @property
    def metadata(self) -> LedgerMetadata: ...

    @property
    def last_add_confirmed(self) -> int: ...

    @property
    def length(self) -> int: ...

    async def read(self, first_entry_id: int, last_entry_id: int) -> list[LedgerEntry]:
        """Entries first..last inclusive, in order, digests verified.  Reading past the LAC
        (or past the last entry of a closed ledger) raises NoSuchEntryError/LedgerClosedError."""

    async def read_last_add_confirmed(self) -> int:
        """Ask the bookies for a fresher LAC (for tailing readers of open ledgers)."""

    async def close(self) -> None: ...


@runtime_checkable
class WriteHandle(ReadHandle, Protocol):
    async def add_entry(self, data: bytes) -> int:
        """Append; returns the entry id once Qa bookies have it.  Calls may be pipelined:
        concurrent add_entry calls complete in the order they were made."""

    @property
    def last_add_pushed(self) -> int: ...

    async def close(self) -> None:
        """Wait for pending adds, then write last entry id and length into the metadata."""


@runtime_checkable
class BookKeeper(Protocol):
    async def create_ledger(
        self,
        ensemble_size: int,
        write_quorum: int,
        ack_quorum: int,
        *,
        digest_type: DigestType = DigestType.CRC32C,
        password: bytes = b"",
        custom_metadata: Mapping[str, bytes] | None = None,
    ) -> WriteHandle: ...

    async def open_ledger(
        self, ledger_id: int, *, password: bytes = b"", recovery: bool = True
    ) -> ReadHandle: ...

    async def delete_ledger(self, ledger_id: int) -> None:
        """Remove the ledger's metadata (bookies reclaim its data in GC).  Missing is not an error."""

    async def get_ledger_metadata(self, ledger_id: int) -> LedgerMetadata: ...

    async def list_ledgers(self) -> Sequence[int]: ...

    async def aclose(self) -> None: ...
