"""Request bodies and small results of the admin REST API, with Pulsar's JSON names.

Theory of operation: each model is a frozen dataclass whose ``to_json()``
writes exactly the field names of ``pulsar-admin-rest.md`` section 11 (some
snake_case, most camelCase -- kept verbatim), and whose ``from_json()`` reads
them back, ignoring unknown fields as Pulsar's readers do.  Setters of the
resource classes accept either a model or a plain mapping already in Pulsar's
shape; getters return the parsed JSON (dicts and lists), so nothing the broker
sends is lost.  Validation here is limited to what can never be valid
(negative quorum sizes, ensemble < write quorum < ack quorum), so the broker
stays the judge of the rest.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from magnetar.common.errors import InvalidArgument

LATEST_ID = 9223372036854775807  # Long.MAX_VALUE: "latest" in ResetCursorData


class AuthAction(enum.StrEnum):
    PRODUCE = "produce"
    CONSUME = "consume"
    FUNCTIONS = "functions"
    SOURCES = "sources"
    SINKS = "sinks"
    PACKAGES = "packages"


class BacklogQuotaType(enum.StrEnum):
    DESTINATION_STORAGE = "destination_storage"
    MESSAGE_AGE = "message_age"


class BacklogQuotaPolicy(enum.StrEnum):
    """Pulsar's ``RetentionPolicy`` enum: what happens when the backlog quota is hit."""

    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"


class SchemaCompatibilityStrategy(enum.StrEnum):
    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


class SubscriptionType(enum.StrEnum):
    EXCLUSIVE = "Exclusive"
    SHARED = "Shared"
    FAILOVER = "Failover"
    KEY_SHARED = "Key_Shared"


class InactiveTopicDeleteMode(enum.StrEnum):
    DELETE_WHEN_NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
    DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP = "delete_when_subscriptions_caught_up"


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


@dataclass(frozen=True)
class TenantInfo:
    admin_roles: tuple[str, ...] = ()
    allowed_clusters: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"adminRoles": list(self.admin_roles), "allowedClusters": list(self.allowed_clusters)}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> TenantInfo:
        return cls(tuple(d.get("adminRoles") or ()), tuple(d.get("allowedClusters") or ()))


@dataclass(frozen=True)
class ClusterData:
    service_url: str | None = None
    service_url_tls: str | None = None
    broker_service_url: str | None = None
    broker_service_url_tls: str | None = None
    proxy_service_url: str | None = None
    proxy_protocol: str | None = None
    peer_cluster_names: tuple[str, ...] | None = None
    authentication_plugin: str | None = None
    authentication_parameters: str | None = None
    listener_name: str | None = None

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "serviceUrl": self.service_url,
                "serviceUrlTls": self.service_url_tls,
                "brokerServiceUrl": self.broker_service_url,
                "brokerServiceUrlTls": self.broker_service_url_tls,
                "proxyServiceUrl": self.proxy_service_url,
                "proxyProtocol": self.proxy_protocol,
                "peerClusterNames": list(self.peer_cluster_names) if self.peer_cluster_names else None,
                "authenticationPlugin": self.authentication_plugin,
                "authenticationParameters": self.authentication_parameters,
                "listenerName": self.listener_name,
            }
        )


@dataclass(frozen=True)
class RetentionPolicies:
    retention_time_in_minutes: int = 0
    retention_size_in_mb: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "retentionTimeInMinutes": self.retention_time_in_minutes,
            "retentionSizeInMB": self.retention_size_in_mb,
        }


@dataclass(frozen=True)
class BacklogQuota:
    limit_size: int = -1  # bytes, -1 = none
    limit_time: int = -1  # seconds, -1 = none
    policy: BacklogQuotaPolicy = BacklogQuotaPolicy.PRODUCER_REQUEST_HOLD

    def to_json(self) -> dict[str, Any]:
        return {"limitSize": self.limit_size, "limitTime": self.limit_time, "policy": str(self.policy)}


@dataclass(frozen=True)
class PersistencePolicies:
    bookkeeper_ensemble: int = 2
    bookkeeper_write_quorum: int = 2
    bookkeeper_ack_quorum: int = 2
    managed_ledger_max_mark_delete_rate: float = 0.0

    def __post_init__(self) -> None:
        e, w, a = self.bookkeeper_ensemble, self.bookkeeper_write_quorum, self.bookkeeper_ack_quorum
        if not (e >= w >= a >= 1):
            raise InvalidArgument(
                f"persistence needs ensemble >= write quorum >= ack quorum >= 1, got {e}/{w}/{a}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "bookkeeperEnsemble": self.bookkeeper_ensemble,
            "bookkeeperWriteQuorum": self.bookkeeper_write_quorum,
            "bookkeeperAckQuorum": self.bookkeeper_ack_quorum,
            "managedLedgerMaxMarkDeleteRate": self.managed_ledger_max_mark_delete_rate,
        }


@dataclass(frozen=True)
class DispatchRate:
    dispatch_throttling_rate_in_msg: int = -1
    dispatch_throttling_rate_in_byte: int = -1
    relative_to_publish_rate: bool = False
    rate_period_in_second: int = 1

    def to_json(self) -> dict[str, Any]:
        return {
            "dispatchThrottlingRateInMsg": self.dispatch_throttling_rate_in_msg,
            "dispatchThrottlingRateInByte": self.dispatch_throttling_rate_in_byte,
            "relativeToPublishRate": self.relative_to_publish_rate,
            "ratePeriodInSecond": self.rate_period_in_second,
        }


