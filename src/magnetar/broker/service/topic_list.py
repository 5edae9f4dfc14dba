"""Topic lists for pattern (regex) consumers: GET_TOPICS_OF_NAMESPACE and topic-list watchers.

Theory of operation
-------------------
A regex consumer learns which topics of a namespace match its pattern in one
of two ways, both answered here as Pulsar answers them:

* **polling** -- GET_TOPICS_OF_NAMESPACE ``{namespace, mode, topics_pattern?,
  topics_hash?}`` every ``patternAutoDiscoveryPeriod``.  The answer carries the
  topics (system topics left out); when the client sent a pattern and broker
  side evaluation is on (``enableBrokerSideSubscriptionPatternEvaluation``,
  pattern no longer than ``subscriptionPatternMaxLength``) only the matching
  ones, with ``filtered=true``.  ``topics_hash`` is the hash of the list sent
  (or that would be sent); when it equals the client's, the list is left out
  and ``changed=false``.
* **watching** -- when CONNECTED advertised ``supports_topic_watchers`` (the
  same setting), the client may send WATCH_TOPIC_LIST ``{watcher_id,
  namespace, topics_pattern, topics_hash?}``: the answer is
  WATCH_TOPIC_LIST_SUCCESS with the matching persistent topics and their hash,
  and from then on every change arrives as WATCH_TOPIC_UPDATE ``{new_topics,
  deleted_topics, topics_hash}`` until WATCH_TOPIC_LIST_CLOSE or the
  connection goes.

The hash is Pulsar's: CRC32-C over the sorted names joined by ``,`` (UTF-8),
written as the 4 bytes of the checksum in little-endian order, in lower-case
hex (Guava's ``HashCode.toString``).  A pattern is matched, as Pulsar does,
against the topic name without its ``persistent://`` scheme and without the
``-partition-N`` suffix, the pattern's own scheme removed first.

Changes reach watchers through :meth:`TopicListWatchers.changed`, which the
topic registry calls when a topic is created or deleted; a rescan every
``RESCAN_S`` also catches creations that bypass the registry (partitioned
metadata written by the admin API, another broker's topics).  The rescan runs
only while watchers exist, and lists each watched namespace once per pass.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import crc32c as _crc32c

from magnetar.broker import errors
from magnetar.broker.service.names import parse_topic
from magnetar.protocol import server_commands as cmds
from magnetar.runtime import wait_for

if TYPE_CHECKING:
    from magnetar.broker.service.broker_service import BrokerService
    from magnetar.broker.service.connection import Connection

log = logging.getLogger(__name__)

RESCAN_S = 1.0
_SCHEMES = ("persistent://", "non-persistent://")


def topics_hash(topics: list[str] | set[str]) -> str:
    """Pulsar's ``TopicList.calculateHash``: CRC32-C of the sorted names joined by ','."""
    checksum = _crc32c.crc32c(",".join(sorted(topics)).encode())
    return checksum.to_bytes(4, "little").hex()


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The client's regex with its domain scheme removed (Pulsar matches scheme-less names)."""
    for scheme in _SCHEMES:
        if pattern.startswith(scheme):
            pattern = pattern[len(scheme) :]
            break
    else:
        if "://" in pattern:
            raise errors.InvalidTopicNameError(f"Does not support topic domain: {pattern.split('://')[0]}")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise errors.InvalidTopicNameError(f"Invalid topics pattern {pattern!r}: {exc}") from None


def filter_topics(topics: list[str], pattern: re.Pattern[str]) -> list[str]:
    out = []
    for name in topics:
        base = parse_topic(name).base.full_name
        if pattern.fullmatch(base.split("://", 1)[-1]):
            out.append(name)
    return out


def pattern_evaluation(svc: Any, pattern: str | None) -> re.Pattern[str] | None:
    """The compiled pattern when the broker evaluates it; None when it lists everything."""
    if not pattern or not svc.config.enable_broker_side_subscription_pattern_evaluation:
        return None
    if len(pattern) > svc.config.subscription_pattern_max_length:
        return None
    return compile_pattern(pattern)


