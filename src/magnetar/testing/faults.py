"""Fault plans: which operations fail, stall or vanish, scripted or seeded-random.

Theory of operation
-------------------
A fault-injecting wrapper (around a metadata store, a bookie client, a
network link, a disk) asks its :class:`FaultPlan` before each operation::

    fault = await plan.inject("put", path, clock)   # raises for FAIL, sleeps for DELAY
    if fault is not None and fault.dropped:
        ...                                          # DROP: the wrapper decides what "lost" means

A plan is an ordered list of :class:`FaultRule`.  A rule matches an
operation name and a key (a path, a ledger id, a bookie address) by glob
(``fnmatch`` rules: ``*``, ``?``, ``[...]``), and says what to do:

* ``FAIL``  -- raise an exception (an instance, a class, or a factory);
* ``DELAY`` -- wait ``delay_s`` on the injected clock, then carry on;
* ``DROP``  -- the operation is lost: a request never sent, or done with
  its answer lost; the wrapper documents which.

Scripted: ``after=N`` lets the first N matching calls through, ``times=M``
fires M times then retires the rule (fail the 3rd put to /ledgers once).
Random: ``probability=p`` fires with that chance using the plan's seeded
:class:`runtime.Rng`, so a seed replays the same faults for the same call
sequence.  The first rule that fires decides; the others are not consulted.
``pause()`` stops all faults (the liveness phase of a simulation) without
forgetting the rules; ``history`` keeps the last ``history_max`` faults so a
failing test can print what was injected.
"""

from __future__ import annotations

import copy
import enum
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

from magnetar.common.errors import MagnetarError
from magnetar.runtime.clock import Clock
from magnetar.runtime.rng import Rng

ErrorSpec = BaseException | type[BaseException] | Callable[[], BaseException]


class InjectedFault(MagnetarError):
    """The default error of a FAIL rule."""

    retriable = True


class FaultAction(enum.Enum):
    FAIL = "fail"
    DELAY = "delay"
    DROP = "drop"


@dataclass(eq=False)
class FaultRule:
    action: FaultAction
    operation: str = "*"
    key: str = "*"
    error: ErrorSpec | None = None
    delay_s: float = 0.0
    times: int | None = None
    after: int = 0
    probability: float = 1.0
    label: str = ""
    matched: int = field(default=0, init=False)
    fired: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability {self.probability} not in [0, 1]")
        if (self.times is not None and self.times < 0) or self.after < 0 or self.delay_s < 0:
            raise ValueError("times, after and delay_s must be >= 0")

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    def matches(self, operation: str, key: str) -> bool:
        return fnmatchcase(operation, self.operation) and fnmatchcase(key, self.key)

    def make_error(self, operation: str, key: str) -> BaseException:
        message = f"injected fault{f' ({self.label})' if self.label else ''}: {operation} {key}"
        err = self.error
        if err is None:
            return InjectedFault(message)
        if isinstance(err, BaseException):
            return copy.copy(err)  # a fresh object each time: no shared traceback
        if isinstance(err, type):
            return err(message)
        return err()


@dataclass(frozen=True, slots=True)
class Fault:
    """One firing of a rule for one operation."""

    rule: FaultRule
    operation: str
    key: str

    @property
    def action(self) -> FaultAction:
        return self.rule.action

    @property
    def dropped(self) -> bool:
        return self.rule.action is FaultAction.DROP

    def error(self) -> BaseException:
        return self.rule.make_error(self.operation, self.key)


class FaultPlan:
    def __init__(self, rng: Rng | None = None, *, history_max: int = 1000) -> None:
        self._rng = rng
        self._rules: list[FaultRule] = []
        self._paused = False
        self.history: deque[Fault] = deque(maxlen=history_max)

    # ------------------------------------------------------------- building

    def add(self, rule: FaultRule) -> FaultRule:
        if rule.probability < 1.0 and self._rng is None:
            raise ValueError("a probabilistic rule needs a plan built with an Rng")
        self._rules.append(rule)
        return rule

    def fail(
        self, operation: str = "*", key: str = "*", error: ErrorSpec | None = None, **kw: object
    ) -> FaultRule:
        return self.add(FaultRule(FaultAction.FAIL, operation, key, error=error, **kw))  # type: ignore[arg-type]

    def delay(self, operation: str = "*", key: str = "*", delay_s: float = 1.0, **kw: object) -> FaultRule:
        return self.add(FaultRule(FaultAction.DELAY, operation, key, delay_s=delay_s, **kw))  # type: ignore[arg-type]

    def drop(self, operation: str = "*", key: str = "*", **kw: object) -> FaultRule:
        return self.add(FaultRule(FaultAction.DROP, operation, key, **kw))  # type: ignore[arg-type]

    def remove(self, rule: FaultRule) -> None:
        self._rules.remove(rule)

    def clear(self) -> None:
        self._rules.clear()

    def pause(self) -> None:
        """Stop injecting (rules and counters are kept)."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False

    @property
    def rules(self) -> tuple[FaultRule, ...]:
        return tuple(self._rules)

    # ------------------------------------------------------------- deciding

    def check(self, operation: str, key: str = "") -> Fault | None:
        """Decide (and count) the fault for one operation; None means run it normally."""
        if self._paused:
            return None
        for rule in self._rules:
            if rule.exhausted or not rule.matches(operation, key):
                continue
            rule.matched += 1
            if rule.matched <= rule.after:
                continue
            if rule.probability < 1.0 and not self._rng.chance(rule.probability):  # type: ignore[union-attr]
                continue
            rule.fired += 1
            fault = Fault(rule, operation, key)
            self.history.append(fault)
            return fault
        return None

    async def inject(self, operation: str, key: str, clock: Clock) -> Fault | None:
        """Apply the fault for one operation: raise (FAIL), sleep (DELAY) or report a DROP."""
        fault = self.check(operation, key)
        if fault is None:
            return None
        if fault.action is FaultAction.FAIL:
            raise fault.error()
        if fault.action is FaultAction.DELAY:
            await clock.sleep(fault.rule.delay_s)
        return fault

    def statistics(self) -> dict[str, int]:
        return {
            "rules": len(self._rules),
            "live_rules": sum(1 for r in self._rules if not r.exhausted),
            "fired": sum(r.fired for r in self._rules),
        }
