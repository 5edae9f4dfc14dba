"""Task supervision: every background task has an owner.

Theory of operation: components never call ``asyncio.create_task`` and forget
the result.  They ``spawn`` through their :class:`TaskSupervisor`, which keeps
a strong reference, names the task, and when it ends with an exception hands
the exception to the owner: the ``on_error`` given to that ``spawn`` (the
object that can act on it -- a connection closes itself, a topic unloads),
else the supervisor's ``on_error``, else the log -- instead of letting it
vanish as "Task exception was never retrieved".  Every failure is also
counted (``failed_tasks``, ``last_failure``) so stats can show it.  ``aclose`` cancels every
live task and waits for all of them, so closing a component leaves nothing
running.  Supervisors nest: a child supervisor is closed by its parent.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger(__name__)


class TaskSupervisor:
    def __init__(self, name: str, on_error: Callable[[str, BaseException], None] | None = None) -> None:
        self.name = name
        self._tasks: set[asyncio.Task[Any]] = set()
        self._children: list[TaskSupervisor] = []
        self._on_error = on_error
        self._closed = False
        self._task_on_error: dict[asyncio.Task[Any], Callable[[str, BaseException], None]] = {}
        self.failed_tasks = 0
        self.last_failure: tuple[str, BaseException] | None = None

    def spawn(
        self,
        coro: Coroutine[Any, Any, T],
        name: str | None = None,
        *,
        on_error: Callable[[str, BaseException], None] | None = None,
    ) -> asyncio.Task[T]:
        """Run ``coro`` as an owned task; a failure goes to ``on_error`` (the owner) if given."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"supervisor {self.name} is closed")
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}:{name or 'task'}")
        self._tasks.add(task)
        if on_error is not None:
            self._task_on_error[task] = on_error
        task.add_done_callback(self._done)
        return task

    def child(self, name: str) -> TaskSupervisor:
        sup = TaskSupervisor(f"{self.name}/{name}", self._on_error)
        self._children.append(sup)
        return sup

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        owner = self._task_on_error.pop(task, None)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        self.failed_tasks += 1
        self.last_failure = (task.get_name(), exc)
        handler = owner or self._on_error
        if handler is None:
            log.error("task %s failed", task.get_name(), exc_info=exc)
            return
        try:
            handler(task.get_name(), exc)
        except Exception:  # the owner's handler itself failed: at least the log has both
            log.exception("error handler of task %s failed (task error: %r)", task.get_name(), exc)

    def statistics(self) -> dict[str, int]:
        return {"tasks": len(self._tasks), "children": len(self._children), "failed": self.failed_tasks}

    @property
    def closed(self) -> bool:
        return self._closed

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        for child in self._children:
            await child.aclose()
        tasks = [t for t in self._tasks if not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
