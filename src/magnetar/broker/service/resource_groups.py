"""Resource groups on one broker: one limiter per group, shared by every topic of its namespaces.

Theory of operation: a resource group (``/admin/resourcegroups/{name}``, see
``broker.resources.resource_groups``) caps the publish rate (messages and
bytes) and the dispatch rate (messages and bytes) of *all* the topics of the
namespaces attached to it, together -- however many topics there are.

* One :class:`ResourceGroupLimiter` per group per broker.  A topic of an
  attached namespace holds it in its typed ``resource_group`` field (set by
  the admin layer's policy enforcer from the namespace's
  ``resource_group_name``, like the other effective policies; None: no
  group).  The hot paths consult it beside the topic's own limits: a publish
  takes its messages and bytes from the group's token buckets
  (:class:`TokenBucket`: refilled at the rate, holding at most one second's
  worth) and, once a bucket is in debt, reading from that connection pauses
  until the debt is paid (``admission.throttle_publish`` calls
  :meth:`ResourceGroupLimiter.throttle_publish`; Pulsar's limiters since
  PIP-322 work the same way, sends are never failed).  Debt rather than
  fixed windows keeps the long-run rate at the quota when the loop wakes
  late, and the short pauses interleave the connections of the group fairly.
  A dispatcher's round sizes its read from what the group's dispatch window
  has left and waits when it is spent (``dispatch_rate.DispatchRateLimiter``,
  the group's window as a third beside the topic's and the subscription's).
* Changes apply without reloading anything: the limiter object stays, its
  rates are replaced in place.  :class:`ResourceGroupService` re-reads the
  groups when the metadata store reports a change under
  ``/admin/resourcegroups``, ``/admin/policies`` (a namespace attached or
  detached) or ``/namespace`` (bundle ownership), and every
  ``resourceUsageTransportPublishIntervalInSecs`` (Pulsar's key; here 10 s by
  default) as a safety net for a lost notification.  With no group defined a
  refresh is one ``children`` read.
* Several brokers: each broker enforces a share of the group's quota.  Pulsar
  redistributes the quota by reported usage; the rule here is simpler and
  documented: ``share = ceil(quota / N)``, N = the number of distinct brokers
  that own at least one bundle of the group's namespaces (read from the
  ownership nodes ``/namespace/{tenant}/{ns}/{range}``; at least 1).  A
  broker that owns nothing of the group serves none of its topics.  The sum
  over brokers is the quota (within N per second of rounding) whatever the
  traffic's spread; traffic concentrated on one of several owners gets only
  that owner's share until the bundles move.
* A topic whose namespace names a group this broker has not read yet gets a
  limiter with no limits at once and its rates with the next refresh (which
  the naming triggers).

Metrics (``web.metrics_resource_groups``) read :meth:`ResourceGroupService.statistics`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from magnetar.broker.ownership.ownership import OWNERSHIP_ROOT, OwnerData
from magnetar.broker.resources.base import JsonStore
from magnetar.broker.resources.namespaces import ROOT as NAMESPACE_ROOT
from magnetar.broker.resources.resource_groups import (
    NO_QUOTA,
    ROOT,
    GroupQuota,
    ResourceGroupResources,
)
from magnetar.broker.service.dispatch_rate import NO_LIMIT, DispatchRate, DispatchWindow
from magnetar.metadata.api import Notification, NotificationType
from magnetar.runtime import wait_for

if TYPE_CHECKING:
    from magnetar.broker.service.connection import Connection
    from magnetar.broker.service.topic_base import BaseTopic

log = logging.getLogger(__name__)

REFRESH_INTERVAL_KEY = "resourceUsageTransportPublishIntervalInSecs"
DEFAULT_REFRESH_INTERVAL_S = 10.0
DEBOUNCE_S = 0.05  # a burst of notifications makes one refresh
GROUPS_MAX = 10_000  # bound on limiters kept for names nobody defined


class TokenBucket:
    """``rate`` tokens per second, at most ``rate`` held (one second's burst); may go into debt."""

    __slots__ = ("last_s", "rate", "tokens")

    def __init__(self, rate: int, now_s: float | None = None) -> None:
        self.rate = rate
        self.tokens = float(rate)
        self.last_s = now_s

    def take(self, n: int, now_s: float) -> float:
        """Take ``n`` tokens; how long to wait (s) until the debt is paid (0: none)."""
        if self.last_s is not None and now_s > self.last_s:
            self.tokens = min(float(self.rate), self.tokens + (now_s - self.last_s) * self.rate)
        self.last_s = now_s
        self.tokens -= n
        return -self.tokens / self.rate if self.tokens < 0 else 0.0

    def set_rate(self, rate: int) -> None:
        self.rate = rate
        self.tokens = min(self.tokens, float(rate))


def _bucket(old: TokenBucket | None, rate: int) -> TokenBucket | None:
    if rate <= 0:
        return None
    if old is None:
        return TokenBucket(rate)
    old.set_rate(rate)
    return old


class ResourceGroupLimiter:
    """The publish and dispatch budgets of one group on this broker (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.quota = NO_QUOTA  # the group's cluster-wide quota, as stored
        self.brokers = 1  # brokers sharing it (owners of the group's bundles)
        self.namespaces: tuple[str, ...] = ()
        self.publish_msgs = -1  # this broker's share, per second (-1: no limit)
        self.publish_bytes = -1
        self.dispatch_rate: DispatchRate = NO_LIMIT  # this broker's share
        self.publish_msg_bucket: TokenBucket | None = None  # None: no limit
        self.publish_byte_bucket: TokenBucket | None = None
        self.dispatch_window = DispatchWindow()
        # usage on this broker since start (metrics): plain adds on the hot path
        self.published_msgs = 0
        self.published_bytes = 0
        self.dispatched_msgs = 0
        self.dispatched_bytes = 0
        self.publish_throttled = 0

    def configure(self, quota: GroupQuota, brokers: int, namespaces: tuple[str, ...] = ()) -> None:
        """New quota or sharing: takes effect at the next publish / dispatch round."""
        self.quota, self.brokers, self.namespaces = quota, max(1, brokers), namespaces
        share = quota.shared_by(self.brokers)
        self.publish_msgs, self.publish_bytes = share.publish_msgs, share.publish_bytes
        self.publish_msg_bucket = _bucket(self.publish_msg_bucket, share.publish_msgs)
        self.publish_byte_bucket = _bucket(self.publish_byte_bucket, share.publish_bytes)
        self.dispatch_rate = (
            DispatchRate(share.dispatch_msgs, share.dispatch_bytes)
            if share.dispatch_msgs > 0 or share.dispatch_bytes > 0
            else NO_LIMIT
        )

    def throttle_publish(self, cnx: Connection, n_messages: int, n_bytes: int, now_s: float) -> None:
        """Count one publish; pause ``cnx`` while a bucket is in debt."""
        self.published_msgs += n_messages
        self.published_bytes += n_bytes
        msgs, size = self.publish_msg_bucket, self.publish_byte_bucket
        if msgs is None and size is None:
            return
        wait_s = msgs.take(n_messages, now_s) if msgs is not None else 0.0
        if size is not None:
            wait_s = max(wait_s, size.take(n_bytes, now_s))
        if wait_s > 0:
            self.publish_throttled += 1
            cnx.pause_reading(wait_s)

    def count_dispatch(self, messages: int, size: int) -> None:
        self.dispatched_msgs += messages
        self.dispatched_bytes += size

    def statistics(self) -> dict[str, Any]:
        return {
            "quota": self.quota.values(),
            "brokers": self.brokers,
            "namespaces": list(self.namespaces),
            "publishRateInMsgs": self.publish_msgs,
            "publishRateInBytes": self.publish_bytes,
            "dispatchRateInMsgs": self.dispatch_rate.messages,
            "dispatchRateInBytes": self.dispatch_rate.bytes,
            "publishedMsgs": self.published_msgs,
            "publishedBytes": self.published_bytes,
            "dispatchedMsgs": self.dispatched_msgs,
            "dispatchedBytes": self.dispatched_bytes,
            "publishThrottled": self.publish_throttled,
        }


class ResourceGroupService:
    """This broker's limiters, kept in step with the metadata store (see the module docstring)."""

    def __init__(self, store: Any, clock: Any, config: Any = None) -> None:
        self._store = store
        self._clock = clock
        self._res = ResourceGroupResources(JsonStore(store))
        self.limiters: dict[str, ResourceGroupLimiter] = {}
        self._wake = asyncio.Event()
        self.refreshes = 0
        props = getattr(config, "as_properties", dict)() if config is not None else {}
        try:
            interval = float(props.get(REFRESH_INTERVAL_KEY, DEFAULT_REFRESH_INTERVAL_S))
        except (TypeError, ValueError):
            interval = DEFAULT_REFRESH_INTERVAL_S
        self.interval_s = max(0.1, interval)
        if hasattr(store, "add_listener"):
            store.add_listener(self._on_notification)

    # ------------------------------------------------------------ topics
    def limiter(self, name: str) -> ResourceGroupLimiter:
        """The group's limiter (no limits until the group is read: a refresh is asked for)."""
        lim = self.limiters.get(name)
        if lim is None:
            if len(self.limiters) >= GROUPS_MAX:
                self._forget_unknown()
            lim = self.limiters[name] = ResourceGroupLimiter(name)
            self._wake.set()
        return lim

    def attach(self, topic: BaseTopic, group: str | None) -> None:
        """Give ``topic`` its namespace's group limiter (None: no group)."""
        limiter = self.limiter(group) if group else None
        if topic.resource_group is not limiter:
            topic.resource_group = limiter

    def _forget_unknown(self) -> None:
        for name in [n for n, lim in self.limiters.items() if lim.quota is NO_QUOTA]:
            del self.limiters[name]

    # ------------------------------------------------------------ refresh
    def _on_notification(self, note: Notification) -> None:
        if note.type is NotificationType.CHILDREN_CHANGED and not note.path.startswith(ROOT):
            return
        path = note.path
        if path.startswith((ROOT, NAMESPACE_ROOT + "/", OWNERSHIP_ROOT + "/")):
            if path.startswith(ROOT) or self.limiters:
                self._wake.set()

    async def refresh(self) -> None:
        """Read every group, the namespaces naming it and the owners of their bundles; configure
        the limiters in place."""
        self.refreshes += 1
        docs = await self._res.all()
        if not docs and not self.limiters:
            return
        attached = await self._res.attachments() if docs else {}
        for name in set(docs) | set(self.limiters):
            namespaces = tuple(attached.get(name, ()))
            brokers = await self._owners(namespaces) if namespaces else 1
            quota = GroupQuota.from_doc(docs.get(name))
            self.limiter(name).configure(quota, brokers, namespaces)

    async def _owners(self, namespaces: tuple[str, ...]) -> int:
        """Distinct brokers owning a bundle of any of ``namespaces`` (at least 1)."""
        owners: set[str] = set()
        for ns in namespaces:
            base = f"{OWNERSHIP_ROOT}/{ns}"
            try:
                ranges = await self._store.children(base)
            except Exception:
                continue
            for rng in ranges:
                got = await self._store.get(f"{base}/{rng}")
                data = OwnerData.from_json(got.value) if got is not None and got.value else None
                if data is not None:
                    owners.add(data.http_url)
        return max(1, len(owners))

    async def run(self) -> None:
        """Refresh at start, on every relevant change and every ``interval_s``."""
        while True:
            try:
                await self.refresh()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("refreshing resource groups failed", exc_info=True)
            try:
                await wait_for(self._clock, self._wake.wait(), self.interval_s)
            except TimeoutError:
                pass
            await self._clock.sleep(DEBOUNCE_S)
            self._wake.clear()

    def statistics(self) -> dict[str, dict[str, Any]]:
        return {name: lim.statistics() for name, lim in sorted(self.limiters.items())}
