"""TransactionConfig: the broker's transaction settings, typed once from its key=value settings.

Theory of operation: the keys are Pulsar's where Pulsar has one; they arrive through
``BrokerConfig.extra`` and are converted here (a bad value is a ConfigError naming the key).
Pulsar's pluggable-implementation keys are *accepted and ignored* (``IGNORED_KEYS``): Magnetar
has one implementation of each part (managed-ledger transaction log, topic transaction
buffer with snapshots in the metadata store, managed-ledger pending-ack store), so naming a
provider class changes nothing.  The number of coordinators is ``magnetarTransaction
CoordinatorCount`` (Pulsar sets it with ``initialize-transaction-coordinator-metadata
--initial-num-transaction-coordinators``): the partitions of
``persistent://pulsar/system/transaction_coordinator_assign`` created at start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from magnetar.broker.config import ConfigError

USED_KEYS = (
    "transactionCoordinatorEnabled",
    "magnetarTransactionCoordinatorCount",
    "maxActiveTransactionsPerCoordinator",
    "transactionBufferSnapshotMaxTransactionCount",
    "transactionBufferSnapshotMinTimeInMillis",
    "magnetarTransactionDefaultTimeoutMs",
    "magnetarTransactionTimeoutCheckIntervalMs",
)
IGNORED_KEYS = (
    "transactionMetadataStoreProviderClassName",
    "transactionBufferProviderClassName",
    "transactionPendingAckStoreProviderClassName",
    "transactionLogBatchedWriteEnabled",
    "transactionPendingAckBatchedWriteEnabled",
    "transactionBufferClientMaxConcurrentRequests",
    "transactionBufferClientOperationTimeoutInMills",
    "transactionPendingAckLogIndexMinLag",
)
KNOWN_KEYS = frozenset(USED_KEYS + IGNORED_KEYS)


@dataclass(frozen=True)
class TransactionConfig:
    enabled: bool = False
    coordinator_count: int = 1
    max_active_per_coordinator: int = 0  # 0: unlimited
    snapshot_max_txn_count: int = 1000  # ends between two buffer snapshots
    snapshot_min_time_ms: int = 5000  # and at most one snapshot per this many ms
    default_timeout_ms: int = 60_000  # NEW_TXN without a timeout
    timeout_check_interval_ms: int = 200

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> TransactionConfig:
        def get(key: str, default: Any, kind: type) -> Any:
            raw = props.get(key)
            if raw is None or raw == "":
                return default
            if kind is bool:
                text = str(raw).strip().lower()
                if text in ("true", "1", "yes", "on"):
                    return True
                if text in ("false", "0", "no", "off"):
                    return False
                raise ConfigError(f"{key}={raw!r}: expected true or false")
            try:
                value = int(str(raw).strip())
            except ValueError:
                raise ConfigError(f"{key}={raw!r}: expected an integer") from None
            if value < 0:
                raise ConfigError(f"{key}={raw!r}: must not be negative")
            return value

        cfg = cls(
            enabled=get("transactionCoordinatorEnabled", False, bool),
            coordinator_count=get("magnetarTransactionCoordinatorCount", 1, int),
            max_active_per_coordinator=get("maxActiveTransactionsPerCoordinator", 0, int),
            snapshot_max_txn_count=get("transactionBufferSnapshotMaxTransactionCount", 1000, int),
            snapshot_min_time_ms=get("transactionBufferSnapshotMinTimeInMillis", 5000, int),
            default_timeout_ms=get("magnetarTransactionDefaultTimeoutMs", 60_000, int),
            timeout_check_interval_ms=get("magnetarTransactionTimeoutCheckIntervalMs", 200, int),
        )
        if cfg.coordinator_count < 1:
            raise ConfigError("magnetarTransactionCoordinatorCount must be at least 1")
        return cfg
