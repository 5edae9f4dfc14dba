"""Compaction errors: typed, each with the wire code and HTTP status the broker answers with.

Theory of operation: everything the compaction package raises is a
:class:`CompactionError`, a :class:`~magnetar.broker.errors.BrokerError`, so the
broker's single translation point (``broker.errors``) turns it into a
``ServerError`` or an HTTP status without knowing this package.  Errors from
the layers below (managed ledger, BookKeeper, a corrupt compacted entry) are
wrapped once, here, with the original kept as ``__cause__``.
"""

from __future__ import annotations

from magnetar.broker.errors import BrokerError, Code


class CompactionError(BrokerError):
    """A compaction run failed; the previous horizon and compacted ledger stay valid."""

    server_error = Code.PersistenceError
    http_status = 500


class CompactionAlreadyRunning(CompactionError):
    """Pulsar's REST answers ``409 Compaction already in progress``."""

    server_error = Code.NotAllowedError
    http_status = 409

    def __init__(self, topic: str) -> None:
        super().__init__("Compaction already in progress")
        self.topic = topic


class CompactionTooManyKeys(CompactionError):
    """Phase one met more distinct keys than ``CompactorConfig.max_keys`` allows."""


class CompactedLedgerCorrupt(CompactionError):
    """An entry of the compacted ledger does not carry the compacted-entry framing."""


class CompactionServiceClosed(CompactionError):
    server_error = Code.ServiceNotReady
    http_status = 503
