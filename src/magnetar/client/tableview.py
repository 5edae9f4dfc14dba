"""TableView: the latest value of every key of a topic, kept up to date.

Theory of operation: ``Client.create_table_view(topic)`` opens a reader from
EARLIEST with ``read_compacted`` (so a compacted topic is replayed from its
compacted ledger: one message per key) on every partition, reads until
``has_message_available()`` says the view caught up, and only then returns.
A background task then applies every new message: a message with an empty
payload deletes its key (compaction's tombstone), any other sets it. Keys are
message keys (``partition_key``); messages without a key are ignored, as in
the official clients. Listeners given to ``for_each_and_listen`` see the
existing entries once, then every update. Values go through the view's
schema (``value()``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from magnetar.client.errors import AlreadyClosed
from magnetar.client.reader import Reader

log = logging.getLogger(__name__)


class TableView:
    def __init__(self, reader: Reader) -> None:
        self._reader = reader
        self._data: dict[str, Any] = {}
        self._listeners: list[Callable[[str, Any], None]] = []
        self._task: asyncio.Task[None] | None = None

    async def _catch_up(self) -> None:
        while await self._reader.has_message_available():
            self._apply(await self._reader.read_next())
        self._task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        while True:
            try:
                self._apply(await self._reader.read_next())
            except AlreadyClosed:
                return
            except Exception as exc:  # keep following: one bad message must not freeze the view
                log.warning("table view on %s: %s", self._reader.topic(), exc)

    def _apply(self, msg: Any) -> None:
        if not msg.has_key():
            return
        key = msg.partition_key()
        if not msg.data():
            self._data.pop(key, None)
            value = None
        else:
            value = msg.value()
            self._data[key] = value
        for listener in list(self._listeners):
            try:
                listener(key, value)
            except Exception:
                log.exception("table view listener failed")

    def get(self, key: str) -> Any:
        return self._data.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def keys(self) -> list[str]:
        return list(self._data)

    def for_each(self, fn: Callable[[str, Any], None]) -> None:
        for key, value in list(self._data.items()):
            fn(key, value)

    def for_each_and_listen(self, fn: Callable[[str, Any], None]) -> None:
        self.for_each(fn)
        self._listeners.append(fn)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        await self._reader.close()
