"""Admission checks: may this producer, consumer, message or read go ahead under the policies?

Theory of operation: each check reads the topic's :class:`TopicPolicies`
(``topic.policies``, one frozen value the admin layer's policy enforcer
resolves and replaces atomically) and the rate windows the topic and
subscription own as typed fields (``publish_rate_window``,
``subscribe_rate_windows``, ``dispatch_window``).  No metadata I/O happens
here: the PRODUCER/SUBSCRIBE/SEND handlers and the dispatchers call these on
the hot path.  A topic not resolved yet carries ``UNRESOLVED`` (no limit), so
it is checked against the broker configuration only.

Windows are one second long (Pulsar's rate limiters tick per second); a
publish over budget pauses reading from the connection until the window
ends, a dispatch over budget waits on the injected clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from magnetar.broker import errors
from magnetar.broker.service.policies import JsonObject
from magnetar.protocol.enums import SubType

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection
    from magnetar.broker.service.topic_base import BaseTopic


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
SUB_TYPE_NAMES = {t.value: t.name for t in SubType}  # Pulsar's names, from the protocol enum


def check_producer(topic: BaseTopic) -> None:
    """Raise when a new producer may not attach: terminated topic, backlog quota, max producers."""
    if topic.terminated:
        raise errors.TopicTerminatedError(f"Topic {topic.name} was already terminated")
    pol = topic.policies
    quota = pol.backlog_quota or {}
    if quota.get("policy") in QUOTA_BLOCKING and quota.get("limitSize", -1) >= 0:
        if backlog_bytes(topic) > quota["limitSize"]:
            if quota["policy"] == "producer_exception":
                raise ProducerBlockedQuotaExceededException(
                    f"Cannot create producer on topic with backlog quota exceeded: {topic.name}"
                )
            raise ProducerBlockedQuotaExceededError(
                f"Cannot create producer on topic with backlog quota exceeded: {topic.name}"
            )
    age_quota = pol.backlog_quota_age or {}
    if age_quota.get("policy") in QUOTA_BLOCKING and topic.backlog_age_exceeded:
        message = f"Cannot create producer on topic with backlog quota exceeded (message age): {topic.name}"
        if age_quota["policy"] == "producer_exception":
            raise ProducerBlockedQuotaExceededException(message)
        raise ProducerBlockedQuotaExceededError(message)
    limit = pol.max_producers
    if limit and len(topic.producers) >= limit:
        raise errors.ProducerBusyError(f"Topic '{topic.name}' reached max producers limit")


def check_subscribe(topic: BaseTopic, subscription: str, sub_type: int) -> None:
    """Raise when a new consumer may not attach: type disabled, max consumers."""
    pol = topic.policies
    enabled = pol.subscription_types_enabled
    name = SUB_TYPE_NAMES.get(sub_type, "")
    if enabled and name not in enabled:
        raise errors.NotAllowedError(f"Subscription type {name} is not enabled on topic {topic.name}")
    subs = topic.subscriptions
    cursors = topic.stored_cursors
    is_new = subscription not in subs and subscription not in cursors
    auto_sub = pol.auto_subscription_creation
    if is_new and auto_sub is not None and not auto_sub.get("allowAutoSubscriptionCreation", True):
        raise errors.SubscriptionNotFoundError(f"Subscription {subscription} does not exist")
    max_subs = pol.max_subscriptions_per_topic
    if (
        is_new
        and max_subs
        and len(set(subs) | {c for c in cursors if not c.startswith("pulsar.")}) >= max_subs
    ):
        raise errors.NotAllowedError(f"Topic {topic.name} reached max subscriptions limit")
    max_topic = pol.max_consumers
    if max_topic and sum(len(s.consumers) for s in subs.values()) >= max_topic:
        raise errors.ConsumerBusyError("Topic reached max consumers limit")
    max_sub = pol.max_consumers_per_subscription
    sub = subs.get(subscription)
    if max_sub and sub is not None and len(sub.consumers) >= max_sub:
        raise errors.ConsumerBusyError("Subscription reached max consumers limit")


SUBSCRIBE_RATE_KEYS_MAX = 10_000  # bound on the per-topic table of consumer identities


def check_subscribe_rate(topic: BaseTopic, host: str, consumer_name: str) -> None:
    """``subscribeRate``: at most ``subscribeThrottlingRatePerConsumer`` subscribes per
    ``ratePeriodInSecond`` by one consumer identity (client host + consumer name; Pulsar
    adds the consumer id, which the official clients change on every new consumer)."""
    rate = topic.policies.subscribe_rate or {}
    limit = rate.get("subscribeThrottlingRatePerConsumer", -1) or -1
    if limit <= 0:
        return
    period_s = max(1, int(rate.get("ratePeriodInSecond", 30) or 30))
    now_s = topic.clock.monotonic()
    table = topic.subscribe_rate_windows
    if len(table) >= SUBSCRIBE_RATE_KEYS_MAX:
        table.clear()
    key = (host, consumer_name)
    window = table.get(key)
    if window is None or now_s - window[0] >= period_s:
        window = table[key] = [now_s, 0]
    if window[1] >= limit:
        raise errors.NotAllowedError("Subscribe limited by subscribe rate limit per consumer.")
    window[1] += 1


def check_producer_encryption(topic: BaseTopic, encrypted: bool) -> None:
    """``encryption_required``: a producer that does not encrypt is refused (Pulsar's answer)."""
    if topic.policies.encryption_required and not encrypted:
        raise errors.MetadataStoreError(f"Encryption is required in {topic.name}")


def check_send(
    topic: BaseTopic, encrypted: bool, size_bytes: int, is_chunk: bool
) -> SendRejectedError | None:
    """The per-message policies: topic ``maxMessageSize`` (not for chunks, as in Pulsar) and
    ``encryption_required`` (a producer created before it was set)."""
    pol = topic.policies
    max_size = pol.max_message_size
    if max_size > 0 and not is_chunk and size_bytes > max_size:
        return SendRejectedError(
            f"Message size {size_bytes} exceeds the topic's max message size {max_size} ({topic.name})"
        )
    if pol.encryption_required and not encrypted:
        return SendRejectedError(f"Message is not encrypted, encryption is required in {topic.name}")
    return None


def unacked_limit_on_consumer(topic: BaseTopic, default: int) -> int:
    value = topic.policies.max_unacked_messages_on_consumer
    return default if value is None else value


def unacked_limit_on_subscription(topic: BaseTopic, default: int) -> int:
    """Effective ``maxUnackedMessagesOnSubscription`` (topic > namespace), else ``default``."""
    value = topic.policies.max_unacked_messages_on_subscription
    return default if value is None else value


def delayed_delivery_active(topic: BaseTopic) -> bool:
    """False when the effective ``delayedDelivery`` policy says ``active: false``."""
    pol = topic.policies.delayed_delivery
    return True if not pol else bool(pol.get("active", True))


def topic_policies_of(topic: BaseTopic) -> JsonObject | None:
    """The topic's own policies document (TopicPolicies JSON) as the enforcer last read it."""
    return topic.policies.topic_document


def backlog_bytes(topic: BaseTopic) -> int:
    """The topic's backlog size: the largest over its durable cursors (Pulsar's backlogSize)."""
    sizes = [
        c.estimated_backlog_size_bytes() for c in topic.stored_cursors.values() if getattr(c, "durable", True)
    ]
    return max(sizes, default=0)


class RateWindow:
    """Messages (or entries) and bytes counted in the current one-second window."""

    __slots__ = ("bytes", "count", "window_start_s")

    def __init__(self, now_s: float) -> None:
        self.window_start_s = now_s
        self.count = 0
        self.bytes = 0


PUBLISH_WINDOW_S = 1.0


def current_window(window: RateWindow | None, now_s: float) -> RateWindow:
    """``window`` while it lasts, else a fresh one starting now."""
    if window is None or now_s - window.window_start_s >= PUBLISH_WINDOW_S:
        return RateWindow(now_s)
    return window


def throttle_publish(topic: BaseTopic, cnx: Connection, n_messages: int, n_bytes: int) -> None:
    """Publish rate limit (Pulsar's ``publishRate`` policy): count this publish in the topic's
    one-second window; once the window's message or byte budget is spent, stop reading from
    this connection until the window ends (Pulsar disables auto-read the same way).  The
    topic's resource group, if any, is counted and checked the same way (its window is shared
    by every topic of the group: ``broker.service.resource_groups``)."""
    group = topic.resource_group  # None: no group
    if group is not None:
        group.throttle_publish(cnx, n_messages, n_bytes, topic.clock.monotonic())
    rate = topic.policies.publish_rate
    if not rate:
        return
    max_msgs = rate.get("publishThrottlingRateInMsg", -1) or -1
    max_bytes = rate.get("publishThrottlingRateInByte", -1) or -1
    if max_msgs <= 0 and max_bytes <= 0:
        return
    now_s = topic.clock.monotonic()
    window = topic.publish_rate_window = current_window(topic.publish_rate_window, now_s)
    window.count += n_messages
    window.bytes += n_bytes
    if (max_msgs > 0 and window.count >= max_msgs) or (max_bytes > 0 and window.bytes >= max_bytes):
        topic.publish_rate_limited_times += 1
        cnx.pause_reading(window.window_start_s + PUBLISH_WINDOW_S - now_s)
