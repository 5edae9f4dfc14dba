"""CompactionService: at most one compaction per topic, its status, and automatic compaction.

Theory of operation: the broker owns one service.  ``trigger(topic)`` starts a
compaction of the topic in the background (a task of the service's
supervisor) and returns at once -- Pulsar's ``PUT .../compaction`` answers 204
before the work is done; a trigger while that topic's compaction runs raises
:class:`CompactionAlreadyRunning` (409 "Compaction already in progress").
``status(topic)`` is Pulsar's LongRunningProcessStatus JSON.

Per-topic state machine (transitions only in :meth:`_set`)::

    NOT_RUN --trigger--> RUNNING --ok--> SUCCESS --trigger--> RUNNING
                                 --error--> ERROR  --trigger--> RUNNING

The state is in memory, as in Pulsar: after a broker restart a topic reports
NOT_RUN until it is compacted again (the compacted view itself is durable).
Known states are bounded (``max_tracked_topics``, oldest finished first out).

Automatic compaction (namespace policy ``compactionThreshold``):
``maybe_auto_compact(topic, backlog_bytes, threshold_bytes)`` triggers when the
threshold is positive and the backlog of the ``__compaction`` cursor
(:func:`compaction_backlog_bytes`) exceeds it, ignoring a run in progress.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from magnetar.broker.compaction.compactor import COMPACTION_SUBSCRIPTION, CompactionResult, Compactor
from magnetar.broker.compaction.errors import (
    CompactionAlreadyRunning,
    CompactionServiceClosed,
)
from magnetar.managed_ledger.api import ManagedLedger
from magnetar.runtime import TaskSupervisor

log = logging.getLogger(__name__)

OpenLedger = Callable[[str], Awaitable[ManagedLedger]]


class CompactionStatus(enum.Enum):
    NOT_RUN = "NOT_RUN"
    RUNNING = "RUNNING"
    SUCCESS = "SUCCESS"
    ERROR = "ERROR"


_TRANSITIONS = {
    CompactionStatus.NOT_RUN: {CompactionStatus.RUNNING},
    CompactionStatus.RUNNING: {CompactionStatus.SUCCESS, CompactionStatus.ERROR},
    CompactionStatus.SUCCESS: {CompactionStatus.RUNNING},
    CompactionStatus.ERROR: {CompactionStatus.RUNNING},
}


@dataclass
class _TopicState:
    status: CompactionStatus = CompactionStatus.NOT_RUN
    last_error: str = ""
    task: asyncio.Task[CompactionResult] | None = None
    last_result: CompactionResult | None = None


def compaction_backlog_bytes(ml: ManagedLedger) -> int:
    """Bytes not yet compacted: after the ``__compaction`` cursor, or the whole backlog if the
    topic was never compacted (what Pulsar compares with ``compactionThreshold``)."""
    cursor = ml.cursors.get(COMPACTION_SUBSCRIPTION)
    if cursor is None:
        return ml.total_size
    return cursor.estimated_backlog_size_bytes()


class CompactionService:
    def __init__(
        self,
        compactor: Compactor,
        open_ledger: OpenLedger,
        supervisor: TaskSupervisor,
        *,
        max_tracked_topics: int = 10_000,
    ) -> None:
        self.compactor = compactor
        self._open_ledger = open_ledger
        self._supervisor = supervisor.child("compaction")
        self._topics: OrderedDict[str, _TopicState] = OrderedDict()
        self._max_tracked = max_tracked_topics
        self._closed = False

    # -- the state machine -----------------------------------------------------------------

    def _set(self, state: _TopicState, new: CompactionStatus, error: str = "") -> None:
        if new not in _TRANSITIONS[state.status]:
            raise AssertionError(f"compaction status {state.status.name} -> {new.name}")
        state.status = new
        if new is CompactionStatus.RUNNING:
            state.last_error = ""
        elif new is CompactionStatus.ERROR:
            state.last_error = error

    def _state(self, topic: str) -> _TopicState:
        state = self._topics.get(topic)
        if state is None:
            state = self._topics[topic] = _TopicState()
            self._evict()
        return state

    def _evict(self) -> None:
        while len(self._topics) > self._max_tracked:
            victim = next(
                (t for t, s in self._topics.items() if s.status is not CompactionStatus.RUNNING), None
            )
            if victim is None:
                return
            del self._topics[victim]

    # -- API ---------------------------------------------------------------------------------

    def trigger(self, topic: str) -> asyncio.Task[CompactionResult]:
        """Start compacting ``topic`` in the background; CompactionAlreadyRunning if it is."""
        if self._closed:
            raise CompactionServiceClosed("compaction service is closed")
        state = self._state(topic)
        if state.status is CompactionStatus.RUNNING:
            raise CompactionAlreadyRunning(topic)
        self._set(state, CompactionStatus.RUNNING)
        state.task = self._supervisor.spawn(self._run(topic, state), name=f"compact:{topic}")
        return state.task

    async def compact(self, topic: str) -> CompactionResult:
        """Trigger and wait for the result (raises what the run raised)."""
        return await self.trigger(topic)

    def status(self, topic: str) -> dict:
        """Pulsar's LongRunningProcessStatus: ``{"status": ..., "lastError": ...}``."""
        state = self._topics.get(topic) or _TopicState()
        return {"status": state.status.value, "lastError": state.last_error}

    def last_result(self, topic: str) -> CompactionResult | None:
        state = self._topics.get(topic)
        return state.last_result if state else None

    def maybe_auto_compact(self, topic: str, backlog_bytes: int, threshold_bytes: int) -> bool:
        """Trigger if ``0 < threshold_bytes < backlog_bytes`` and none runs; True if triggered."""
        if threshold_bytes <= 0 or backlog_bytes <= threshold_bytes or self._closed:
            return False
        try:
            self.trigger(topic)
        except CompactionAlreadyRunning:
            return False
        return True

    async def _run(self, topic: str, state: _TopicState) -> CompactionResult:
        try:
            ml = await self._open_ledger(topic)
            result = await self.compactor.compact(ml)
        except asyncio.CancelledError:
            self._set(state, CompactionStatus.ERROR, "compaction cancelled")
            raise
        except Exception as e:  # every failure is reported through status(), then re-raised
            message = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
            self._set(state, CompactionStatus.ERROR, message)
            log.warning("compaction of %s failed: %s", topic, message)
            raise
        state.last_result = result
        self._set(state, CompactionStatus.SUCCESS)
        return result

    async def aclose(self) -> None:
        self._closed = True
        await self._supervisor.aclose()
