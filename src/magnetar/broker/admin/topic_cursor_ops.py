"""Cursor moves of the topic-state admin API: skip, clear backlog, expire, reset.

Theory of operation: a subscription's position is its managed-ledger cursor;
these operations move it (skip ``n``, skip all, expire by age or up to a
position, reset by publish time or to a position).  The cursor is the live
subscription's when one is loaded, else the stored cursor of that name (404
when neither exists).  After a move the subscription's dispatcher is woken
so it reads from the new place.  Moving a cursor *back* under connected
consumers goes through the subscription (``reset_to``) so the dispatcher
forgets what it had read ahead; Pulsar disconnects consumers on reset, and we
do the same.  On a partitioned base name, skip-all, expire and reset by time
run on every partition (:meth:`TopicResolution._each`); the others need one
topic.  Publish times come from each entry's metadata (:func:`publish_time_of`,
also the message-TTL enforcer's clock).
"""

from __future__ import annotations

from typing import Any

from magnetar.broker import errors
from magnetar.broker.admin.topic_resolve import TopicResolution, q
from magnetar.broker.service.rates import expire_counted
from magnetar.common.lazy_import import lazy_import
from magnetar.managed_ledger.api import Position
from magnetar.protocol.payload import peek_metadata

m = lazy_import("magnetar.common.rest_models")  # pydantic on first use (issue 15 start-up)


def publish_time_of(data: bytes) -> int:
    return int(peek_metadata(data).publish_time)


class CursorOps(TopicResolution):
    @staticmethod
    def _cursor(t: Any, sub: str) -> Any:
        s = t.subscriptions.get(sub)
        if s is not None:
            return s.cursor
        c = t.ml.cursors.get(sub)
        if c is None:
            raise errors.SubscriptionNotFoundError("Subscription not found")
        return c

    async def _move(self, t: Any, sub: str, position: Position) -> None:
        s = t.subscriptions.get(sub)
        if s is not None:
            for c in list(s.consumers):
                c.cnx.broker_closed_consumer(c)
            await s.reset_to(position)
        else:
            await self._cursor(t, sub).reset_cursor(position)

    async def skip(self, topic: str, sub: str, n: int) -> None:
        if n < 0:
            raise errors.PreconditionFailedError("Number of messages to skip must be >= 0")
        (t,) = await self._topics(topic, allow_partitioned=False)
        await self._cursor(t, sub).skip_entries(n)
        self._after_move(t, sub)

    async def skip_all(self, topic: str, sub: str) -> None:
        async def clear(t: Any) -> None:
            await self._cursor(t, sub).clear_backlog()
            self._after_move(t, sub)

        if not await self._each(topic, clear, "POST", f"/subscription/{q(sub)}/skip_all"):
            raise errors.SubscriptionNotFoundError("Subscription not found")

    @staticmethod
    def _after_move(t: Any, sub: str) -> None:
        s = t.subscriptions.get(sub)
        if s is not None and s.dispatcher is not None:
            s.dispatcher.notify()

    async def expire_messages(self, topic: str, sub: str | None, expire_seconds: int) -> None:
        if expire_seconds < 0:
            raise errors.PreconditionFailedError("Expire time must be >= 0")

        async def expire(t: Any) -> None:
            names = [sub] if sub is not None else sorted(set(t.subscriptions) | set(t.ml.cursors))
            found = False
            for name in names:
                try:
                    cursor = self._cursor(t, name)
                except errors.SubscriptionNotFoundError:
                    continue
                found = True
                await expire_counted(
                    t, name, cursor, expire_seconds * 1000, publish_time_of, self._svc.clock.time_ms()
                )
                self._after_move(t, name)
            if sub is not None and not found:
                raise errors.SubscriptionNotFoundError("Subscription not found")

        if sub is None:
            suffix = f"/all_subscription/expireMessages/{expire_seconds}"
        else:
            suffix = f"/subscription/{q(sub)}/expireMessages/{expire_seconds}"
        if not await self._each(topic, expire, "POST", suffix) and sub is not None:
            raise errors.SubscriptionNotFoundError("Subscription not found")

    async def expire_to_position(self, topic: str, sub: str, pos: m.ResetCursorData) -> None:
        (t,) = await self._topics(topic, allow_partitioned=False)
        cursor = self._cursor(t, sub)
        target = Position(pos.ledger_id, pos.entry_id)
        if pos.is_excluded:
            target = Position(pos.ledger_id, pos.entry_id - 1)
        if target.entry_id >= 0 and cursor.mark_delete_position < target:
            await cursor.mark_delete(target)
        self._after_move(t, sub)

    async def reset_by_time(self, topic: str, sub: str, timestamp_ms: int) -> None:
        async def reset(t: Any) -> None:
            pos = await self._cursor(t, sub).find_position_by_publish_time(timestamp_ms, publish_time_of)
            await self._move(t, sub, pos)

        if not await self._each(topic, reset, "POST", f"/subscription/{q(sub)}/resetcursor/{timestamp_ms}"):
            raise errors.SubscriptionNotFoundError("Subscription not found")

    async def reset_by_position(self, topic: str, sub: str, data: m.ResetCursorData) -> None:
        (t,) = await self._topics(topic, allow_partitioned=False)
        self._cursor(t, sub)
        if data.ledger_id == -1 and data.entry_id == -1:
            pos = Position.EARLIEST
            first = await t.ml.read_entries_from(Position(0, 0), 1)
            pos = first[0].position if first else t.ml.last_confirmed_entry.next()
        else:
            pos = Position(data.ledger_id, data.entry_id)
            if data.is_excluded:
                pos = pos.next()
        await self._move(t, sub, pos)