async def topics_of_namespace(
    svc: Any, namespace: str, mode: str, pattern: str | None, client_hash: str | None
) -> tuple[list[str], bool, str, bool]:
    """(topics, filtered, hash, changed) for GET_TOPICS_OF_NAMESPACE."""
    topics = await svc.list_topics(namespace, mode)
    compiled = pattern_evaluation(svc, pattern)
    if compiled is not None:
        topics = filter_topics(topics, compiled)
    digest = topics_hash(topics)
    changed = client_hash is None or client_hash != digest
    return (topics if changed else []), compiled is not None, digest, changed


@dataclass
class _Watcher:
    cnx: Connection
    watcher_id: int
    namespace: str
    pattern: re.Pattern[str]
    topics: set[str] = field(default_factory=set)


class TopicListWatchers:
    """The WATCH_TOPIC_LIST watchers of one broker and the task that keeps them current."""

    def __init__(self, svc: BrokerService) -> None:
        self._svc = svc
        self._watchers: dict[tuple[int, int], _Watcher] = {}  # (id(cnx), watcher_id)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def enabled(self) -> bool:
        return bool(self._svc.config.enable_broker_side_subscription_pattern_evaluation)

    async def watch(
        self, cnx: Connection, watcher_id: int, namespace: str, pattern: str, client_hash: str | None
    ) -> tuple[list[str], str]:
        """Register a watcher; (topics to send, hash).  The topics are empty when the hash matches."""
        if not self.enabled:
            raise errors.NotAllowedError("Broker side subscription pattern evaluation is disabled")
        if len(pattern) > self._svc.config.subscription_pattern_max_length:
            raise errors.NotAllowedError(
                f"Unable to create topic list watcher: the pattern is longer than "
                f"{self._svc.config.subscription_pattern_max_length} characters"
            )
        compiled = compile_pattern(pattern)
        topics = filter_topics(await self._svc.list_topics(namespace, "PERSISTENT"), compiled)
        w = _Watcher(cnx, watcher_id, namespace, compiled, set(topics))
        self._watchers[(id(cnx), watcher_id)] = w
        if self._task is None or self._task.done():
            self._task = self._svc.supervisor.spawn(self._run(), name="topic-list-watchers")
        digest = topics_hash(topics)
        return ([] if client_hash == digest else sorted(topics)), digest

    def close(self, cnx: Connection, watcher_id: int) -> None:
        self._watchers.pop((id(cnx), watcher_id), None)

    def forget_connection(self, cnx: Connection) -> None:
        for key in [k for k, w in self._watchers.items() if w.cnx is cnx]:
            del self._watchers[key]

    def changed(self, namespace: str) -> None:
        """A topic of ``namespace`` was created or deleted: bring its watchers up to date now."""
        if any(w.namespace == namespace for w in self._watchers.values()):
            self._wake.set()

    async def _run(self) -> None:
        while self._watchers:
            try:
                await wait_for(self._svc.clock, self._wake.wait(), RESCAN_S)
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.rescan()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("topic-list watcher rescan failed", exc_info=True)

    async def rescan(self) -> None:
        by_ns: dict[str, list[_Watcher]] = {}
        for w in list(self._watchers.values()):
            if w.cnx.closed:
                self.forget_connection(w.cnx)
                continue
            by_ns.setdefault(w.namespace, []).append(w)
        for namespace, watchers in by_ns.items():
            try:
                current = await self._svc.list_topics(namespace, "PERSISTENT")
            except errors.BrokerError:
                current = []  # the namespace went away: every topic is deleted
            for w in watchers:
                now = set(filter_topics(current, w.pattern))
                new, gone = now - w.topics, w.topics - now
                if not new and not gone:
                    continue
                w.topics = now
                w.cnx.write(
                    cmds.watch_topic_update(w.watcher_id, sorted(new), sorted(gone), topics_hash(now))
                )
