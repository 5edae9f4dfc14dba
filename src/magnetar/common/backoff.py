"""Exponential backoff with jitter, as the Pulsar client retries.

Theory of operation
-------------------
Each failed attempt waits ``next_ms()``: the delay starts at ``initial_ms``
(the client uses 100 ms), doubles after every call up to ``max_ms`` (60 s),
and is then shortened by a random amount of up to 10% so that many clients
that failed together do not retry together; it is never below
``initial_ms``.  With ``mandatory_stop_ms`` > 0 (the producer's send
timeout, the lookup's operation timeout) the delay is cut so that the sum of
waits since the first failure does not overshoot that deadline; the first
cut sets ``mandatory_stop_made``, after which the caller usually gives up.
``reset()`` after a success starts over; ``reduce_to_half()`` softens the
delay without forgetting it.

Randomness comes from an injected :class:`runtime.Rng` and time (only for the
mandatory stop) from an injected :class:`runtime.Clock`, so retry schedules
are reproducible in tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# ``common`` and ``runtime`` are sibling layers that may not import each
# other, so the two things we need are named structurally; runtime.Rng and
# runtime.Clock satisfy them.


class Rng(Protocol):
    def randint(self, a: int, b: int) -> int: ...


class Clock(Protocol):
    def time_ms(self) -> int: ...


@dataclass(frozen=True, slots=True)
class BackoffConfig:
    initial_ms: int = 100
    max_ms: int = 60_000
    mandatory_stop_ms: int = 0  # 0: no deadline

    def __post_init__(self) -> None:
        if self.initial_ms <= 0 or self.max_ms < self.initial_ms or self.mandatory_stop_ms < 0:
            raise ValueError(f"invalid backoff {self}: need 0 < initial_ms <= max_ms, mandatory_stop_ms >= 0")


class Backoff:
    def __init__(self, config: BackoffConfig, rng: Rng, clock: Clock | None = None) -> None:
        if config.mandatory_stop_ms and clock is None:
            raise ValueError("a mandatory stop needs a clock")
        self.config = config
        self._rng = rng
        self._clock = clock
        self._next_ms = config.initial_ms
        self._first_backoff_ms: int | None = None
        self._mandatory_stop_made = False

    @property
    def mandatory_stop_made(self) -> bool:
        return self._mandatory_stop_made

    def next_ms(self) -> int:
        """The delay before the next attempt, in milliseconds."""
        cfg = self.config
        current = self._next_ms
        if current < cfg.max_ms:
            self._next_ms = min(current * 2, cfg.max_ms)
        if cfg.mandatory_stop_ms and not self._mandatory_stop_made:
            assert self._clock is not None
            now_ms = self._clock.time_ms()
            if self._first_backoff_ms is None:
                self._first_backoff_ms = now_ms
            elapsed_ms = now_ms - self._first_backoff_ms
            if elapsed_ms + current > cfg.mandatory_stop_ms:
                current = max(cfg.initial_ms, cfg.mandatory_stop_ms - elapsed_ms)
                self._mandatory_stop_made = True
        if current > 10:
            current -= self._rng.randint(0, current // 10 - 1)  # Java: nextInt(current / 10)
        return max(cfg.initial_ms, current)

    def next_s(self) -> float:
        return self.next_ms() / 1000.0

    def reduce_to_half(self) -> None:
        if self._next_ms > self.config.initial_ms:
            self._next_ms = max(self._next_ms // 2, self.config.initial_ms)

    def reset(self) -> None:
        self._next_ms = self.config.initial_ms
        self._first_backoff_ms = None
        self._mandatory_stop_made = False
