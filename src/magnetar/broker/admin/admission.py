"""Admission checks for producers and consumers under the effective policies.

Theory of operation: the policy enforcer (``topic_policies.PolicyEnforcer``)
resolves each loaded topic's effective policies (topic > namespace > broker
default) and stores the ones checked on the hot path in the topic object's
``policy_limits`` dict, re-computing it on every policy write and
periodically.  The broker's PRODUCER/SUBSCRIBE handling calls the functions
here, which read only that dict -- no metadata I/O on the connection path and
no import of the service package (the handlers import this module).  A topic
the enforcer has not seen yet has an empty dict and is checked against the
broker configuration only, as before.
"""

from __future__ import annotations

from typing import Any

from magnetar.broker import errors


class ProducerBlockedQuotaExceededError(errors.BrokerError):
    """producer_request_hold: the client retries until the backlog shrinks."""

    server_error = errors.Code.ProducerBlockedQuotaExceededError
    http_status = 412


class ProducerBlockedQuotaExceededException(errors.BrokerError):  # noqa: N818 -- Pulsar's name
    """producer_exception: the client fails the producer creation."""

    server_error = errors.Code.ProducerBlockedQuotaExceededException
    http_status = 412


class SendRejectedError(errors.ChecksumError):
    """A policy refuses one message (topic ``maxMessageSize``, ``encryption_required``).

    Sent as SEND_ERROR with the ChecksumError code: the only code on which the official
    clients fail that one send (and keep the producer) -- any other code makes them drop
    the connection and re-send the same message forever.  The message says why.
    """


QUOTA_BLOCKING = ("producer_exception", "producer_request_hold")
SUB_TYPE_NAMES = {0: "Exclusive", 1: "Shared", 2: "Failover", 3: "Key_Shared"}


def _limits(topic: Any) -> dict[str, Any]:
    return getattr(topic, "policy_limits", None) or {}


def check_producer(topic: Any) -> None:
    """Raise when a new producer may not attach: terminated topic, max producers."""
    if getattr(topic.ml, "is_terminated", False):
        raise errors.TopicTerminatedError(f"Topic {topic.name} was already terminated")
    quota = _limits(topic).get("backlogQuota") or {}
    if quota.get("policy") in QUOTA_BLOCKING and quota.get("limitSize", -1) >= 0:
        if backlog_bytes(topic) > quota["limitSize"]:
            if quota["policy"] == "producer_exception":
                raise ProducerBlockedQuotaExceededException(
                    f"Cannot create producer on topic with backlog quota exceeded: {topic.name}"
                )
            raise ProducerBlockedQuotaExceededError(
                f"Cannot create producer on topic with backlog quota exceeded: {topic.name}"
            )
    age_quota = _limits(topic).get("backlogQuotaAge") or {}
    if age_quota.get("policy") in QUOTA_BLOCKING and _limits(topic).get("backlogAgeExceeded"):
        message = f"Cannot create producer on topic with backlog quota exceeded (message age): {topic.name}"
        if age_quota["policy"] == "producer_exception":
            raise ProducerBlockedQuotaExceededException(message)
        raise ProducerBlockedQuotaExceededError(message)
    limit = _limits(topic).get("maxProducers") or 0
    if limit and len(topic.producers) >= limit:
        raise errors.ProducerBusyError(f"Topic '{topic.name}' reached max producers limit")


def check_subscribe(topic: Any, subscription: str, sub_type: int) -> None:
    """Raise when a new consumer may not attach: type disabled, max consumers."""
    limits = _limits(topic)
    enabled = limits.get("subscriptionTypesEnabled")
    name = SUB_TYPE_NAMES.get(sub_type, "")
    if enabled and name not in enabled:
        raise errors.NotAllowedError(f"Subscription type {name} is not enabled on topic {topic.name}")
    subs = getattr(topic, "subscriptions", {})
    cursors = getattr(topic.ml, "cursors", {})
    is_new = subscription not in subs and subscription not in cursors
    auto_sub = limits.get("autoSubscriptionCreation")
    if is_new and auto_sub is not None and not auto_sub.get("allowAutoSubscriptionCreation", True):
        raise errors.SubscriptionNotFoundError(f"Subscription {subscription} does not exist")
    max_subs = limits.get("maxSubscriptionsPerTopic") or 0
    if (
        is_new
        and max_subs
        and len(set(subs) | {c for c in cursors if not c.startswith("pulsar.")}) >= max_subs
    ):
        raise errors.NotAllowedError(f"Topic {topic.name} reached max subscriptions limit")
    max_topic = limits.get("maxConsumers") or 0
    if max_topic and sum(len(s.consumers) for s in subs.values()) >= max_topic:
        raise errors.ConsumerBusyError("Topic reached max consumers limit")
    max_sub = limits.get("maxConsumersPerSubscription") or 0
    sub = subs.get(subscription)
    if max_sub and sub is not None and len(sub.consumers) >= max_sub:
        raise errors.ConsumerBusyError("Subscription reached max consumers limit")


SUBSCRIBE_RATE_KEYS_MAX = 10_000  # bound on the per-topic table of consumer identities


