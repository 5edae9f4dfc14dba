"""Subscriptions and messages of a topic: cursors, skip, expire, reset, peek, examine, ids.

Theory of operation: the cursor operations of ``pulsar-admin-rest.md`` 4.2 and
the REST reads of 4.3, as a base class of :class:`~magnetar.admin_client.topics.Topics`
(one family in the REST API, two modules here to keep each small).
Subscription names are percent-encoded into one path segment.  Positions are
:class:`MessageId` (``EARLIEST`` / ``LATEST`` are the special ids Pulsar
uses); reset by time takes epoch *milliseconds*, expiry takes seconds.  REST
reads return a list of :class:`PeekedMessage` (one per batch record).  The
bodies (pydantic models) and the message parser are imported when a call
builds or reads one, so importing the client does not build them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from magnetar.admin_client import models
from magnetar.admin_client.core import Expect, RawResponse, Resource, call, seg, topic_path

if TYPE_CHECKING:
    from magnetar.admin_client.models import MessageId, PeekedMessage


def message_id_of(answer: dict[str, Any]) -> MessageId:
    """A MessageId answer read into the shared body class."""
    return models.MessageId.from_json(answer)


def parse_messages(raw: RawResponse) -> list[PeekedMessage]:
    """``messages.parse_messages``, imported on the first read (it loads the protocol codecs)."""
    from magnetar.admin_client.messages import parse_messages

    return parse_messages(raw)


def _sub(topic: str, subscription: str, suffix: str = "") -> str:
    return topic_path(topic) + f"/subscription/{seg(subscription)}" + (f"/{suffix}" if suffix else "")


class TopicSubscriptions(Resource):
    def get_subscriptions(self, topic: str) -> Any:
        return self._run(call("GET", topic_path(topic) + "/subscriptions"))

    def create_subscription(
        self,
        topic: str,
        subscription: str,
        *,
        message_id: MessageId | None = None,
        replicated: bool = False,
        properties: Mapping[str, str] | None = None,
    ) -> Any:
        """Create a durable subscription at ``message_id`` (default latest; ``EARLIEST`` for earliest)."""
        at = models.LATEST if message_id is None else message_id
        body = models.ResetCursorData.at(at, properties=dict(properties or {}))
        params = {"replicated": True} if replicated else None
        return self._run(call("PUT", _sub(topic, subscription), params=params, body=body, expect=Expect.NONE))

    def delete_subscription(self, topic: str, subscription: str, *, force: bool = False) -> Any:
        params = {"force": True} if force else None
        return self._run(call("DELETE", _sub(topic, subscription), params=params, expect=Expect.NONE))

    def skip_messages(self, topic: str, subscription: str, count: int) -> Any:
        return self._run(call("POST", _sub(topic, subscription, f"skip/{int(count)}"), expect=Expect.NONE))

    def clear_backlog(self, topic: str, subscription: str) -> Any:
        return self._run(call("POST", _sub(topic, subscription, "skip_all"), expect=Expect.NONE))

    def expire_messages(self, topic: str, subscription: str, expire_time_s: int) -> Any:
        path = _sub(topic, subscription, f"expireMessages/{int(expire_time_s)}")
        return self._run(call("POST", path, expect=Expect.NONE))

    def expire_messages_to(
        self, topic: str, subscription: str, message_id: MessageId, *, is_excluded: bool = False
    ) -> Any:
        body = models.ResetCursorData.at(message_id, is_excluded=is_excluded)
        return self._run(
            call("POST", _sub(topic, subscription, "expireMessages"), body=body, expect=Expect.NONE)
        )

    def expire_messages_all_subscriptions(self, topic: str, expire_time_s: int) -> Any:
        path = topic_path(topic) + f"/all_subscription/expireMessages/{int(expire_time_s)}"
        return self._run(call("POST", path, expect=Expect.NONE))

    def reset_cursor(self, topic: str, subscription: str, timestamp_ms: int) -> Any:
        """Move the cursor to the first message published at/after ``timestamp_ms``."""
        path = _sub(topic, subscription, f"resetcursor/{int(timestamp_ms)}")
        return self._run(call("POST", path, expect=Expect.NONE))

    def reset_cursor_to(
        self, topic: str, subscription: str, message_id: MessageId, *, is_excluded: bool = False
    ) -> Any:
        body = models.ResetCursorData.at(message_id, is_excluded=is_excluded)
        return self._run(
            call("POST", _sub(topic, subscription, "resetcursor"), body=body, expect=Expect.NONE)
        )

    def get_subscription_properties(self, topic: str, subscription: str) -> Any:
        return self._run(call("GET", _sub(topic, subscription, "properties")))

    def set_subscription_properties(
        self, topic: str, subscription: str, properties: Mapping[str, str]
    ) -> Any:
        path = _sub(topic, subscription, "properties")
        return self._run(call("PUT", path, body=dict(properties), expect=Expect.NONE))

    def analyze_backlog(self, topic: str, subscription: str, start: MessageId | None = None) -> Any:
        path = _sub(topic, subscription, "analyzeBacklog")
        if start is not None:
            return self._run(call("POST", path, body=models.ResetCursorData.at(start)))
        return self._run(call("POST", path))

    # ------------------------------------------------------------ reading messages
    def peek_message(self, topic: str, subscription: str, position: int) -> Any:
        """Message(s) at backlog ``position`` (1-based) of the subscription."""
        path = _sub(topic, subscription, f"position/{int(position)}")
        return self._run(call("GET", path, expect=Expect.RAW, transform=parse_messages))

    def examine_message(
        self, topic: str, *, initial_position: str = "latest", message_position: int = 1
    ) -> Any:
        params = {"initialPosition": initial_position, "messagePosition": int(message_position)}
        path = topic_path(topic) + "/examinemessage"
        return self._run(call("GET", path, params=params, expect=Expect.RAW, transform=parse_messages))

    def get_message_by_id(self, topic: str, ledger_id: int, entry_id: int) -> Any:
        path = topic_path(topic) + f"/ledger/{int(ledger_id)}/entry/{int(entry_id)}"
        return self._run(call("GET", path, expect=Expect.RAW, transform=parse_messages))

    def get_message_id_by_timestamp(self, topic: str, timestamp_ms: int) -> Any:
        path = topic_path(topic) + f"/messageid/{int(timestamp_ms)}"
        return self._run(call("GET", path, transform=message_id_of))

    def get_last_message_id(self, topic: str) -> Any:
        """The raw MessageId JSON (``ledgerId``, ``entryId``, ``partitionIndex`` ...)."""
        return self._run(call("GET", topic_path(topic) + "/lastMessageId"))

    def get_backlog_size(self, topic: str, message_id: MessageId) -> Any:
        return self._run(call("PUT", topic_path(topic) + "/backlogSize", body=message_id))
