"""Broker configuration: one frozen model, read from Pulsar's ``key=value`` files.

Theory of operation: :class:`BrokerConfig` is a frozen dataclass whose fields are
Pulsar's ``broker.conf``/``standalone.conf`` key names in snake_case
(``brokerServicePort`` -> ``broker_service_port``).  Every field's metadata carries
its Pulsar key, so one table drives parsing, overriding and printing.

Sources, lowest precedence first: the built-in defaults (standalone's values, as
``conf/standalone.conf`` ships them), a properties file (:func:`load_config_file`),
then overrides from a dict (CLI flags, environment) via :meth:`BrokerConfig.with_overrides`,
which accepts either Pulsar keys or field names.

Rules of the file format (Java properties, as Pulsar reads them): ``#``/``!``
comment lines, blank lines, ``key=value`` or ``key: value``, a trailing backslash
continues a line, values are trimmed, an empty value means "use the default".
Unknown keys are not an error: they are kept in ``extra`` (plugins read them)
and reported by :func:`unknown_keys` so the caller can warn.  A bad value
(``brokerServicePort=abc``) raises :class:`ConfigError` naming the key, the value
and the expected type.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

from magnetar.managed_ledger.api import ManagedLedgerConfig
from magnetar.managed_ledger.offload import POLICY_KEYS as OFFLOAD_KEYS
from magnetar.managed_ledger.offload import OffloadPolicies, policies_from


class ConfigError(ValueError):
    """A configuration value could not be converted or is out of range."""


def _k(pulsar_key: str, default: Any, doc: str = "") -> Any:
    return field(default=default, metadata={"key": pulsar_key, "doc": doc})


@dataclass(frozen=True)
class BrokerConfig:
    # --- identity, ports, addresses
    cluster_name: str = _k("clusterName", "standalone")
    broker_service_port: int = _k("brokerServicePort", 6650)
    web_service_port: int = _k("webServicePort", 8080)
    bind_address: str = _k("bindAddress", "0.0.0.0")
    advertised_address: str = _k("advertisedAddress", "localhost")
    advertised_listeners: str = _k("advertisedListeners", "")
    metadata_store_url: str = _k("metadataStoreUrl", "")
    broker_shutdown_timeout_ms: int = _k("brokerShutdownTimeoutMs", 60_000)
    # --- topic creation
    allow_auto_topic_creation: bool = _k("allowAutoTopicCreation", True)
    allow_auto_topic_creation_type: str = _k("allowAutoTopicCreationType", "non-partitioned")
    default_num_partitions: int = _k("defaultNumPartitions", 1)
    allow_auto_subscription_creation: bool = _k("allowAutoSubscriptionCreation", True)
    max_num_partitions_per_partitioned_topic: int = _k("maxNumPartitionsPerPartitionedTopic", 0)
    default_number_of_namespace_bundles: int = _k("defaultNumberOfNamespaceBundles", 4)
    max_producers_per_topic: int = _k("maxProducersPerTopic", 0)
    # --- connections (0 = unlimited): more are closed at once, as Pulsar's ConnectionController
    broker_max_connections: int = _k("brokerMaxConnections", 0)
    broker_max_connections_per_ip: int = _k("brokerMaxConnectionsPerIp", 0)
    # --- regex consumers: server-side pattern filtering and topic-list watchers
    enable_broker_side_subscription_pattern_evaluation: bool = _k(
        "enableBrokerSideSubscriptionPatternEvaluation", True
    )
    subscription_pattern_max_length: int = _k("subscriptionPatternMaxLength", 50)
    max_topics_per_namespace: int = _k("maxTopicsPerNamespace", 0)  # 0 = unlimited
    max_consumers_per_topic: int = _k("maxConsumersPerTopic", 0)
    max_consumers_per_subscription: int = _k("maxConsumersPerSubscription", 0)
    broker_delete_inactive_topics_enabled: bool = _k("brokerDeleteInactiveTopicsEnabled", True)
    broker_delete_inactive_topics_frequency_seconds: int = _k(
        "brokerDeleteInactiveTopicsFrequencySeconds", 60
    )
    active_consumer_failover_delay_time_millis: int = _k("activeConsumerFailoverDelayTimeMillis", 1000)
    subscription_types_enabled: tuple[str, ...] = _k(
        "subscriptionTypesEnabled", ("Exclusive", "Shared", "Failover", "Key_Shared")
    )
    system_topic_enabled: bool = _k("systemTopicEnabled", True)
    # --- limits and flow control
    max_message_size: int = _k("maxMessageSize", 5 * 1024 * 1024)
    max_pending_publish_requests_per_connection: int = _k("maxPendingPublishRequestsPerConnection", 1000)
    max_unacked_messages_per_consumer: int = _k("maxUnackedMessagesPerConsumer", 50_000)
    max_unacked_messages_per_subscription: int = _k("maxUnackedMessagesPerSubscription", 200_000)
    keep_alive_interval_seconds: int = _k("keepAliveIntervalSeconds", 30)
    subscription_redelivery_tracker_enabled: bool = _k("subscriptionRedeliveryTrackerEnabled", True)
    acknowledgment_at_batch_index_level_enabled: bool = _k("acknowledgmentAtBatchIndexLevelEnabled", False)
    broker_deduplication_enabled: bool = _k("brokerDeduplicationEnabled", False)
    stats_update_frequency_in_secs: int = _k("statsUpdateFrequencyInSecs", 60)
    dispatcher_max_read_batch_size: int = _k("dispatcherMaxReadBatchSize", 100)
    dispatcher_max_read_size_bytes: int = _k("dispatcherMaxReadSizeBytes", 5 * 1024 * 1024)
    dispatcher_max_round_robin_batch_size: int = _k("dispatcherMaxRoundRobinBatchSize", 20)
    # --- retention
    default_retention_time_in_minutes: int = _k("defaultRetentionTimeInMinutes", 0)
    default_retention_size_in_mb: int = _k("defaultRetentionSizeInMB", 0)
    # --- managed ledger
    managed_ledger_default_ensemble_size: int = _k("managedLedgerDefaultEnsembleSize", 1)
    managed_ledger_default_write_quorum: int = _k("managedLedgerDefaultWriteQuorum", 1)
    managed_ledger_default_ack_quorum: int = _k("managedLedgerDefaultAckQuorum", 1)
    managed_ledger_max_entries_per_ledger: int = _k("managedLedgerMaxEntriesPerLedger", 50_000)
    managed_ledger_max_size_per_ledger_mbytes: int = _k("managedLedgerMaxSizePerLedgerMbytes", 2048)
    managed_ledger_min_ledger_rollover_time_minutes: int = _k("managedLedgerMinLedgerRolloverTimeMinutes", 10)
    managed_ledger_max_ledger_rollover_time_minutes: int = _k(
        "managedLedgerMaxLedgerRolloverTimeMinutes", 240
    )
    managed_ledger_cursor_max_entries_per_ledger: int = _k("managedLedgerCursorMaxEntriesPerLedger", 50_000)
    managed_ledger_max_unacked_ranges_to_persist: int = _k("managedLedgerMaxUnackedRangesToPersist", 10_000)
    managed_ledger_add_entry_timeout_seconds: int = _k("managedLedgerAddEntryTimeoutSeconds", 0)
    managed_ledger_password: str = _k("managedLedgerPassword", "")
    # Cursor snapshots persisted per second at most; acks do not wait for them (a crash
    # redelivers at most the last interval's acks).  0 = every ack waits until it is durable.
    managed_ledger_default_mark_delete_rate_limit: float = _k("managedLedgerDefaultMarkDeleteRateLimit", 1.0)
    # --- tiered storage (managed_ledger.offload); driver "" = off
    managed_ledger_offload_driver: str = _k("managedLedgerOffloadDriver", "")
    s3_managed_ledger_offload_bucket: str = _k("s3ManagedLedgerOffloadBucket", "")
    s3_managed_ledger_offload_region: str = _k("s3ManagedLedgerOffloadRegion", "")
    s3_managed_ledger_offload_service_endpoint: str = _k("s3ManagedLedgerOffloadServiceEndpoint", "")
    s3_managed_ledger_offload_credential_id: str = _k("s3ManagedLedgerOffloadCredentialId", "")
    s3_managed_ledger_offload_credential_secret: str = _k("s3ManagedLedgerOffloadCredentialSecret", "")
    file_system_uri: str = _k("fileSystemURI", "")
    managed_ledger_offload_max_block_size_in_bytes: int = _k(
        "managedLedgerOffloadMaxBlockSizeInBytes", 64 << 20
    )
    managed_ledger_offload_read_buffer_size_in_bytes: int = _k(
        "managedLedgerOffloadReadBufferSizeInBytes", 1 << 20
    )
    managed_ledger_offload_auto_trigger_size_threshold_bytes: int = _k(
        "managedLedgerOffloadAutoTriggerSizeThresholdBytes", -1
    )
    managed_ledger_offload_threshold_in_seconds: int = _k("managedLedgerOffloadThresholdInSeconds", -1)
    managed_ledger_offload_deletion_lag_ms: int = _k("managedLedgerOffloadDeletionLagMs", 14_400_000)
    # Keys we do not model, kept for plugins (Pulsar keeps them in a generic property map).
    extra: Mapping[str, str] = field(default_factory=dict, metadata={"key": None})

    # ------------------------------------------------------------------ conversions
    def with_overrides(self, overrides: Mapping[str, Any]) -> BrokerConfig:
        """A copy with values replaced; keys may be Pulsar names or field names.

        String values are converted like file values; typed values are checked.
        Unknown keys land in ``extra``.
        """
        changes: dict[str, Any] = {}
        extra = dict(self.extra)
        by_key = _fields_by_key()
        hints = _hints()
        for key, value in overrides.items():
            name = by_key.get(key) or (key if key in hints and key != "extra" else None)
            if name is None:
                extra[key] = str(value)
                continue
            changes[name] = (
                _convert(key, value, hints[name])
                if isinstance(value, str)
                else _check(key, value, hints[name])
            )
        cfg = dataclasses.replace(self, extra=extra, **changes)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        if self.allow_auto_topic_creation_type not in ("non-partitioned", "partitioned"):
            raise ConfigError(
                f"allowAutoTopicCreationType must be 'non-partitioned' or 'partitioned', "
                f"got {self.allow_auto_topic_creation_type!r}"
            )
        for key in ("broker_service_port", "web_service_port"):
            port = getattr(self, key)
            if not 0 <= port <= 65535:
                raise ConfigError(f"{_field_key(key)} must be a port number 0..65535, got {port}")
        if self.max_message_size <= 0:
            raise ConfigError(f"maxMessageSize must be positive, got {self.max_message_size}")
        if self.default_num_partitions <= 0:
            raise ConfigError(f"defaultNumPartitions must be positive, got {self.default_num_partitions}")
        e, w, a = (
            self.managed_ledger_default_ensemble_size,
            self.managed_ledger_default_write_quorum,
            self.managed_ledger_default_ack_quorum,
        )
        if not e >= w >= a >= 1:
            raise ConfigError(f"managed ledger quorums must satisfy E >= Qw >= Qa >= 1, got {e}/{w}/{a}")

    def as_properties(self) -> dict[str, Any]:
        """Pulsar key -> value, for ``/admin/v2/brokers/configuration`` style dumps."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            key = f.metadata.get("key")
            if key:
                value = getattr(self, f.name)
                out[key] = ",".join(value) if isinstance(value, tuple) else value
        out.update(self.extra)
        return out

    def managed_ledger_config(self) -> ManagedLedgerConfig:
        """The per-topic managed-ledger settings these managedLedger* keys describe."""

        def minutes_to_ms(m: int) -> int:
            return -1 if m < 0 else m * 60_000

        return ManagedLedgerConfig(
            ensemble_size=self.managed_ledger_default_ensemble_size,
            write_quorum=self.managed_ledger_default_write_quorum,
            ack_quorum=self.managed_ledger_default_ack_quorum,
            max_entries_per_ledger=self.managed_ledger_max_entries_per_ledger,
            max_size_per_ledger_bytes=self.managed_ledger_max_size_per_ledger_mbytes * 1024 * 1024,
            min_ledger_rollover_time_ms=minutes_to_ms(self.managed_ledger_min_ledger_rollover_time_minutes),
            max_ledger_rollover_time_ms=minutes_to_ms(self.managed_ledger_max_ledger_rollover_time_minutes),
            retention_time_ms=minutes_to_ms(self.default_retention_time_in_minutes),
            retention_size_bytes=(
                -1
                if self.default_retention_size_in_mb < 0
                else self.default_retention_size_in_mb * 1024 * 1024
            ),
            max_unacked_ranges_to_persist=self.managed_ledger_max_unacked_ranges_to_persist,
            cursor_max_entries_per_ledger=self.managed_ledger_cursor_max_entries_per_ledger,
            add_entry_timeout_ms=(self.managed_ledger_add_entry_timeout_seconds or 30) * 1000,
            password=self.managed_ledger_password.encode(),
            mark_delete_rate_per_s=max(0.0, float(self.managed_ledger_default_mark_delete_rate_limit)),
            offload_policies=self.offload_policies(),
        )

    def offload_policies(self) -> OffloadPolicies:
        """The broker's tiered-storage settings (namespace offload_policies overlay them).
        Pulsar also accepts the s3-prefixed block sizes: they win when present in ``extra``."""
        props = {k: v for k, v in self.as_properties().items() if k in OFFLOAD_KEYS}
        return policies_from(props)

    @property
    def max_frame_size(self) -> int:
        """Largest frame accepted: maxMessageSize + 10 KiB padding (chunked sends exceed the max)."""
        return self.max_message_size + 10 * 1024


