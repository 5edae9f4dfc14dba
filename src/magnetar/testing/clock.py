"""Test clocks: time that only moves when the test says so, or that jumps when idle.

Theory of operation
-------------------
Production code asks an injected :class:`magnetar.runtime.Clock` for time and
waits through ``clock.sleep`` / ``clock.call_later``.  Two test clocks:

:class:`ManualClock` -- time stands still until the test calls
``await clock.advance(seconds)``.  Timers due within the step fire in
(deadline, creation) order; between firings ``advance`` yields to the event
loop (``settle_iterations`` times) so the tasks woken by a timer run and may
arm new timers, which fire too if they fall inside the step.  Good for
sans-IO state machines and for tests that want to observe every instant.
Only timers made through the clock are virtual: ``asyncio.sleep`` or
``asyncio.wait_for`` inside the code under test still use real time.

:class:`VirtualTimeEventLoop` -- an asyncio selector loop whose ``time()``
is virtual.  Each loop iteration asks its selector to wait until the next
timer; our selector first polls for real I/O and, if nothing is ready, moves
virtual time forward by the whole timeout instead of sleeping (trio's
``MockClock(autojump_threshold=0)``).  So everything time-based -- asyncio
timers, ``asyncio.sleep``, ``asyncio.wait_for``/``timeout`` and the
:class:`VirtualClock` built on the loop -- runs instantly and in order, and
an hour-long TTL test takes milliseconds.  Virtual time only jumps when
every task is waiting on a timer; a loop blocked with no timers at all
waits for real.  Work handed to threads through ``loop.run_in_executor``
(which ``runtime.BlockingExecutor`` uses) is counted: while any is
outstanding the loop waits in real time, and virtual time moves by the
real time spent, so an fsync under ``wait_for(..., 5)`` is not timed out
"instantly".  Other real I/O the loop cannot see coming (a socket served by
another process, a subprocess) needs ``autojump_threshold_s`` > 0: the
selector then waits that long in real time for I/O before each jump.

Use it with ``run_virtual(main())``, the ``virtual_time_loop()`` context
manager, or decorate an async test with ``@virtual_time`` (it becomes a
plain test that runs on its own virtual loop; sync fixtures only).  The
:class:`VirtualTimeEventLoopPolicy` also plugs into pytest-asyncio by
overriding its (deprecated) ``event_loop_policy`` fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import selectors
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from magnetar.runtime.clock import TimerHandle

T = TypeVar("T")

DEFAULT_WALL_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z: a fixed, recognisable epoch
DEFAULT_START_S = 100_000.0  # virtual monotonic origin; non-zero like a real uptime


class ManualTimer:
    """A pending :meth:`ManualClock.call_later` callback."""

    __slots__ = ("due", "callback", "cancelled")

    def __init__(self, due: float, callback: Callable[[], object]) -> None:
        self.due = due
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class ManualClock:
    """A :class:`runtime.Clock` whose time moves only through :meth:`advance`."""

    def __init__(
        self, start_s: float = DEFAULT_START_S, wall_ms: int = DEFAULT_WALL_MS, settle_iterations: int = 20
    ) -> None:
        self._now = float(start_s)
        self._wall_offset_ms = wall_ms - self._now * 1000.0
        self._timers: list[tuple[float, int, ManualTimer]] = []
        self._seq = itertools.count()
        self._settle_iterations = settle_iterations

    # -- runtime.Clock
    def monotonic(self) -> float:
        return self._now

    def time_ms(self) -> int:
        return round(self._wall_offset_ms + self._now * 1000.0)

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handle = self.call_later(seconds, lambda: fut.done() or fut.set_result(None))
        try:
            await fut
        finally:
            handle.cancel()

    def call_later(self, seconds: float, callback: Callable[[], object]) -> TimerHandle:
        timer = ManualTimer(self._now + max(0.0, seconds), callback)
        heapq.heappush(self._timers, (timer.due, next(self._seq), timer))
        return timer

    # -- test controls
    def set_wall_ms(self, wall_ms: int) -> None:
        """Jump the wall clock (forwards or backwards); monotonic time is unaffected."""
        self._wall_offset_ms = wall_ms - self._now * 1000.0

    def pending_timers(self) -> int:
        return sum(1 for _, _, t in self._timers if not t.cancelled)

    def next_deadline(self) -> float | None:
        self._drop_cancelled()
        return self._timers[0][0] if self._timers else None

    async def settle(self) -> None:
        """Let ready tasks run (a bounded number of loop iterations)."""
        for _ in range(self._settle_iterations):
            await asyncio.sleep(0)

    async def advance(self, seconds: float) -> int:
        """Move time forward by ``seconds``, firing due timers in order; returns how many fired."""
        if seconds < 0:
            raise ValueError("time does not go backwards")
        target = self._now + seconds
        fired = 0
        await self.settle()
        while (timer := self._pop_due(target)) is not None:
            self._now = max(self._now, timer.due)
            timer.callback()
            fired += 1
            await self.settle()
        self._now = target
        await self.settle()
        return fired

    async def advance_to_next(self) -> bool:
        """Jump to the next timer's deadline and fire it; False if none is pending."""
        deadline = self.next_deadline()
        if deadline is None:
            return False
        await self.advance(max(0.0, deadline - self._now))
        return True

    def advance_nowait(self, seconds: float) -> int:
        """Like :meth:`advance` but without yielding: callbacks run, woken tasks do not."""
        if seconds < 0:
            raise ValueError("time does not go backwards")
        target = self._now + seconds
        fired = 0
        while (timer := self._pop_due(target)) is not None:
            self._now = max(self._now, timer.due)
            timer.callback()
            fired += 1
        self._now = target
        return fired

    def _drop_cancelled(self) -> None:
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)

    def _pop_due(self, target: float) -> ManualTimer | None:
        self._drop_cancelled()
        if self._timers and self._timers[0][0] <= target:
            return heapq.heappop(self._timers)[2]
        return None


