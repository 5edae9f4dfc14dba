"""Runtime: the only code that touches time, randomness and the event loop.

Everything above receives a :class:`Clock`, an :class:`Rng` and a
:class:`TaskSupervisor` through its constructor, so tests swap in manual or
virtual clocks and seeded randomness and get deterministic runs.
"""

from magnetar.runtime.clock import Clock, RealClock, TimerHandle, wait_for
from magnetar.runtime.ids import IdGenerator
from magnetar.runtime.offload import BlockingExecutor
from magnetar.runtime.rng import Rng
from magnetar.runtime.slim_event import SlimEvent
from magnetar.runtime.supervisor import TaskSupervisor

__all__ = [
    "BlockingExecutor",
    "Clock",
    "IdGenerator",
    "RealClock",
    "Rng",
    "SlimEvent",
    "TaskSupervisor",
    "TimerHandle",
    "wait_for",
]
