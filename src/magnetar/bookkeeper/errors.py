"""Translation of bookie errors into ledger-client errors (once, at this boundary).

Theory of operation: a :class:`~magnetar.bookie.api.BookieError` says what
went wrong on one bookie; the ledger client decides per operation whether
that is fatal (fenced, unauthorized) or a reason to try another bookie or an
ensemble change (unavailable, timeout, read-only, disk full).  When an
operation as a whole fails the caller gets a :class:`BKError` subclass.
"""

from __future__ import annotations

from magnetar.bookie import api as bookie_api
from magnetar.bookkeeper import api
from magnetar.metadata.api import MetadataError


class BookieFailedError(api.BKError):
    """An operation failed on one bookie in a way another bookie might not (retriable)."""

    retriable = True

    def __init__(self, message: str, bookie_id: str | None = None) -> None:
        super().__init__(message)
        self.bookie_id = bookie_id


class UnauthorizedError(api.BKError):
    """Wrong ledger password (master key) for the bookie."""


def is_fenced(exc: BaseException) -> bool:
    return isinstance(exc, bookie_api.LedgerFencedError | api.LedgerFencedError)


def is_missing(exc: BaseException) -> bool:
    """The bookie answered that it does not have the entry / ledger."""
    return isinstance(exc, bookie_api.NoSuchEntryError | bookie_api.NoSuchLedgerError)


def translate(exc: BaseException, ledger_id: int) -> api.BKError:
    """The BKError a caller sees for a bookie-level failure."""
    if isinstance(exc, api.BKError):
        return exc
    if isinstance(exc, bookie_api.LedgerFencedError):
        return api.LedgerFencedError(f"ledger {ledger_id} is fenced")
    if isinstance(exc, bookie_api.NoSuchLedgerError):
        return api.NoSuchLedgerError(f"ledger {ledger_id} not found on bookie {exc.bookie_id}")
    if isinstance(exc, bookie_api.NoSuchEntryError):
        return api.NoSuchEntryError(str(exc))
    if isinstance(exc, bookie_api.UnauthorizedAccessError):
        return UnauthorizedError(f"wrong password for ledger {ledger_id}")
    if isinstance(exc, bookie_api.BookieTimeoutError):
        return api.BKTimeoutError(f"bookie {exc.bookie_id} timed out on ledger {ledger_id}")
    if isinstance(exc, bookie_api.BookieError):
        return BookieFailedError(f"bookie {exc.bookie_id}: {exc}", exc.bookie_id)
    if isinstance(exc, MetadataError):
        return api.BKMetadataError(f"metadata store: {type(exc).__name__}: {exc}")
    return BookieFailedError(f"{type(exc).__name__}: {exc}")
