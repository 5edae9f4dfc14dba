"""Dispatch rate limits: ``dispatchRate`` per topic, ``subscriptionDispatchRate`` per subscription.

Theory of operation: each limit is a number of messages and/or bytes per
``ratePeriodInSecond`` (scaled to one second) that the broker may send to
consumers.  The topic owns one :class:`DispatchWindow` (shared by all of its
subscriptions) and each subscription owns one; a window counts the messages
and bytes sent in the current one-second period and starts afresh when the
period is over.

Every dispatcher's round (``dispatcher_base``) goes through one
:class:`DispatchRateLimiter`, in two steps:

1. :meth:`DispatchRateLimiter.entry_budget` before reading: when a window's
   budget is spent, wait (on the injected clock) for the next period; then
   size the read in entries from what is left, using the average messages
   and bytes per entry of what this subscription sent so far (a batch entry
   carries many messages: reading ``room`` entries could send many times the
   limit).  Until something was sent the average is unknown and the read is
   one entry;
2. :meth:`DispatchRateLimiter.charge` after sending: the messages (not
   entries) and bytes that really left are counted in both windows.

A read may overshoot what was left by less than one entry (entries differ in
size); the overshoot is carried into the next period as debt, so the rate
holds over time and an entry larger than a whole period's budget still goes.

The limits come from the topic's effective policies (its typed ``TopicPolicies``,
replaced whole by ``broker.admin``'s policy enforcer); with no limit set
the limiter costs one dictionary lookup per round.  A topic in a resource
group adds the group's window (one per group per broker, shared by all of
its topics' subscriptions: ``broker.service.resource_groups``) as a third.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PERIOD_S = 1.0
WAIT_ROUNDS_MAX = 100  # bound on back-to-back waits in one round (a clock that does not move)
UNLIMITED = -1


class DispatchWindow:
    """Messages and bytes dispatched in the current one-second period (per topic or per
    subscription), including the debt an overshoot left from the periods before."""

    __slots__ = ("bytes", "messages", "start_s")

    def __init__(self) -> None:
        self.start_s = float("-inf")
        self.messages = 0
        self.bytes = 0

    def current(self, now_s: float, rate: DispatchRate) -> DispatchWindow:
        """This period's counts: a new period starts (paying off debt) at the first send after
        the last one is over, so periods line up with the sends."""
        elapsed = now_s - self.start_s
        if elapsed >= PERIOD_S:
            periods = int(elapsed / PERIOD_S) if elapsed != float("inf") else 1 << 30
            self.start_s = now_s
            self.messages = max(0, self.messages - max(0, rate.messages) * periods)
            self.bytes = max(0, self.bytes - max(0, rate.bytes) * periods)
        return self

    def left(self, now_s: float, rate: DispatchRate) -> tuple[int | None, int | None, float]:
        """(messages, bytes) this period still allows (None: no such limit) and when it ends;
        an expired period is read as the next one, without starting it."""
        w = self
        if now_s - self.start_s >= PERIOD_S:
            w = DispatchWindow()
            w.start_s, w.messages, w.bytes = self.start_s, self.messages, self.bytes
            w.current(now_s, rate)
        messages = rate.messages - w.messages if rate.messages > 0 else None
        size = rate.bytes - w.bytes if rate.bytes > 0 else None
        return messages, size, w.start_s + PERIOD_S


@dataclass(frozen=True, slots=True)
class DispatchRate:
    """One ``DispatchRate`` policy as per-second budgets (``UNLIMITED`` when not set)."""

    messages: int = UNLIMITED
    bytes: int = UNLIMITED

    @classmethod
    def from_policy(cls, doc: dict[str, Any] | None) -> DispatchRate:
        if not doc:
            return NO_LIMIT
        period = max(1, int(doc.get("ratePeriodInSecond", 1) or 1))
        return cls(
            _per_second(doc.get("dispatchThrottlingRateInMsg"), period),
            _per_second(doc.get("dispatchThrottlingRateInByte"), period),
        )

    @property
    def unlimited(self) -> bool:
        return self.messages <= 0 and self.bytes <= 0


NO_LIMIT = DispatchRate()


def _per_second(value: Any, period: int) -> int:
    if value is None or value <= 0:
        return UNLIMITED
    return max(1, int(value) // period)


def rates_of(topic: Any) -> tuple[DispatchRate, DispatchRate]:
    """The topic's and the subscription's dispatch rate under the effective policies."""
    policies = topic.policies
    return (
        DispatchRate.from_policy(policies.dispatch_rate),
        DispatchRate.from_policy(policies.subscription_dispatch_rate),
    )


class DispatchRateLimiter:
    """The dispatch-rate step of one dispatcher's round (see the module docstring)."""

    def __init__(self, subscription: Any) -> None:
        self._subscription = subscription
        self._topic = subscription.topic
        self._rates: tuple[DispatchRate, DispatchRate] = (NO_LIMIT, NO_LIMIT)
        self._group: Any = None  # the topic's resource group when it limits dispatch
        self.limited = False  # this round is under a limit (else nothing is counted: no cost)
        self._sent_entries = 0  # for the per-entry averages that size reads
        self._sent_messages = 0
        self._sent_bytes = 0

    def _windows(self) -> tuple[tuple[DispatchWindow, DispatchRate], ...]:
        topic_rate, sub_rate = self._rates
        windows = (
            (self._topic.dispatch_window, topic_rate),
            (self._subscription.dispatch_window, sub_rate),
        )
        group = self._group
        return windows if group is None else (*windows, (group.dispatch_window, group.dispatch_rate))

    async def entry_budget(self, budget: int) -> int:
        """How many entries to read this round, at most ``budget``; waits while a window is spent."""
        self._rates = rates_of(self._topic)
        group = getattr(self._topic, "resource_group", None)  # a fake topic has none
        self._group = group if group is not None and not group.dispatch_rate.unlimited else None
        limiting = not (self._rates[0].unlimited and self._rates[1].unlimited) or self._group is not None
        # a topic in a group counts what it sends (the group's usage) even without a group limit
        self.limited = limiting or group is not None
        if not limiting:
            return budget
        clock = self._topic.clock
        for _ in range(WAIT_ROUNDS_MAX):
            now_s = clock.monotonic()
            messages_left = bytes_left = 1 << 62
            wait_until = 0.0
            for window, rate in self._windows():
                if rate.unlimited:
                    continue
                messages, size, ends_s = window.left(now_s, rate)
                spent = False
                if messages is not None:
                    messages_left = min(messages_left, messages)
                    spent = messages <= 0
                if size is not None:
                    bytes_left = min(bytes_left, size)
                    spent = spent or size <= 0
                if spent:
                    wait_until = max(wait_until, ends_s)
            if wait_until <= 0:
                if not self._sent_entries:
                    return 1  # the size of an entry is not known yet
                entries = min(
                    budget, max(1, int(messages_left * self._sent_entries / max(1, self._sent_messages)))
                )
                return min(entries, max(1, int(bytes_left * self._sent_entries / max(1, self._sent_bytes))))
            await clock.sleep(max(0.0, wait_until - now_s))
        return 1

    def charge(self, entries: int, messages: int, size: int) -> None:
        """Count what one round sent under a limit: messages and bytes in every window."""
        if not entries or not self.limited:
            return
        group = getattr(self._topic, "resource_group", None)  # a fake topic has none
        if group is not None:
            group.count_dispatch(messages, size)
        self._sent_entries += entries
        self._sent_messages += messages
        self._sent_bytes += size
        if self._sent_entries > 1 << 20:  # keep the averages recent
            self._sent_entries //= 2
            self._sent_messages //= 2
            self._sent_bytes //= 2
        now_s = self._topic.clock.monotonic()
        for window, rate in self._windows():
            if not rate.unlimited:
                w = window.current(now_s, rate)
                w.messages += messages
                w.bytes += size
