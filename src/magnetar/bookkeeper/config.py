"""Configuration of the ledger client.

Theory of operation: one frozen :class:`ClientConfig` is built by the
composition root (from Pulsar's ``bookkeeperClient*`` / BookKeeper's client
keys) and handed to :class:`~magnetar.bookkeeper.client.BookKeeperClient`.
Every wait the client does is bounded by one of these numbers, and every
queue by one of the ``*_max`` limits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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
    # Placement: "default", "rack_aware" or "region_aware" (BK: ensemblePlacementPolicy; Pulsar:
    # bookkeeperClientRackawarePolicyEnabled / bookkeeperClientRegionawarePolicyEnabled).
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
        if self.placement_policy not in ("default", "rack_aware", "region_aware"):
            raise ValueError(f"unknown placement policy {self.placement_policy!r}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: ClientConfig | None = None) -> ClientConfig:
        """The ledger client's settings from Pulsar's ``bookkeeperClient*`` keys and BookKeeper's
        client / auto-recovery keys (``CLIENT_KEYS``), converted to this model's units once.

        Placement: ``bookkeeperClientRegionawarePolicyEnabled=true`` wins, then
        ``bookkeeperClientRackawarePolicyEnabled`` (Pulsar's broker default true); a BookKeeper
        ``ensemblePlacementPolicy`` class name is understood too.  ``base`` supplies the
        defaults for keys not given (a broker's default policy is rack-aware, as Pulsar's)."""
        cfg = base or cls()
        changes: dict[str, Any] = {}
        for key, (name, scale) in CLIENT_KEYS.items():
            raw = props.get(key, "").strip()
            if raw:
                changes[name] = _number(key, raw, scale)
        if (timeout := props.get("bookkeeperClientTimeoutInSeconds", "").strip()) and not (
            {"addEntryTimeoutSec", "readEntryTimeoutSec"} & props.keys()
        ):
            changes["add_timeout_ms"] = changes["read_timeout_ms"] = _number(
                "bookkeeperClientTimeoutInSeconds", timeout, 1000
            )
        policy = _placement_from(props)
        if policy is not None:
            changes["placement_policy"] = policy
        return dataclasses.replace(cfg, **changes)


# key -> (field, factor to the field's unit).  BookKeeper's seconds become milliseconds here.
CLIENT_KEYS: dict[str, tuple[str, int]] = {
    "addEntryTimeoutSec": ("add_timeout_ms", 1000),
    "readEntryTimeoutSec": ("read_timeout_ms", 1000),
    "speculativeReadTimeout": ("speculative_read_timeout_ms", 1),
    "bookkeeperClientSpeculativeReadTimeoutInMillis": ("speculative_read_timeout_ms", 1),
    "bookieQuarantineTimeSeconds": ("bookie_quarantine_ms", 1000),
    "bookkeeperClientHealthCheckQuarantineTimeInSeconds": ("bookie_quarantine_ms", 1000),
    "lostBookieRecoveryDelay": ("lost_bookie_recovery_delay_ms", 1000),
    "auditorPeriodicCheckInterval": ("auditor_periodic_check_ms", 1000),
    "openLedgerRereplicationGracePeriod": ("open_ledger_rereplication_grace_ms", 1),
    "rereplicationEntryBatchSize": ("replication_copy_parallelism", 1),
}
PLACEMENT_KEYS = frozenset(
    {
        "bookkeeperClientRackawarePolicyEnabled",
        "bookkeeperClientRegionawarePolicyEnabled",
        "ensemblePlacementPolicy",
        "bookkeeperClientTimeoutInSeconds",
    }
)
KNOWN_KEYS = frozenset(CLIENT_KEYS) | PLACEMENT_KEYS


def _number(key: str, raw: str, scale: int) -> int:
    try:
        return int(float(raw) * scale)
    except ValueError:
        raise ValueError(f"bad value for {key}: {raw!r} (expected a number)") from None


def _flag(props: Mapping[str, str], key: str) -> bool | None:
    raw = props.get(key, "").strip().lower()
    if not raw:
        return None
    if raw in ("true", "false"):
        return raw == "true"
    raise ValueError(f"bad value for {key}: {props[key]!r} (expected true or false)")


def _placement_from(props: Mapping[str, str]) -> str | None:
    region, rack = (
        _flag(props, "bookkeeperClientRegionawarePolicyEnabled"),
        _flag(props, "bookkeeperClientRackawarePolicyEnabled"),
    )
    if region:
        return "region_aware"
    if rack is not None:
        return "rack_aware" if rack else "default"
    cls_name = props.get("ensemblePlacementPolicy", "").strip().lower()
    if "regionaware" in cls_name:
        return "region_aware"
    if "rackaware" in cls_name:
        return "rack_aware"
    if cls_name:
        return "default"
    return None
