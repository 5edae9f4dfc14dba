"""Pattern (regex) consumers: which topics match, and noticing topics created or deleted later.

Theory of operation: a pattern names one namespace
(``persistent://tenant/ns/prefix-.*``). At subscribe time the namespace is
listed (GET_TOPICS_OF_NAMESPACE) and the matching topics subscribed. Then a
:class:`PatternDiscovery` task keeps the consumer's topics equal to the
matching ones:

* when the broker's CONNECTED advertised ``supports_topic_watchers`` (and the
  regex mode is the default ``PersistentOnly``), a :class:`TopicListWatcher`
  sends WATCH_TOPIC_LIST on the connection of the broker that owns the
  namespace; the broker answers with the matching topics and, from then on,
  pushes WATCH_TOPIC_UPDATE (new and deleted topics) as they happen, so a new
  topic is subscribed within moments. If the connection drops, the watcher
  registers again with backoff and the full list it gets back replaces its
  view (nothing missed while it was away);
* otherwise -- a broker without the feature, or one that refuses the watch
  (broker-side pattern evaluation off) -- the namespace is listed again every
  ``pattern_auto_discovery_period`` seconds.

The periodic listing also runs next to a watcher, as a safety net (Pulsar's
Java client does the same). Reconciling is by state, never by replaying
events: the wanted set is the matching topic names without their
``-partition-N`` suffix; the consumer subscribes to wanted topics it lacks and
closes its children of topics no longer wanted. One task does all of it, so
two reconciliations never interleave.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable
from typing import Any

from magnetar.client.connection import ClientCnx
from magnetar.client.errors import InvalidConfiguration, PulsarException
from magnetar.client.types import RegexSubscriptionMode, coerce
from magnetar.common.backoff import Backoff, BackoffConfig
from magnetar.protocol import client_commands
from magnetar.protocol.enums import CommandType, TopicDomainMode
from magnetar.protocol.frames import Frame
from magnetar.runtime.rng import Rng

log = logging.getLogger(__name__)
T = CommandType
FEATURE = "supports_topic_watchers"


def pattern_namespace(pattern: re.Pattern[str], mode: Any) -> tuple[str, TopicDomainMode]:
    """The namespace a pattern names, and the wire regex mode."""
    text = pattern.pattern
    if "://" not in text:
        raise InvalidConfiguration(
            "a topic pattern must be a full name, e.g. persistent://public/default/t-.*"
        )
    parts = text.split("://", 1)[1].split("/")
    if len(parts) < 3:
        raise InvalidConfiguration(f"topic pattern {text!r} names no namespace")
    wire = TopicDomainMode(int(coerce(RegexSubscriptionMode, mode)))
    return f"{parts[0]}/{parts[1]}", wire


def base_names(names: Any) -> list[str]:
    """Topic names without their ``-partition-N`` suffix, first occurrence order, no repeats."""
    return list(dict.fromkeys(n.split("-partition-")[0] for n in names))


async def matching_topics(
    lookup: Any, pattern: re.Pattern[str], namespace: str, mode: TopicDomainMode
) -> list[str]:
    names = await lookup.topics_of_namespace(namespace, mode)
    return [t for t in base_names(names) if pattern.fullmatch(t)]


class TopicListWatcher:
    """One WATCH_TOPIC_LIST registration; ``topics`` is the broker's current list of matching topics."""

    def __init__(
        self, client: Any, watcher_id: int, namespace: str, pattern: str, on_change: Callable[[], None]
    ) -> None:
        self.client = client
        self.watcher_id = watcher_id
        self.namespace = namespace
        self.pattern = pattern
        self.topics: set[str] = set()
        self._on_change = on_change
        self._cnx: ClientCnx | None = None
        self._early: list[Any] | None = None  # updates that overtook the registration's answer
        self._closed = False
        self._reconnect_task: asyncio.Task[None] | None = None

    async def _owner_cnx(self) -> ClientCnx:
        logical, physical = await self.client.lookup.lookup(f"persistent://{self.namespace}/__watcher")
        return await self.client.pool.get(logical, physical)

    async def start(self) -> bool:
        """Register; False when the broker does not offer watchers (the caller polls instead)."""
        cnx = await self._owner_cnx()
        if FEATURE not in cnx.server_features:
            return False
        try:
            await self._register(cnx)
        except PulsarException as exc:  # e.g. NotAllowed: pattern evaluation is off on the broker
            log.info("topic-list watch on %s refused (%s); polling instead", self.namespace, exc)
            return False
        return True

    async def _register(self, cnx: ClientCnx) -> None:
        self._early = []
        cnx.add_watcher(self.watcher_id, self)
        try:
            frame = await cnx.request(
                T.WATCH_TOPIC_LIST,
                lambda rid: client_commands.watch_topic_list(
                    rid, self.watcher_id, self.namespace, self.pattern
                ),
            )
        except BaseException:
            cnx.remove_watcher(self.watcher_id)
            self._early = None
            raise
        self._cnx = cnx
        self.topics = set(frame.command.topic)
        early, self._early = self._early, None
        for cmd in early:
            self._apply(cmd)
        self._on_change()

    def handle_frame(self, frame: Frame) -> None:
        if frame.type is not T.WATCH_TOPIC_UPDATE:
            return
        if self._early is not None:
            self._early.append(frame.command)
            return
        self._apply(frame.command)
        self._on_change()

    def _apply(self, cmd: Any) -> None:
        self.topics.difference_update(cmd.deleted_topics)
        self.topics.update(cmd.new_topics)

    def connection_closed(self, cnx: ClientCnx) -> None:
        if cnx is not self._cnx or self._closed:
            return
        self._cnx = None
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = asyncio.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        backoff = Backoff(BackoffConfig(100, 30_000), Rng())
        while not self._closed:
            await asyncio.sleep(backoff.next_s())
            try:
                await self._register(await self._owner_cnx())
                return
            except (PulsarException, OSError) as exc:
                log.info("topic-list watcher on %s: re-register failed (%s)", self.namespace, exc)

    async def close(self) -> None:
        self._closed = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        cnx, self._cnx = self._cnx, None
        if cnx is not None and not cnx.is_closed:
            cnx.remove_watcher(self.watcher_id)
            with contextlib.suppress(PulsarException):
                await cnx.request(
                    T.WATCH_TOPIC_LIST_CLOSE,
                    lambda rid: client_commands.watch_topic_list_close(rid, self.watcher_id),
                )


