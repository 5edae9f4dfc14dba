"""The broker's policy table: every namespace / topic policy with the kind its body is parsed as.

Theory of operation: the facts of each policy -- REST suffixes and verbs at
namespace and topic level, the fields of the stored namespace (``Policies``)
and topic (``TopicPolicies``) documents, ``per_cluster`` storage -- are
written once, in :mod:`magnetar.common.admin_policies`, which the admin
client and the CLI use too.  This module adds the body *kind* used to
validate a value (:data:`KINDS`) and builds one :class:`PolicySpec` per
policy.  ``parse_value`` turns a raw request body into the stored JSON value
or raises 400 (malformed) / 412 (out-of-range scalar), as Pulsar does.
Policies Pulsar stores per cluster inside the namespace document
(dispatch/publish/subscribe rates) are marked ``per_cluster``: the value
lives at ``field[cluster]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from magnetar.broker import errors
from magnetar.common import rest_enums as e
from magnetar.common.admin_policies import POLICIES
from magnetar.common.lazy_import import lazy_import

m = lazy_import("magnetar.common.rest_models")  # pydantic on first use (issue 15 start-up)

INT = "int"  # non-negative int32
LONG = "long"  # any int64 (negative values mean "disabled" for offload thresholds)
BOOL = "bool"
CLUSTERS = "clusters"
SUBTYPES = "subtypes"
STRING = "string"

BODY_BYTES_MAX = 256 * 1024


class BadBodyError(errors.BrokerError):
    """A malformed request body (HTTP 400)."""

    http_status = 400


@dataclass(frozen=True)
class PolicySpec:
    name: str
    kind: Any  # INT/LONG/BOOL/CLUSTERS/SUBTYPES/STRING, an Enum class or a Model (pydantic body)
    ns_suffix: str | None
    ns_field: str | None
    topic_suffix: str | None
    topic_field: str | None
    ns_set: str = "POST"
    topic_set: str = "POST"
    per_cluster: bool = False
    ns_cleared: Any = None  # the stored value after DELETE / when unset


@dataclass(frozen=True)
class Model:
    """A pydantic body class of ``common.rest_models`` by name: that module (and pydantic) is
    imported by the first body parsed, not when this table is built (start-up, issue 15)."""

    name: str

    def resolve(self) -> Any:
        return getattr(m, self.name)


# The body kind each policy's value is validated with (the facts themselves: common.admin_policies).
KINDS: dict[str, Any] = {
    "retention": Model("RetentionPolicies"),
    "messageTTL": INT,
    "deduplication": BOOL,
    "deduplicationSnapshotInterval": INT,
    "schemaCompatibilityStrategy": e.SchemaCompatibilityStrategy,
    "schemaAutoUpdateCompatibilityStrategy": e.SchemaAutoUpdateCompatibilityStrategy,
    "isAllowAutoUpdateSchema": BOOL,
    "schemaValidationEnforced": BOOL,
    "autoTopicCreation": Model("AutoTopicCreationOverride"),
    "autoSubscriptionCreation": Model("AutoSubscriptionCreationOverride"),
    "replication": CLUSTERS,
    "allowedClusters": CLUSTERS,
    "persistence": Model("PersistencePolicies"),
    "bookieAffinity": Model("BookieAffinityGroupData"),
    "offloadPolicies": Model("OffloadPolicies"),
    "offloadThreshold": LONG,
    "offloadThresholdInSeconds": LONG,
    "offloadDeletionLagMs": LONG,
    "compactionThreshold": LONG,
    "dispatchRate": Model("DispatchRate"),
    "subscriptionDispatchRate": Model("DispatchRate"),
    "replicatorDispatchRate": Model("DispatchRate"),
    "publishRate": Model("PublishRate"),
    "subscribeRate": Model("SubscribeRate"),
    "maxProducers": INT,
    "maxConsumers": INT,
    "maxConsumersPerSubscription": INT,
    "maxUnackedMessagesOnConsumer": INT,
    "maxUnackedMessagesOnSubscription": INT,
    "maxSubscriptionsPerTopic": INT,
    "maxTopicsPerNamespace": INT,
    "maxMessageSize": INT,
    "subscriptionExpirationTime": INT,
    "inactiveTopicPolicies": Model("InactiveTopicPolicies"),
    "delayedDelivery": Model("DelayedDeliveryPolicies"),
    "subscriptionTypesEnabled": SUBTYPES,
    "subscriptionAuthMode": e.SubscriptionAuthMode,
    "encryptionRequired": BOOL,
    "antiAffinity": STRING,
    "entryFilters": Model("EntryFilters"),
}

SPECS: tuple[PolicySpec, ...] = tuple(
    PolicySpec(
        p.name,
        KINDS[p.name],
        p.ns_suffix,
        p.ns_field,
        p.topic_suffix,
        p.topic_field,
        ns_set=p.ns_set,
        topic_set=p.topic_set,
        per_cluster=p.per_cluster,
        ns_cleared=p.ns_cleared,
    )
    for p in POLICIES
)

BY_NS_SUFFIX = {s.ns_suffix: s for s in SPECS if s.ns_suffix}
BY_TOPIC_SUFFIX = {s.topic_suffix: s for s in SPECS if s.topic_suffix}
BY_NAME = {s.name: s for s in SPECS}


def load_json(body: bytes, *, allow_bare_string: bool = False) -> Any:
    if len(body) > BODY_BYTES_MAX:
        raise BadBodyError("request body too large")
    text = body.decode("utf-8", errors="replace").strip()
    if not text:
        raise BadBodyError("request body is required")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        if allow_bare_string:
            return text
        raise BadBodyError("request body is not valid JSON") from None


def parse_value(kind: Any, raw: Any) -> Any:
    """Validate a decoded JSON body against a policy kind; the JSON value to store."""
    if kind in (INT, LONG):
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise BadBodyError("expected an integer body")
        if not -(2**63) <= raw < 2**63:
            raise BadBodyError("integer out of range")
        if kind == INT and (raw < 0 or raw > e.INT32_MAX):
            raise errors.PreconditionFailedError("Invalid value: must be a non-negative 32-bit integer")
        return raw
    if kind == BOOL:
        if not isinstance(raw, bool):
            raise BadBodyError("expected a boolean body")
        return raw
    if kind == STRING:
        if not isinstance(raw, str) or not raw.strip():
            raise errors.PreconditionFailedError("Invalid value: expected a non-empty string")
        return raw.strip()
    if kind in (CLUSTERS, SUBTYPES):
        if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
            raise BadBodyError("expected a JSON list of strings")
        if kind == SUBTYPES:
            try:
                return sorted({e.SubscriptionType(x).value for x in raw})
            except ValueError:
                raise BadBodyError(f"invalid subscription type in {raw}") from None
        return sorted(set(raw))
    if isinstance(kind, type) and issubclass(kind, Enum):
        try:
            return kind(raw).value
        except ValueError:
            raise BadBodyError(f"invalid value {raw!r}: expected one of {[e.value for e in kind]}") from None
    if isinstance(kind, Model) or (isinstance(kind, type) and issubclass(kind, m.BaseModel)):
        model = kind.resolve() if isinstance(kind, Model) else kind
        if not isinstance(raw, dict):
            raise BadBodyError(f"expected a JSON object ({model.__name__})")
        try:
            return m.dump(model.model_validate(raw))
        except m.ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(p) for p in first.get("loc", ()))
            raise BadBodyError(f"invalid {model.__name__}: {where} {first.get('msg', '')}".strip()) from None
    raise AssertionError(f"unknown policy kind {kind!r}")