# ---------------------------------------------------------------- virtual loop


class _VirtualTime:
    __slots__ = ("now", "jumps")

    def __init__(self, now: float) -> None:
        self.now = now
        self.jumps = 0


class _JumpingSelector(selectors.BaseSelector):
    """Delegates to a real selector; turns an idle timed wait into a jump of virtual time."""

    def __init__(self, vtime: _VirtualTime, autojump_threshold_s: float) -> None:
        self._inner = selectors.DefaultSelector()
        self._vtime = vtime
        self._threshold_s = autojump_threshold_s
        self.executor_jobs = 0  # run_in_executor calls in flight: no jumping meanwhile

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.register(fileobj, events, data)

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.unregister(fileobj)

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        return self._inner.modify(fileobj, events, data)

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:  # no timer pending: only real I/O can wake us
            return self._inner.select(None)
        if timeout <= 0:
            return self._inner.select(0)
        if self.executor_jobs:  # a thread is working: let real time pass
            started = time.monotonic()
            ready = self._inner.select(timeout)
            self._vtime.now += min(timeout, time.monotonic() - started)
            return ready
        ready = self._inner.select(min(timeout, self._threshold_s))
        if not ready:
            self._vtime.now += timeout
            self._vtime.jumps += 1
        return ready

    def close(self) -> None:
        self._inner.close()

    def get_key(self, fileobj: Any) -> selectors.SelectorKey:
        return self._inner.get_key(fileobj)

    def get_map(self) -> Any:
        return self._inner.get_map()


