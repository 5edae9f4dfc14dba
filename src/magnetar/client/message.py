"""Received messages: what ``consumer.receive()`` returns, with the official client's accessors.

Theory of operation: a :class:`Message` is an immutable view of one message
as the application sees it: its payload (``data()``), the decoded value
(``value()``, through the consumer's schema), metadata (``properties()``,
``partition_key()``, ``ordering_key()``, ``publish_timestamp()``,
``event_timestamp()``, ``redelivery_count()``, ``schema_version()``) and where
it lives (``message_id()``, ``topic_name()``). For a message of a batch the id
carries ``batch_index`` and ``batch_size``; for a chunked message it is the
last chunk's id with ``first_chunk`` set, and ``_chunk_ids`` lists every chunk
so an individual ack acks them all. The consumer that received it is kept in
``_consumer`` so a multi-topic consumer can route an ack to the right child.
"""

from __future__ import annotations

import base64
from typing import Any

from magnetar.protocol.message_id import EARLIEST, LATEST, MessageId

__all__ = ["EARLIEST", "LATEST", "Message", "MessageId"]


class Message:
    """One received message (build with keywords; slots keep it small and fast on the hot path)."""

    __slots__ = (
        "_topic", "_id", "_data", "_properties", "_partition_key", "_ordering_key", "_publish_time",
        "_event_time", "_redelivery_count", "_schema_version", "_producer_name", "_sequence_id",
        "_schema", "_consumer", "_chunk_ids", "_replicated_from", "_key_b64",
    )  # fmt: skip

    def __init__(
        self,
        _topic: str,
        _id: MessageId | tuple[int, int, int, int, int],
        _data: bytes,
        _properties: dict[str, str] | None = None,
        _partition_key: str | None = None,
        _ordering_key: bytes | None = None,
        _publish_time: int = 0,
        _event_time: int = 0,
        _redelivery_count: int = 0,
        _schema_version: bytes = b"",
        _producer_name: str = "",
        _sequence_id: int = 0,
        _schema: Any = None,
        _consumer: Any = None,
        _chunk_ids: tuple[MessageId, ...] = (),
        _replicated_from: str | None = None,
        _key_b64: bool = False,
    ) -> None:
        self._topic = _topic
        self._id = _id
        self._data = _data
        self._properties = _properties if _properties is not None else {}
        self._partition_key = _partition_key
        self._ordering_key = _ordering_key
        self._publish_time = _publish_time
        self._event_time = _event_time
        self._redelivery_count = _redelivery_count
        self._schema_version = _schema_version
        self._producer_name = _producer_name
        self._sequence_id = _sequence_id
        self._schema = _schema
        self._consumer = _consumer
        self._chunk_ids = _chunk_ids
        self._replicated_from = _replicated_from
        self._key_b64 = _key_b64

    def data(self) -> bytes:
        return self._data

    def value(self) -> Any:
        schema = self._schema
        if schema is None:
            return self._data
        if schema.separated:
            return schema.decode_separated(self.key_bytes(), self._data)
        return schema.decode(self._data)

    def key_bytes(self) -> bytes | None:
        """The key as bytes: base64-decoded when the producer flagged it so (KeyValue SEPARATED)."""
        key = self._partition_key
        if key is None:
            return None
        return base64.b64decode(key) if self._key_b64 else key.encode()

    def properties(self) -> dict[str, str]:
        return dict(self._properties)

    def partition_key(self) -> str:
        return self._partition_key or ""

    def has_key(self) -> bool:
        return self._partition_key is not None

    def ordering_key(self) -> bytes | None:
        return self._ordering_key

    def publish_timestamp(self) -> int:
        return self._publish_time

    def event_timestamp(self) -> int:
        return self._event_time

    def message_id(self) -> MessageId:
        mid = self._id
        if type(mid) is tuple:  # (ledger, entry, partition, batch_index, batch_size), built lazily
            mid = self._id = MessageId(*mid)
        return mid

    def topic_name(self) -> str:
        return self._topic

    def redelivery_count(self) -> int:
        return self._redelivery_count

    def schema_version(self) -> bytes:
        return self._schema_version

    def producer_name(self) -> str:
        return self._producer_name

    def sequence_id(self) -> int:
        return self._sequence_id

    def __repr__(self) -> str:
        return f"Message(topic={self._topic!r}, id={self.message_id()}, {len(self._data)} bytes)"