@dataclass(frozen=True)
class PublishRate:
    publish_throttling_rate_in_msg: int = -1
    publish_throttling_rate_in_byte: int = -1

    def to_json(self) -> dict[str, Any]:
        return {
            "publishThrottlingRateInMsg": self.publish_throttling_rate_in_msg,
            "publishThrottlingRateInByte": self.publish_throttling_rate_in_byte,
        }


@dataclass(frozen=True)
class SubscribeRate:
    subscribe_throttling_rate_per_consumer: int = -1
    rate_period_in_second: int = 30

    def to_json(self) -> dict[str, Any]:
        return {
            "subscribeThrottlingRatePerConsumer": self.subscribe_throttling_rate_per_consumer,
            "ratePeriodInSecond": self.rate_period_in_second,
        }


@dataclass(frozen=True)
class InactiveTopicPolicies:
    inactive_topic_delete_mode: InactiveTopicDeleteMode = InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS
    max_inactive_duration_seconds: int = 60
    delete_while_inactive: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "inactiveTopicDeleteMode": str(self.inactive_topic_delete_mode),
            "maxInactiveDurationSeconds": self.max_inactive_duration_seconds,
            "deleteWhileInactive": self.delete_while_inactive,
        }


@dataclass(frozen=True)
class DelayedDeliveryPolicies:
    tick_time_ms: int = 1000
    active: bool = True
    max_delivery_delay_in_millis: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tickTime": self.tick_time_ms,
            "active": self.active,
            "maxDeliveryDelayInMillis": self.max_delivery_delay_in_millis,
        }


@dataclass(frozen=True)
class AutoTopicCreationOverride:
    allow_auto_topic_creation: bool = True
    topic_type: str = "non-partitioned"  # or "partitioned"
    default_num_partitions: int | None = None

    def __post_init__(self) -> None:
        if self.topic_type not in ("partitioned", "non-partitioned"):
            raise InvalidArgument(
                f"topic type must be partitioned or non-partitioned, got '{self.topic_type}'"
            )
        if self.allow_auto_topic_creation and self.topic_type == "partitioned":
            if not self.default_num_partitions or self.default_num_partitions <= 0:
                raise InvalidArgument("a partitioned auto-creation override needs default partitions > 0")

    def to_json(self) -> dict[str, Any]:
        return _drop_none(
            {
                "allowAutoTopicCreation": self.allow_auto_topic_creation,
                "topicType": self.topic_type,
                "defaultNumPartitions": self.default_num_partitions,
            }
        )


@dataclass(frozen=True)
class MessageId:
    """Admin-API message id: ``{"ledgerId", "entryId", "partitionIndex"[, "batchIndex"]}``."""

    ledger_id: int
    entry_id: int
    partition_index: int = -1
    batch_index: int = -1

    @classmethod
    def parse(cls, text: str) -> MessageId:
        """``L:E``, ``L:E:P`` or ``L:E:P:B`` (as ``pulsar-admin`` accepts and prints)."""
        parts = text.strip().split(":")
        if not 2 <= len(parts) <= 4:
            raise InvalidArgument(f"message id '{text}' is not ledgerId:entryId")
        try:
            nums = [int(p) for p in parts]
        except ValueError:
            raise InvalidArgument(f"message id '{text}' is not ledgerId:entryId") from None
        return cls(*nums)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> MessageId:
        return cls(
            int(d.get("ledgerId", -1)),
            int(d.get("entryId", -1)),
            int(d.get("partitionIndex", -1)),
            int(d.get("batchIndex", -1)),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ledgerId": self.ledger_id,
            "entryId": self.entry_id,
            "partitionIndex": self.partition_index,
        }
        if self.batch_index >= 0:
            out["batchIndex"] = self.batch_index
        return out

    def __str__(self) -> str:
        s = f"{self.ledger_id}:{self.entry_id}:{self.partition_index}"
        return s + (f":{self.batch_index}" if self.batch_index >= 0 else "")


EARLIEST = MessageId(-1, -1)
LATEST = MessageId(LATEST_ID, LATEST_ID)


@dataclass(frozen=True)
class ResetCursorData:
    ledger_id: int
    entry_id: int
    partition_index: int = -1
    is_excluded: bool = False
    batch_index: int = -1
    properties: dict[str, str] = field(default_factory=dict)

    @classmethod
    def at(
        cls, mid: MessageId, *, is_excluded: bool = False, properties: dict[str, str] | None = None
    ) -> ResetCursorData:
        return cls(
            mid.ledger_id,
            mid.entry_id,
            mid.partition_index,
            is_excluded,
            mid.batch_index,
            dict(properties or {}),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ledgerId": self.ledger_id,
            "entryId": self.entry_id,
            "partitionIndex": self.partition_index,
            "isExcluded": self.is_excluded,
            "batchIndex": self.batch_index,
        }
        if self.properties:
            out["properties"] = dict(self.properties)
        return out


@dataclass(frozen=True)
class PeekedMessage:
    """One message read over REST (peek / examine / get-by-id), from its headers and body."""

    message_id: str  # "L:E" (X-Pulsar-Message-ID)
    payload: bytes
    properties: dict[str, str]
    publish_time: str | None
    event_time: str | None
    batch_index: int | None = None  # set when split out of a batch entry
    key: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
