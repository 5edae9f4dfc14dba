"""Readers: a consumer without a durable subscription, positioned by message id.

Theory of operation: a :class:`Reader` is a ``Consumer`` on a non-durable
Exclusive subscription named ``reader-<10 hex>`` whose SUBSCRIBE carries the
start message id. The broker positions its cursor near that id and the
consumer drops what lies before it (``start_message_id_inclusive`` decides
whether the start message itself is delivered). ``EARLIEST`` reads from the
beginning, ``LATEST`` only what is published afterwards -- or, inclusive,
from the last stored message: the reader asks for the last message id and
seeks to it, as the official clients do.

``has_message_available()`` is true when a message is queued, else compares,
per partition, the broker's last message id with the last one handed out (or
with the start id before anything was read). On a partitioned topic a reader
reads every partition, each from the start id, as the official clients do:
ledger ids are broker-wide, so a specific id starts its own partition right
at (or after) it and the others at their first entry past that position;
LATEST-inclusive starts each partition at its own last message.
"""

from __future__ import annotations

from typing import Any

from magnetar.client.consumer import Consumer
from magnetar.client.message import Message
from magnetar.protocol.message_id import INT64_MAX, MessageId


def _key(mid: MessageId) -> tuple[int, int, int]:
    return (mid.ledger_id, mid.entry_id, mid.batch_index if mid.batch_index >= 0 else INT64_MAX)


class Reader:
    def __init__(self, consumer: Consumer, start: MessageId, inclusive: bool) -> None:
        self._consumer = consumer
        self._start = start
        self._inclusive = inclusive
        self._starts: dict[str, MessageId] = {}  # per partition, where LATEST-inclusive put it

    async def _position_latest_inclusive(self) -> None:
        if self._start.ledger_id == INT64_MAX and self._inclusive:
            for child in list(self._consumer._children.values()):
                last, _mark = await child.get_last_message_id()
                if last.entry_id >= 0:
                    await child.seek(last)
                    self._starts[child.topic] = last

    def topic(self) -> str:
        return self._consumer.topic()

    async def read_next(self, timeout_millis: int | None = None) -> Message:
        return await self._consumer.receive(timeout_millis)

    def __aiter__(self) -> Reader:
        return self

    async def __anext__(self) -> Message:
        return await self._consumer.__anext__()

    async def has_message_available(self) -> bool:
        if len(self._consumer.queue):
            return True
        for child in list(self._consumer._children.values()):
            last, _mark = await child.get_last_message_id()
            if last.entry_id < 0:
                continue
            seen = child.last_dequeued
            if seen is None:
                start = self._starts.get(child.topic, self._start)
                if start.ledger_id < 0:
                    return True
                if start.ledger_id == INT64_MAX:
                    continue
                if _key(last) >= _key(start) if self._inclusive else _key(last) > _key(start):
                    return True
            elif _key(last) > _key(seen):
                return True
        return False

    async def seek(self, target: MessageId | int) -> None:
        await self._consumer.seek(target)

    def is_connected(self) -> bool:
        return self._consumer.is_connected()

    async def close(self) -> None:
        await self._consumer.close()

    async def __aenter__(self) -> Reader:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
