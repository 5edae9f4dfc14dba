"""Configuration of the ledger client.

Theory of operation: one frozen :class:`ClientConfig` is built by the
composition root (from Pulsar's ``bookkeeperClient*`` / BookKeeper's client
keys) and handed to :class:`~magnetar.bookkeeper.client.BookKeeperClient`.
Every wait the client does is bounded by one of these numbers, and every
queue by one of the ``*_max`` limits.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClientConfig:
    # A single add request to one bookie (BK: addEntryTimeoutSec).  On expiry the bookie
    # counts as failed for this ledger and an ensemble change replaces it.
    add_timeout_ms: int = 5_000
    # A single read request to one bookie (BK: readEntryTimeoutSec).
    read_timeout_ms: int = 5_000
    # After this long without an answer a read is also sent to the next replica
    # (BK: speculativeReadTimeout).  0 disables speculative reads.
    speculative_read_timeout_ms: int = 500
    # Metadata-store operations (CAS loops give up after metadata_retries_max rounds).
    metadata_timeout_ms: int = 10_000
    metadata_retries_max: int = 32
    # Adds pushed but not yet confirmed, per write handle; add_entry waits for room.
    pending_adds_max: int = 10_000
    # How long add_entry / close wait for room or for pending adds to drain.
    add_wait_timeout_ms: int = 60_000
    # Ensemble changes: attempts to find a replacement and update metadata before the
    # handle gives up with NotEnoughBookiesError, and the pause between attempts.
    ensemble_change_attempts_max: int = 5
    ensemble_change_backoff_ms: int = 200
    # A bookie that failed a write is not picked as a replacement for this long
    # (BK: bookieQuarantineTimeSeconds); stops a writer flapping between sick bookies.
    bookie_quarantine_ms: int = 30_000
    # Reads of a range are split into batches fetched concurrently (bounded).
    read_parallelism_max: int = 64
    # Recovery reads forward from the LAC; this bounds how far (a sanity limit).
    recovery_entries_max: int = 1_000_000
    # Cached list of available bookies / racks is re-read at least this often.
    bookie_list_refresh_ms: int = 5_000
    # Placement: "default" or "rack_aware" (BK: ensemblePlacementPolicy).
    placement_policy: str = "default"
    # Auto-recovery: how long a lost bookie may stay away before its ledgers are marked
    # under-replicated (BK: lostBookieRecoveryDelay), and the worker's polling period.
    lost_bookie_recovery_delay_ms: int = 0
    replication_poll_interval_ms: int = 1_000
    # The auditor re-checks every ledger at least this often even when no bookie changed.
    auditor_periodic_check_ms: int = 3_600_000
    # Entries a replication worker copies concurrently.
    replication_copy_parallelism: int = 16
    # Open ledgers whose last fragment is under-replicated are fenced and closed by the
    # replication worker after this grace period (BK: openLedgerRereplicationGracePeriod).
    open_ledger_rereplication_grace_ms: int = 30_000

    def __post_init__(self) -> None:
        for name in (
            "add_timeout_ms",
            "read_timeout_ms",
            "metadata_timeout_ms",
            "pending_adds_max",
            "add_wait_timeout_ms",
            "ensemble_change_attempts_max",
            "read_parallelism_max",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"ClientConfig.{name} must be positive, got {getattr(self, name)}")
        if self.speculative_read_timeout_ms < 0:
            raise ValueError("ClientConfig.speculative_read_timeout_ms must be >= 0")
        if self.placement_policy not in ("default", "rack_aware"):
            raise ValueError(f"unknown placement policy {self.placement_policy!r}")
