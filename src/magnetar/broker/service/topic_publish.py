"""A plain SEND's add as callbacks, and the helpers between add futures and callbacks.

Theory of operation: ``PersistentTopic.add_entry`` hands a plain SEND (no
transaction, no deduplication, not a remote cluster's replicator) to the
managed ledger as a callback (``ManagedLedger.add_entry_cb``) through a
:class:`TopicAdd`: on success it does the topic's bookkeeping
(``PersistentTopic._added``) and calls the producer's callback at once -- no
future and no loop hop per layer; after a retriable failure it retries once
on the next ledger (a task, as the future path does); ``cancel`` (the topic's
close) fails it with CancelledError, soon, as a cancelled future would.  The
callback is called exactly once.  The other kinds of add keep their futures;
``outcome`` turns a finished one into the callback's (position, error).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from magnetar.managed_ledger.add_completion import AddCallbackFn
from magnetar.managed_ledger.api import EntryMetadata, ManagedLedgerError, Position

if TYPE_CHECKING:
    from magnetar.broker.service.topic import PersistentTopic


class TopicAdd:
    """One plain SEND's add, as callbacks (see the module docstring)."""

    __slots__ = ("topic", "data", "n_messages", "is_batch", "metadata", "on_done", "finished", "retry")

    def __init__(
        self,
        topic: PersistentTopic,
        data: bytes,
        n_messages: int,
        is_batch: bool,
        metadata: EntryMetadata | None,
        on_done: AddCallbackFn,
    ) -> None:
        self.topic = topic
        self.data = data
        self.n_messages = n_messages
        self.is_batch = is_batch
        self.metadata = metadata
        self.on_done = on_done
        self.finished = False
        self.retry: asyncio.Task[Position] | None = None

    def start(self) -> None:
        topic = self.topic
        topic._track(self)
        topic.ml.add_entry_cb(self.data, self._stored, num_messages=self.n_messages, metadata=self.metadata)

    def _stored(self, pos: Position | None, exc: BaseException | None) -> None:
        if self.finished:  # cancelled by close()
            return
        topic = self.topic
        if exc is None:
            assert pos is not None
            self._finish(topic._added(pos, self.data, self.n_messages, self.is_batch), None)
        elif isinstance(exc, ManagedLedgerError) and topic._may_retry(exc, 0):
            self.retry = asyncio.get_running_loop().create_task(
                topic._add(self.data, self.n_messages, self.is_batch, first_attempt=1, metadata=self.metadata)
            )
            self.retry.add_done_callback(self._retried)
        else:
            self._finish(None, exc)

    def _retried(self, task: asyncio.Task[Position]) -> None:
        if not self.finished:
            self._finish(*outcome(task))

    def _finish(self, pos: Position | None, exc: BaseException | None) -> None:
        self.finished = True
        self.topic._adds.discard(self)
        self.on_done(pos, exc)

    def cancel(self) -> None:
        """close(): the ledger is gone; the producer hears CancelledError (soon, as from a
        cancelled future)."""
        if self.finished:
            return
        self.finished = True
        self.topic._adds.discard(self)
        if self.retry is not None:
            self.retry.cancel()
        fail_soon(self.on_done, asyncio.CancelledError())


def outcome(f: asyncio.Future[Position]) -> tuple[Position | None, BaseException | None]:
    if f.cancelled():
        return None, asyncio.CancelledError()
    exc = f.exception()
    return (None, exc) if exc is not None else (f.result(), None)


def fail_soon(on_done: AddCallbackFn, exc: BaseException) -> None:
    asyncio.get_running_loop().call_soon(on_done, None, exc)


def chain(src: asyncio.Future[Position], dst: asyncio.Future[Position]) -> None:
    if dst.done():
        return
    if src.cancelled():
        dst.cancel()
    elif (exc := src.exception()) is not None:
        dst.set_exception(exc)
    else:
        dst.set_result(src.result())