def check_subscribe_rate(topic: Any, host: str, consumer_name: str) -> None:
    """``subscribeRate``: at most ``subscribeThrottlingRatePerConsumer`` subscribes per
    ``ratePeriodInSecond`` by one consumer identity (client host + consumer name; Pulsar
    adds the consumer id, which the official clients change on every new consumer)."""
    rate = _limits(topic).get("subscribeRate") or {}
    limit = rate.get("subscribeThrottlingRatePerConsumer", -1) or -1
    if limit <= 0:
        return
    period_s = max(1, int(rate.get("ratePeriodInSecond", 30) or 30))
    now_s = topic.clock.monotonic()
    table: dict[tuple[str, str], list[float]] | None = getattr(topic, "subscribe_rate_windows", None)
    if table is None or len(table) >= SUBSCRIBE_RATE_KEYS_MAX:
        table = {}
        topic.subscribe_rate_windows = table
    key = (host, consumer_name)
    window = table.get(key)
    if window is None or now_s - window[0] >= period_s:
        window = table[key] = [now_s, 0]
    if window[1] >= limit:
        raise errors.NotAllowedError("Subscribe limited by subscribe rate limit per consumer.")
    window[1] += 1


def check_producer_encryption(topic: Any, encrypted: bool) -> None:
    """``encryption_required``: a producer that does not encrypt is refused (Pulsar's answer)."""
    if _limits(topic).get("encryptionRequired") and not encrypted:
        raise errors.MetadataStoreError(f"Encryption is required in {topic.name}")


def check_send(topic: Any, encrypted: bool, size_bytes: int, is_chunk: bool) -> SendRejectedError | None:
    """The per-message policies: topic ``maxMessageSize`` (not for chunks, as in Pulsar) and
    ``encryption_required`` (a producer created before it was set)."""
    limits = _limits(topic)
    max_size = limits.get("maxMessageSize") or 0
    if max_size > 0 and not is_chunk and size_bytes > max_size:
        return SendRejectedError(
            f"Message size {size_bytes} exceeds the topic's max message size {max_size} ({topic.name})"
        )
    if limits.get("encryptionRequired") and not encrypted:
        return SendRejectedError(f"Message is not encrypted, encryption is required in {topic.name}")
    return None


def unacked_limit_on_consumer(topic: Any, default: int) -> int:
    value = _limits(topic).get("maxUnackedMessagesOnConsumer")
    return default if value is None else int(value)


def backlog_bytes(topic: Any) -> int:
    """The topic's backlog size: the largest over its durable cursors (Pulsar's backlogSize)."""
    sizes = [
        c.estimated_backlog_size_bytes() for c in topic.ml.cursors.values() if getattr(c, "durable", True)
    ]
    return max(sizes, default=0)


def topic_policies_of(topic: Any) -> dict[str, Any] | None:
    """The topic's own policies document (TopicPolicies JSON) as the enforcer last read it."""
    return _limits(topic).get("topicPolicies")


class PublishRateWindow:
    """Messages and bytes published to one topic in the current one-second window."""

    __slots__ = ("bytes", "messages", "window_start_s")

    def __init__(self, now_s: float) -> None:
        self.window_start_s = now_s
        self.messages = 0
        self.bytes = 0


PUBLISH_WINDOW_S = 1.0


def throttle_publish(topic: Any, cnx: Any, n_messages: int, n_bytes: int) -> None:
    """Publish rate limit (Pulsar's ``publishRate`` policy): count this publish in the topic's
    one-second window; once the window's message or byte budget is spent, stop reading from
    this connection until the window ends (Pulsar disables auto-read the same way)."""
    rate = _limits(topic).get("publishRate") or {}
    max_msgs = rate.get("publishThrottlingRateInMsg", -1) or -1
    max_bytes = rate.get("publishThrottlingRateInByte", -1) or -1
    if max_msgs <= 0 and max_bytes <= 0:
        return
    now_s = topic.clock.monotonic()
    window = getattr(topic, "publish_rate_window", None)
    if window is None or now_s - window.window_start_s >= PUBLISH_WINDOW_S:
        window = PublishRateWindow(now_s)
        topic.publish_rate_window = window
    window.messages += n_messages
    window.bytes += n_bytes
    if (max_msgs > 0 and window.messages >= max_msgs) or (max_bytes > 0 and window.bytes >= max_bytes):
        topic.publish_rate_limited_times = getattr(topic, "publish_rate_limited_times", 0) + 1
        cnx.pause_reading(window.window_start_s + PUBLISH_WINDOW_S - now_s)


def delayed_delivery_active(topic: Any) -> bool:
    """False when the effective ``delayedDelivery`` policy says ``active: false``."""
    pol = _limits(topic).get("delayedDelivery")
    return True if not pol else bool(pol.get("active", True))


def unacked_limit_on_subscription(topic: Any, default: int) -> int:
    """Effective ``maxUnackedMessagesOnSubscription`` (topic > namespace), else ``default``."""
    value = _limits(topic).get("maxUnackedMessagesOnSubscription")
    return default if value is None else int(value)
