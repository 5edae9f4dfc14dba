"""The admin REST API's JSON bodies, written once for the broker, the admin client and the CLI.

Theory of operation: every JSON body the admin REST accepts or answers with a
fixed shape (Pulsar's section 11 of ``pulsar-admin-rest.md``) is one frozen
pydantic model here.  Python attributes are snake_case; the *wire* names are
Pulsar's, verbatim (mostly camelCase, a few historic spellings such as
``retentionSizeInMB`` or ``tickTime``), declared as field aliases.  The same
class is used on both ends of the wire:

* the broker (``web`` / ``broker.admin``) validates request bodies with it
  (FastAPI, or :func:`parse_body` for stored documents) and stores
  :func:`dump` of it -- every field, by its wire name;
* the admin client and the CLI construct it (keyword or positional
  arguments, in field order) and send ``to_json()`` -- the wire names with
  unset (``None``) fields left out; ``from_json()`` reads an answer back.

Unknown fields are ignored, as Pulsar's Jackson readers do.  Defaults and
bounds are Pulsar's.  A body that can never be valid (ensemble < write
quorum, a partitioned auto-creation override without partitions...) fails
at construction with :class:`InvalidBody` -- which is both a pydantic
``ValidationError`` (the broker answers 400 with its first error) and the
project's :class:`InvalidArgument` (what the admin client raises for bad
input).  The enumerations of field values live in the pydantic-free
:mod:`magnetar.common.rest_enums` (re-exported here).  This module is data
at the bottom of the import layers: no I/O, no imports from the project
above ``common``.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from magnetar.common.errors import InvalidArgument
from magnetar.common.rest_enums import (  # noqa: F401 -- re-exported: one import for bodies and their values
    INT32_MAX,
    INT64_MAX,
    LATEST_ID,
    AuthAction,
    BacklogQuotaPolicy,
    BacklogQuotaType,
    InactiveTopicDeleteMode,
    RetentionPolicyAction,
    SchemaAutoUpdateCompatibilityStrategy,
    SchemaCompatibilityStrategy,
    SubscriptionAuthMode,
    SubscriptionType,
    TopicType,
)


class InvalidBody(ValidationError, InvalidArgument):  # type: ignore[misc]
    """A body constructed in Python that can never be valid (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # built by ValidationError.from_exception_data
        self.message = str(self)

    def __str__(self) -> str:
        """One line a CLI user can read: ``invalid Model: field: what is wrong``."""
        parts = []
        for err in self.errors(include_url=False):
            where = ".".join(str(p) for p in err.get("loc", ()))
            msg = str(err.get("msg", "")).removeprefix("Value error, ")
            parts.append(f"{where}: {msg}" if where else msg)
        return f"invalid {self.title}: " + "; ".join(parts)


class RestBody(BaseModel):
    """Base of every body: wire names as aliases, unknown fields ignored, frozen values."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Positional arguments fill the fields in declaration order (the admin client's API)."""
        if args:
            names = list(type(self).model_fields)
            if len(args) > len(names):
                raise InvalidArgument(f"{type(self).__name__} takes at most {len(names)} arguments")
            kwargs.update(zip(names, args, strict=False))
        try:
            super().__init__(**kwargs)
        except InvalidBody:
            raise
        except ValidationError as exc:
            raise InvalidBody.from_exception_data(exc.title, exc.errors()) from None  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        """The body as the admin client sends it: wire names, unset fields left out."""
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Self:
        """Read a body answered by the broker (unknown fields ignored)."""
        return cls.model_validate(d)


def wire_names(model: type[BaseModel]) -> frozenset[str]:
    """The JSON names a body class reads and writes."""
    return frozenset(f.alias or name for name, f in model.model_fields.items())


def dump(model: BaseModel) -> dict[str, Any]:
    """The body as the broker stores and answers it: every field, by its wire name."""
    return model.model_dump(by_alias=True, mode="json")


# ------------------------------------------------------------------ tenants, clusters, isolation


class TenantInfo(RestBody):
    admin_roles: tuple[str, ...] = Field(default=(), alias="adminRoles")
    allowed_clusters: tuple[str, ...] = Field(default=(), alias="allowedClusters")


class ClusterData(RestBody):
    service_url: str | None = Field(default=None, alias="serviceUrl")
    service_url_tls: str | None = Field(default=None, alias="serviceUrlTls")
    broker_service_url: str | None = Field(default=None, alias="brokerServiceUrl")
    broker_service_url_tls: str | None = Field(default=None, alias="brokerServiceUrlTls")
    proxy_service_url: str | None = Field(default=None, alias="proxyServiceUrl")
    proxy_protocol: str | None = Field(default=None, alias="proxyProtocol")
    peer_cluster_names: tuple[str, ...] | None = Field(default=None, alias="peerClusterNames")
    authentication_plugin: str | None = Field(default=None, alias="authenticationPlugin")
    authentication_parameters: str | None = Field(default=None, alias="authenticationParameters")
    listener_name: str | None = Field(default=None, alias="listenerName")
    broker_client_tls_enabled: bool = Field(default=False, alias="brokerClientTlsEnabled")
    tls_allow_insecure_connection: bool = Field(default=False, alias="tlsAllowInsecureConnection")

    def to_json(self) -> dict[str, Any]:
        """Only what is set: the broker stores a cluster without its unset and false fields."""
        return {k: v for k, v in super().to_json().items() if v is not False and v != []}


class FailureDomain(RestBody):
    brokers: tuple[str, ...] = Field(default=(), max_length=10_000)


class AutoFailoverPolicy(RestBody):
    policy_type: str = "min_available"
    parameters: dict[str, str] = Field(default_factory=dict)


class NamespaceIsolationData(RestBody):
    namespaces: tuple[str, ...] = Field(default=(), max_length=10_000)
    primary: tuple[str, ...] = Field(default=(), max_length=10_000)
    secondary: tuple[str, ...] = Field(default=(), max_length=10_000)
    auto_failover_policy: AutoFailoverPolicy | None = None


class BookieInfo(RestBody):
    """A bookie's place in ``bookies/racks-info`` (Pulsar's BookieInfo)."""

    rack: str = ""
    hostname: str | None = None


class BookieAffinityGroupData(RestBody):
    bookkeeper_affinity_group_primary: str = Field(default="", alias="bookkeeperAffinityGroupPrimary")
    bookkeeper_affinity_group_secondary: str | None = Field(
        default=None, alias="bookkeeperAffinityGroupSecondary"
    )


# ------------------------------------------------------------------ namespace / topic policies


class BundlesData(RestBody):
    boundaries: tuple[str, ...] | None = None
    num_bundles: int = Field(default=4, ge=1, le=1024, alias="numBundles")


class RetentionPolicies(RestBody):
    retention_time_in_minutes: int = Field(default=0, ge=-1, le=INT32_MAX, alias="retentionTimeInMinutes")
    retention_size_in_mb: int = Field(default=0, ge=-1, le=INT64_MAX, alias="retentionSizeInMB")


class BacklogQuota(RestBody):
    limit_size: int = Field(default=-1, ge=-1, le=INT64_MAX, alias="limitSize")  # bytes, -1 = none
    limit_time: int = Field(default=-1, ge=-1, le=INT32_MAX, alias="limitTime")  # seconds, -1 = none
    policy: BacklogQuotaPolicy = BacklogQuotaPolicy.PRODUCER_REQUEST_HOLD

    @model_validator(mode="before")
    @classmethod
    def _old_limit(cls, data: Any) -> Any:
        """Pulsar's pre-2.9 body names the size ``limit``."""
        if (
            isinstance(data, dict)
            and "limit" in data
            and "limitSize" not in data
            and "limit_size" not in data
        ):
            data = {**data, "limitSize": data["limit"]}
        return data


class PersistencePolicies(RestBody):
    bookkeeper_ensemble: int = Field(default=2, ge=1, le=64, alias="bookkeeperEnsemble")
    bookkeeper_write_quorum: int = Field(default=2, ge=1, le=64, alias="bookkeeperWriteQuorum")
    bookkeeper_ack_quorum: int = Field(default=2, ge=1, le=64, alias="bookkeeperAckQuorum")
    managed_ledger_max_mark_delete_rate: float = Field(
        default=0.0, ge=0.0, alias="managedLedgerMaxMarkDeleteRate"
    )

    @model_validator(mode="after")
    def _quorums(self) -> PersistencePolicies:
        e, w, a = self.bookkeeper_ensemble, self.bookkeeper_write_quorum, self.bookkeeper_ack_quorum
        if not (e >= w >= a >= 1):
            raise ValueError(
                "Bookkeeper Ensemble >= WriteQuorum >= AckQuoru must hold, all > 0"
                f" (ensemble >= write quorum >= ack quorum >= 1, got {e}/{w}/{a})"
            )
        return self


class DispatchRate(RestBody):
    dispatch_throttling_rate_in_msg: int = Field(
        default=-1, ge=-1, le=INT32_MAX, alias="dispatchThrottlingRateInMsg"
    )
    dispatch_throttling_rate_in_byte: int = Field(
        default=-1, ge=-1, le=INT64_MAX, alias="dispatchThrottlingRateInByte"
    )
    relative_to_publish_rate: bool = Field(default=False, alias="relativeToPublishRate")
    rate_period_in_second: int = Field(default=1, ge=1, le=86400, alias="ratePeriodInSecond")


class PublishRate(RestBody):
    publish_throttling_rate_in_msg: int = Field(
        default=-1, ge=-1, le=INT32_MAX, alias="publishThrottlingRateInMsg"
    )
    publish_throttling_rate_in_byte: int = Field(
        default=-1, ge=-1, le=INT64_MAX, alias="publishThrottlingRateInByte"
    )


class SubscribeRate(RestBody):
    subscribe_throttling_rate_per_consumer: int = Field(
        default=-1, ge=-1, le=INT32_MAX, alias="subscribeThrottlingRatePerConsumer"
    )
    rate_period_in_second: int = Field(default=30, ge=1, le=86400, alias="ratePeriodInSecond")


class InactiveTopicPolicies(RestBody):
    inactive_topic_delete_mode: InactiveTopicDeleteMode = Field(
        default=InactiveTopicDeleteMode.DELETE_WHEN_NO_SUBSCRIPTIONS, alias="inactiveTopicDeleteMode"
    )
    max_inactive_duration_seconds: int = Field(
        default=60, ge=-1, le=INT32_MAX, alias="maxInactiveDurationSeconds"
    )
    # True as the broker's own default (brokerDeleteInactiveTopicsEnabled=true).
    delete_while_inactive: bool = Field(default=True, alias="deleteWhileInactive")


class DelayedDeliveryPolicies(RestBody):
    tick_time_ms: int = Field(default=1000, ge=0, le=INT64_MAX, alias="tickTime")
    active: bool = True
    max_delivery_delay_in_millis: int = Field(default=0, ge=0, le=INT64_MAX, alias="maxDeliveryDelayInMillis")


class AutoTopicCreationOverride(RestBody):
    allow_auto_topic_creation: bool = Field(default=True, alias="allowAutoTopicCreation")
    topic_type: TopicType | None = Field(default=None, alias="topicType")
    default_num_partitions: int | None = Field(default=None, le=INT32_MAX, alias="defaultNumPartitions")

    @model_validator(mode="after")
    def _partitions(self) -> AutoTopicCreationOverride:
        if self.allow_auto_topic_creation and self.topic_type is None:
            raise ValueError("topicType is required when auto topic creation is allowed")
        if self.topic_type == TopicType.PARTITIONED and (self.default_num_partitions or 0) <= 0:
            raise ValueError("defaultNumPartitions cannot be less than 1 for partitioned topics")
        return self


class AutoSubscriptionCreationOverride(RestBody):
    allow_auto_subscription_creation: bool = Field(alias="allowAutoSubscriptionCreation")


class OffloadPolicies(RestBody):
    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)
    managed_ledger_offload_driver: str | None = Field(default=None, alias="managedLedgerOffloadDriver")
    managed_ledger_offload_threshold_in_bytes: int = Field(
        default=-1, alias="managedLedgerOffloadThresholdInBytes"
    )
    managed_ledger_offload_threshold_in_seconds: int = Field(
        default=-1, alias="managedLedgerOffloadThresholdInSeconds"
    )
    managed_ledger_offload_deletion_lag_in_millis: int | None = Field(
        default=14400000, alias="managedLedgerOffloadDeletionLagInMillis"
    )


