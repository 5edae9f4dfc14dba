"""The admin client's bodies: the shared REST models, and what only the client reads.

Theory of operation: the JSON bodies of the admin REST API are defined once,
in :mod:`magnetar.common.rest_models`, and used as they are by the broker,
this client and the CLI (the names below *are* those classes, re-exported
so that ``magnetar.admin_client`` stays the client's one import; they are
imported on first use, see ``__getattr__``).  A model's
``to_json()`` writes Pulsar's wire names; setters of the resource classes
accept either a model or a plain mapping already in Pulsar's shape; getters
return the parsed JSON (dicts and lists), so nothing the broker sends is
lost.  Only :class:`PeekedMessage` lives here: it is read from the headers
and body of a peek / examine answer, not from a JSON body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The shared REST names this client re-exports (classes, enums, the special message ids).
SHARED = (
    "EARLIEST",
    "LATEST",
    "LATEST_ID",
    "AuthAction",
    "AutoTopicCreationOverride",
    "BacklogQuota",
    "BacklogQuotaPolicy",
    "BacklogQuotaType",
    "ClusterData",
    "DelayedDeliveryPolicies",
    "DispatchRate",
    "InactiveTopicDeleteMode",
    "InactiveTopicPolicies",
    "InvalidBody",
    "MessageId",
    "PersistencePolicies",
    "PublishRate",
    "ResetCursorData",
    "RetentionPolicies",
    "SchemaCompatibilityStrategy",
    "SubscribeRate",
    "SubscriptionType",
    "TenantInfo",
    "TopicType",
)
__all__ = [*SHARED, "PeekedMessage"]


def __getattr__(name: str) -> Any:
    """A shared name, from :mod:`magnetar.common.rest_models` on first use (so importing
    the client, or ``magnetar admin``, does not import pydantic and build every body)."""
    if name not in SHARED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from magnetar.common import rest_models

    value = getattr(rest_models, name)
    globals()[name] = value
    return value


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