class PatternDiscovery:
    """Keeps a consumer subscribed to exactly the topics matching its pattern."""

    def __init__(
        self, consumer: Any, pattern: re.Pattern[str], namespace: str, mode: TopicDomainMode, period_s: float
    ) -> None:
        self.consumer = consumer
        self.client = consumer.client
        self.pattern = pattern
        self.namespace = namespace
        self.mode = mode
        self.period_s = period_s
        self.watcher: TopicListWatcher | None = None
        self.watching = False
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        if self.mode == TopicDomainMode.PERSISTENT:
            w = TopicListWatcher(
                self.client,
                self.client.next_consumer_id(),
                self.namespace,
                self.pattern.pattern,
                self._wake.set,
            )
            try:
                self.watching = await w.start()
            except (PulsarException, OSError) as exc:
                log.info("topic-list watcher on %s not started (%s); polling", self.namespace, exc)
            if self.watching:
                self.watcher = w
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            polled = False
            try:
                await asyncio.wait_for(self._wake.wait(), self.period_s)
            except TimeoutError:
                polled = True
            self._wake.clear()
            try:
                if polled or self.watcher is None:
                    wanted = await matching_topics(
                        self.client.lookup, self.pattern, self.namespace, self.mode
                    )
                else:
                    wanted = [t for t in base_names(sorted(self.watcher.topics)) if self.pattern.fullmatch(t)]
                await self.consumer.reconcile_topics(wanted)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("pattern discovery on %s failed: %s", self.namespace, exc)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
        if self.watcher is not None:
            await self.watcher.close()