class EntryFilters(RestBody):
    entry_filter_names: str = Field(default="", alias="entryFilterNames")


class ResourceGroup(RestBody):
    """A resource group's quotas (``/admin/v2/resourcegroups/{name}``), per second for the whole
    cluster.  None: not given (create stores -1, update keeps the stored value); -1 (or 0): no
    limit; below -1 is refused."""

    publish_rate_in_msgs: int | None = Field(default=None, ge=-1, le=INT32_MAX, alias="publishRateInMsgs")
    publish_rate_in_bytes: int | None = Field(default=None, ge=-1, le=INT64_MAX, alias="publishRateInBytes")
    dispatch_rate_in_msgs: int | None = Field(default=None, ge=-1, le=INT32_MAX, alias="dispatchRateInMsgs")
    dispatch_rate_in_bytes: int | None = Field(default=None, ge=-1, le=INT64_MAX, alias="dispatchRateInBytes")


# ------------------------------------------------------------------ message ids and cursors


class MessageId(RestBody):
    """Admin-API message id: ``{"ledgerId", "entryId", "partitionIndex"[, "batchIndex"]}``."""

    ledger_id: int = Field(ge=-1, le=INT64_MAX, alias="ledgerId")
    entry_id: int = Field(ge=-1, le=INT64_MAX, alias="entryId")
    partition_index: int = Field(default=-1, alias="partitionIndex")
    batch_index: int = Field(default=-1, alias="batchIndex")

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
        """Missing parts read as -1 (a broker answer may leave the partition out)."""
        return cls.model_validate({"ledgerId": -1, "entryId": -1} | d)

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.batch_index < 0:
            del out["batchIndex"]
        return out

    def __str__(self) -> str:
        s = f"{self.ledger_id}:{self.entry_id}:{self.partition_index}"
        return s + (f":{self.batch_index}" if self.batch_index >= 0 else "")


MessageIdData = MessageId  # Pulsar's name for the body form

EARLIEST = MessageId(-1, -1)
LATEST = MessageId(LATEST_ID, LATEST_ID)


class ResetCursorData(RestBody):
    ledger_id: int = Field(default=-1, ge=-1, le=INT64_MAX, alias="ledgerId")
    entry_id: int = Field(default=-1, ge=-1, le=INT64_MAX, alias="entryId")
    partition_index: int = Field(default=-1, ge=-1, le=INT32_MAX, alias="partitionIndex")
    is_excluded: bool = Field(default=False, alias="isExcluded")
    batch_index: int = Field(default=-1, ge=-1, le=INT32_MAX, alias="batchIndex")
    properties: dict[str, str] = Field(default_factory=dict)

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
        out = super().to_json()
        if not self.properties:
            del out["properties"]
        return out


def bodies() -> dict[str, type[RestBody]]:
    """Every body class of this module, by name (what the one-source test walks)."""
    return {
        name: obj
        for name, obj in globals().items()
        if isinstance(obj, type)
        and issubclass(obj, RestBody)
        and obj is not RestBody
        and obj.__name__ == name
    }