class VirtualTimeEventLoop(asyncio.SelectorEventLoop):
    """An asyncio loop on virtual time that jumps forward whenever all tasks wait on timers."""

    def __init__(
        self,
        *,
        start_s: float = DEFAULT_START_S,
        wall_ms: int = DEFAULT_WALL_MS,
        autojump_threshold_s: float = 0.0,
    ) -> None:
        self._vtime = _VirtualTime(float(start_s))
        self._wall_offset_ms = wall_ms - float(start_s) * 1000.0
        super().__init__(selector=_JumpingSelector(self._vtime, autojump_threshold_s))

    def time(self) -> float:
        return self._vtime.now

    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        fut = super().run_in_executor(executor, func, *args)
        selector: _JumpingSelector = self._selector  # type: ignore[attr-defined]
        selector.executor_jobs += 1

        def done(_: object) -> None:
            selector.executor_jobs -= 1

        fut.add_done_callback(done)
        return fut

    def wall_ms(self) -> int:
        return round(self._wall_offset_ms + self._vtime.now * 1000.0)

    def set_wall_ms(self, wall_ms: int) -> None:
        self._wall_offset_ms = wall_ms - self._vtime.now * 1000.0

    def jump(self, seconds: float) -> None:
        """Move virtual time forward by hand (timers now due fire on the next iteration)."""
        if seconds < 0:
            raise ValueError("time does not go backwards")
        self._vtime.now += seconds

    @property
    def jumps(self) -> int:
        """How many times the loop jumped instead of sleeping (for tests and statistics)."""
        return self._vtime.jumps


class VirtualClock:
    """A :class:`runtime.Clock` reading a :class:`VirtualTimeEventLoop` (the running one by default)."""

    def __init__(self, loop: VirtualTimeEventLoop | None = None) -> None:
        self._loop = loop

    def _vloop(self) -> VirtualTimeEventLoop:
        loop = self._loop or asyncio.get_running_loop()
        if not isinstance(loop, VirtualTimeEventLoop):
            raise TypeError("VirtualClock needs a VirtualTimeEventLoop (use run_virtual / virtual_time_loop)")
        return loop

    def monotonic(self) -> float:
        return self._vloop().time()

    def time_ms(self) -> int:
        return self._vloop().wall_ms()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def call_later(self, seconds: float, callback: Callable[[], object]) -> TimerHandle:
        return self._vloop().call_later(max(0.0, seconds), callback)

    def set_wall_ms(self, wall_ms: int) -> None:
        self._vloop().set_wall_ms(wall_ms)


def new_virtual_loop(**kwargs: Any) -> VirtualTimeEventLoop:
    """A loop factory (for ``asyncio.Runner(loop_factory=...)`` or pytest-asyncio's hook)."""
    return VirtualTimeEventLoop(**kwargs)


@contextlib.contextmanager
def virtual_time_loop(**kwargs: Any) -> Iterator[VirtualTimeEventLoop]:
    """A fresh virtual-time loop, closed (async generators shut down) at exit."""
    loop = VirtualTimeEventLoop(**kwargs)
    try:
        yield loop
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


def run_virtual(main: Coroutine[Any, Any, T], **kwargs: Any) -> T:
    """``asyncio.run`` on a virtual-time loop."""
    with asyncio.Runner(loop_factory=lambda: VirtualTimeEventLoop(**kwargs)) as runner:
        return runner.run(main)


class VirtualTimeEventLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """For pytest-asyncio: ``@pytest.fixture(scope="module") def event_loop_policy(): return VirtualTimeEventLoopPolicy()``."""

    def __init__(self, **loop_kwargs: Any) -> None:
        super().__init__()
        self._loop_kwargs = loop_kwargs

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        return VirtualTimeEventLoop(**self._loop_kwargs)


def virtual_time(fn: Callable[..., Coroutine[Any, Any, T]] | None = None, **loop_kwargs: Any) -> Any:
    """Decorator: run an async test on a fresh virtual-time loop.

    ``@virtual_time`` or ``@virtual_time(autojump_threshold_s=0.05)``.  The
    wrapped test is a plain function to pytest (pytest-asyncio leaves it
    alone); its fixtures must be synchronous.
    """

    def decorate(f: Callable[..., Coroutine[Any, Any, T]]) -> Callable[..., T]:
        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> T:
            return run_virtual(f(*args, **kwargs), **loop_kwargs)

        return wrapper

    return decorate(fn) if fn is not None else decorate
