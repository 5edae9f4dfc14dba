"""Typed bodies of the admin API (Pulsar's JSON shapes, section 11 of the reference).

Theory of operation: every JSON body the admin REST accepts is validated by
one of these pydantic models before it reaches a metadata document, and the
same models describe the bodies in the OpenAPI document the web layer serves.
Field names are Pulsar's exactly (camelCase, or snake_case where Pulsar's
Jackson names are); unknown fields are ignored as Jackson does.  Defaults are
Pulsar's.  ``dump`` turns a model back into the stored JSON.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


def dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json")


class SchemaCompatibilityStrategy(str, Enum):
    UNDEFINED = "UNDEFINED"
    ALWAYS_INCOMPATIBLE = "ALWAYS_INCOMPATIBLE"
    ALWAYS_COMPATIBLE = "ALWAYS_COMPATIBLE"
    BACKWARD = "BACKWARD"
    FORWARD = "FORWARD"
    FULL = "FULL"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"


class SchemaAutoUpdateCompatibilityStrategy(str, Enum):
    AutoUpdateDisabled = "AutoUpdateDisabled"
    Backward = "Backward"
    Forward = "Forward"
    Full = "Full"
    AlwaysCompatible = "AlwaysCompatible"
    BackwardTransitive = "BackwardTransitive"
    ForwardTransitive = "ForwardTransitive"
    FullTransitive = "FullTransitive"


class SubscriptionType(str, Enum):
    Exclusive = "Exclusive"
    Shared = "Shared"
    Failover = "Failover"
    Key_Shared = "Key_Shared"


class SubscriptionAuthMode(str, Enum):
    NONE = "None"
    Prefix = "Prefix"


class AuthAction(str, Enum):
    produce = "produce"
    consume = "consume"
    functions = "functions"
    sources = "sources"
    sinks = "sinks"
    packages = "packages"


class BacklogQuotaType(str, Enum):
    destination_storage = "destination_storage"
    message_age = "message_age"


class RetentionPolicyAction(str, Enum):
    producer_request_hold = "producer_request_hold"
    producer_exception = "producer_exception"
    consumer_backlog_eviction = "consumer_backlog_eviction"


class ClusterData(_Body):
    serviceUrl: str | None = None
    serviceUrlTls: str | None = None
    brokerServiceUrl: str | None = None
    brokerServiceUrlTls: str | None = None
    proxyServiceUrl: str | None = None
    proxyProtocol: str | None = None
    authenticationPlugin: str | None = None
    authenticationParameters: str | None = None
    peerClusterNames: list[str] | None = None
    brokerClientTlsEnabled: bool = False
    tlsAllowInsecureConnection: bool = False
    listenerName: str | None = None


class TenantInfo(_Body):
    adminRoles: list[str] = Field(default_factory=list)
    allowedClusters: list[str] = Field(default_factory=list)


class BundlesData(_Body):
    boundaries: list[str] | None = None
    numBundles: int = Field(default=4, ge=1, le=1024)


class RetentionPolicies(_Body):
    retentionTimeInMinutes: int = Field(default=0, ge=-1, le=INT32_MAX)
    retentionSizeInMB: int = Field(default=0, ge=-1, le=INT64_MAX)


class BacklogQuota(_Body):
    limitSize: int = Field(default=-1, ge=-1, le=INT64_MAX)
    limitTime: int = Field(default=-1, ge=-1, le=INT32_MAX)
    policy: RetentionPolicyAction = RetentionPolicyAction.producer_request_hold

    @model_validator(mode="before")
    @classmethod
    def _old_limit(cls, data: Any) -> Any:
        if isinstance(data, dict) and "limit" in data and "limitSize" not in data:
            data = {**data, "limitSize": data["limit"]}
        return data


class PersistencePolicies(_Body):
    bookkeeperEnsemble: int = Field(default=2, ge=1, le=64)
    bookkeeperWriteQuorum: int = Field(default=2, ge=1, le=64)
    bookkeeperAckQuorum: int = Field(default=2, ge=1, le=64)
    managedLedgerMaxMarkDeleteRate: float = Field(default=0.0, ge=0.0)

    @model_validator(mode="after")
    def _quorums(self) -> PersistencePolicies:
        if not (self.bookkeeperEnsemble >= self.bookkeeperWriteQuorum >= self.bookkeeperAckQuorum >= 1):
            raise ValueError("Bookkeeper Ensemble >= WriteQuorum >= AckQuoru must hold, all > 0")
        return self


class DispatchRate(_Body):
    dispatchThrottlingRateInMsg: int = Field(default=-1, ge=-1, le=INT32_MAX)
    dispatchThrottlingRateInByte: int = Field(default=-1, ge=-1, le=INT64_MAX)
    relativeToPublishRate: bool = False
    ratePeriodInSecond: int = Field(default=1, ge=1, le=86400)


class PublishRate(_Body):
    publishThrottlingRateInMsg: int = Field(default=-1, ge=-1, le=INT32_MAX)
    publishThrottlingRateInByte: int = Field(default=-1, ge=-1, le=INT64_MAX)


class SubscribeRate(_Body):
    subscribeThrottlingRatePerConsumer: int = Field(default=-1, ge=-1, le=INT32_MAX)
    ratePeriodInSecond: int = Field(default=30, ge=1, le=86400)


class InactiveTopicDeleteMode(str, Enum):
    delete_when_no_subscriptions = "delete_when_no_subscriptions"
    delete_when_subscriptions_caught_up = "delete_when_subscriptions_caught_up"


class InactiveTopicPolicies(_Body):
    inactiveTopicDeleteMode: InactiveTopicDeleteMode = InactiveTopicDeleteMode.delete_when_no_subscriptions
    maxInactiveDurationSeconds: int = Field(default=60, ge=-1, le=INT32_MAX)
    deleteWhileInactive: bool = False


class DelayedDeliveryPolicies(_Body):
    tickTime: int = Field(default=1000, ge=0, le=INT64_MAX)
    active: bool = True
    maxDeliveryDelayInMillis: int = Field(default=0, ge=0, le=INT64_MAX)


class TopicType(str, Enum):
    partitioned = "partitioned"
    non_partitioned = "non-partitioned"


class AutoTopicCreationOverride(_Body):
    allowAutoTopicCreation: bool
    topicType: TopicType | None = None
    defaultNumPartitions: int | None = Field(default=None, le=INT32_MAX)

    @model_validator(mode="after")
    def _partitions(self) -> AutoTopicCreationOverride:
        if self.allowAutoTopicCreation and self.topicType is None:
            raise ValueError("topicType is required when auto topic creation is allowed")
        if self.topicType == TopicType.partitioned and (self.defaultNumPartitions or 0) <= 0:
            raise ValueError("defaultNumPartitions cannot be less than 1 for partitioned topics")
        return self


class AutoSubscriptionCreationOverride(_Body):
    allowAutoSubscriptionCreation: bool


class BookieInfo(_Body):
    """A bookie's place in ``bookies/racks-info`` (Pulsar's BookieInfo)."""

    rack: str = ""
    hostname: str | None = None


class BookieAffinityGroupData(_Body):
    bookkeeperAffinityGroupPrimary: str = ""
    bookkeeperAffinityGroupSecondary: str | None = None


class OffloadPolicies(_Body):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    managedLedgerOffloadDriver: str | None = None
    managedLedgerOffloadThresholdInBytes: int = -1
    managedLedgerOffloadThresholdInSeconds: int = -1
    managedLedgerOffloadDeletionLagInMillis: int | None = 14400000


class EntryFilters(_Body):
    entryFilterNames: str = ""


class ResetCursorData(_Body):
    ledgerId: int = Field(default=-1, ge=-1, le=INT64_MAX)
    entryId: int = Field(default=-1, ge=-1, le=INT64_MAX)
    partitionIndex: int = Field(default=-1, ge=-1, le=INT32_MAX)
    isExcluded: bool = False
    batchIndex: int = Field(default=-1, ge=-1, le=INT32_MAX)
    properties: dict[str, str] = Field(default_factory=dict)


class MessageIdData(_Body):
    ledgerId: int = Field(ge=-1, le=INT64_MAX)
    entryId: int = Field(ge=-1, le=INT64_MAX)
    partitionIndex: int = -1
    batchIndex: int = -1