# ---------------------------------------------------------------------- helpers
def _hints() -> dict[str, Any]:
    return get_type_hints(BrokerConfig)


def _fields_by_key() -> dict[str, str]:
    return {f.metadata["key"]: f.name for f in dataclasses.fields(BrokerConfig) if f.metadata.get("key")}


def _field_key(name: str) -> str:
    for f in dataclasses.fields(BrokerConfig):
        if f.name == name:
            return f.metadata.get("key") or name
    return name


_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def _convert(key: str, raw: str, typ: Any) -> Any:
    text = raw.strip()
    try:
        if typ is bool:
            low = text.lower()
            if low in _TRUE:
                return True
            if low in _FALSE:
                return False
            raise ValueError("expected true or false")
        if typ is int:
            return int(text)
        if typ is float:
            return float(text)
        if typ is str:
            return text
        if typ == tuple[str, ...]:
            return tuple(p.strip() for p in text.split(",") if p.strip())
    except ValueError as exc:
        raise ConfigError(f"bad value for {key}: {raw!r} ({exc})") from None
    raise ConfigError(f"cannot convert {key} to {typ}")


def _check(key: str, value: Any, typ: Any) -> Any:
    if typ is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if typ is bool and isinstance(value, bool):
        return value
    if typ is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if typ is str and isinstance(value, str):
        return value
    if typ == tuple[str, ...] and isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    if isinstance(typ, types.GenericAlias) and isinstance(value, tuple):
        return value
    raise ConfigError(f"bad value for {key}: {value!r} (expected {getattr(typ, '__name__', typ)})")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java-properties text into key -> raw value (empty values are dropped: 'not set')."""
    out: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            pending += stripped[:-1]
            continue
        logical.append(pending + stripped)
        pending = ""
    if pending:
        logical.append(pending)
    for entry in logical:
        seps = [i for i in (entry.find("="), entry.find(":")) if i >= 0]
        if seps:
            i = min(seps)
            key, value = entry[:i].strip(), entry[i + 1 :].strip()
        else:
            key, _, value = entry.partition(" ")
            key, value = key.strip(), value.strip()
        if key and value:
            out[key] = value
    return out


def config_from_properties(props: Mapping[str, str], base: BrokerConfig | None = None) -> BrokerConfig:
    return (base or BrokerConfig()).with_overrides(props)


def load_config_file(path: str | Path, base: BrokerConfig | None = None) -> BrokerConfig:
    """Read a ``broker.conf``/``standalone.conf`` file; raises ConfigError on bad values."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    return config_from_properties(parse_properties(text), base)


def unknown_keys(config: BrokerConfig) -> list[str]:
    """Keys that were given but are not modelled (the caller logs a warning for each)."""
    return sorted(config.extra)
