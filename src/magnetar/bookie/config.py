"""Bookie configuration: one frozen model, BookKeeper's key names.

Theory of operation: :class:`BookieConfig` is immutable and built once by the
composition root (CLI or standalone).  Each field maps to the key BookKeeper
uses in ``bk_server.conf`` (listed in ``BK_KEYS``), so an operator's existing
file works: ``BookieConfig.from_properties(text)`` reads ``key=value`` lines
(``#`` comments, blank lines), converts each value to the field's type and
ignores keys it does not know (returned by ``unknown_keys`` so the CLI can
warn).  ``with_overrides`` applies CLI flags on top.

Sizes and durations carry their unit in the field name; where BookKeeper's
key has another unit (``journalMaxSizeMB``) the field keeps BK's unit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# field name -> BookKeeper key
BK_KEYS: dict[str, str] = {
    "bookie_port": "bookiePort",
    "advertised_address": "advertisedAddress",
    "bookie_id": "bookieId",
    "journal_directory": "journalDirectory",
    "ledger_directories": "ledgerDirectories",
    "journal_sync_data": "journalSyncData",
    "journal_max_group_wait_ms": "journalMaxGroupWaitMSec",
    "journal_flush_when_queue_empty": "journalFlushWhenQueueEmpty",
    "journal_buffered_writes_threshold_bytes": "journalBufferedWritesThreshold",
    "journal_buffered_entries_threshold": "journalBufferedEntriesThreshold",
    "journal_max_size_mb": "journalMaxSizeMB",
    "journal_queue_size": "journalQueueSize",
    "journal_prealloc_size_mb": "journalPreAllocSizeMB",
    "write_cache_max_size_mb": "dbStorage_writeCacheMaxSizeMb",
    "read_cache_max_size_mb": "dbStorage_readAheadCacheMaxSizeMb",
    "read_ahead_batch_size": "dbStorage_readAheadCacheBatchSize",
    "entry_log_size_limit_bytes": "logSizeLimit",
    "flush_interval_ms": "flushInterval",
    "gc_wait_time_ms": "gcWaitTime",
    "minor_compaction_threshold": "minorCompactionThreshold",
    "minor_compaction_interval_s": "minorCompactionInterval",
    "major_compaction_threshold": "majorCompactionThreshold",
    "major_compaction_interval_s": "majorCompactionInterval",
    "disk_usage_threshold": "diskUsageThreshold",
    "disk_usage_lwm_threshold": "diskUsageLwmThreshold",
    "disk_check_interval_ms": "diskCheckInterval",
    "max_frame_size_bytes": "nettyMaxFrameSizeBytes",
    "max_pending_requests_per_connection": "maxPendingRequestsPerConnection",
    "max_lac_waiters": "maxLongPollWaiters",
    "read_only_mode_enabled": "readOnlyModeEnabled",
    "auto_recovery_daemon_enabled": "autoRecoveryDaemonEnabled",
    "zk_timeout_ms": "zkTimeout",
}


# Keys an embedded bookie (``magnetar standalone``) takes from the process's own settings; the
# identity and directories of that bookie are the standalone's (its data dir, a fixed id).
EMBEDDED_IDENTITY_KEYS = frozenset(
    {"bookiePort", "advertisedAddress", "bookieId", "journalDirectory", "ledgerDirectories"}
)


@dataclass(frozen=True, slots=True)
class BookieConfig:
    bookie_port: int = 3181
    advertised_address: str = "127.0.0.1"
    bookie_id: str = ""  # default: advertised_address:bookie_port
    journal_directory: str = "data/bookkeeper/journal"
    ledger_directories: tuple[str, ...] = ("data/bookkeeper/ledgers",)
    # journal: group commit
    journal_sync_data: bool = True
    journal_max_group_wait_ms: float = 2.0
    # flush a group as soon as the queue is empty (a lone writer waits for its fsync only);
    # BookKeeper's default is false, which makes every lone add wait journalMaxGroupWaitMSec
    journal_flush_when_queue_empty: bool = True
    journal_buffered_writes_threshold_bytes: int = 512 * 1024
    journal_buffered_entries_threshold: int = 1000
    journal_max_size_mb: int = 2048
    journal_queue_size: int = 10_000
    journal_prealloc_size_mb: int = 16
    # DbLedgerStorage
    write_cache_max_size_mb: int = 64
    read_cache_max_size_mb: int = 16
    read_ahead_batch_size: int = 100  # entries read ahead on a read-cache miss (1 = off)
    entry_log_size_limit_bytes: int = 1024 * 1024 * 1024
    flush_interval_ms: int = 60_000
    # garbage collection / compaction
    gc_wait_time_ms: int = 900_000
    minor_compaction_threshold: float = 0.2
    minor_compaction_interval_s: int = 3600
    major_compaction_threshold: float = 0.5
    major_compaction_interval_s: int = 86400
    # disk checks
    disk_usage_threshold: float = 0.95
    disk_usage_lwm_threshold: float = 0.90
    disk_check_interval_ms: int = 10_000
    read_only_mode_enabled: bool = True
    # auto-recovery (auditor + replication worker) in the bookie process; its own settings
    # (lostBookieRecoveryDelay, auditorPeriodicCheckInterval...) are the ledger client's
    auto_recovery_daemon_enabled: bool = False
    # metadata (ZooKeeper) session timeout: how long a dead bookie stays registered
    zk_timeout_ms: int = 10_000
    # server
    max_frame_size_bytes: int = 5 * 1024 * 1024
    max_pending_requests_per_connection: int = 1000
    max_lac_waiters: int = 10_000
    extra: dict[str, str] = field(default_factory=dict, compare=False)

    @property
    def effective_bookie_id(self) -> str:
        return self.bookie_id or f"{self.advertised_address}:{self.bookie_port}"

    @property
    def journal_max_size_bytes(self) -> int:
        return self.journal_max_size_mb * 1024 * 1024

    @property
    def write_cache_max_size_bytes(self) -> int:
        return self.write_cache_max_size_mb * 1024 * 1024

    @property
    def read_cache_max_size_bytes(self) -> int:
        return self.read_cache_max_size_mb * 1024 * 1024

    @classmethod
    def for_data_dir(cls, data_dir: str, **overrides: Any) -> BookieConfig:
        """Journal and ledgers under one directory (standalone, tests)."""
        kwargs: dict[str, Any] = {
            "journal_directory": f"{data_dir}/journal",
            "ledger_directories": (f"{data_dir}/ledgers",),
        }
        kwargs.update(overrides)
        return cls(**kwargs)

    def with_overrides(self, **overrides: Any) -> BookieConfig:
        return dataclasses.replace(self, **{k: v for k, v in overrides.items() if v is not None})

    @classmethod
    def from_properties(cls, text: str, base: BookieConfig | None = None) -> BookieConfig:
        return cls.from_mapping(parse_properties(text), base)

    @classmethod
    def from_mapping(cls, values: Mapping[str, str], base: BookieConfig | None = None) -> BookieConfig:
        """BK key -> raw string (a parsed file, or the keys of a standalone.conf); typed once here."""
        by_key = {v: k for k, v in BK_KEYS.items()}
        kwargs: dict[str, Any] = {}
        extra: dict[str, str] = {}
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for key, raw in values.items():
            name = by_key.get(key)
            if name is None:
                extra[key] = raw
                continue
            kwargs[name] = _convert(str(types[name]), raw, key)
        cfg = base or cls()
        return dataclasses.replace(cfg, extra=extra, **kwargs)

    @classmethod
    def from_file(cls, path: str, base: BookieConfig | None = None) -> BookieConfig:
        with open(path, encoding="utf-8") as f:
            return cls.from_properties(f.read(), base)

    def unknown_keys(self) -> list[str]:
        return sorted(self.extra)


def parse_properties(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            continue
        out[line[:sep].strip()] = line[sep + 1 :].strip()
    return out


def _convert(type_name: str, raw: str, key: str) -> Any:
    try:
        if type_name == "bool":
            if raw.lower() not in ("true", "false"):
                raise ValueError(raw)
            return raw.lower() == "true"
        if type_name == "int":
            return int(raw)
        if type_name == "float":
            return float(raw)
        if type_name.startswith("tuple"):
            return tuple(p.strip() for p in raw.split(",") if p.strip())
        return raw
    except ValueError:
        raise ValueError(f"bad value for {key}: {raw!r} (expected {type_name})") from None
