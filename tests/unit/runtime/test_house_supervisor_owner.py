"""TaskSupervisor hands a task's failure to the owner named at spawn (issue 14: every task has an owner)."""

from __future__ import annotations

import asyncio

from magnetar.runtime import TaskSupervisor


async def _fail() -> None:
    await asyncio.sleep(0)
    raise RuntimeError("lost")


async def test_failure_goes_to_the_spawns_owner_and_is_counted() -> None:
    seen: list[tuple[str, str]] = []
    default: list[str] = []
    sup = TaskSupervisor("t", on_error=lambda name, exc: default.append(name))
    task = sup.spawn(_fail(), name="keepalive", on_error=lambda name, exc: seen.append((name, str(exc))))
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    assert seen == [("t:keepalive", "lost")]
    assert default == []  # the owner got it, not the supervisor-wide handler
    assert sup.failed_tasks == 1 and sup.last_failure is not None
    assert sup.statistics()["failed"] == 1
    await sup.aclose()


async def test_without_an_owner_the_supervisor_handler_gets_it() -> None:
    default: list[str] = []
    sup = TaskSupervisor("t", on_error=lambda name, exc: default.append(name))
    await asyncio.gather(sup.spawn(_fail(), name="x"), return_exceptions=True)
    await asyncio.sleep(0)
    assert default == ["t:x"]
    await sup.aclose()


async def test_a_failing_owner_handler_does_not_break_the_supervisor() -> None:
    def bad(name: str, exc: BaseException) -> None:
        raise ValueError("handler")

    sup = TaskSupervisor("t")
    await asyncio.gather(sup.spawn(_fail(), on_error=bad), return_exceptions=True)
    await asyncio.sleep(0)
    assert sup.failed_tasks == 1
    ok = sup.spawn(asyncio.sleep(0, result=7))
    assert await ok == 7
    await sup.aclose()
