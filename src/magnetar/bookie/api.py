"""What a ledger client sees of one bookie.

Theory of operation: the ledger client (``magnetar.bookkeeper``) talks to each
bookie through a :class:`BookieClient`.  Over the network that is the wire
client in ``bookie.wire_client``; in standalone it is an in-process adapter
that calls the bookie's storage directly, with no socket.  Both raise the
same typed :class:`BookieError` subclasses.

Entries are opaque to the bookie except for the header the client puts in
front of the payload (see :mod:`magnetar.bookie.entry_format`): ledger id,
entry id, the writer's last-add-confirmed (LAC) and a CRC32-C digest.  The
bookie stores the whole thing and keeps the highest LAC it has seen per ledger
so ``read_lac`` can answer without the writer.

Fencing: ``read_entry(..., fence=True)`` (or ``fence``) marks the ledger
fenced on that bookie; later normal adds fail with :class:`LedgerFencedError`
while adds with ``recovery=True`` (the recovering client rewriting the tail)
are still accepted.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

# entry_id used in read requests to mean "the last entry this bookie has" (BK: LAST_ADD_CONFIRMED = -1).
LAST_ENTRY = -1


class BookieErrorCode(enum.IntEnum):
    # Values follow BookKeeper's BKException codes where one exists.
    OK = 0
    READ_EXCEPTION = -1
    NO_SUCH_ENTRY = -13
    NO_SUCH_LEDGER = -7
    LEDGER_FENCED = -101
    BOOKIE_READ_ONLY = -104
    UNAUTHORIZED = -102  # wrong master key
    BAD_REQUEST = -105
    TIMEOUT = -23
    UNAVAILABLE = -8  # cannot connect / connection lost
    TOO_MANY_REQUESTS = -106
    DISK_FULL = -107
    INTERNAL = -100


class BookieError(Exception):
    code: BookieErrorCode = BookieErrorCode.INTERNAL

    def __init__(self, message: str = "", bookie_id: str | None = None) -> None:
        super().__init__(message or self.__class__.__name__)
        self.bookie_id = bookie_id


class NoSuchLedgerError(BookieError):
    code = BookieErrorCode.NO_SUCH_LEDGER


class NoSuchEntryError(BookieError):
    code = BookieErrorCode.NO_SUCH_ENTRY


class LedgerFencedError(BookieError):
    code = BookieErrorCode.LEDGER_FENCED


class BookieReadOnlyError(BookieError):
    code = BookieErrorCode.BOOKIE_READ_ONLY


class UnauthorizedAccessError(BookieError):
    code = BookieErrorCode.UNAUTHORIZED


class BookieTimeoutError(BookieError):
    code = BookieErrorCode.TIMEOUT


class BookieUnavailableError(BookieError):
    code = BookieErrorCode.UNAVAILABLE


class BadRequestError(BookieError):
    code = BookieErrorCode.BAD_REQUEST


class DiskFullError(BookieError):
    code = BookieErrorCode.DISK_FULL


class TooManyRequestsError(BookieError):
    code = BookieErrorCode.TOO_MANY_REQUESTS


ERRORS_BY_CODE: dict[int, type[BookieError]] = {
    cls.code: cls
    for cls in (
        NoSuchLedgerError,
        NoSuchEntryError,
        LedgerFencedError,
        BookieReadOnlyError,
        UnauthorizedAccessError,
        BookieTimeoutError,
        BookieUnavailableError,
        BadRequestError,
        DiskFullError,
        TooManyRequestsError,
    )
}


def error_for_code(code: int, message: str = "", bookie_id: str | None = None) -> BookieError:
    cls = ERRORS_BY_CODE.get(code, BookieError)
    return cls(message, bookie_id)


@dataclass(frozen=True, slots=True)
class BookieInfo:
    bookie_id: str
    total_disk_bytes: int
    free_disk_bytes: int
    read_only: bool


@runtime_checkable
class BookieClient(Protocol):
    """A connection to one bookie.  Every call has a timeout (BookieTimeoutError)."""

    @property
    def bookie_id(self) -> str: ...

    async def add_entry(
        self, ledger_id: int, entry_id: int, master_key: bytes, entry: bytes, *, recovery: bool = False
    ) -> None:
        """Durably store ``entry`` (the full framed entry); returns after the journal sync."""

    async def read_entry(
        self, ledger_id: int, entry_id: int, *, fence: bool = False, master_key: bytes = b""
    ) -> bytes:
        """The framed entry; ``entry_id=LAST_ENTRY`` returns the last entry the bookie has.
        ``fence=True`` fences the ledger first (needs ``master_key``)."""

    async def read_lac(self, ledger_id: int) -> int:
        """The highest LAC this bookie has seen for the ledger (-1 if none)."""

    async def wait_lac(self, ledger_id: int, previous_lac: int, timeout_ms: int) -> int:
        """Long-poll: return when the LAC passes ``previous_lac`` or the timeout expires."""

    async def get_info(self) -> BookieInfo: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class BookieClientPool(Protocol):
    """Hands out (and caches) clients by bookie id."""

    def get(self, bookie_id: str) -> BookieClient: ...

    async def aclose(self) -> None: ...


# --- Metadata paths shared by bookies (registration, GC) and the ledger client -------------
# Flat layout like BookKeeper's: one node per ledger, the ledger id zero-padded.

LEDGERS_ROOT = "/ledgers"
AVAILABLE_PATH = "/ledgers/available"  # ephemeral child per writable bookie id
READONLY_PATH = "/ledgers/available/readonly"  # ephemeral child per read-only bookie id
COOKIES_PATH = "/ledgers/cookies"  # persistent child per bookie id
UNDERREPLICATED_PATH = "/ledgers/underreplication/ledgers"
LEDGER_ID_GEN_PATH = "/ledgers/idgen"
RACKS_PATH = "/ledgers/racks"  # child per bookie id -> rack name (rack-aware placement)
_LEDGER_PREFIX = "L"


def ledger_path(ledger_id: int) -> str:
    return f"{LEDGERS_ROOT}/{_LEDGER_PREFIX}{ledger_id:010d}"


def ledger_id_from_node(name: str) -> int | None:
    """The ledger id of a child name of LEDGERS_ROOT, or None if it is not a ledger node."""
    if not name.startswith(_LEDGER_PREFIX) or not name[1:].isdigit():
        return None
    return int(name[1:])
