"""The admin REST API's enumerations and bounds, without pydantic.

Theory of operation: the values a body field, a policy or a flag may take
(compatibility strategies, subscription types, auth actions, backlog-quota
types and policies, inactive-topic delete modes, topic types) are Pulsar's
strings, written once here as ``StrEnum``s with UPPER_CASE members.  They
live apart from the body classes (:mod:`magnetar.common.rest_models`, which
re-exports them) so that what only names a value -- the CLI's flag parsing
and help, the admin client's paths, the broker's schema registry -- does
not import pydantic and build every model: ``magnetar admin`` starts
without them and imports the bodies only where one is built or read.

:class:`SchemaCompatibilityStrategy` is also the broker's own strategy type
(``broker.schema``): one enumeration for the REST field, the namespace and
topic policies and the registry's checks.  :meth:`~SchemaCompatibilityStrategy.lookup`
reads the spellings Pulsar accepts and answers None for an unknown one, so
each caller raises its own error.  Data only: no I/O, no imports from the
project above ``common``.
"""

from __future__ import annotations

import enum
from typing import Self

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
LATEST_ID = INT64_MAX  # Long.MAX_VALUE: "latest" in ResetCursorData / MessageId


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

    @classmethod
    def lookup(cls, value: str | None) -> Self | None:
        """A strategy from its name in any case; None/"" is UNDEFINED, "NONE" (Confluent's
        word for "no checks") ALWAYS_COMPATIBLE; None for anything else."""
        if isinstance(value, cls):
            return value
        if value is None or not str(value).strip():
            return cls.UNDEFINED
        key = str(value).strip().upper()
        if key == "NONE":
            return cls.ALWAYS_COMPATIBLE
        return cls.__members__.get(key)

    @property
    def is_transitive(self) -> bool:
        return self.name.endswith("_TRANSITIVE")

    @property
    def base(self) -> SchemaCompatibilityStrategy:
        """BACKWARD for BACKWARD_TRANSITIVE etc.; itself otherwise."""
        return type(self)[self.name.removesuffix("_TRANSITIVE")]


class SchemaAutoUpdateCompatibilityStrategy(enum.StrEnum):
    AUTO_UPDATE_DISABLED = "AutoUpdateDisabled"
    BACKWARD = "Backward"
    FORWARD = "Forward"
    FULL = "Full"
    ALWAYS_COMPATIBLE = "AlwaysCompatible"
    BACKWARD_TRANSITIVE = "BackwardTransitive"
    FORWARD_TRANSITIVE = "ForwardTransitive"
    FULL_TRANSITIVE = "FullTransitive"


class SubscriptionType(enum.StrEnum):
    EXCLUSIVE = "Exclusive"
    SHARED = "Shared"
    FAILOVER = "Failover"
    KEY_SHARED = "Key_Shared"


class SubscriptionAuthMode(enum.StrEnum):
    NONE = "None"
    PREFIX = "Prefix"


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
    """Pulsar's ``BacklogQuota.RetentionPolicy``: what happens when the backlog quota is hit."""

    PRODUCER_REQUEST_HOLD = "producer_request_hold"
    PRODUCER_EXCEPTION = "producer_exception"
    CONSUMER_BACKLOG_EVICTION = "consumer_backlog_eviction"


RetentionPolicyAction = BacklogQuotaPolicy  # the broker's older name for it


class InactiveTopicDeleteMode(enum.StrEnum):
    DELETE_WHEN_NO_SUBSCRIPTIONS = "delete_when_no_subscriptions"
    DELETE_WHEN_SUBSCRIPTIONS_CAUGHT_UP = "delete_when_subscriptions_caught_up"


class TopicType(enum.StrEnum):
    PARTITIONED = "partitioned"
    NON_PARTITIONED = "non-partitioned"
